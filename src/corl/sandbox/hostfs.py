"""The host's only ways to touch what a program made: a bounded read of a regular file, and a removal that cannot fail.

Behind walls (bwrap, unshare) the host reads and removes nothing the program made: its files
live on a tmpfs inside the run's mount namespace and its record comes on a pipe. These are
for what remains, the `none` backend's work folder on the host's disk and any caller that
has to look into a folder a program wrote (corl.sandbox's other modules may use them):

- `read_regular(dir_fd, name, limit)` opens with O_NOFOLLOW | O_NONBLOCK relative to a
  folder fd, so a symlink (to a root-only file, to /dev/zero) is refused and a FIFO cannot
  block; only a regular file is read, and at most `limit` bytes of it.
- `remove_tree(path)` removes a folder bottom-up with fd-relative calls: iterative (no
  recursion limit at any depth, one folder fd open at a time), never following a symlink,
  giving itself rights on folders the program locked (chmod 000), never crossing into
  another file system, and checking on each step up that ".." is the folder it came from
  (a folder moved mid-removal stops it rather than leading it elsewhere). It never raises.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import stat

log = logging.getLogger(__name__)
_MAX_STEPS = 10_000_000  # folders entered or left by one removal
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK


def read_regular(dir_fd: int, name: str, limit: int) -> bytes | None:
    """Up to `limit` bytes of regular file `name` in folder `dir_fd`; None for anything else or more than `limit`."""
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY, dir_fd=dir_fd)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        chunks, size = [], 0
        while size <= limit:
            chunk = os.read(fd, min(1 << 16, limit + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        return b"".join(chunks) if size <= limit else None
    except OSError:
        return None
    finally:
        os.close(fd)


def _open_dir(parent_fd: int, name: str) -> int | None:
    """A folder fd for `name` (not a symlink), made enterable first if the program locked it; None if it is no folder."""
    for attempt in range(2):
        try:
            return os.open(name, _DIR_FLAGS, dir_fd=parent_fd)
        except PermissionError:
            if attempt:
                return None
            with contextlib.suppress(OSError):
                os.chmod(name, 0o700, dir_fd=parent_fd, follow_symlinks=False)
        except OSError:
            return None
    return None


def _same(fd: int, ident: tuple[int, int]) -> bool:
    st = os.fstat(fd)
    return (st.st_dev, st.st_ino) == ident


def _clear_one_level(fd: int, dev: int) -> str | None:
    """Remove every entry of folder `fd` that is not a non-empty folder; the name of one such folder, else None."""
    with contextlib.suppress(OSError):
        os.fchmod(fd, 0o700)  # entries of a folder we may not write cannot be removed
    try:
        names = os.listdir(fd)
    except OSError:
        return None
    for name in names:
        try:
            os.unlink(name, dir_fd=fd)
            continue
        except FileNotFoundError:
            continue
        except OSError as e:
            if e.errno not in (errno.EISDIR, errno.EPERM, errno.EACCES):
                continue
        try:
            os.rmdir(name, dir_fd=fd)
            continue
        except FileNotFoundError:
            continue
        except OSError:
            pass
        try:
            st = os.stat(name, dir_fd=fd, follow_symlinks=False)
        except OSError:
            continue
        if stat.S_ISDIR(st.st_mode) and st.st_dev == dev:  # never into another file system (a mount)
            return name
    return None


def remove_tree(path: str) -> bool:
    """Remove folder `path` and everything under it; True when it is gone. Never raises, never recurses."""
    try:
        parent = os.open(os.path.dirname(path) or ".", _DIR_FLAGS & ~os.O_NOFOLLOW)
    except OSError:
        return not os.path.lexists(path)
    try:
        return _remove_under(parent, os.path.basename(path))
    except Exception as e:  # noqa: BLE001 (cleanup must never raise into a run's result)
        log.warning("corl.sandbox: could not remove %s: %s", path, e)
        return False
    finally:
        os.close(parent)


def _remove_under(parent: int, top: str) -> bool:
    with contextlib.suppress(FileNotFoundError):
        try:
            os.unlink(top, dir_fd=parent)
            return True
        except OSError:
            pass
    cur = _open_dir(parent, top)
    if cur is None:
        return not _exists(parent, top)
    st = os.fstat(cur)
    dev = st.st_dev
    ancestors: list[tuple[int, int]] = []  # (dev, ino) of each folder above `cur`, below `top`'s parent
    names: list[str] = []  # the name of `cur` in the folder above it
    try:
        for _ in range(_MAX_STEPS):  # a process still writing (backend none has no PID walls) cannot keep us here
            child = _clear_one_level(cur, dev)
            if child is not None:
                sub = _open_dir(cur, child)
                if sub is not None:
                    ancestors.append((dev, os.fstat(cur).st_ino))
                    names.append(child)
                    os.close(cur)
                    cur = sub
                    continue
                return False  # a folder we can neither remove nor enter
            if not names:
                break
            up = os.open("..", _DIR_FLAGS & ~os.O_NOFOLLOW, dir_fd=cur)
            if not _same(up, ancestors[-1]):
                os.close(up)
                log.warning("corl.sandbox: a folder moved while being removed; stopped")
                return False
            os.close(cur)
            cur = up
            ancestors.pop()
            try:
                os.rmdir(names.pop(), dir_fd=cur)
            except OSError:
                return False  # something in it could not be removed: stop rather than loop
        else:
            return False
    finally:
        os.close(cur)
    with contextlib.suppress(OSError):
        os.rmdir(top, dir_fd=parent)
    return not _exists(parent, top)


def _exists(dir_fd: int, name: str) -> bool:
    try:
        os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
        return True
    except OSError:
        return False
