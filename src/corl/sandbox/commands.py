"""The command line of one sandboxed run, per backend, and the folders it uses."""

from __future__ import annotations

import os
import stat
import tempfile
from dataclasses import dataclass
from typing import Protocol

from corl.sandbox.bootstrap import BOOTSTRAP
from corl.sandbox.limits import Limits, MiB, rlimits
from corl.sandbox.nsinit import unshare_command
from corl.sandbox.seccomp import program as seccomp_program
from corl.sandbox.view import WORK, bwrap_args, host_view

PROGRAM = "main.py"


@dataclass(frozen=True)
class Layout:
    """A run's host folders, made and removed by the host; the program writes into none of them behind walls.

    `root` is where unshare mounts the view, inside the run's own mount namespace, so on the
    host it stays an empty folder; `work` is the program's folder for the `none` backend
    only (bwrap and unshare put it on the run's tmpfs, corl.sandbox.view.WORK).
    """

    base: str
    work: str
    root: str

    @classmethod
    def make(cls, base: str, source: str, uid: int | None, walled: bool = True) -> Layout:
        """The folders under `base`; without walls also work/ holding main.py, which only `uid` (when given) may enter."""
        work, root = os.path.join(base, "work"), os.path.join(base, "root")
        os.mkdir(root, 0o700)
        if not walled:
            os.mkdir(work, 0o700)
            with open(os.path.join(work, PROGRAM), "w", encoding="utf-8") as f:
                f.write(source)
            os.chmod(base, 0o711)  # a dropped uid without namespaces must pass through to work/
            if uid is not None:
                os.chown(work, uid, uid)
        return cls(base, work, root)


def source_file(source: str):
    """The program as an unlinked host file, for the launcher to copy into the run's tmpfs (fd at offset 0)."""
    f = tempfile.TemporaryFile()  # noqa: SIM115 (the caller closes it)
    f.write(source.encode("utf-8"))
    f.flush()
    f.seek(0)
    return f


def filter_file(backend: str):
    """bwrap's syscall filter (corl.sandbox.seccomp) as an unlinked file at offset 0; None for other backends or arches."""
    data = seccomp_program() if backend == "bwrap" else None
    if data is None:
        return None
    f = tempfile.TemporaryFile()  # noqa: SIM115 (the caller closes it)
    f.write(data)
    f.flush()
    f.seek(0)
    return f


def world_runnable(path: str) -> bool:
    """True when a uid with no special rights can reach and execute `path` on the host (every parent o+x)."""
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


def _boot(python: str, uid: int, record_fd: int, program: str) -> list[str]:
    return [python, "-s", "-B", "-c", BOOTSTRAP, str(uid), str(record_fd), program]


class Launch(Protocol):
    """What the command needs of a backend: corl.sandbox.isolation.Isolation (not imported: it imports us)."""

    @property
    def backend(self) -> str: ...  # bwrap, unshare or none

    @property
    def launcher(self) -> str: ...  # absolute path of bwrap / unshare

    @property
    def python(self) -> str: ...  # the interpreter inside


def argv(
    iso: Launch,
    layout: Layout,
    uid: int | None,
    limits: Limits | None,
    *,
    source_fd: int,
    record_fd: int,
    nproc_base: int = 0,
    seccomp_fd: int = -1,
) -> list[str]:
    """The full argv. bwrap and none get their rlimits from the launcher's preexec; unshare's init sets them.

    `source_fd` (the program, for bwrap and unshare), `record_fd` (the bootstrap's record
    pipe) and `seccomp_fd` (bwrap's filter file, `filter_file`) must be passed to the child at
    the same numbers (Popen's pass_fds). unshare carries the filter in its init's configuration.
    """
    limits = limits or Limits()
    disk = limits.disk_mb * MiB
    if iso.backend == "bwrap":
        namespaces = ["--unshare-net", "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--die-with-parent", "--new-session"]
        view = bwrap_args(host_view(iso.python), disk, source_fd)
        boot = _boot(iso.python, -1 if uid is None else uid, record_fd, f"{WORK}/{PROGRAM}")
        syscalls = ["--seccomp", str(seccomp_fd)] if seccomp_fd >= 0 else []
        return [iso.launcher, *namespaces, *view, *syscalls, "--", *boot]
    if iso.backend == "unshare":
        return unshare_command(
            iso.launcher,
            iso.python,
            host_view(iso.python),
            root=layout.root,
            uid=uid,
            rlimits=rlimits(limits, nproc_base),
            disk_bytes=disk,
            source_fd=source_fd,
            record_fd=record_fd,
            program=PROGRAM,
            boot=BOOTSTRAP,
            seccomp=seccomp_program(),
        )
    # No namespaces: a shell in between, so the program's parent (getppid) is not this process.
    return ["/bin/sh", "-c", '"$@"; exit $?', "sh", *_boot(iso.python, -1, record_fd, os.path.join(layout.work, PROGRAM))]
