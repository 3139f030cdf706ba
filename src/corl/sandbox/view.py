"""What a sandboxed program sees of the host's files: the same plan for the bwrap and unshare backends.

The view is built on an empty tmpfs rather than the host's / with parts hidden: only the
system trees and the interpreter are bound in, read-only, so other users' files, homes,
data folders and every Unix socket of the host (under /run, /tmp or anywhere else; a
read-only mount does not stop connect()) are simply absent. /tmp, /var/tmp and /dev/shm
are fresh tmpfs that die with the run; the run's work folder is the one writable host path.
"""

from __future__ import annotations

import functools
import os
import stat
import sys
from dataclasses import dataclass

SYSTEM_TREES = ("/usr", "/etc", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
PRIVATE_TMPFS = ("/tmp", "/var/tmp", "/dev/shm")
DEVICES = ("null", "zero", "full", "random", "urandom")


@dataclass(frozen=True)
class View:
    """Host trees bound read-only, symlinks recreated (merged /usr), folders made traversable."""

    read_only: tuple[str, ...]
    symlinks: tuple[tuple[str, str], ...]  # (path in the view, link target)
    traversable: tuple[str, ...]  # folders created 0755 in the view, outermost first


def _under(path: str, tree: str) -> bool:
    return path == tree or path.startswith(tree.rstrip("/") + "/")


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
            links.append((path, real))
    dirs = {os.path.dirname(t) for t in trees} | {os.path.dirname(link) for link, _ in links}
    return View(tuple(trees), tuple(sorted(set(links))), tuple(_parents(dirs)))


def _parents(dirs: set[str]) -> list[str]:
    """Every folder from / down to each of `dirs`, outermost first (without /)."""
    out: set[str] = set()
    for d in dirs:
        while d not in ("/", ""):
            out.add(d)
            d = os.path.dirname(d)
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


def bwrap_args(view: View, workdir: str) -> list[str]:
    """bwrap's options for the view (namespaces and the command follow in the caller)."""
    args = []
    for d in view.traversable:
        args += ["--perms", "0755", "--dir", d]
    for tree in view.read_only:
        args += ["--ro-bind", tree, tree]
    for link, target in view.symlinks:
        args += ["--symlink", target, link]
    args += ["--dev", "/dev", "--proc", "/proc"]
    for d in _parents({os.path.dirname(t) for t in PRIVATE_TMPFS}):
        if d not in ("/dev",):
            args += ["--perms", "0755", "--dir", d]
    for d in PRIVATE_TMPFS:
        args += ["--perms", "1777", "--tmpfs", d]
    for d in _parents({os.path.dirname(workdir)}):
        if d not in PRIVATE_TMPFS:
            args += ["--perms", "0755", "--dir", d]
    return args + ["--bind", workdir, workdir, "--chdir", workdir, "--remount-ro", "/"]
