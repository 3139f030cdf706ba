"""The launcher that runs first inside the sandbox: drop to the sandbox uid, run the program, record its exception.

It is passed to the interpreter with `-c`, so it has to be self-contained source. The
record (one JSON line) goes to a pipe the host passed as an inherited fd, rather than being
parsed from stderr, because stderr is truncated and the program may print anything there;
and rather than to a file, because the host then reads nothing the program could have made
(a FIFO, a symlink to a root-only file or /dev/zero). The write end is non-blocking and
closed on exec: a program that fills the pipe loses its own record, nothing more.
"""

BOOTSTRAP = r"""
import os, sys, json
_uid = int(sys.argv[1])
_record_fd = int(sys.argv[2])
_program = os.path.abspath(sys.argv[3])
try:
    os.set_blocking(_record_fd, False)
    os.set_inheritable(_record_fd, False)
except OSError:
    _record_fd = -1
if _uid >= 0:
    for _path in (os.path.dirname(_program), _program):  # made by a root launcher (bwrap): the program's own
        try:
            os.chown(_path, _uid, _uid, follow_symlinks=False)
        except OSError:
            pass
    os.setgroups([])
    os.setgid(_uid)
    os.setuid(_uid)
def _record(kind, message, errno=None):
    try:
        line = json.dumps({"kind": kind, "message": message[:2000], "errno": errno}) + "\n"
        os.write(_record_fd, line.encode("utf-8", "replace"))
    except BaseException:
        pass
sys.argv = [_program]
sys.path[0] = os.path.dirname(_program)
_globals = {"__name__": "__main__", "__file__": _program, "__builtins__": __builtins__}
try:
    with open(_program, encoding="utf-8") as f:
        _code = compile(f.read(), _program, "exec")
    del f
    exec(_code, _globals)
except SystemExit as e:
    if e.code not in (None, 0):
        _record("SystemExit", str(e.code))
    raise
except BaseException as e:
    _kind, _message, _errno = type(e).__name__, str(e), getattr(e, "errno", None)
    del e
    _globals.clear()
    _record(_kind, _message, _errno if isinstance(_errno, int) else None)
    try:
        import traceback  # only on failure: most programs end without one
        traceback.print_exc()
    except BaseException:
        pass
    sys.exit(1)
"""
