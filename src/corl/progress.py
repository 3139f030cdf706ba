"""A console progress bar that shows the numbers worth watching while a cohort trains."""

from __future__ import annotations

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn


class StepProgress:
    """Context manager; call it as `on_step(step, metrics)` from the training loop."""

    def __init__(self, trainer, console):
        self.trainer = trainer
        self.names = trainer.names
        self.progress = Progress(
            TextColumn("[bold]step"),
            MofNCompleteColumn(),
            BarColumn(),
            TimeElapsedColumn(),
            TimeRemainingColumn(),
            TextColumn("{task.description}"),
            console=console,
            disable=not trainer.cfg.logging.progress,
        )
        self.task = None

    def __enter__(self):
        self.progress.start()
        self.task = self.progress.add_task("", total=self.trainer.cfg.cohort.steps, completed=self.trainer.start_step)
        return self

    def __exit__(self, *exc):
        self.progress.stop()

    def __call__(self, step: int, metrics: dict) -> None:
        parts = []
        for name in self.names:
            reward = metrics.get(f"{name}/reward_mean", float("nan"))
            std = metrics.get(f"{name}/reward_std_normalized", float("nan"))
            part = f"{name}: r={reward:.2f} std/std0={std:.2f}"
            if f"{name}/pseudo_label_accuracy" in metrics:
                part += f" label_acc={metrics[f'{name}/pseudo_label_accuracy']:.2f}"
            parts.append(part)
        agree = [v for k, v in metrics.items() if k.startswith("agreement/")]
        if agree:
            parts.append(f"agree={sum(agree) / len(agree):.2f}")
        self.progress.update(self.task, completed=step + 1, description=" | ".join(parts))
