"""Which isolation this host supports, detected once per process, and whether a run may go ahead.

Backends, best first; `CORL_SANDBOX=bwrap|unshare|none` picks one by name instead of `auto`:
- bwrap and unshare give the same walls (corl.sandbox.view): new mount, PID, network, IPC
  and UTS namespaces; a view of the host holding only the system trees and the interpreter,
  read-only; homes, /run and other users' files absent; one tmpfs of Limits.disk_mb inside
  the run's mount namespace the one writable place (its work folder, /tmp, /var/tmp and
  /dev/shm), gone with the namespace. As root the program drops to a per-run uid;
  otherwise bwrap and unshare need unprivileged user namespaces.
- none: a plain child process with the host's files, processes and network. `auto` never
  falls back to it silently: a run refuses (SandboxUnavailable) unless the user names it
  (`CORL_SANDBOX=none`, or `backend="none"`), and then a warning says what is missing.

Memory: each process is held to `Limits.memory_mb` by RLIMIT_AS; where this process may
create cgroups (root, v1 or delegated v2; `Isolation.cgroup`) the run's processes together
are also held to it (the kernel kills one when the sum goes over: status MEMORY), and the
cgroup's pids.max bounds their count. Without a cgroup the bound on the whole program is
memory_mb x nproc (RLIMIT_AS per process x RLIMIT_NPROC).

The per-run uid matters because RLIMIT_NPROC does not bind root (a fork bomb would exhaust
the host's PIDs) and a non-root program can neither signal our processes nor write into
root-owned directories.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import warnings
from dataclasses import dataclass

from corl.sandbox import commands
from corl.sandbox.cgroups import detect_cgroups
from corl.sandbox.limits import Limits
from corl.sandbox.seccomp import program as seccomp_program
from corl.sandbox.view import host_view, reachable

BACKENDS = ("bwrap", "unshare", "none")
ENV_VAR = "CORL_SANDBOX"
_UID_BASE = 1_000_000_000  # far above any uid a distribution hands out
_MAX_SLOTS = 100
log = logging.getLogger(__name__)


class SandboxUnavailable(RuntimeError):
    """Isolation was required (or the only backend left is none, unnamed) but this host offers none."""


@dataclass(frozen=True)
class Isolation:
    """What a backend gives: the flags say which hostile behaviours it contains."""

    backend: str
    network: bool  # the program cannot reach the host's network or Unix sockets
    pids: bool  # the program cannot see or signal processes outside its own
    filesystem: bool  # host files read-only and only system trees visible; /tmp, /var/tmp, /dev/shm private
    drops_uid: bool  # runs as an unprivileged per-run uid (NPROC binds, root files protected)
    python: str  # interpreter the sandbox runs
    cgroup: str = "none"  # "v1" / "v2": memory and task count bound the run as a whole; "none": per process
    launcher: str = ""  # absolute path of bwrap / unshare

    @property
    def walls(self) -> bool:
        """True when every wall of the module docstring holds (files, processes, network)."""
        return self.network and self.pids and self.filesystem

    def describe(self) -> str:
        memory = (
            f"memory and tasks of the whole program bounded by a cgroup {self.cgroup}"
            if self.cgroup != "none"
            else "memory bounded per process (the whole program: memory_mb x nproc)"
        )
        walls = "mount/PID/network namespaces, read-only minimal host view" if self.walls else "NO namespaces"
        if self.walls and seccomp_program() is None:
            walls += " (no syscall filter for this architecture: concurrent runs can signal through file locks)"
        return f"sandbox backend {self.backend}: {walls}; {memory}; per-run uid: {self.drops_uid}"


_lock = threading.Lock()
_detected: dict[str, Isolation] = {}
_failures: dict[str, str] = {}
_warned = False
_slots_in_use: set[int] = set()


def _is_root() -> bool:
    return os.geteuid() == 0


def requested(backend: str = "auto") -> str:
    """The backend asked for: `backend` itself, or for "auto" the CORL_SANDBOX variable when set."""
    if backend == "auto":
        backend = os.environ.get(ENV_VAR, "").strip() or "auto"
    if backend != "auto" and backend not in BACKENDS:
        raise ValueError(f"unknown sandbox backend {backend!r} (argument or {ENV_VAR}); choose from auto, {', '.join(BACKENDS)}")
    return backend


def _system_python() -> str | None:
    found = shutil.which("python3", path="/usr/bin:/bin:/usr/local/bin")
    return found if found and commands.world_runnable(found) else None


def _python_for(backend: str) -> str | None:
    """The interpreter a dropped uid can run: ours when it can reach it, else the system's python3."""
    if not _is_root():
        return sys.executable
    if backend == "none":
        return sys.executable if commands.world_runnable(sys.executable) else _system_python()
    return sys.executable if reachable(sys.executable, host_view(sys.executable)) else _system_python()


def _probe(iso: Isolation) -> str | None:
    """Run `pass` through the backend; None when it works here, else why not."""
    with contextlib.ExitStack() as stack:
        base = stack.enter_context(tempfile.TemporaryDirectory(prefix="corl-probe-"))
        source = stack.enter_context(commands.source_file("pass"))
        filter_f = commands.filter_file(iso.backend)
        seccomp_fd = stack.enter_context(filter_f).fileno() if filter_f is not None else -1
        uid = uid_for_slot(0) if iso.drops_uid else None
        layout = commands.Layout.make(base, "pass", uid, walled=iso.backend != "none")
        record_r, record_w = os.pipe()
        argv = commands.argv(
            iso, layout, uid, Limits(disk_mb=1), source_fd=source.fileno(), record_fd=record_w, seccomp_fd=seccomp_fd
        )
        try:
            done = subprocess.run(
                argv,
                cwd=base,
                capture_output=True,
                timeout=60,
                env={"PATH": "/usr/bin:/bin"},
                pass_fds=tuple(fd for fd in (record_w, source.fileno(), seccomp_fd) if fd >= 0),
            )
        except (OSError, subprocess.TimeoutExpired) as e:
            return f"{iso.launcher} failed to start: {e}"
        finally:
            os.close(record_r)
            os.close(record_w)
    if done.returncode != 0:
        return f"{iso.launcher} exited {done.returncode}: {done.stderr.decode(errors='replace').strip()[-300:]}"
    return None


def _make(backend: str, cgroup: str) -> Isolation | None:
    python = _python_for(backend)
    if backend == "none":
        return Isolation("none", False, False, False, _is_root() and python is not None, python or sys.executable, cgroup)
    launcher = shutil.which(backend)
    if launcher is None:
        _failures[backend] = "not installed" + (" (apt-get install bubblewrap)" if backend == "bwrap" else "")
        return None
    if python is None:
        _failures[backend] = "no interpreter a dropped uid may run"
        return None
    iso = Isolation(backend, True, True, True, _is_root(), python, cgroup, launcher)
    why = _probe(iso)
    if why is not None:
        _failures[backend] = why
        return None
    return iso


def detect(backend: str = "auto") -> Isolation:
    """The isolation `backend` gives here ("auto": the best that works, else none); probed once per process."""
    name = requested(backend)
    with _lock:
        if name not in _detected:
            cg = detect_cgroups()
            names = BACKENDS if name == "auto" else (name,)
            found = next((iso for iso in (_make(n, cg.version if cg else "none") for n in names) if iso is not None), None)
            if found is None:
                raise SandboxUnavailable(f"sandbox backend {name!r} does not work on this host: {_failures.get(name)}")
            _detected[name] = found
            log.info("%s", found.describe())
        return _detected[name]


def refusal(iso: Isolation) -> str:
    """Why a run without walls is refused, and the two ways forward."""
    tried = "; ".join(f"{b}: {why}" for b, why in _failures.items()) or f"{iso.backend} has none"
    return (
        f"corl.sandbox: no sandbox backend gives walls here ({tried}), so model-written programs would see the "
        "host's files, processes and network. Install bubblewrap (apt-get install bubblewrap), or run as root "
        f"(or with user namespaces) so that unshare works; or set {ENV_VAR}=none to run them WITHOUT walls "
        "(rlimits, a fresh work folder and a minimal environment still apply)."
    )


def check_isolation(iso: Isolation, require_isolation: bool, backend: str = "auto") -> None:
    """Refuse a run without walls unless `none` was named (and isolation not required); warn once then."""
    global _warned
    if iso.walls:
        return
    if require_isolation or requested(backend) != "none":
        raise SandboxUnavailable(refusal(iso))
    with _lock:
        if not _warned:
            _warned = True
            message = f"{iso.describe()}: model-written programs see the host's files, processes and network, as asked"
            warnings.warn(f"{message} (backend none, or {ENV_VAR}=none).", RuntimeWarning, stacklevel=3)


def uid_for_slot(slot: int) -> int:
    """A uid no other live sandbox of any process shares (pid-keyed block, one uid per slot)."""
    return _UID_BASE + (os.getpid() % 1_000_000) * _MAX_SLOTS + slot


def acquire_slot() -> int:
    """A free slot number; each concurrent run holds its own so NPROC and signals stay per run."""
    with _lock:
        for slot in range(1, _MAX_SLOTS):
            if slot not in _slots_in_use:
                _slots_in_use.add(slot)
                return slot
    raise RuntimeError(f"more than {_MAX_SLOTS - 1} concurrent sandboxed programs")


def release_slot(slot: int) -> None:
    with _lock:
        _slots_in_use.discard(slot)
