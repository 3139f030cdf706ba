"""The command line of one sandboxed run, per backend, and the folders it uses."""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from typing import Protocol

from corl.sandbox.bootstrap import BOOTSTRAP
from corl.sandbox.limits import Limits, rlimits
from corl.sandbox.nsinit import unshare_command
from corl.sandbox.view import bwrap_args, host_view

RECORD = ".corl_exception.json"
PROGRAM = "main.py"


@dataclass(frozen=True)
class Layout:
    """A run's host folders: `work` (the program's, writable) and `root` (where unshare mounts the view)."""

    base: str
    work: str
    root: str

    @classmethod
    def make(cls, base: str, source: str, uid: int | None) -> Layout:
        """The folders under `base` with the program in work/, which only `uid` (when given) may enter."""
        work, root = os.path.join(base, "work"), os.path.join(base, "root")
        os.mkdir(work, 0o700)
        os.mkdir(root, 0o700)
        with open(os.path.join(work, PROGRAM), "w", encoding="utf-8") as f:
            f.write(source)
        os.chmod(base, 0o711)  # a dropped uid without namespaces must pass through to work/
        if uid is not None:
            os.chown(work, uid, uid)
        return cls(base, work, root)


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


def _boot(python: str, uid: int) -> list[str]:
    return [python, "-s", "-B", "-c", BOOTSTRAP, str(uid), RECORD, PROGRAM]


class Launch(Protocol):
    """What the command needs of a backend: corl.sandbox.isolation.Isolation (not imported: it imports us)."""

    @property
    def backend(self) -> str: ...  # bwrap, unshare or none

    @property
    def launcher(self) -> str: ...  # absolute path of bwrap / unshare

    @property
    def python(self) -> str: ...  # the interpreter inside


def argv(iso: Launch, layout: Layout, uid: int | None, limits: Limits | None, tmpfs_mb: int, nproc_base: int = 0) -> list[str]:
    """The full argv. bwrap and none get their rlimits from the launcher's preexec; unshare's init sets them."""
    if iso.backend == "bwrap":
        namespaces = ["--unshare-net", "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--die-with-parent", "--new-session"]
        view = bwrap_args(host_view(iso.python), layout.work)
        return [iso.launcher, *namespaces, *view, "--", *_boot(iso.python, -1 if uid is None else uid)]
    if iso.backend == "unshare":
        return unshare_command(
            iso.launcher,
            iso.python,
            host_view(iso.python),
            root=layout.root,
            work=layout.work,
            uid=uid,
            rlimits=rlimits(limits or Limits(), nproc_base),
            tmpfs_mb=tmpfs_mb,
            record=RECORD,
            program=PROGRAM,
            boot=BOOTSTRAP,
        )
    # No namespaces: a shell in between, so the program's parent (getppid) is not this process.
    return ["/bin/sh", "-c", '"$@"; exit $?', "sh", *_boot(iso.python, -1)]
