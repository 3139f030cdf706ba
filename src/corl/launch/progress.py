"""What `corl train` prints while a cohort trains, on a terminal and in a log file alike.

    resumed from step 4 (runs/tiny-corl/checkpoints/step_000004); steps 5-12 to go
    step 5/12  llama-char reward 0.41 label_acc 0.62 | qwen2-bpe reward 0.38 label_acc 0.59 | agree 0.55  3.1 s/step  eta 0:00:22  412 tok/s
    val after step 6: llama-char 0.438 | qwen2-bpe 0.406 | cohort 0.422

Steps count from 1: "step N" is the N-th update, the row `step: N` of metrics.jsonl, the point N
of TensorBoard and W&B, and `checkpoints/step_00000N` (saved after it); a validation before
training (logging.eval_on_start) is step 0. A line is printed every logging.print_every steps
and at every validation point; on a terminal a live counter (logging.progress) sits below them.
`summary` is the closing block: per agent its last and selected validation accuracy, where the
checkpoints are and the next command.
"""

from __future__ import annotations

import math
import shlex
import time
from pathlib import Path

from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn


class StepProgress:
    """Context manager around `trainer.train`; call it as `on_step(step, metrics)` (step: the loop's
    0-based index). It also receives every metrics row as it is written (a `MetricsLog` mirror):
    validation lines come from there."""

    def __init__(self, trainer, console):
        self.trainer = trainer
        self.console = console
        self.names = trainer.names
        self.total = trainer.cfg.cohort.steps
        self.every = trainer.cfg.logging.print_every
        self.live = bool(trainer.cfg.logging.progress and console.is_terminal)
        self.progress = Progress(  # the counter alone: it must stay readable at 80 columns
            TextColumn("[bold]step"),
            MofNCompleteColumn(),
            BarColumn(bar_width=None),
            TimeElapsedColumn(),
            TimeRemainingColumn(),
            console=console,
            disable=not self.live,
        )
        self.task = None
        self.started = None
        self.first = trainer.start_step

    def __enter__(self):
        start, total = self.trainer.start_step, self.total
        if start > 0:
            checkpoint = self.trainer.entry.checkpoint
            where = f" ({checkpoint})" if checkpoint is not None else ""
            todo = f"steps {start + 1}-{total} to go" if start + 1 < total else f"step {total} to go"
            todo = todo if start < total else f"no step left to train (cohort.steps {total}; --set cohort.steps=M trains on)"
            self._print(f"resumed from step {start}{where}; {todo}")
        elif self.trainer.entry.redo:
            self._print("no checkpoint to resume from: the run starts again at step 1 (the rows it had are redone)")
        if self.trainer.log is not None:
            self.trainer.log.mirrors.append(self)
        self.started = time.monotonic()
        self.progress.start()
        self.task = self.progress.add_task("", total=max(total, start), completed=start)
        return self

    def __exit__(self, *exc):
        self.progress.stop()

    def __call__(self, step: int, metrics: dict) -> None:
        self.progress.update(self.task, completed=min(step + 1, self.total))

    # the MetricsLog mirror: every row, as it is written
    def log(self, step: int, metrics: dict, kind: str = "train") -> None:
        if kind == "train" and self.every and (step % self.every == 0 or step == self.total):
            self._print(self.step_line(step, metrics))
        elif kind == "val" and any(k.endswith("/val_accuracy") for k in metrics):
            self._print(validation_line(step, metrics, self.names))

    def close(self) -> None:
        pass

    def step_line(self, step: int, metrics: dict) -> str:
        """`step 5/12  a reward 0.41 label_acc 0.62 | b ... | agree 0.55  3.1 s/step  eta 0:00:22  412 tok/s`."""
        parts = []
        for name in self.names:
            part = f"{name} reward {_num(metrics.get(f'{name}/reward_mean'))}"
            if f"{name}/pseudo_label_accuracy" in metrics:
                part += f" label_acc {_num(metrics[f'{name}/pseudo_label_accuracy'])}"
            parts.append(part)
        agree = [v for k, v in metrics.items() if k.startswith("agreement/") and v is not None]
        if agree:
            parts.append(f"agree {sum(agree) / len(agree):.2f}")
        line = f"step {step}/{self.total}  " + " | ".join(parts)
        done = step - self.first
        if done > 0 and self.started is not None:
            per_step = (time.monotonic() - self.started) / done
            line += f"  {per_step:.1f} s/step  eta {_clock(per_step * (self.total - step))}"
        if metrics.get("time/tokens_per_s"):
            line += f"  {metrics['time/tokens_per_s']:.0f} tok/s"
        return line

    def _print(self, text: str) -> None:
        self.console.print(escape(text), soft_wrap=True, highlight=False)


def validation_line(step: int, metrics: dict, names: list[str]) -> str:
    """`val after step 6: a 0.438 | b 0.406 | cohort 0.422` (step 0: before training)."""
    when = "before training" if step == 0 else f"after step {step}"
    parts = [f"{who} {_num(metrics.get(f'{who}/val_accuracy'), 3)}" for who in [*names, "cohort"]]
    parts = [p for who, p in zip([*names, "cohort"], parts) if f"{who}/val_accuracy" in metrics]
    return f"val {when}: " + " | ".join(parts)


def summary(run_dir: Path, cfg, console) -> None:
    """The closing block: per agent its last validation accuracy (and the selected one, with
    logging.select), where the checkpoints are, and the commands to look at them."""
    import json

    from corl.checkpoints.checkpoint import latest_checkpoint
    from corl.tracking.metrics import read_metrics

    names = [a.name for a in cfg.agents]
    rows = [r for r in read_metrics(run_dir, "val") if any(k.endswith("/val_accuracy") for k in r)]
    last = rows[-1] if rows else None
    selected, best = None, run_dir / "best"
    if (best / "selection.json").is_file():
        record = json.loads((best / "selection.json").read_text())
        chosen = (record.get("chosen") or {}).get(cfg.logging.select) if isinstance(record.get("chosen"), dict) else None
        step = chosen.get("checkpoint_step") if isinstance(chosen, dict) else None
        selected = next((r for r in rows if step is not None and r["step"] == step), None)
    lines = [f"done: {run_dir}"]
    for who in [*names, "cohort"]:
        key = f"{who}/val_accuracy"
        if last is None or key not in last:
            continue
        text = f"  {who:<12} val_accuracy {_num(last[key], 3)} (step {last['step']})"
        if selected is not None and key in selected:
            text += f", selected {_num(selected[key], 3)} (step {selected['step']}, {best.name}/)"
        lines.append(text)
    if last is None:
        lines.append("  no validation (set data.val to score the agents)")
    checkpoint = latest_checkpoint(run_dir)
    if checkpoint is not None:
        lines.append(f"  checkpoints: {checkpoint.parent}/ (latest: {checkpoint.name})")
    if best.is_dir():
        lines.append(f"  selected (logging.select {cfg.logging.select}): {best}/")
    lines.append(
        f"  metrics: {run_dir / 'metrics.jsonl'}"
        + ("; tensorboard --logdir " + shlex.quote(str(run_dir)) if cfg.logging.reports_to("tensorboard") else "")
    )
    target = shlex.quote(str(run_dir))
    step = " --step best" if best.is_dir() else ""
    lines.append(f"next: corl eval {target}{step}    (every agent on the run's validation set; --data FILE for another)")
    for line in lines:
        console.print(escape(line), soft_wrap=True, highlight=False)


def _num(value, digits: int = 2) -> str:
    return "n/a" if value is None or (isinstance(value, float) and not math.isfinite(value)) else f"{value:.{digits}f}"


def _clock(seconds: float) -> str:
    seconds = int(max(seconds, 0))
    return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"
