"""Stopping a run on a signal: a scheduler's SIGTERM or a person's Ctrl-C.

    while the run starts (models loading, the validation before step 1)   stop at once: nothing to finish
    during the steps, SIGTERM        finish the step, save a checkpoint, exit 143, within
                                     distributed.preempt_grace_s (the launcher's SIGKILL follows)
    during the steps, Ctrl-C         finish the step, save a checkpoint, exit 130: no deadline (a person
                                     waits; on a GPU a step takes minutes)
    a second Ctrl-C                  stop at once, without a checkpoint of this moment

Every process asks `at_step_boundary` before each step (under torchrun all of them, so that
they stop after the same step); the first ask ends the start, after which a signal lets the
step in progress finish.
"""

from __future__ import annotations

import signal
import sys
import threading
from pathlib import Path

from corl.checkpoints.checkpoint import latest_checkpoint
from corl.parallel import Heartbeat


class StopNow(BaseException):
    """A signal while the run was starting: there is no step to finish. A BaseException, as
    KeyboardInterrupt is: no `except Exception` on its way out (a model loader's, a grader's)
    may swallow it."""

    def __init__(self, name: str, exit_code: int):
        super().__init__(f"{name} while the run was starting")
        self.name, self.exit_code = name, exit_code


class Preemption:
    """Installs the handlers of SIGTERM and SIGINT for the run's life (see the module's table)."""

    SIGNALS = {signal.SIGTERM: ("SIGTERM", 143), signal.SIGINT: ("Ctrl-C", 130)}

    def __init__(self, grace_s: float, run_dir: str | Path, heartbeat: Heartbeat | None = None):
        self.grace_s = grace_s
        self.run_dir = Path(run_dir)
        self.heartbeat = heartbeat
        self.flag = False
        self.starting = True  # until the first step boundary: a signal stops the run at once
        self.failing = False  # the run is failing: a SIGTERM now is torchrun stopping it, nothing to say
        self.name, self.exit_code = self.SIGNALS[signal.SIGTERM]
        self._timer: threading.Timer | None = None

    def __enter__(self) -> Preemption:
        self._previous = {s: signal.signal(s, self._handler) for s in self.SIGNALS}
        return self

    def __exit__(self, *exc) -> None:
        for s, previous in self._previous.items():
            # a failing run is on its way out to say why: torchrun's SIGTERM (another rank exited) must not cut it short
            signal.signal(s, signal.SIG_IGN if self.failing and s == signal.SIGTERM else previous)
        if self._timer is not None:  # the checkpoint is written (or the run failed): no "none saved" exit 1
            self._timer.cancel()

    def at_step_boundary(self) -> bool:
        """Whether a signal asked the run to stop before the next step; from the first call on,
        a signal lets the step in progress finish."""
        self.starting = False
        return self.flag

    def _handler(self, signum, frame) -> None:
        if self.flag:
            if signum == signal.SIGINT:  # Ctrl-C twice: stop now (the previous checkpoint stands)
                raise KeyboardInterrupt
            self._start_deadline()  # a scheduler's SIGTERM after a Ctrl-C: its kill will follow
            return
        self.flag = True
        self.name, self.exit_code = self.SIGNALS[signum]
        if self.heartbeat is not None:
            self.heartbeat.stop_requested = True  # a meeting now fails at once if a peer is gone
        if self.starting:
            raise StopNow(self.name, self.exit_code)
        if signum == signal.SIGTERM:
            line = f"corl: SIGTERM: finishing this step, then saving a checkpoint (within distributed.preempt_grace_s = {self.grace_s:g} s)"
            self._start_deadline()
        else:
            line = "corl: Ctrl-C: finishing this step, then saving a checkpoint; Ctrl-C again to stop at once, without one"
        if self.heartbeat is None:
            print(line, file=sys.stderr, flush=True)
        else:  # torchrun also stops every rank this way once one has died: that is no preemption to announce
            threading.Thread(target=self._announce, args=(line,), daemon=True).start()

    def _start_deadline(self) -> None:
        if self._timer is None:
            self._timer = threading.Timer(self.grace_s, self._give_up)
            self._timer.daemon = True
            self._timer.start()

    def _announce(self, line: str) -> None:
        """Say `line` unless a peer stopped beating (dead: torchrun is stopping the job, and the
        rank that noticed the death says so) or the run is failing already."""
        if not self.heartbeat.stopped_ranks(wait_s=2 * self.heartbeat.BEAT_S) and not self.failing:
            print(line, file=sys.stderr, flush=True)

    def _give_up(self) -> None:
        import os

        last = latest_checkpoint(self.run_dir)
        print(
            f"corl: SIGTERM: no checkpoint saved within distributed.preempt_grace_s = {self.grace_s:g} s (a step takes "
            f"longer: raise it, below the launcher's kill timeout); the last checkpoint is {last or 'none'}",
            file=sys.stderr,
            flush=True,
        )
        os._exit(1)
