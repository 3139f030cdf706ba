"""The one syscall filter of a walled run: no file locks and no file-access notifications, so concurrent runs cannot signal.

Two runs at once see the same host inodes (the interpreter's files, /dev/null, /proc/self/exe),
read-only, and a read-only file can still carry bits between them: a run that takes flock(2)
on os.py is seen by another whose flock(LOCK_NB) fails; a POSIX or OFD read lock is seen by
another's F_GETLK; an inotify watch or a dnotify (F_NOTIFY) on a shared folder fires when
another run opens or reads a file there. Each of these was decoded across two concurrent
runs (tests/sandbox/test_sandbox.py). Every one of them is a syscall, and none is needed by
the programs corl judges, so the filter refuses them all with EPERM, whatever file they name:

- flock; fcntl with a lock command (F_GETLK, F_SETLK, F_SETLKW, their 64-bit and OFD forms),
  a lease (F_SETLEASE, F_GETLEASE) or F_NOTIFY (dnotify);
- inotify_init, inotify_init1, inotify_add_watch; fanotify_init, fanotify_mark;
- add_key, request_key, keyctl: a key ring is per uid and outlives its processes (a per-run
  uid is reused by the slot's next run).

Everything else is allowed; a syscall of another ABI than the interpreter's (x32 numbers,
int 0x80 on x86_64) gets ENOSYS. The filter is built for x86_64 and aarch64, as classic BPF
(the kernel's seccomp_data: nr at 0, arch at 4, args from 16, little-endian); on another
architecture `program()` is None and `Isolation.describe` says that locks are not filtered.
The unshare backend installs it in the program's process (corl.sandbox.nsinit), bwrap loads
it with --seccomp; both set no_new_privs first, and the filter holds for every process the
program starts.
"""

from __future__ import annotations

import errno
import platform
import struct
from dataclasses import dataclass

_LD_ABS_W, _JEQ, _JGE, _RET = 0x20, 0x15, 0x35, 0x06
_ALLOW, _ERRNO = 0x7FFF0000, 0x00050000
_OFF_NR, _OFF_ARCH, _OFF_CMD = 0, 4, 24  # seccomp_data.nr, .arch, low word of .args[1]
_X32_BIT = 0x40000000

# fcntl commands: F_GETLK, F_SETLK, F_SETLKW, F_GETLK64, F_SETLK64, F_SETLKW64, F_OFD_GETLK,
# F_OFD_SETLK, F_OFD_SETLKW, F_SETLEASE, F_GETLEASE, F_NOTIFY.
LOCK_COMMANDS = (5, 6, 7, 12, 13, 14, 36, 37, 38, 1024, 1025, 1026)


@dataclass(frozen=True)
class _Arch:
    audit: int  # AUDIT_ARCH_* of the interpreter's ABI
    fcntl: int  # its fcntl syscall number
    refused: dict[str, int]  # name: number of each syscall refused whatever its arguments
    x32: bool  # numbers with bit 30 set are another ABI (x86_64's x32)


ARCHES = {
    "x86_64": _Arch(
        0xC000003E,
        72,
        {
            "flock": 73,
            "inotify_init": 253,
            "inotify_add_watch": 254,
            "inotify_init1": 294,
            "fanotify_init": 300,
            "fanotify_mark": 301,
            "add_key": 248,
            "request_key": 249,
            "keyctl": 250,
        },
        x32=True,
    ),
    "aarch64": _Arch(
        0xC00000B7,
        25,
        {
            "flock": 32,
            "inotify_init1": 26,
            "inotify_add_watch": 27,
            "fanotify_init": 262,
            "fanotify_mark": 263,
            "add_key": 217,
            "request_key": 218,
            "keyctl": 219,
        },
        x32=False,
    ),
}


def _assemble(code: list[tuple]) -> bytes:
    """struct sock_filter[] from (opcode, k) and (jump opcode, k, true label, false label) items; "label:" strings mark places."""
    places, n = {}, 0
    for item in code:
        if isinstance(item, str):
            places[item.rstrip(":")] = n
        else:
            n += 1
    out, pc = [], 0
    for item in code:
        if isinstance(item, str):
            continue
        op, k, *jumps = item
        jt, jf = (places[j] - pc - 1 if isinstance(j, str) else j for j in jumps) if jumps else (0, 0)
        out.append(struct.pack("<HBBI", op, jt, jf, k))
        pc += 1
    return b"".join(out)


def program(machine: str | None = None) -> bytes | None:
    """The filter for `machine` (default: this host's) as struct sock_filter bytes; None where none is built."""
    arch = ARCHES.get(machine or platform.machine())
    if arch is None:
        return None
    code: list = [(_LD_ABS_W, _OFF_ARCH), (_JEQ, arch.audit, 0, "other_abi"), (_LD_ABS_W, _OFF_NR)]
    if arch.x32:
        code.append((_JGE, _X32_BIT, "other_abi", 0))
    code += [(_JEQ, nr, "refuse", 0) for nr in arch.refused.values()]
    code += [(_JEQ, arch.fcntl, 0, "allow"), (_LD_ABS_W, _OFF_CMD)]
    code += [(_JEQ, cmd, "refuse", 0) for cmd in LOCK_COMMANDS]
    code += ["allow:", (_RET, _ALLOW), "refuse:", (_RET, _ERRNO | errno.EPERM), "other_abi:", (_RET, _ERRNO | errno.ENOSYS)]
    return _assemble(code)
