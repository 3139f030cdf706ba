"""The built-in named data sources.

tiny:<split>[:<rows>]            the embedded synthetic text task (corl.tiny.task)
vtiny:<split>[:<rows>]           the embedded synthetic image task (corl.vision.task)
vision:<dataset>:<path>          a vision dataset's local file in its own format (corl.vision.datasets:
                                 open-r1-mm, mmr1, mathvista, mathverse, mathvision, wemath, corl)
vision:<dataset>[:hub[:<split>]] the same dataset from the Hugging Face hub (needs network access)
"""

from __future__ import annotations

from pathlib import Path

from corl.data import DataError, register_data_source


def tiny_rows(spec: str, source: str) -> list[dict]:
    """`tiny:<split>[:<rows>]` -> rows of the generated task (500 rows by default)."""
    from corl.tiny.task import SPLITS, make_split

    parts = spec.split(":")
    if len(parts) not in (1, 2) or parts[0] not in SPLITS or (len(parts) == 2 and not parts[1].isdigit()):
        raise DataError(f"dataset {source!r}: write tiny:<split>[:<rows>] with split one of {', '.join(SPLITS)}")
    return make_split(parts[0], int(parts[1]) if len(parts) == 2 else 500, seed=0)


register_data_source("tiny", tiny_rows)


def vtiny_rows(spec: str, source: str) -> list[dict]:
    """`vtiny:<split>[:<rows>]` -> rows of the generated image task (500 rows by default), images as PIL."""
    from corl.vision.task import SPLITS, make_split

    parts = spec.split(":")
    if len(parts) not in (1, 2) or parts[0] not in SPLITS or (len(parts) == 2 and not parts[1].isdigit()):
        raise DataError(f"dataset {source!r}: write vtiny:<split>[:<rows>] with split one of {', '.join(SPLITS)}")
    return make_split(parts[0], int(parts[1]) if len(parts) == 2 else 500, seed=0)


def vision_rows(spec: str, source: str) -> list[dict]:
    """`vision:<dataset>:<path>` (a local file) or `vision:<dataset>:hub[:<split>]` -> corl vision rows."""
    from corl.vision.datasets import DATASETS, load_hub_rows, load_rows

    dataset, _, where = spec.partition(":")
    if dataset not in DATASETS and dataset != "corl":
        raise DataError(f"dataset {source!r}: unknown vision dataset {dataset!r}; choose one of {', '.join(DATASETS)} or corl")
    if where == "hub" or where.startswith("hub:"):
        try:
            return load_hub_rows(dataset, where.partition(":")[2] or None)
        except Exception as err:  # datasets raises many types; the user needs the name and the cause
            raise DataError(f"dataset {source!r}: could not load {dataset!r} from the Hugging Face hub: {err}") from err
    if not where:
        raise DataError(f"dataset {source!r}: write vision:{dataset}:<path to its .jsonl/.json> (or vision:{dataset}:hub)")
    path = Path(where).expanduser()
    if not path.is_file():
        raise DataError(f"dataset {source!r}: file {where!r} not found")
    try:
        return load_rows(path, dataset)
    except (KeyError, ValueError) as err:  # a record without a field the format needs
        raise DataError(f"dataset {source!r}: {err}") from err


register_data_source("vtiny", vtiny_rows)
register_data_source("vision", vision_rows)
