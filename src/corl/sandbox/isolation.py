"""Which isolation this host supports, detected once, and the command line that applies it.

Backends, best first:
- bwrap: new network and PID namespaces, the host filesystem read-only, a private /tmp,
  root's home hidden; as root the program then drops to a per-run uid.
- unshare: new network and PID namespaces (util-linux); as root it drops to a per-run uid,
  otherwise it needs unprivileged user namespaces. The filesystem is the host's.
- none: a plain child process. The network is reachable; a warning says so once, and
  `require_isolation=True` refuses to run instead.

The per-run uid matters for two reasons: RLIMIT_NPROC does not bind root (a fork bomb would
exhaust the host's PIDs), and a non-root program can neither signal our processes nor
write into root-owned directories.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
import threading
import warnings
from dataclasses import dataclass

BACKENDS = ("bwrap", "unshare", "none")
_UID_BASE = 1_000_000_000  # far above any uid a distribution hands out
_MAX_SLOTS = 100


class SandboxUnavailable(RuntimeError):
    """Isolation was required but this host offers none."""


@dataclass(frozen=True)
class Isolation:
    """What a backend gives: the flags say which hostile behaviours it contains."""

    backend: str
    network: bool  # the program cannot reach the host's network (localhost included)
    pids: bool  # the program cannot see or signal processes outside its own
    filesystem: bool  # the host filesystem is read-only, /tmp private
    drops_uid: bool  # runs as an unprivileged per-run uid (NPROC binds, root files protected)
    python: str  # interpreter the sandbox runs


_lock = threading.Lock()
_detected: dict[str, Isolation] = {}
_warned = False
_slots_in_use: set[int] = set()


def _is_root() -> bool:
    return os.geteuid() == 0


def _world_runnable(path: str) -> bool:
    """True when a uid with no special rights can reach and execute `path` (every parent dir o+x)."""
    real = os.path.realpath(path)
    try:
        if not os.stat(real).st_mode & stat.S_IXOTH:
            return False
        parent = os.path.dirname(real)
        while parent != "/":
            if not os.stat(parent).st_mode & stat.S_IXOTH:
                return False
            parent = os.path.dirname(parent)
    except OSError:
        return False
    return True


def _hidden_dirs() -> list[str]:
    """Home directories the bwrap view replaces by an empty tmpfs (keys, tokens, histories)."""
    return sorted({"/root", os.path.expanduser("~")} - {"/"})


def _rebinds(hidden: list[str]) -> list[str]:
    """Interpreter trees that live under a hidden dir and must be bound back read-only."""
    trees = {sys.prefix, sys.base_prefix, os.path.dirname(os.path.dirname(os.path.realpath(sys.executable)))}
    return sorted(t for t in trees if any(t == h or t.startswith(h + os.sep) for h in hidden))


def _between(hidden: list[str], tree: str) -> list[str]:
    """Directories strictly between the hidden dir holding `tree` and `tree`, outermost first."""
    top = next(h for h in hidden if tree.startswith(h + os.sep))
    parts = os.path.relpath(tree, top).split(os.sep)[:-1]
    return [os.path.join(top, *parts[: i + 1]) for i in range(len(parts))]


def bwrap_prefix(workdir: str) -> list[str]:
    """bwrap arguments for one run: read-only host, private /tmp, the work dir writable, no network."""
    hidden = _hidden_dirs()
    args = ["bwrap", "--unshare-net", "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--die-with-parent"]
    args += ["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp"]
    for h in hidden:
        args += ["--tmpfs", h]
    for tree in _rebinds(hidden):
        # bwrap makes missing mount points 0700; a dropped uid must still traverse them.
        for d in _between(hidden, tree):
            args += ["--perms", "0755", "--dir", d]
        args += ["--ro-bind", tree, tree]
    args += ["--bind", workdir, workdir, "--chdir", workdir, "--"]
    return args


def unshare_prefix(uid: int | None) -> list[str]:
    """unshare arguments: new network and PID namespaces; the uid switch when we are root."""
    args = ["unshare", "--net", "--pid", "--fork", "--kill-child"]
    if uid is not None:
        args += ["--setuid", str(uid), "--setgid", str(uid)]
    elif not _is_root():
        args += ["--user", "--map-root-user"]
    return args + ["--"]


def _python_for(backend: str) -> str | None:
    """The interpreter a dropped uid can run: ours when reachable, else the system's python3."""
    if backend == "bwrap" or not _is_root() or _world_runnable(sys.executable):
        return sys.executable
    system = shutil.which("python3", path="/usr/bin:/bin:/usr/local/bin")
    return system if system and _world_runnable(system) else None


def _probe(backend: str, python: str) -> bool:
    """Run `python -c pass` through the backend; True when it works on this host."""
    import tempfile

    with tempfile.TemporaryDirectory(prefix="corl-probe-") as d:
        if backend == "bwrap":
            cmd = [*bwrap_prefix(d), python, "-c", "pass"]
        else:
            cmd = [*unshare_prefix(uid_for_slot(0) if _is_root() else None), python, "-c", "pass"]
        try:
            return subprocess.run(cmd, capture_output=True, timeout=30, env={"PATH": "/usr/bin:/bin"}).returncode == 0
        except (OSError, subprocess.TimeoutExpired):
            return False


def _make(backend: str) -> Isolation | None:
    if backend == "none":
        python = _python_for("none")
        drops = _is_root() and python is not None
        return Isolation("none", False, False, False, drops, python or sys.executable)
    if shutil.which(backend) is None:
        return None
    python = _python_for(backend)
    if python is None or not _probe(backend, python):
        return None
    return Isolation(backend, True, True, backend == "bwrap", _is_root(), python)


def detect(backend: str = "auto") -> Isolation:
    """The isolation `backend` gives here ("auto": the best that works); probed once per process."""
    if backend != "auto" and backend not in BACKENDS:
        raise ValueError(f"unknown sandbox backend {backend!r}; choose from auto, {', '.join(BACKENDS)}")
    with _lock:
        if backend not in _detected:
            names = BACKENDS if backend == "auto" else (backend,)
            found = next((iso for iso in map(_make, names) if iso is not None), None)
            if found is None:
                raise SandboxUnavailable(f"sandbox backend {backend!r} does not work on this host")
            _detected[backend] = found
        return _detected[backend]


def check_isolation(iso: Isolation, require_isolation: bool) -> None:
    """Refuse (require_isolation) or warn once when programs would run without network isolation."""
    global _warned
    if iso.network:
        return
    message = (
        "corl.sandbox: neither bwrap nor unshare works here; programs run WITHOUT network or filesystem "
        "isolation (rlimits, a fresh temp dir and a minimal env still apply). Install bubblewrap, or pass "
        "require_isolation=True to refuse."
    )
    if require_isolation:
        raise SandboxUnavailable(message)
    with _lock:
        if not _warned:
            _warned = True
            warnings.warn(message, RuntimeWarning, stacklevel=3)


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
