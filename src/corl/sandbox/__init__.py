"""Run untrusted Python programs: own process, limits, a private bounded disk, no network, minimal env.

    from corl.sandbox import SandboxPool, Limits, run_program
    run_program("print(1)").status            # Status.OK
    with SandboxPool(workers=4) as pool:
        results = pool.map(["print(1)", "1/0"])

`detect()` says which isolation this host gives (bwrap > unshare, the same walls; `none`
only when named, e.g. CORL_SANDBOX=none); see corl.sandbox.isolation for what each
contains, corl.sandbox.view for what a program sees, corl.sandbox.cgroups for the memory
bound on the program as a whole.

The walls, and what holds each (bwrap and unshare alike):
- Files: the host's system trees and the interpreter (wherever its venv lives, under /tmp
  too) read-only; everything the program writes (its work folder, /tmp, /var/tmp, /dev/shm)
  goes to ONE tmpfs of `Limits.disk_mb` mounted inside the run's own mount namespace
  (ENOSPC past it: status output_limit), which vanishes with the namespace.
- The host touches nothing the program made: the source goes in as an unlinked host file,
  the exception record comes back on a pipe (bounded, never a path the program could turn
  into a FIFO or a symlink), and the host's own folder is removed by corl.sandbox.hostfs
  (iterative, fd-relative, never following a link, deaf to chmod 000); the run's slot is
  freed whatever happens. stdout and stderr are bounded together by `Limits.output_bytes`.
- Processes: a program may fork and exec; it is not forbidden (no audit hook is a wall,
  `_posixsubprocess.fork_exec` passes any), it is contained: every process it starts is
  in the run's PID namespace, under RLIMIT_NPROC (and a cgroup's pids.max where one can be
  made), and is killed when the run ends.
- Other runs: concurrent runs share the host's read-only inodes; a syscall filter refuses
  file locks, file-access notifications and key rings (corl.sandbox.seccomp), the calls
  through which one run could signal another or the slot's next run.
With `none` (no namespaces) the work folder is on the host's disk (only `file_mb` per file
binds) and the program sees the host; hostfs still removes whatever it left.
"""

from corl.sandbox.isolation import Isolation, SandboxUnavailable, detect
from corl.sandbox.limits import Limits
from corl.sandbox.pool import SandboxPool, close_default_pool, default_pool
from corl.sandbox.result import Result, Status
from corl.sandbox.runner import run_program

__all__ = [
    "Isolation",
    "Limits",
    "Result",
    "SandboxPool",
    "SandboxUnavailable",
    "Status",
    "close_default_pool",
    "default_pool",
    "detect",
    "run_program",
]
