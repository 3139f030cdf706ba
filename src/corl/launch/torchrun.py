"""torchrun, with SIGTERM read as a preemption:

    python -m corl.launch --standalone --nproc-per-node 2 -m corl train CONFIG

It takes torchrun's own arguments and runs torchrun itself (torch.distributed.run). On
SIGTERM (SLURM before its KillWait, Kubernetes) torchrun forwards the signal to its
workers, and every corl rank finishes its step, saves a checkpoint and exits 143; torchrun
then reports the signal as its own failure: a SignalException traceback and exit status 1,
which a scheduler reads as a crash. Here that ends in one line and 128 + the signal's
number (143 for SIGTERM), as `corl train` does in one process. Every other outcome (a
worker that failed, success) is torchrun's own.
"""

from __future__ import annotations

import signal
import sys


def main(argv: list[str] | None = None) -> int:
    from torch.distributed.elastic.multiprocessing.api import SignalException
    from torch.distributed.run import main as torchrun

    try:
        torchrun(argv)
    except SignalException as err:
        name = signal.Signals(err.sigval).name
        print(
            f"corl.launch: {name}: the workers were told to stop (each corl rank saves a checkpoint and exits 143)",
            file=sys.stderr,
            flush=True,
        )
        return 128 + int(err.sigval)
    return 0


if __name__ == "__main__":
    sys.exit(main())
