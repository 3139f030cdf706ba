"""The built-in named data sources (the studies add `tiny:` and `vtiny:`, `corl.studies.plugins`).

vision:<dataset>:<path>          a vision dataset's local file in its own format (corl.vision.datasets:
                                 open-r1-mm, mmr1, mathvista, mathverse, mathvision, wemath, corl)
vision:<dataset>[:hub[:<split>]] the same dataset from the Hugging Face hub (needs network access)
"""

from __future__ import annotations

from pathlib import Path

from corl.data.rows import DataError, register_data_source


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


register_data_source("vision", vision_rows)
