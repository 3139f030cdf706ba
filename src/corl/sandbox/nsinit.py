"""The unshare backend: `unshare` makes the namespaces, a small Python init builds the view and runs the program.

    unshare --mount --pid --net --ipc --uts --fork --kill-child -- python -s -B -c INIT CONFIG BOOTSTRAP

INIT runs as pid 1 of the new PID namespace, still privileged: it mounts the view of
corl.sandbox.view on a tmpfs, pivots into it, then forks the program. Only the forked child
gets the rlimits (RLIMIT_CPU on unshare or on pid 1 would hit the wrong process: pid 1
ignores SIGXCPU, and unshare itself fails under it), the unprivileged uid and the syscall
filter of corl.sandbox.seccomp (a failure to install it ends the run: no program runs without), then runs the
bootstrap in the same interpreter (one interpreter start less per program). When the program
ends, INIT exits with its status (128+n for a signal, as bwrap reports it), and the kernel
kills whatever else is left in the namespace before unshare sees INIT's exit: so the launcher
exiting means every process of the run is gone, and with the last of them the mount namespace
and the scratch tmpfs holding all the program wrote (bounded by size= and nr_inodes=; bwrap's
--size bounds the bytes only).

Hand-written rather than bwrap's: it is exactly what a fresh machine without bubblewrap has
(util-linux and Python), and mount(2)/pivot_root(2) through ctypes need no other package.
"""

from __future__ import annotations

import json
import os
import platform

from corl.sandbox.view import DEVICES, SCRATCH, WORK, View, scratch_links

# pivot_root has no glibc wrapper; its syscall number per architecture (chroot where unknown).
_PIVOT_ROOT = {"x86_64": 155, "aarch64": 41, "riscv64": 41, "ppc64le": 203, "ppc64": 203, "s390x": 217}

INIT = r"""
import ctypes, json, os, resource, sys
cfg = json.loads(sys.argv[1])
libc = ctypes.CDLL(None, use_errno=True)
RDONLY, NOSUID, NODEV, NOEXEC, REMOUNT, BIND, REC = 1, 2, 4, 8, 32, 4096, 16384
os.umask(0o022)

def fail(what):
    e = ctypes.get_errno()
    raise OSError(e, f"corl sandbox init: {what}: {os.strerror(e)}")

def mount(src, dst, fstype, flags, data=None):
    enc = lambda s: s.encode() if s is not None else None
    if libc.mount(enc(src), enc(dst), enc(fstype), ctypes.c_ulong(flags), enc(data)) != 0:
        fail(f"mount {src} on {dst}")

def kept_flags(path):
    # Flags a mount in a user namespace must keep on remount (they are locked); harmless as root.
    f = os.statvfs(path).f_flag
    return (NOEXEC if f & 8 else 0) | (f & (1024 | 2048)) | ((1 << 21) if f & 4096 else 0)

def bind(src, dst, read_only, devices=False):
    if os.path.isdir(src):
        os.makedirs(dst, exist_ok=True)
    else:
        open(dst, "a").close()
    try:
        mount(src, dst, None, BIND)  # not recursive: submounts (a bound-in /etc/hosts, say) stay out
    except OSError:
        mount(src, dst, None, BIND | REC)  # a user namespace refuses to split off locked submounts
    flags = BIND | REMOUNT | NOSUID | (0 if devices else NODEV) | (RDONLY if read_only else 0) | kept_flags(dst)
    mount(None, dst, None, flags)

def tmpfs(dst, mode, size, devices=False):
    os.makedirs(dst, exist_ok=True)
    mount("tmpfs", dst, "tmpfs", NOSUID | (0 if devices else NODEV), f"mode={mode},size={size}")

def build_view(new):
    mount("tmpfs", new, "tmpfs", NOSUID | NODEV, "mode=0755,size=4m")
    # The one writable place, first: interpreter trees under it are bound on top of it below.
    tmpfs(new + cfg["scratch"], "1777", f"{cfg['disk_bytes']},nr_inodes={cfg['disk_inodes']}")
    for d in cfg["traversable"]:
        os.makedirs(new + d, mode=0o755, exist_ok=True)
    for src, dst in cfg["binds"]:
        bind(src, new + dst, True)
    for link, target in cfg["symlinks"]:
        os.symlink(target, new + link)
    tmpfs(new + "/dev", "0755", "1m", devices=True)  # device nodes on a nodev mount cannot be opened
    for name in cfg["devices"]:
        bind("/dev/" + name, new + "/dev/" + name, False, devices=True)
    for i, name in enumerate(("stdin", "stdout", "stderr")):
        os.symlink(f"/proc/self/fd/{i}", new + "/dev/" + name)
    os.symlink("/proc/self/fd", new + "/dev/fd")
    os.makedirs(new + "/var", mode=0o755, exist_ok=True)
    for link, target in cfg["scratch_links"]:  # relative targets: they never leave the new root
        os.symlink(target, new + link)
    os.makedirs(new + "/proc", exist_ok=True)
    mount("proc", new + "/proc", "proc", NOSUID | NODEV | NOEXEC)
    make_work(new + cfg["work"])

def make_work(work):
    # The program's folder on the scratch tmpfs, with main.py copied from the host's (unlinked) file.
    os.mkdir(work, 0o700)
    fd = os.open(work + "/" + cfg["program"], os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
    with os.fdopen(cfg["source_fd"], "rb") as src, os.fdopen(fd, "wb") as dst:
        while chunk := src.read(1 << 16):
            dst.write(chunk)
    if cfg["uid"] >= 0:
        os.chown(work, cfg["uid"], cfg["uid"])
        os.chown(work + "/" + cfg["program"], cfg["uid"], cfg["uid"])

def enter(new):
    os.chdir(new)
    if cfg["pivot_root"] and libc.syscall(cfg["pivot_root"], b".", b".") == 0:
        if libc.umount2(b".", 2) != 0:  # MNT_DETACH: the old root leaves this namespace
            fail("umount old root")
    else:
        os.chroot(".")
    os.chdir("/")
    mount(None, "/", None, BIND | REMOUNT | RDONLY | NOSUID | NODEV)

def drop_privileges():
    for kind, soft, hard in cfg["rlimits"]:
        resource.setrlimit(kind, (soft, hard))
    os.chdir(cfg["work"])
    if libc.prctl(38, 1, 0, 0, 0) != 0:  # PR_SET_NO_NEW_PRIVS
        fail("no_new_privs")
    if cfg["uid"] >= 0:
        os.setgroups([])
        os.setgid(cfg["uid"])
        os.setuid(cfg["uid"])
        return
    # Root of a user namespace: drop every capability, or it could remount the view writable.
    for cap in range(64):
        libc.prctl(24, cap, 0, 0, 0)  # PR_CAPBSET_DROP
    header = (ctypes.c_uint32 * 2)(0x20080522, 0)
    if libc.capset(header, (ctypes.c_uint32 * 6)()) != 0:
        fail("capset")

def install_filter():
    # corl.sandbox.seccomp's filter (no locks, no file notifications), after no_new_privs; it holds for every child.
    data = bytes.fromhex(cfg["seccomp"])
    if not data:
        return
    buf = ctypes.create_string_buffer(data, len(data))
    class Prog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]
    prog = Prog(len(data) // 8, ctypes.addressof(buf))
    if libc.prctl(22, 2, ctypes.byref(prog), 0, 0) != 0:  # PR_SET_SECCOMP, SECCOMP_MODE_FILTER
        fail("seccomp filter")

def run_program():
    drop_privileges()
    install_filter()
    sys.argv = ["-c", "-1", str(cfg["record_fd"]), cfg["program"]]
    try:
        exec(compile(boot, "<corl-bootstrap>", "exec"), {"__builtins__": __builtins__, "__name__": "__corl__"})
        code = 0
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        if not isinstance(e.code, (int, type(None))):
            sys.stderr.write(f"{e.code}\n")
    finish(code)

def finish(code):
    # What interpreter shutdown does that a program can notice (its threads joined, atexit run,
    # output flushed), without freeing every object: in a forked interpreter that touches each
    # copy-on-write page of the heap and costs more than a small program itself.
    threading = sys.modules.get("threading")
    if threading is not None and hasattr(threading, "_shutdown"):
        threading._shutdown()
    import atexit
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
        try:
            stream.flush()
        except BaseException:
            pass
    os._exit(code & 0xFF)

boot = sys.argv[2]
try:
    build_view(cfg["root"])
    enter(cfg["root"])
except OSError as e:
    sys.stderr.write(f"{e}\n")
    os._exit(125)
child = os.fork()
if child == 0:
    run_program()
else:
    while True:
        pid, status = os.wait()
        if pid == child:
            code = os.waitstatus_to_exitcode(status)
            os._exit(code if code >= 0 else 128 - code)
"""


def unshare_command(
    unshare: str,
    python: str,
    view: View,
    *,
    root: str,
    uid: int | None,
    rlimits,
    disk_bytes: int,
    source_fd: int,
    record_fd: int,
    program: str,
    boot: str,
    seccomp: bytes | None = None,
) -> list[str]:
    """The argv of one run: namespaces by unshare, then INIT with its configuration and the bootstrap source.

    `root` is an empty host folder to mount the view on (inside the run's mount namespace
    only), `source_fd` an inherited file holding the program, `record_fd` the pipe the
    bootstrap reports an exception on, `rlimits` (resource, soft, hard) triples for the program alone,
    `seccomp` the program's syscall filter (corl.sandbox.seccomp; None: none).
    """
    cfg = {
        "root": root,
        "work": WORK,
        "scratch": SCRATCH,
        "scratch_links": [list(s) for s in scratch_links()],
        "disk_bytes": disk_bytes,
        # Empty files take no pages, so `size` alone does not bound how many (each costs kernel memory).
        "disk_inodes": max(disk_bytes >> 10, 4096),
        "binds": [list(b) for b in view.binds],
        "symlinks": [list(s) for s in view.symlinks],
        "traversable": list(view.traversable),
        "devices": list(DEVICES),
        "uid": -1 if uid is None else uid,
        "rlimits": [list(r) for r in rlimits],
        "source_fd": source_fd,
        "record_fd": record_fd,
        "program": program,
        "pivot_root": _PIVOT_ROOT.get(platform.machine(), 0),
        "seccomp": (seccomp or b"").hex(),
    }
    args = [unshare, "--mount", "--pid", "--net", "--ipc", "--uts", "--fork", "--kill-child"]
    if uid is None and os.geteuid() != 0:
        args += ["--user", "--map-root-user"]
    return [*args, "--", python, "-s", "-B", "-c", INIT, json.dumps(cfg), boot]
