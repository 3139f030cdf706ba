"""Resuming a run: its metrics, its configuration and its checkpoints."""

from __future__ import annotations

from corl.tracking import MetricsLog, read_metrics


def test_metrics_after_resume_hold_every_step_once(tmp_path):
    """A checkpoint after 2 steps has seen steps 0 and 1 (and the validations after them);
    rows the interrupted run wrote later are dropped, and the resumed run's rows follow."""
    log = MetricsLog(tmp_path, tensorboard=False)
    log.log(-1, {"a/val_accuracy": 0.1}, kind="val")  # eval_on_start
    for step in range(3):
        log.log(step, {"a/loss": float(step)})
    log.log(1, {"a/val_accuracy": 0.2}, kind="val")  # eval_every 2: after step 1, before checkpoint 2
    log.close()  # killed after step 2, whose checkpoint never came

    log = MetricsLog(tmp_path, tensorboard=False, resume_step=2)
    for step in range(2, 4):
        log.log(step, {"a/loss": float(step)})
    log.close()
    assert [r["step"] for r in read_metrics(tmp_path, "train")] == [0, 1, 2, 3]
    assert [r["step"] for r in read_metrics(tmp_path, "val")] == [-1, 1]


def test_tensorboard_purges_from_the_first_redone_step(tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    log = MetricsLog(tmp_path)
    for step in range(3):
        log.log(step, {"a/loss": float(step)})
    log.close()
    log = MetricsLog(tmp_path, resume_step=2)
    log.log(2, {"a/loss": 20.0})
    log.close()
    events = EventAccumulator(str(tmp_path / "tensorboard"))
    events.Reload()
    assert [(e.step, e.value) for e in events.Scalars("train/a/loss")] == [(0, 0.0), (1, 1.0), (2, 20.0)]
