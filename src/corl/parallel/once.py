"""One line per error for a whole torchrun world, not one per rank.

Every rank of a job reads the same config, model folders and data, so an input error (a
missing model folder, a malformed row) is met by every rank at once, and each would print it:
a requeued job on 16 ranks said the same line 16 times. Before a rank prints such a line it
claims the line in the launcher's c10d store (torchrun hosts it for the job and every worker can
reach it at MASTER_ADDR:MASTER_PORT, also before the process groups exist); the first claim
prints, the others stay silent. The key is the text itself, so a rank whose error differs (a
folder missing on one node only) still says its own, once. Without a reachable store (no
torchrun, another launcher, the launcher already gone) every rank says its line, as before:
a line too many beats a line lost.
"""

from __future__ import annotations

import hashlib
import os
from datetime import timedelta

from corl.parallel.layout import under_torchrun

# Long enough for a store under a loaded launcher, short enough that an unreachable one (the
# launcher gone) delays the error by seconds, not by the c10d default of 5 minutes.
_CONNECT_TIMEOUT_S = 10.0


def first_to_say(line: str) -> bool:
    """Whether this process should print `line`: True outside torchrun, and under torchrun for the
    first rank of this attempt (torchrun --max-restarts keeps its store) to claim that text."""
    if not under_torchrun():
        return True
    host, port = os.environ.get("MASTER_ADDR"), os.environ.get("MASTER_PORT")
    if not host or not port:
        return True
    rank = os.environ.get("RANK", "0").encode()
    attempt = os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")
    key = f"corl/{attempt}/said/{hashlib.sha256(line.encode()).hexdigest()[:32]}"
    try:
        import torch.distributed as dist

        store = dist.TCPStore(
            host, int(port), is_master=False, timeout=timedelta(seconds=_CONNECT_TIMEOUT_S), wait_for_workers=False
        )
        return store.compare_set(key, "", rank) == rank
    except (RuntimeError, ValueError, OSError):  # DistStoreError and friends: nobody to agree with
        return True
