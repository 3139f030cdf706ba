"""The built-in named data sources: `tiny:<split>[:<rows>]`, the embedded synthetic task."""

from __future__ import annotations

from corl.data import DataError, register_data_source


def tiny_rows(spec: str, source: str) -> list[dict]:
    """`tiny:<split>[:<rows>]` -> rows of the generated task (500 rows by default)."""
    from corl.tiny.task import SPLITS, make_split

    parts = spec.split(":")
    if len(parts) not in (1, 2) or parts[0] not in SPLITS or (len(parts) == 2 and not parts[1].isdigit()):
        raise DataError(f"dataset {source!r}: write tiny:<split>[:<rows>] with split one of {', '.join(SPLITS)}")
    return make_split(parts[0], int(parts[1]) if len(parts) == 2 else 500, seed=0)


register_data_source("tiny", tiny_rows)
