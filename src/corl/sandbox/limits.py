"""Resource limits applied inside the child (setrlimit) and the minimal environment it sees."""

from __future__ import annotations

import os
import resource
from dataclasses import dataclass

MiB = 1 << 20


@dataclass(frozen=True)
class Limits:
    """Per-program limits; every field bounds one way a program can hurt its host."""

    wall_s: float = 10.0  # killed as a whole process group after this many seconds
    cpu_s: int = 10  # RLIMIT_CPU (SIGXCPU at the soft limit, SIGKILL one second later)
    memory_mb: int = 1024  # RLIMIT_AS per process (a hog gets MemoryError), and all processes together in a cgroup
    output_bytes: int = 1 * MiB  # stdout + stderr kept; more kills the program (status output_limit)
    file_mb: int = 16  # RLIMIT_FSIZE: largest file the program may write
    disk_mb: int = 64  # all it writes together (work folder, /tmp, /var/tmp, /dev/shm: one tmpfs); ENOSPC past it
    nproc: int = 32  # RLIMIT_NPROC: processes + threads of the sandbox's uid (fork bombs); pids.max in a cgroup
    stack_mb: int = 64  # RLIMIT_STACK: deep recursion ends in a crash, not in the host's memory

    def __post_init__(self) -> None:
        if not (isinstance(self.disk_mb, int) and self.disk_mb >= 1):  # a tmpfs of size 0 would have no bound at all
            raise ValueError(f"Limits.disk_mb must be a whole number of MiB >= 1, not {self.disk_mb!r}")


def rlimits(limits: Limits, nproc_base: int = 0) -> list[tuple[int, int, int]]:
    """(resource, soft, hard) for every rlimit the program runs under."""
    return [
        (resource.RLIMIT_CPU, limits.cpu_s, limits.cpu_s + 1),
        (resource.RLIMIT_AS, limits.memory_mb * MiB, limits.memory_mb * MiB),
        (resource.RLIMIT_FSIZE, limits.file_mb * MiB, limits.file_mb * MiB),
        (resource.RLIMIT_STACK, limits.stack_mb * MiB, limits.stack_mb * MiB),
        (resource.RLIMIT_CORE, 0, 0),
        # NPROC counts every process of the real uid; when the sandbox shares our uid the limit
        # has to sit above what that uid already runs, or the launcher itself could not fork.
        (resource.RLIMIT_NPROC, nproc_base + limits.nproc, nproc_base + limits.nproc),
    ]


def apply_rlimits(limits: Limits, nproc_base: int = 0) -> None:
    """Apply the limits to the calling process (run in the child between fork and exec)."""
    for kind, soft, hard in rlimits(limits, nproc_base):
        resource.setrlimit(kind, (soft, hard))


def tasks_of_uid(uid: int) -> int:
    """Threads currently run by `uid` (what RLIMIT_NPROC counts); 0 when /proc is unreadable."""
    count = 0
    try:
        pids = [p for p in os.listdir("/proc") if p.isdigit()]
    except OSError:
        return 0
    for pid in pids:
        try:
            if os.stat(f"/proc/{pid}").st_uid == uid:
                count += len(os.listdir(f"/proc/{pid}/task"))
        except OSError:
            continue
    return count


def minimal_env(workdir: str) -> dict[str, str]:
    """The whole environment of a sandboxed program: nothing of the parent's (no tokens, no keys)."""
    return {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": workdir,
        "TMPDIR": workdir,
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        # A fixed hash seed makes set/dict reprs of one behaviour identical across runs (vote keys).
        "PYTHONHASHSEED": "0",
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONIOENCODING": "utf-8",
        # Native thread pools would spend the NPROC budget and the shared CPUs.
        "OMP_NUM_THREADS": "1",
        "OPENBLAS_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
    }
