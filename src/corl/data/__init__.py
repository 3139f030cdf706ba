"""Training and evaluation rows: where they come from and what the agents are shown.

- `rows`: rows from a file or a dataset name, `Problem`s (prompts without answers; the gold
  goes to a separate key), prompt templates, and the stateless batch order.
- `sources`: the built-in named data sources (`vision:`); plugins register more.
- `catalog`: `corl data`, the paper's datasets written into the files configs read.

Imported by the trainer, the launcher, evaluation, the plan and the studies; imports the
config's defaults and the registry (`catalog` also reads answers and vision datasets).
"""

from corl.data.rows import (
    DATA_SOURCES,
    DataError,
    Problem,
    PromptTemplate,
    batch_indices,
    build_problems,
    load_rows,
    register_data_source,
)

__all__ = [
    "DATA_SOURCES",
    "DataError",
    "Problem",
    "PromptTemplate",
    "batch_indices",
    "build_problems",
    "load_rows",
    "register_data_source",
]
