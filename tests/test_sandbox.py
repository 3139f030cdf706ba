"""Hostile programs against corl.sandbox: each must be contained, reported with its status, and leave us unharmed.

Everything here runs real subprocesses through the backend this host supports; the cases
a backend cannot contain are skipped with the reason (see corl.sandbox.isolation).
"""

from __future__ import annotations

import http.server
import os
import threading
import time
import urllib.request

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
    assert 1.5 <= r.wall_s < 4.0


def test_cpu_limit_stops_a_spinning_program():
    r = run("while True:\n    pass", limits=Limits(wall_s=30, cpu_s=1))
    assert r.status is Status.TIMEOUT and r.error_kind == "SIGXCPU"


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


def test_fork_bomb_is_contained():
    src = "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n"
    r = run(src, limits=Limits(wall_s=2.0, cpu_s=3, nproc=8))
    assert r.status in (Status.TIMEOUT, Status.KILLED)
    assert os.getpid() > 0 and os.fork is not None  # still here
    if ISO.drops_uid:
        time.sleep(0.2)
        assert [p for p in filter(str.isdigit, os.listdir("/proc")) if _uid(p) >= 1_000_000_000] == []


def _uid(pid: str) -> int:
    try:
        return os.stat(f"/proc/{pid}").st_uid
    except OSError:
        return -1


def test_memory_hog_gets_memory_status():
    r = run("x = bytearray(8 * 1024**3)", limits=Limits(wall_s=5, memory_mb=512))
    assert (r.status, r.error_kind) == (Status.MEMORY, "MemoryError")


def test_huge_output_is_cut_and_reported():
    r = run("import sys\nwhile True:\n    sys.stdout.write('x' * 65536)", limits=Limits(wall_s=5, output_bytes=100_000))
    assert r.status is Status.OUTPUT_LIMIT and r.truncated
    assert len(r.stdout) == 100_000 and set(r.stdout) == {"x"}


def test_huge_file_hits_the_file_size_limit_and_the_work_dir_is_removed():
    src = "import os\nprint(os.getcwd(), flush=True)\nwith open('big.bin', 'wb') as f:\n    while True:\n        f.write(b'0' * 2**20)\n"
    r = run(src, limits=Limits(wall_s=5, file_mb=4))
    assert r.status is Status.OUTPUT_LIMIT and r.error_kind == "OSError"
    workdir = r.stdout.strip()
    assert workdir.startswith("/") and not os.path.exists(workdir)


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
    r = run(src, limits=Limits(wall_s=10, stack_mb=8))
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


def _works(backend: str) -> bool:
    try:
        return detect(backend).network
    except SandboxUnavailable:
        return False


WORKING = [b for b in ("bwrap", "unshare") if _works(b)]


@pytest.mark.skipif(not WORKING, reason="neither bwrap nor unshare works on this host")
@pytest.mark.parametrize("backend", WORKING or ["-"])
def test_every_working_backend_cuts_the_network_and_keeps_root_files(backend, server, tmp_path):
    r = run(_fetch(server.url), backend=backend)
    assert r.status is Status.ERROR and server.hits == 0
    target = tmp_path / "escaped.txt"
    r = run(f"open({str(target)!r}, 'w').write('pwned')\n", backend=backend)
    if detect(backend).filesystem or detect(backend).drops_uid:
        assert r.status is Status.ERROR and not target.exists()
