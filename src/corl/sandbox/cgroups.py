"""One control group per sandboxed run: memory for all its processes together, a task count, a sure kill.

RLIMIT_AS binds each process alone, so five forked children may each take the whole memory
limit; a cgroup bounds their sum (and tmpfs pages they write), and its task list names every
process of the run, so nothing survives the run. cgroup v1 (`memory` and `pids` hierarchies)
and v2 (a delegated subtree with the memory and pids controllers) are both handled; where
neither is writable (no root, read-only cgroupfs) `detect_cgroups()` returns None and the
bound is per process (see corl.sandbox.isolation). Only the run's own child groups, named
`corl-sbx-<pid>-<n>`, are ever created or removed.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import os
import signal
import time
from dataclasses import dataclass

MiB = 1 << 20
_counter = itertools.count()


@dataclass(frozen=True)
class Cgroups:
    """Where this process may create child groups: one parent folder per controller."""

    version: str  # "v1" or "v2"
    memory: str  # parent folder for memory groups
    pids: str | None  # parent folder for pids groups (the same folder on v2; None if v1 lacks it)


def _mounts() -> list[tuple[str, str, str, set[str]]]:
    """(mount point, root inside the hierarchy, fstype, super options) of every cgroup mount."""
    found = []
    with contextlib.suppress(OSError), open("/proc/self/mountinfo", encoding="utf-8") as f:
        for line in f:
            left, _, right = line.partition(" - ")
            fields, tail = left.split(), right.split()
            if len(fields) >= 5 and len(tail) >= 3 and tail[0] in ("cgroup", "cgroup2"):
                found.append((fields[4], fields[3], tail[0], set(tail[2].split(","))))
    return found


def _own_groups() -> dict[str, str]:
    """This process's group path per v1 controller, and under "" its v2 group."""
    groups: dict[str, str] = {}
    with contextlib.suppress(OSError), open("/proc/self/cgroup", encoding="utf-8") as f:
        for line in f:
            _, controllers, path = line.rstrip("\n").split(":", 2)
            for c in controllers.split(",") if controllers else [""]:
                groups[c] = path
    return groups


def _folder(mount: str, root: str, path: str) -> str | None:
    """The folder of group `path` under a mount whose hierarchy root is `root`."""
    if root != "/" and not (path == root or path.startswith(root + "/")):
        return None
    rel = path[len(root) :] if root != "/" else path
    folder = os.path.join(mount, rel.lstrip("/"))
    return folder if os.path.isdir(folder) else None


def _writable(parent: str) -> bool:
    """True when we may create (and remove) a child group under `parent`."""
    probe = os.path.join(parent, f"corl-sbx-{os.getpid()}-probe")
    try:
        os.mkdir(probe)
    except OSError:
        return False
    with contextlib.suppress(OSError):
        os.rmdir(probe)
    return True


def _v1(mounts, own) -> Cgroups | None:
    folders = {}
    for controller in ("memory", "pids"):
        for mount, root, fstype, opts in mounts:
            if fstype == "cgroup" and controller in opts and controller in own:
                folders[controller] = _folder(mount, root, own[controller])
    memory, pids = folders.get("memory"), folders.get("pids")
    if memory is None or not _writable(memory):
        return None
    return Cgroups("v1", memory, pids if pids and _writable(pids) else None)


def _v2(mounts, own) -> Cgroups | None:
    for mount, root, fstype, _ in mounts:
        if fstype != "cgroup2" or "" not in own:
            continue
        parent = _folder(mount, root, own[""])
        if parent is None:
            continue
        try:
            with open(os.path.join(parent, "cgroup.subtree_control")) as f:
                enabled = set(f.read().split())
            if not {"memory", "pids"} <= enabled:
                # Enabling fails (EBUSY) when our own group holds processes, as a leaf usually does.
                with open(os.path.join(parent, "cgroup.subtree_control"), "w") as f:
                    f.write("+memory +pids")
        except OSError:
            continue
        if _writable(parent):
            return Cgroups("v2", parent, parent)
    return None


@functools.lru_cache(maxsize=1)
def detect_cgroups() -> Cgroups | None:
    """The cgroup setup this process can use for its sandboxes, or None (per-process limits only)."""
    mounts, own = _mounts(), _own_groups()
    found = _v1(mounts, own) or _v2(mounts, own)
    if found is not None:
        for parent in {found.memory, found.pids} - {None}:
            _remove_stale(parent)
    return found


def _remove_stale(parent: str) -> None:
    """Remove empty groups of corl processes that died mid-run (a live process's groups are left alone)."""
    with contextlib.suppress(OSError):
        for name in os.listdir(parent):
            parts = name.split("-")
            if len(parts) == 4 and name.startswith("corl-sbx-") and parts[2].isdigit() and not _alive(int(parts[2])):
                with contextlib.suppress(OSError):
                    os.rmdir(os.path.join(parent, name))  # fails, harmlessly, while a task is still inside


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    return True


def _write(path: str, value: str) -> bool:
    try:
        with open(path, "w") as f:
            f.write(value)
        return True
    except OSError:
        return False


class RunGroup:
    """The control group(s) of one run: created with its limits, joined by the launcher, emptied, removed."""

    def __init__(self, cg: Cgroups, memory_mb: int, max_tasks: int) -> None:
        self.cg = cg
        name = f"corl-sbx-{os.getpid()}-{next(_counter)}"
        self.folders = [os.path.join(cg.memory, name)]
        if cg.pids is not None and cg.pids != cg.memory:
            self.folders.append(os.path.join(cg.pids, name))
        made = []
        try:
            for folder in self.folders:
                os.mkdir(folder)
                made.append(folder)
            self._limit(memory_mb * MiB, max_tasks)
        except OSError:
            for folder in made:
                with contextlib.suppress(OSError):
                    os.rmdir(folder)
            raise

    def _limit(self, memory: int, max_tasks: int) -> None:
        mem = self.folders[0]
        if self.cg.version == "v1":
            if not _write(os.path.join(mem, "memory.limit_in_bytes"), str(memory)):
                raise OSError(f"cannot set {mem}/memory.limit_in_bytes")
            _write(os.path.join(mem, "memory.memsw.limit_in_bytes"), str(memory))  # no swap beyond it
            if len(self.folders) > 1:
                _write(os.path.join(self.folders[1], "pids.max"), str(max_tasks))
        else:
            if not _write(os.path.join(mem, "memory.max"), str(memory)):
                raise OSError(f"cannot set {mem}/memory.max")
            _write(os.path.join(mem, "memory.swap.max"), "0")
            _write(os.path.join(mem, "pids.max"), str(max_tasks))

    @property
    def procs_files(self) -> list[str]:
        """The files the launcher writes its pid to (before exec, so every descendant is inside)."""
        return [os.path.join(f, "cgroup.procs") for f in self.folders]

    def pids(self) -> list[int]:
        found: set[int] = set()
        for path in self.procs_files:
            with contextlib.suppress(OSError), open(path) as f:
                found.update(int(p) for p in f.read().split())
        return sorted(found)

    def oom_kills(self) -> int:
        """How many processes the kernel killed for going over the group's memory limit."""
        name = "memory.oom_control" if self.cg.version == "v1" else "memory.events"
        try:
            with open(os.path.join(self.folders[0], name)) as f:
                for line in f:
                    key, _, value = line.partition(" ")
                    if key == "oom_kill":
                        return int(value)
        except (OSError, ValueError):
            pass
        return 0

    def kill_all(self, timeout_s: float = 10.0) -> bool:
        """SIGKILL every process in the group until it is empty; True when it is."""
        deadline = time.monotonic() + timeout_s
        kill_file = os.path.join(self.folders[0], "cgroup.kill")
        while True:
            pids = self.pids()
            if not pids:
                return True
            if time.monotonic() > deadline:
                return False
            if not (self.cg.version == "v2" and _write(kill_file, "1")):
                for pid in pids:
                    # Read-then-kill could only hit a stranger if the pid were freed and reused in between.
                    with contextlib.suppress(ProcessLookupError, PermissionError):
                        os.kill(pid, signal.SIGKILL)
            time.sleep(0.005)

    def remove(self) -> None:
        """Remove the group; retried briefly, as the kernel frees a group a moment after its last task."""
        for folder in self.folders:
            for _ in range(200):
                try:
                    os.rmdir(folder)
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.005)
