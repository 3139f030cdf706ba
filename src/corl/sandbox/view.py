"""What a sandboxed program sees of the host's files: the same plan for the bwrap and unshare backends.

The view is built on an empty tmpfs rather than the host's / with parts hidden: only the
system trees and the interpreter are bound in, read-only, so other users' files, homes,
data folders and every Unix socket of the host (under /run, /tmp or anywhere else; a
read-only mount does not stop connect()) are simply absent.

The program's one writable place is a single tmpfs of `Limits.disk_mb` at /tmp, mounted
inside the run's own mount namespace: its work folder (`WORK`, where main.py lies) is a
folder on it, and /var/tmp and /dev/shm are symlinks to it, so everything the program
writes counts against one bound (ENOSPC past it) and vanishes with the namespace, without
the host ever touching it. An interpreter installed under /tmp, /var/tmp or /dev/shm (a
venv in a clone under /tmp) is bound read-only on top of that tmpfs at its own path.
"""

from __future__ import annotations

import functools
import os
import stat
import sys
from dataclasses import dataclass

SYSTEM_TREES = ("/usr", "/etc", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
SCRATCH = "/tmp"  # the run's one writable tmpfs
SCRATCH_ALIASES = ("/var/tmp", "/dev/shm")  # symlinks to SCRATCH in the view
WORK = "/tmp/work"  # the program's work folder (cwd, HOME, TMPDIR) inside the view
DEVICES = ("null", "zero", "full", "random", "urandom")


@dataclass(frozen=True)
class View:
    """Host trees bound read-only, symlinks recreated (merged /usr), folders made traversable.

    Paths on the left of `binds` are host paths; every other path is where it appears in the view.
    Binds and folders on SCRATCH are made after its tmpfs is mounted, the rest before.
    """

    binds: tuple[tuple[str, str], ...]  # (host tree, path in the view), read-only
    symlinks: tuple[tuple[str, str], ...]  # (path in the view, link target)
    traversable: tuple[str, ...]  # folders created 0755 in the view, outermost first

    @property
    def read_only(self) -> tuple[str, ...]:
        """The host trees the view shows."""
        return tuple(src for src, _ in self.binds)


def _under(path: str, tree: str) -> bool:
    return path == tree or path.startswith(tree.rstrip("/") + "/")


def on_scratch(path: str) -> bool:
    """True when `path` (in the view) lies on the scratch tmpfs."""
    return _under(path, SCRATCH)


def in_view(path: str) -> str:
    """Where a host path appears in the view: under /var/tmp or /dev/shm it is on the scratch tmpfs."""
    for alias in SCRATCH_ALIASES:
        if _under(path, alias):
            return SCRATCH + path[len(alias) :]
    return path


def interpreter_trees(python: str) -> list[str]:
    """The folders a Python needs: its venv (sys.prefix), its base install, the real binary's install."""
    real = os.path.realpath(python)
    trees = {sys.prefix, sys.base_prefix, os.path.dirname(os.path.dirname(real))}
    return sorted(os.path.realpath(t) for t in trees if os.path.isdir(t))


@functools.lru_cache(maxsize=8)
def host_view(python: str) -> View:
    """The view for programs run by `python`: system trees, then interpreter trees not inside them."""
    links, trees = [], []
    for path in SYSTEM_TREES:
        if os.path.islink(path):
            links.append((path, os.readlink(path)))
        elif os.path.isdir(path):
            trees.append(path)
    for tree in interpreter_trees(python):
        if not any(_under(tree, t) for t in trees):
            trees.append(tree)
    # A symlinked venv (e.g. /work/venv -> /data/venv) keeps its own name working too.
    for path in {sys.prefix, os.path.dirname(os.path.dirname(python))}:
        real = os.path.realpath(path)
        if path != real and os.path.isdir(real) and not any(_under(path, t) for t in trees):
            links.append((in_view(path), real))
    binds = [(t, in_view(t)) for t in trees if not _under(WORK, in_view(t)) and not _under(in_view(t), WORK)]
    dirs = {os.path.dirname(dst) for _, dst in binds} | {os.path.dirname(link) for link, _ in links}
    return View(tuple(binds), tuple(sorted(set(links))), tuple(_parents(dirs)))


def _parents(dirs: set[str]) -> list[str]:
    """Every folder from / down to each of `dirs`, outermost first (without / and the scratch mount itself)."""
    out: set[str] = set()
    for d in dirs:
        while d not in ("/", ""):
            out.add(d)
            d = os.path.dirname(d)
    out.discard(SCRATCH)
    return sorted(out, key=lambda p: (p.count("/"), p))


def reachable(python: str, view: View) -> bool:
    """True when a uid with no rights can run `python` inside the view (o+x from its bound tree down)."""
    real = os.path.realpath(python)
    tree = next((t for t in view.read_only if _under(real, t)), None)
    if tree is None:
        return False
    try:
        if not os.stat(real).st_mode & stat.S_IXOTH:
            return False
        d = os.path.dirname(real)
        while _under(d, tree):
            if not os.stat(d).st_mode & stat.S_IXOTH:
                return False
            if d == tree:
                break
            d = os.path.dirname(d)
    except OSError:
        return False
    return True


def _relative(link: str, target: str) -> str:
    """`target` relative to the folder of `link`: it resolves inside the new root before the pivot too."""
    return os.path.relpath(target, os.path.dirname(link))


def scratch_links() -> list[tuple[str, str]]:
    """(path in the view, relative target) of /var/tmp and /dev/shm onto the scratch tmpfs."""
    return [(alias, _relative(alias, SCRATCH)) for alias in SCRATCH_ALIASES]


def bwrap_args(view: View, disk_bytes: int, source_fd: int) -> list[str]:
    """bwrap's options for the view, the scratch tmpfs and main.py (from `source_fd`) in WORK."""
    args = ["--size", str(disk_bytes), "--perms", "1777", "--tmpfs", SCRATCH]
    for d in view.traversable:
        args += ["--perms", "0755", "--dir", d]
    for src, dst in view.binds:
        args += ["--ro-bind", src, dst]
    for link, target in view.symlinks:
        args += ["--symlink", target, link]
    # /dev by hand (not --dev) so that /dev/shm can be a link to the one bounded tmpfs.
    args += ["--perms", "0755", "--dir", "/var", "--perms", "0755", "--dir", "/dev"]
    for name in DEVICES:
        args += ["--dev-bind", "/dev/" + name, "/dev/" + name]
    for i, name in enumerate(("stdin", "stdout", "stderr")):
        args += ["--symlink", f"/proc/self/fd/{i}", "/dev/" + name]
    args += ["--symlink", "/proc/self/fd", "/dev/fd"]
    for link, target in scratch_links():
        args += ["--symlink", target, link]
    args += ["--proc", "/proc", "--perms", "0700", "--dir", WORK, "--perms", "0644", "--file", str(source_fd), WORK + "/main.py"]
    return args + ["--chdir", WORK, "--remount-ro", "/"]
