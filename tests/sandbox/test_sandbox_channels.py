"""Runs cannot signal each other through the host files they share: locks, file notifications and key rings.

Two concurrent runs see the same read-only inodes (the interpreter's os.py here). Each probe
is two real sandboxed programs, ordered by the host through their pipes (no sleeps, no
timing): the observer gets ready, the actor acts and holds, then the observer looks and
says whether it saw the actor. Through `none` (no walls, no syscall filter) each probe sees
the other run, so the probe itself works on this host; behind walls the actor's call is
refused (corl.sandbox.seccomp) and the observer sees nothing. Every backend with walls that
is installed here runs; one that is not shows as a skip with the reason.
"""

from __future__ import annotations

import contextlib
import os
import warnings

import pytest

from corl.sandbox import Limits, SandboxUnavailable, detect
from corl.sandbox.seccomp import ARCHES, LOCK_COMMANDS, program
from corl.sandbox.session import Session

_COMMON = """
import ctypes, fcntl, os, signal, struct
libc = ctypes.CDLL(None, use_errno=True)
PATH = os.__file__  # a read-only interpreter file every run sees
def say(m):
    os.write(1, (m + "\\n").encode())
def wait():
    os.read(0, 1)
def attempt(fn):
    try:
        return fn()
    except OSError as e:
        say("refused %d" % e.errno)
        raise SystemExit(0)
"""
_ACT = {
    "read": "with open(PATH, 'rb') as f:\n    f.read(16)\nsay('acted')\nwait()\n",
    "flock": "fd = os.open(PATH, os.O_RDONLY)\nattempt(lambda: fcntl.flock(fd, fcntl.LOCK_EX))\nsay('acted')\nwait()\n",
    "posix": "fd = os.open(PATH, os.O_RDONLY)\nattempt(lambda: fcntl.lockf(fd, fcntl.LOCK_SH))\nsay('acted')\nwait()\n",
    "ofd": "fd = os.open(PATH, os.O_RDONLY)\n"
    "attempt(lambda: fcntl.fcntl(fd, 37, struct.pack('hhqqi', fcntl.F_RDLCK, 0, 0, 0, 0)))\nsay('acted')\nwait()\n",
}
_LOOK_LOCK = """
fd = os.open(PATH, os.O_RDONLY)
say("ready")
wait()
{look}
"""
_LOOKS = {
    "flock": "try:\n    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)\n    say('unseen')\nexcept BlockingIOError:\n    say('seen')",
    "posix": "out = attempt(lambda: fcntl.fcntl(fd, fcntl.F_GETLK, struct.pack('hhqqi', fcntl.F_WRLCK, 0, 0, 0, 0)))\n"
    "say('unseen' if struct.unpack('hhqqi', out)[0] == fcntl.F_UNLCK else 'seen')",
    "ofd": "out = attempt(lambda: fcntl.fcntl(fd, 36, struct.pack('hhqqi', fcntl.F_WRLCK, 0, 0, 0, 0)))\n"
    "say('unseen' if struct.unpack('hhqqi', out)[0] == fcntl.F_UNLCK else 'seen')",
}
_INOTIFY = """
fd = libc.inotify_init1(os.O_NONBLOCK)
if fd < 0 or libc.inotify_add_watch(fd, PATH.encode(), 0x20 | 0x1) < 0:  # IN_OPEN | IN_ACCESS
    say("refused %d" % ctypes.get_errno())
    raise SystemExit(0)
say("ready")
wait()
try:
    say("seen" if os.read(fd, 4096) else "unseen")
except BlockingIOError:
    say("unseen")
"""
_DNOTIFY = """
got = []
signal.signal(signal.SIGIO, lambda *a: got.append(1))
d = os.open(os.path.dirname(PATH), os.O_RDONLY)
attempt(lambda: fcntl.fcntl(d, fcntl.F_NOTIFY, fcntl.DN_ACCESS | fcntl.DN_MULTISHOT))
say("ready")
wait()
signal.sigtimedwait([signal.SIGIO], 0.5) if not got else None
say("seen" if got else "unseen")
"""
# (observer, actor): the observer starts first; the actor acts while the observer waits, then the observer looks.
PROBES = {
    "flock": (_LOOK_LOCK.format(look=_LOOKS["flock"]), _ACT["flock"]),
    "posix lock seen by F_GETLK": (_LOOK_LOCK.format(look=_LOOKS["posix"]), _ACT["posix"]),
    "ofd lock seen by F_OFD_GETLK": (_LOOK_LOCK.format(look=_LOOKS["ofd"]), _ACT["ofd"]),
    "inotify on a shared file": (_INOTIFY, _ACT["read"]),
    "dnotify on a shared folder": (_DNOTIFY, _ACT["read"]),
}


def _backend_param(name: str):
    try:
        works = detect(name).walls
        why = "" if works else "no walls"
    except SandboxUnavailable as e:
        works, why = False, str(e)
    return pytest.param(name, marks=pytest.mark.skipif(not works, reason=f"{name}: {why}"))


WALLED = [_backend_param("bwrap"), _backend_param("unshare")]


class _Running:
    """One program under a Session, with the host's ends of its two pipes."""

    def __init__(self, source: str, backend: str) -> None:
        request_r, self.request_w = os.pipe()
        self.reply_r, reply_w = os.pipe()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # backend none, named
            self.session = Session(_COMMON + source, request_r, reply_w, Limits(wall_s=60, cpu_s=60), backend=backend)
        os.close(request_r)
        os.close(reply_w)

    def line(self) -> str:
        data = b""
        while not data.endswith(b"\n") and (chunk := os.read(self.reply_r, 200)):
            data += chunk
        return data.decode().strip()

    def go(self) -> None:
        with contextlib.suppress(BrokenPipeError):  # it already ended (a refused call)
            os.write(self.request_w, b"x")

    def close(self) -> None:
        os.close(self.request_w)
        os.close(self.reply_r)
        self.session.close()


def _two_runs(observer_source: str, actor_source: str, backend: str) -> tuple[str, str, str]:
    """(observer ready line, actor line, observer's look), the two runs alive together throughout."""
    observer = _Running(observer_source, backend)
    actor = None
    try:
        ready = observer.line()
        actor = _Running(actor_source, backend)
        acted = actor.line()
        observer.go()
        return ready, acted, observer.line() or "ended"
    finally:
        if actor is not None:
            actor.go()
            actor.close()
        observer.close()


@pytest.mark.parametrize("probe", list(PROBES))
def test_without_walls_each_probe_sees_the_other_run(probe):
    assert _two_runs(*PROBES[probe], "none") == ("ready", "acted", "seen")


@pytest.mark.parametrize("backend", WALLED)
@pytest.mark.parametrize("probe", list(PROBES))
def test_behind_walls_no_run_sees_another(probe, backend):
    ready, acted, looked = _two_runs(*PROBES[probe], backend)
    assert looked != "seen" and "seen" not in (ready, acted)
    # The first shared-file call of the pair is refused with EPERM: the lock, the watch or the notification.
    assert "refused 1" in (ready, acted, looked), (ready, acted, looked)


_ADD_KEY = """
r = libc.syscall(248 if os.uname().machine == "x86_64" else 217, b"user", b"corl-probe", b"hello", 5, ctypes.c_int(-4))
say("added" if r > 0 else "refused %d" % ctypes.get_errno())
"""
_FIND_KEY = """
k = libc.syscall(250 if os.uname().machine == "x86_64" else 219, 10, ctypes.c_int(-4), b"user", b"corl-probe", 0)
say("seen" if k > 0 else "refused %d" % ctypes.get_errno())
"""


def _one_after_another(backend: str) -> tuple[str, str]:
    """A key added to the user key ring by one run, looked for by the next (the same slot: the same uid)."""
    lines = []
    for source in (_ADD_KEY, _FIND_KEY):
        run = _Running(source, backend)
        lines.append(run.line())
        run.close()
    return lines[0], lines[1]


@pytest.mark.skipif(os.uname().machine not in ARCHES, reason="the probe's syscall numbers are x86_64's and aarch64's")
def test_a_key_ring_carries_a_value_from_one_run_to_the_next_without_walls():
    if os.geteuid() != 0:
        pytest.skip("without root, runs of backend none share this process's uid and key ring by design")
    assert _one_after_another("none") == ("added", "seen")


@pytest.mark.skipif(os.uname().machine not in ARCHES, reason="the probe's syscall numbers are x86_64's and aarch64's")
@pytest.mark.parametrize("backend", WALLED)
def test_behind_walls_key_rings_are_refused(backend):
    assert _one_after_another(backend) == ("refused 1", "refused 1")


def test_the_filter_refuses_exactly_the_listed_calls():
    """The filter's program read back: arch check first, each refused number once, each lock command once."""
    import struct

    for machine, arch in ARCHES.items():
        code = [struct.unpack("<HBBI", program(machine)[i : i + 8]) for i in range(0, len(program(machine)), 8)]
        assert code[0] == (0x20, 0, 0, 4) and code[1][3] == arch.audit  # load arch, compare
        compared = [k for op, _, _, k in code if op == 0x15]
        assert sorted(compared) == sorted([arch.audit, *arch.refused.values(), arch.fcntl, *LOCK_COMMANDS])
        assert code[-3:] == [(0x06, 0, 0, 0x7FFF0000), (0x06, 0, 0, 0x50001), (0x06, 0, 0, 0x50026)]  # allow, EPERM, ENOSYS
    assert program("riscv64") is None


def test_ordinary_fcntl_and_programs_still_work_behind_the_filter():
    from corl.sandbox import Status, run_program

    source = "import os, fcntl\nr, w = os.pipe()\nos.set_blocking(r, False)\nprint(fcntl.fcntl(r, fcntl.F_GETFL) & os.O_NONBLOCK > 0)\n"
    result = run_program(source)
    assert (result.status, result.stdout) == (Status.OK, "True\n"), result.stderr
