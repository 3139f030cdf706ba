"""What a run records about itself while it trains.

- `metrics`: metrics.jsonl (the record), TensorBoard, and mirrors that get every row.
- `wandb_run`, `wandb_log`: Weights & Biases, one W&B run per training run, exactly once per row.
- `step_numbering`: one step numbering for every record (steps count from 1).
- `health`: NaN/inf never reaches the weights unnoticed; a collapsing run says so.
- `diagnostics`: the training dynamics of one step (the paper's Figures 4 and 5).

Imported by the trainer, the launcher, checkpoints (model cards read the last validation),
evaluation and the studies; imports only the config and labels (votes for the diagnostics).
"""

from corl.tracking.metrics import MetricsLog, RunFileError, read_metrics, replace_file

__all__ = ["MetricsLog", "RunFileError", "read_metrics", "replace_file"]
