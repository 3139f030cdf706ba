"""Hostile programs against corl.sandbox: each must be contained, reported with its status, and leave us unharmed.

Everything here runs real subprocesses. The first part uses the backend this host picks;
the walls probes (canary files, writes that outlive the run, host Unix sockets, the host's
process list, total memory of forked children, CPU limit, fork bomb) run once per backend
that works here, each by name, so the unshare backend is probed even where bwrap is
installed; each probe first shows, through the `none` backend, that it can see the breach.
"""

from __future__ import annotations

import http.server
import json
import os
import socket
import subprocess
import sys
import threading
import time
import urllib.request
import warnings

import pytest

from corl.sandbox import Limits, SandboxPool, SandboxUnavailable, Status, detect, run_program

ISO = detect()
QUICK = Limits(wall_s=3.0, cpu_s=3, nproc=8)
needs_net = pytest.mark.skipif(not ISO.network, reason=f"backend {ISO.backend} has no network isolation")
needs_fs = pytest.mark.skipif(not (ISO.filesystem or ISO.drops_uid), reason=f"backend {ISO.backend} cannot protect files")
needs_pids = pytest.mark.skipif(not (ISO.pids or ISO.drops_uid), reason=f"backend {ISO.backend} cannot protect processes")


def run(source: str, **kw):
    return run_program(source, limits=kw.pop("limits", QUICK), **kw)


def _processes_with(marker: str) -> list[int]:
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if marker.encode() in f.read():
                    found.append(int(pid))
        except OSError:
            continue
    return found


def test_ok_program_reports_stdout_and_backend():
    r = run("print(6 * 7)")
    assert (r.status, r.stdout, r.returncode, r.isolation) == (Status.OK, "42\n", 0, ISO.backend)


def test_exception_reports_kind_and_message():
    r = run("raise KeyError('missing')")
    assert (r.status, r.error_kind, r.error_message) == (Status.ERROR, "KeyError", "'missing'")


def test_nonzero_exit_is_an_error():
    r = run("import sys; sys.exit(3)")
    assert (r.status, r.returncode, r.error_kind) == (Status.ERROR, 3, "exit")


def test_infinite_loop_times_out_near_the_limit():
    r = run("while True:\n    pass", limits=Limits(wall_s=1.5, cpu_s=30))
    assert r.status is Status.TIMEOUT
    # the wall limit stopped it, not the CPU limit (how far past the limit: benchmarks/sandbox_throughput.py)
    assert (r.error_kind, r.error_message) == ("timeout", "wall time limit")


def test_timeout_kills_descendants_that_left_the_process_group():
    marker = f"corl-escapee-{os.getpid()}-{time.monotonic_ns()}"
    src = (
        "import subprocess, sys, time\n"
        f"subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)', {marker!r}], start_new_session=True)\n"
        "time.sleep(60)\n"
    )
    r = run(src, limits=Limits(wall_s=2.0, cpu_s=5))
    assert r.status is Status.TIMEOUT
    if not ISO.pids:
        pytest.skip(f"backend {ISO.backend} has no PID namespace to reap setsid() escapees")
    time.sleep(0.2)
    assert _processes_with(marker) == []


def test_memory_hog_gets_memory_status():
    r = run("x = bytearray(8 * 1024**3)", limits=Limits(wall_s=5, memory_mb=512))
    assert (r.status, r.error_kind) == (Status.MEMORY, "MemoryError")


def test_huge_output_is_cut_and_reported():
    r = run("import sys\nwhile True:\n    sys.stdout.write('x' * 65536)", limits=Limits(wall_s=5, output_bytes=100_000))
    assert r.status is Status.OUTPUT_LIMIT and r.truncated
    assert len(r.stdout) == 100_000 and set(r.stdout) == {"x"}


def test_huge_file_hits_the_file_size_limit_and_the_work_dir_is_removed(host_tmp):
    src = "import os\nprint(os.getcwd(), flush=True)\nwith open('big.bin', 'wb') as f:\n    while True:\n        f.write(b'0' * 2**20)\n"
    r = run(src, limits=Limits(wall_s=5, file_mb=4))
    assert r.status is Status.OUTPUT_LIMIT and r.error_kind == "OSError"
    assert r.stdout.startswith("/") and list(host_tmp.iterdir()) == []  # nothing of the run left on the host


@needs_fs
def test_writing_outside_the_work_dir_fails(tmp_path):
    targets = [tmp_path / "escaped.txt", "/root/corl-escaped.txt"]
    src = "".join(f"open({str(t)!r}, 'w').write('pwned')\n" for t in targets[:1]) + f"open({targets[1]!r}, 'w').write('pwned')\n"
    r = run(src)
    assert r.status is Status.ERROR and r.error_kind in ("PermissionError", "OSError", "FileNotFoundError")
    assert not any(os.path.exists(t) for t in targets)
    # Each target alone, so the first failure does not hide the second.
    r2 = run(f"open({targets[1]!r}, 'w').write('pwned')\n")
    assert r2.status is Status.ERROR and not os.path.exists(targets[1])


def test_parent_environment_does_not_leak(monkeypatch):
    secret = f"s3cr3t-{time.monotonic_ns()}"
    monkeypatch.setenv("CORL_TEST_SECRET_TOKEN", secret)
    src = (
        "import os\n"
        "print(dict(os.environ))\n"
        f"for pid in (os.getppid(), {os.getpid()}):\n"
        "    try:\n"
        "        print(open(f'/proc/{pid}/environ').read())\n"
        "    except OSError as e:\n"
        "        print('unreadable', pid, e)\n"
    )
    r = run(src)
    assert r.status is Status.OK and "HOME" in r.stdout
    assert secret not in r.stdout and "CORL_TEST_SECRET_TOKEN" not in r.stdout
    assert os.environ["CORL_TEST_SECRET_TOKEN"] == secret  # the secret really was in our env


class _Server:
    """A real HTTP server on localhost that counts the requests it gets."""

    def __init__(self) -> None:
        self.hits = 0
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802 (http.server's naming)
                outer.hits += 1
                self.send_response(200)
                self.end_headers()
                self.wfile.write(b"reachable")

            def log_message(self, *args):
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def server():
    s = _Server()
    yield s
    s.close()


def _fetch(url: str) -> str:
    return f"import urllib.request\nprint(urllib.request.urlopen({url!r}, timeout=2).read().decode())\n"


@needs_net
def test_socket_to_a_local_server_fails_inside(server):
    assert urllib.request.urlopen(server.url, timeout=5).read() == b"reachable"  # reachable from here
    hits_before = server.hits
    r = run(_fetch(server.url))
    assert r.status is Status.ERROR and r.error_kind in ("URLError", "ConnectionRefusedError", "OSError")
    assert server.hits == hits_before


def test_without_isolation_the_same_program_reaches_the_server(server):
    with pytest.warns(RuntimeWarning) if not _warned() else _nothing():
        r = run(_fetch(server.url), backend="none")
    assert (r.status, r.stdout, r.isolation) == (Status.OK, "reachable\n", "none")
    assert server.hits == 1


def _warned() -> bool:
    from corl.sandbox import isolation

    return isolation._warned


class _nothing:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def test_require_isolation_refuses_the_none_backend():
    with pytest.raises(SandboxUnavailable):
        run("print(1)", backend="none", require_isolation=True)
    with pytest.raises(SandboxUnavailable):
        SandboxPool(workers=1, backend="none", require_isolation=True)


@pytest.mark.parametrize("backend", ["auto", "none"])
def test_killing_the_parent_and_its_group_leaves_us_alive(backend):
    if backend == "auto" and not (ISO.pids or ISO.drops_uid):
        pytest.skip("no PID isolation here")
    src = "import os, signal\nos.kill(os.getppid(), signal.SIGKILL)\nos.killpg(os.getpgid(os.getppid()), signal.SIGKILL)\n"
    r = run(src, backend=backend)
    assert r.status in (Status.ERROR, Status.KILLED, Status.OK)
    assert os.getpid() > 0  # reaching this line is the real assertion


@needs_pids
def test_killing_the_test_process_by_pid_fails():
    r = run(f"import os, signal\nos.kill({os.getpid()}, signal.SIGKILL)\nos.killpg({os.getpgid(0)}, signal.SIGKILL)\n")
    assert r.status is Status.ERROR and r.error_kind in ("PermissionError", "ProcessLookupError")


def test_deep_recursion_is_an_error():
    r = run("def f(n):\n    return f(n + 1)\nf(0)\n")
    assert (r.status, r.error_kind) == (Status.ERROR, "RecursionError")


def test_recursion_past_the_c_stack_is_a_segfault_not_our_crash():
    # repr of a deeply nested list recurses in C; with the limit lifted it overflows the (8 MiB) stack.
    src = "import sys\nsys.setrecursionlimit(10**8)\nx = []\nfor _ in range(10**6):\n    x = [x]\nprint(len(repr(x)))\n"
    r = run(src, limits=Limits(wall_s=60, stack_mb=8))  # ~1 s of CPU; a loaded host stretches the wall
    assert (r.status, r.error_kind) == (Status.KILLED, "SIGSEGV")


def test_program_that_never_reads_a_large_stdin_finishes():
    r = run("print('done')", stdin="x" * (8 * 2**20))
    assert (r.status, r.stdout) == (Status.OK, "done\n")


def test_stdin_is_given_or_dev_null():
    assert run("import sys; print(sys.stdin.read()[::-1])", stdin="abc").stdout == "cba\n"
    assert run("import sys; print(repr(sys.stdin.read()))").stdout == "''\n"


def test_pool_runs_in_parallel_and_keeps_order():
    # each program says when it ran (the host's clock); run together, every one started
    # before any ended: behaviour, not a speed (one after another, none would overlap)
    sources = [f"import time\nprint({i}, time.time())\ntime.sleep(3)\nprint(time.time())" for i in range(4)]
    with SandboxPool(workers=4, limits=Limits(wall_s=30)) as pool:
        results = pool.map(sources)
    lines = [r.stdout.split() for r in results]
    assert [x[0] for x in lines] == [str(i) for i in range(4)]  # in the order given
    starts, ends = [float(x[1]) for x in lines], [float(x[2]) for x in lines]
    assert max(starts) < min(ends)


def _why_not(backend: str) -> str | None:
    """None when `backend` gives walls here, else why not (shown as the skip's reason)."""
    try:
        return None if detect(backend).walls else "no walls"
    except SandboxUnavailable as e:
        return str(e)


def _works(backend: str) -> bool:
    return _why_not(backend) is None


WORKING = [b for b in ("bwrap", "unshare") if _works(b)]
# Every walled backend is a case, so one that is not installed shows as a skip line with its reason.
WALLED = [pytest.param(b, marks=pytest.mark.skipif(not _works(b), reason=f"{b}: {_why_not(b)}")) for b in ("bwrap", "unshare")]
walls = pytest.mark.parametrize("backend", WALLED)


@walls
def test_every_working_backend_cuts_the_network_and_keeps_root_files(backend, server, tmp_path):
    r = run(_fetch(server.url), backend=backend)
    assert r.status is Status.ERROR and server.hits == 0
    target = tmp_path / "escaped.txt"
    r = run(f"open({str(target)!r}, 'w').write('pwned')\n", backend=backend)
    assert r.status is Status.ERROR and not target.exists()


@walls
def test_the_usual_devices_work_inside(backend):
    program = (
        "import os\nopen(os.devnull, 'w').write('x')\nassert open('/dev/zero', 'rb').read(4) == bytes(4)\n"
        "print(len(os.urandom(8)), len(open('/dev/urandom', 'rb').read(8)))\n"
    )
    r = run(program, backend=backend)
    assert (r.status, r.stdout) == (Status.OK, "8 8\n"), r.stderr


def _unwalled(source: str, **kw):
    """The same probe with no walls (`none`, named): shows the breach is real on this host."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return run(source, backend="none", **kw)


def _public_dir(parent: str) -> str:
    """A fresh folder any uid may enter, as other users' folders under /tmp are."""
    import tempfile

    d = tempfile.mkdtemp(prefix="corl-probe-", dir=parent)
    os.chmod(d, 0o755)
    return d


@pytest.fixture
def canaries():
    """World-readable secret files under /tmp, /var/tmp, /dev/shm and our home; removed afterwards."""
    secret = f"canary-{os.getpid()}-{time.monotonic_ns()}"
    dirs = [_public_dir(p) for p in ("/tmp", "/var/tmp", "/dev/shm") if os.path.isdir(p)]
    paths = [os.path.join(d, "secret.txt") for d in dirs] + [os.path.expanduser(f"~/.corl-canary-{os.getpid()}")]
    for path in paths:
        with open(path, "w") as f:
            f.write(secret)
        os.chmod(path, 0o644)
    yield secret, paths
    for path in paths:
        os.unlink(path)
    for d in dirs:
        os.rmdir(d)


_READ = "import os\nfor p in {paths!r}:\n    try:\n        print(p, open(p).read())\n    except OSError as e:\n        print(p, type(e).__name__)\n"


@walls
def test_world_readable_files_outside_the_work_folder_are_not_visible(backend, canaries):
    secret, paths = canaries
    home = os.path.dirname(paths[-1])
    program = _READ.format(paths=paths) + f"print(os.listdir({home!r}) if os.path.isdir({home!r}) else 'no home')\n"
    if ISO.drops_uid:  # as root the unwalled run is a dropped uid too: the /tmp canaries are its to read
        assert secret in _unwalled(_READ.format(paths=paths[:1])).stdout
    r = run(program, backend=backend)
    assert r.status is Status.OK, r.stderr
    assert secret not in r.stdout
    assert os.path.basename(paths[-1]) not in r.stdout.splitlines()[-1]  # the home's listing


@walls
def test_writes_to_shared_temp_folders_do_not_outlive_the_run(backend):
    marker = f"corl-leak-{os.getpid()}-{time.monotonic_ns()}"
    targets = [os.path.join(d, marker) for d in ("/tmp", "/var/tmp", "/dev/shm")]
    program = f"for p in {targets!r}:\n    open(p, 'w').write('x')\n    print('wrote', p)\n"
    try:
        r = run(program, backend=backend)
        assert r.status is Status.OK, r.stderr  # private and writable inside...
        assert r.stdout.count("wrote") == 3
        assert [t for t in targets if os.path.exists(t)] == []  # ...and gone with the run
        assert _unwalled(program).status is Status.OK and all(os.path.exists(t) for t in targets)
    finally:
        for t in targets:
            if os.path.exists(t):
                os.unlink(t)


@pytest.fixture
def unix_sockets():
    """Listening host sockets anyone may connect to: under /tmp, under /run, and abstract."""
    made, paths = [], []
    dirs = [_public_dir("/tmp")] + ([_public_dir("/run")] if os.access("/run", os.W_OK) else [])
    for d in dirs:
        path = os.path.join(d, "host.sock")
        s = socket.socket(socket.AF_UNIX)
        s.bind(path)
        os.chmod(path, 0o777)
        made.append(s)
        paths.append(path)
    abstract = socket.socket(socket.AF_UNIX)
    abstract.bind(f"\0corl-probe-{os.getpid()}")
    made.append(abstract)
    paths.append(f"@corl-probe-{os.getpid()}")
    for s in made:
        s.listen(16)
    yield paths
    for s in made:
        s.close()
    for d in dirs:
        os.unlink(os.path.join(d, "host.sock"))
        os.rmdir(d)


_CONNECT = (
    "import socket\nfor p in {paths!r}:\n    s = socket.socket(socket.AF_UNIX)\n    try:\n"
    "        s.connect('\\0' + p[1:] if p.startswith('@') else p)\n        print('connected', p)\n"
    "    except OSError as e:\n        print('refused', p, type(e).__name__)\n"
)


@walls
def test_host_unix_sockets_cannot_be_reached(backend, unix_sockets):
    program = _CONNECT.format(paths=unix_sockets)
    assert _unwalled(program).stdout.count("connected") == len(unix_sockets)
    r = run(program, backend=backend)
    assert r.status is Status.OK, r.stderr
    assert "connected" not in r.stdout and r.stdout.count("refused") == len(unix_sockets)


_LIST = (
    "import os\nseen = []\nfor pid in filter(str.isdigit, os.listdir('/proc')):\n    try:\n"
    "        seen.append(open(f'/proc/{pid}/cmdline', 'rb').read().replace(b'\\0', b' ').decode())\n"
    "    except OSError:\n        pass\nprint(len(seen))\nprint('\\n'.join(seen))\n"
)


@walls
def test_host_processes_cannot_be_listed(backend):
    marker = f"corl-host-process-{os.getpid()}-{time.monotonic_ns()}"
    host = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", marker])
    try:
        assert marker in _unwalled(_LIST).stdout
        r = run(_LIST, backend=backend)
    finally:
        host.kill()
        host.wait()
    assert r.status is Status.OK, r.stderr
    assert marker not in r.stdout
    assert int(r.stdout.split()[0]) <= 3  # the namespace's init and the program itself


_CHILDREN = (
    "import os, time\nkids = []\nfor i in range(5):\n    pid = os.fork()\n    if pid == 0:\n"
    "        block = b'x' * (400 << 20)  # written, so really resident\n        print('held', i, flush=True)\n"
    "        time.sleep(2)\n        os._exit(0)\n    kids.append(pid)\n"
    "print('children', [os.waitstatus_to_exitcode(os.waitpid(k, 0)[1]) for k in kids])\n"
)


@walls
def test_forked_children_share_one_memory_limit(backend):
    if detect(backend).cgroup == "none":
        pytest.skip("no writable cgroup here: the documented bound is memory_mb x nproc")
    r = run(_CHILDREN, backend=backend, limits=Limits(wall_s=60, cpu_s=60, memory_mb=512, nproc=16))
    # 5 x 400 MiB fit one by one under RLIMIT_AS (512 MiB each), but not two together.
    assert "children [0, 0, 0, 0, 0]" not in r.stdout
    assert (r.status, r.error_kind) == (Status.MEMORY, "OOMKilled")


@walls
def test_cpu_limit_stops_a_spinning_program(backend):
    r = run("while True:\n    pass", backend=backend, limits=Limits(wall_s=60, cpu_s=1))
    assert (r.status, r.error_kind) == (Status.TIMEOUT, "SIGXCPU")


_BOMB = (
    "import os, time\nprint(os.readlink('/proc/self/ns/pid'), flush=True)\nwhile True:\n    try:\n"
    "        if os.fork() == 0:\n            os.setsid()\n    except OSError:\n        time.sleep(0.01)\n"
)


def _ticks_since_boot() -> int:
    with open("/proc/uptime") as f:
        return int(float(f.read().split()[0]) * os.sysconf("SC_CLK_TCK"))


def _processes_in_namespace(ns: str, started_by: int) -> list[int]:
    """Processes in PID namespace `ns` started by tick `started_by`: a namespace's inode number is reused once it is
    gone, so a sandbox started later (another run on a shared host) can show the same `ns` and is no survivor."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/stat") as f:
                started = int(f.read().rsplit(")", 1)[1].split()[19])
            if os.readlink(f"/proc/{pid}/ns/pid") == ns and started <= started_by:
                found.append(int(pid))
        except (OSError, ValueError, IndexError):
            continue
    return found


@walls
def test_fork_bomb_leaves_no_survivors(backend):
    r = run(_BOMB, backend=backend, limits=Limits(wall_s=3.0, cpu_s=10, nproc=16))
    returned = _ticks_since_boot()
    # Checked at once: every process of the run is dead when run_program returns.
    ns = r.stdout.split()[0]
    assert ns.startswith("pid:[") and ns != os.readlink("/proc/self/ns/pid")
    assert _processes_in_namespace(ns, returned) == []
    assert r.status in (Status.TIMEOUT, Status.KILLED)


def _python(code: str, **env: str) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items() if k != "CORL_SANDBOX"}
    return subprocess.run([sys.executable, "-c", code], env={**base, **env}, capture_output=True, text=True, timeout=300)


_TRY = (
    "import json, warnings\nfrom corl.sandbox import SandboxPool, SandboxUnavailable, run_program\n"
    "warnings.simplefilter('ignore')\ntry:\n    r = run_program('print(6 * 7)')\n"
    "    print(json.dumps({'ran': r.isolation, 'stdout': r.stdout}))\nexcept SandboxUnavailable as e:\n"
    "    try:\n        SandboxPool(workers=1)\n        pool = 'made'\n    except SandboxUnavailable:\n        pool = 'refused'\n"
    "    print(json.dumps({'refused': str(e), 'pool': pool}))\n"
)


def test_without_any_backend_programs_are_refused_unless_none_is_named():
    # PATH without bwrap or unshare: what a host with neither offers.
    refused = json.loads(_python(_TRY, PATH="/nonexistent").stdout)
    assert refused["pool"] == "refused" and "CORL_SANDBOX=none" in refused["refused"]
    ran = json.loads(_python(_TRY, PATH="/nonexistent", CORL_SANDBOX="none").stdout)
    assert ran == {"ran": "none", "stdout": "42\n"}


@pytest.mark.skipif("unshare" not in WORKING, reason="unshare gives no walls here")
def test_corl_sandbox_names_the_backend():
    assert json.loads(_python(_TRY, CORL_SANDBOX="unshare").stdout)["ran"] == "unshare"
    bad = _python(_TRY, CORL_SANDBOX="chroot")
    assert bad.returncode != 0 and "CORL_SANDBOX" in bad.stderr


_AS_NOBODY = r"""
import json, os, sys, warnings
from corl.sandbox import Limits, SandboxUnavailable, Status, detect, run_program
try:
    detect("unshare")
except SandboxUnavailable as e:
    print(json.dumps({"skip": str(e)}))
    raise SystemExit(0)
canary, leak = sys.argv[1], sys.argv[2]
read = run_program(f"print(open({canary!r}).read())", backend="unshare")
write = run_program(f"open({leak!r}, 'w').write('x')", backend="unshare")
remount = run_program("import os; print(os.system('mount -o remount,rw /usr 2>/dev/null'))", backend="unshare")
cpu = run_program("while True:\n    pass", backend="unshare", limits=Limits(wall_s=60, cpu_s=1))
print(json.dumps({"read": read.stdout, "wrote": write.ok, "remount": remount.stdout.strip(), "cpu": [cpu.status.value, cpu.error_kind]}))
"""


def _nobody_python() -> str | None:
    from corl.sandbox.commands import world_runnable

    return next((p for p in (sys.executable, "/usr/bin/python3") if world_runnable(p)), None)


@pytest.mark.skipif(os.geteuid() != 0 or not os.path.exists("/usr/bin/setpriv"), reason="needs root to become nobody")
def test_unshare_walls_hold_for_a_user_without_root(canaries):
    # What a non-root user gets: unshare in a user namespace, every capability dropped.
    import corl

    secret, paths = canaries
    src, python = os.path.dirname(os.path.dirname(corl.__file__)), _nobody_python()
    if python is None or not os.access(src, os.R_OK | os.X_OK):
        pytest.skip("no interpreter or source tree that nobody may use")
    leak = f"/tmp/corl-leak-nobody-{os.getpid()}"
    cmd = ["/usr/bin/setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", python, "-c", _AS_NOBODY, paths[0], leak]
    done = subprocess.run(
        cmd, capture_output=True, text=True, timeout=300, cwd="/", env={"PATH": "/usr/bin:/bin", "PYTHONPATH": src}
    )
    if done.returncode != 0 and "ModuleNotFoundError" in done.stderr:
        pytest.skip(f"{python} cannot import corl's dependencies: {done.stderr[-200:]}")
    out = json.loads(done.stdout.splitlines()[-1])
    if "skip" in out:
        pytest.skip(f"no user namespaces for nobody here: {out['skip']}")
    try:
        assert secret not in out["read"] and not os.path.exists(leak) and out["wrote"]
        assert out["remount"] != "0"  # the view stays read-only: no capability left to remount it
        assert out["cpu"] == ["timeout", "SIGXCPU"]
    finally:
        if os.path.exists(leak):
            os.unlink(leak)


# The host touches nothing the program made except through safe calls (issue 40, item 3).
# Each probe runs against every backend with walls here and against `none` (the one backend
# whose work folder is on the host's disk) and asserts the exact status it must end in.

EVERY = [*WALLED, "none"]
every_backend = pytest.mark.parametrize("backend", EVERY)
OLD_RECORD = ".corl_exception.json"  # where the bootstrap's record file used to be read from


def _run_in(backend: str, source: str, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return run(source, backend=backend, **kw)


def _opening_no(name: str, fn, monkeypatch):
    """(fn()'s value, the paths called `name` this process tried to open meanwhile): each such open is refused
    before it happens, so a host that would block on a FIFO there (or read through a symlink) fails instead."""
    import builtins
    import io

    tried: list[str] = []

    def guarded(real):
        def open_(path, *args, **kwargs):
            if not isinstance(path, int) and os.path.basename(os.fsdecode(path)) == name:
                tried.append(os.fsdecode(path))
                raise PermissionError(f"the host opened {path!r}")
            return real(path, *args, **kwargs)

        return open_

    for module, attribute in ((os, "open"), (builtins, "open"), (io, "open")):
        monkeypatch.setattr(module, attribute, guarded(getattr(module, attribute)))
    return fn(), tried


@pytest.fixture
def host_tmp(tmp_path, monkeypatch):  # tmp_path first: it is made under the real temp folder
    """The host's temp folder for the runs of one test: what is left in it afterwards was left by a run."""
    import pathlib
    import shutil
    import tempfile

    # On a tmpfs where there is one: removing 5,000 folders from a disk costs seconds of the disk's time, not ours.
    # Public, as /tmp is: a dropped uid (backend none, as root) passes through it.
    folder = _public_dir("/dev/shm" if os.access("/dev/shm", os.W_OK) else "/tmp")
    monkeypatch.setattr(tempfile, "tempdir", folder)
    yield pathlib.Path(folder)
    shutil.rmtree(folder, ignore_errors=True)


@every_backend
def test_a_fifo_at_the_record_path_does_not_freeze_the_host(backend, host_tmp, monkeypatch):
    """The record comes on a pipe: the host never opens the path, where an open would block on the FIFO."""
    src = f"import os\nos.mkfifo({OLD_RECORD!r})\nraise ValueError('boom')\n"
    r, opened = _opening_no(OLD_RECORD, lambda: _run_in(backend, src), monkeypatch)
    assert opened == []
    assert (r.status, r.error_kind, r.error_message) == (Status.ERROR, "ValueError", "boom")
    assert list(host_tmp.iterdir()) == []


@every_backend
@pytest.mark.parametrize("target", ["secret", "/dev/zero"])
def test_a_symlink_at_the_record_path_is_never_read(backend, target, host_tmp, tmp_path, monkeypatch):
    secret = f"root-only-{time.monotonic_ns()}"
    if target == "secret":
        target = str(tmp_path / "secret.json")  # what a root-only file would say, if the host read it
        with open(target, "w") as f:
            json.dump({"kind": "Leaked", "message": secret, "errno": None}, f)
        os.chmod(target, 0o600)
    src = f"import os\nos.symlink({target!r}, {OLD_RECORD!r})\nraise ValueError('boom')\n"
    r, opened = _opening_no(OLD_RECORD, lambda: _run_in(backend, src), monkeypatch)
    assert opened == []
    assert (r.status, r.error_kind, r.error_message) == (Status.ERROR, "ValueError", "boom")
    assert secret not in r.stdout + r.stderr
    assert list(host_tmp.iterdir()) == []


_TREE = """import os
top = os.getcwd()
for _ in range(5000):
    os.mkdir('d')
    os.chdir('d')
open('deepest', 'w').write('x')
os.chdir(top)
os.makedirs('locked/inner')
open('locked/inner/f', 'w').write('x')
os.chmod('locked/inner', 0)
os.chmod('locked', 0o500)
os.mkfifo('fifo')
os.symlink({keep!r}, 'link')
print('made')
"""


@every_backend
def test_deep_and_locked_trees_are_removed_and_the_slot_released(backend, host_tmp, tmp_path):
    from corl.sandbox import isolation

    keep = tmp_path / "keep"  # a host folder the program links to: removal must not follow the link
    keep.mkdir()
    (keep / "precious").write_text("mine")
    slots = set(isolation._slots_in_use)
    r = _run_in(backend, _TREE.format(keep=str(keep)), limits=Limits(wall_s=30, cpu_s=20))
    assert (r.status, r.stdout) == (Status.OK, "made\n"), r.stderr
    assert list(host_tmp.iterdir()) == []
    assert (keep / "precious").read_text() == "mine"
    assert isolation._slots_in_use == slots  # the run's slot was given back


_FILL = """import os
for i, folder in enumerate(['.', '/tmp', '/var/tmp', '/dev/shm', '.', '/tmp']):
    with open(os.path.join(folder, f'fill{i}'), 'wb') as f:
        f.write(b'0' * (3 << 20))
    print('wrote', folder, flush=True)
"""


@walls
def test_disk_is_bounded_in_total_not_per_file(backend, host_tmp):
    # Every file is under file_mb; together they pass disk_mb wherever they are written.
    r = run(_FILL, backend=backend, limits=Limits(wall_s=30, file_mb=4, disk_mb=8))
    assert (r.status, r.error_kind) == (Status.OUTPUT_LIMIT, "OSError")
    assert r.stdout == "wrote .\nwrote /tmp\n" and "No space left" in r.error_message
    assert list(host_tmp.iterdir()) == []


@every_backend
def test_a_flood_on_stderr_is_cut_as_soon_as_one_on_stdout(backend):
    limits = Limits(wall_s=60, cpu_s=60, output_bytes=100_000)
    flood = "import sys, time\nsys.{stream}.write('x' * (8 << 20))\nsys.{stream}.flush()\ntime.sleep(60)\n"
    out = _run_in(backend, flood.format(stream="stdout"), limits=limits)
    err = _run_in(backend, flood.format(stream="stderr"), limits=limits)
    assert (out.status, err.status) == (Status.OUTPUT_LIMIT, Status.OUTPUT_LIMIT)
    assert (len(out.stdout), len(err.stderr)) == (100_000, 100_000)
    # how soon each is cut is measured, as a ratio, by benchmarks/sandbox_flood.py (a test asserts no time)


_VENV_RUN = """import json, sys
from corl.sandbox import run_program
inner = "import subprocess, sys; print(subprocess.run([sys.executable, '-c', 'import sys; print(sys.prefix)'], capture_output=True, text=True).stdout)"
r = run_program(inner)
print(json.dumps([r.status.value, r.stdout.strip(), r.isolation, sys.prefix]))
"""


@walls
def test_an_interpreter_in_a_venv_under_tmp_runs_inside(backend):
    import sysconfig
    import tempfile

    import corl

    with tempfile.TemporaryDirectory(prefix="corl-venv-", dir="/tmp") as clone:
        venv = os.path.join(clone, ".venv")
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", venv], check=True, capture_output=True, timeout=120)
        python = os.path.join(venv, "bin", "python")
        site = subprocess.run(
            [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        # The clone's venv sees corl and its dependencies through a .pth, as an editable install would.
        src = os.path.dirname(os.path.dirname(corl.__file__))
        with open(os.path.join(site, "corl-test.pth"), "w") as f:
            f.write(f"{src}\n{sysconfig.get_paths()['purelib']}\n")
        env = {"PATH": "/usr/bin:/bin", "CORL_SANDBOX": backend}
        done = subprocess.run([python, "-c", _VENV_RUN], capture_output=True, text=True, timeout=300, env=env, cwd=clone)
    assert done.returncode == 0, done.stderr[-2000:]
    status, printed, isolation, prefix = json.loads(done.stdout.splitlines()[-1])
    assert prefix == venv
    # The program starts its own interpreter (sys.executable) inside the sandbox: the venv is there.
    assert (status, printed, isolation) == ("ok", venv, backend)


def test_read_regular_refuses_links_fifos_devices_and_big_files(tmp_path):
    from corl.sandbox.hostfs import read_regular

    (tmp_path / "record").write_bytes(b"{}")
    (tmp_path / "big").write_bytes(b"x" * 101)
    secret = tmp_path / "secret"
    secret.write_text("root-only")
    os.chmod(secret, 0o600)
    os.symlink(secret, tmp_path / "to-secret")
    os.symlink("/dev/zero", tmp_path / "to-zero")
    os.mkfifo(tmp_path / "fifo")  # opening it for reading would block without O_NONBLOCK
    fd = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        read = {name: read_regular(fd, name, 100) for name in ("record", "big", "to-secret", "to-zero", "fifo", "missing")}
    finally:
        os.close(fd)
    assert read == {"record": b"{}", "big": None, "to-secret": None, "to-zero": None, "fifo": None, "missing": None}


def test_a_disk_bound_of_zero_is_refused_not_unbounded():
    # tmpfs reads size=0 as "no limit": the bound must never silently vanish.
    with pytest.raises(ValueError, match="disk_mb"):
        Limits(disk_mb=0)


_FORGE = """import os
open({old!r}, 'wb').write({line!r})  # where the record file used to be
for fd in range(3, 256):  # whatever the host passed in: the record pipe among them
    try:
        os.write(fd, {line!r})
    except OSError:
        pass
"""


@every_backend
@pytest.mark.parametrize(
    "line", [b"[" * 50_000 + b"\n", b'{"kind": ["x"], "message": {"a": 1}, "errno": "e"}\n'], ids=["deep", "shape"]
)
def test_a_forged_record_cannot_break_the_host(backend, line):
    # A deeply nested line used to raise RecursionError out of run_program; a record of the wrong shape is ignored.
    r = _run_in(backend, _FORGE.format(line=line, old=OLD_RECORD))
    assert (r.status, r.error_kind, r.error_message) == (Status.OK, None, None), r.stderr


def test_program_texts_are_cleaned_at_the_host_boundary():
    """A record the program forged into the bootstrap's pipe (an fd of its own process) with a lone surrogate and a
    newline: its texts come back escaped on one line and encodable (raw, `corl grade --records` died on them)."""
    from corl.sandbox.launch import read_record
    from corl.sandbox.result import clean_text

    assert clean_text("a\nb\ud800\x1bc") == "a\\nb\\ud800\\x1bc"
    assert clean_text("é ok") == "é ok" and clean_text(None) == "?"
    assert clean_text("\n" * 50, limit=10) == "\\n" * 5 + "..."
    r, w = os.pipe()
    os.write(w, b'{"kind": "Memory\\nError", "message": "\\ud800 forged\\n' + b"x" * 5000 + b'", "errno": null}\n')
    os.close(w)
    try:
        record = read_record(r)
    finally:
        os.close(r)
    assert record["kind"] == "Memory\\nError" and record["message"].startswith("\\ud800 forged\\nxxx")
    assert len(record["message"]) <= 2003 and record["message"].encode("utf-8")


def test_a_forged_record_sets_no_text_the_host_cannot_write():
    line = b'{"kind": "E\\ud800", "message": "\\ud800\\n", "errno": null}\n'
    code = f"import os\nfor fd in range(3, 20):\n    try:\n        os.write(fd, {line!r})\n    except OSError:\n        pass\nos._exit(1)"
    r = run(code)
    for text in (r.error_kind, r.error_message):
        assert text is None or (text.isprintable() and text.encode("utf-8"))
