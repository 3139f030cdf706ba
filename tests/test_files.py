"""corl.files: a file is absent, the old one, or all of the new one, whatever stops its writer."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time

import pytest

from corl.files import OTHER_HOSTS_AFTER_S, write_whole, writing_whole


def _leftovers(folder):
    return sorted(p.name for p in folder.iterdir() if ".tmp." in p.name)


def test_a_write_replaces_the_file_whole_and_leaves_nothing_beside_it(tmp_path):
    path = tmp_path / "deep" / "records.jsonl"  # its folder is made
    write_whole(path, "old\n")
    write_whole(path, "new\n")
    assert path.read_text() == "new\n" and _leftovers(path.parent) == []


def test_an_error_inside_the_block_keeps_the_old_file(tmp_path):
    path = tmp_path / "records.jsonl"
    write_whole(path, "a\nb\nc\n")
    with pytest.raises(RuntimeError), writing_whole(path) as f:
        f.write("a\n")
        raise RuntimeError("the grader failed at row 2")
    assert path.read_text() == "a\nb\nc\n" and _leftovers(tmp_path) == []


def test_a_writer_killed_mid_write_leaves_the_old_file_and_the_next_writer_clears_its_leftover(tmp_path):
    path = tmp_path / "records.jsonl"
    write_whole(path, "1\n2\n3\n")
    script = textwrap.dedent(f"""
        import sys, time
        from corl.files import writing_whole
        with writing_whole({str(path)!r}) as f:
            f.write("1\\n")
            f.flush()
            print("half", flush=True)
            time.sleep(60)
            f.write("2\\n3\\n4\\n")
    """)
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline() == "half\n"
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert path.read_text() == "1\n2\n3\n"  # not the prefix "1\n"
    assert _leftovers(tmp_path) == [f".records.jsonl.tmp.{socket.gethostname()}.{proc.pid}"]
    write_whole(path, "1\n2\n3\n4\n")
    assert path.read_text() == "1\n2\n3\n4\n" and _leftovers(tmp_path) == []


def test_a_running_writers_file_and_another_hosts_recent_one_are_left_alone(tmp_path):
    """Another process of this host still writing, or a node on a shared disk this one cannot
    see: their temporary files stay; another host's after a day is a leftover."""
    path = tmp_path / "latest"
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        running = tmp_path / f".latest.tmp.{socket.gethostname()}.{sleeper.pid}"
        recent = tmp_path / ".latest.tmp.node-7.cluster.12345"
        old = tmp_path / ".latest.tmp.node-8.cluster.12345"
        for p in (running, recent, old):
            p.write_text("step_0000")
        day_ago = time.time() - OTHER_HOSTS_AFTER_S - 60
        os.utime(old, (day_ago, day_ago))
        write_whole(path, "step_000002")
        assert path.read_text() == "step_000002"
        assert _leftovers(tmp_path) == sorted([running.name, recent.name])
    finally:
        sleeper.kill()
        sleeper.wait()


def test_a_pipe_is_written_into_not_renamed_over(tmp_path):
    """`--records /dev/stdout` or a named pipe: renaming over it would replace it, not write to it."""
    fifo = tmp_path / "records.fifo"
    os.mkfifo(fifo)
    got = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_text()))
    reader.start()
    write_whole(fifo, "a\nb\n")
    reader.join(timeout=30)
    assert got == ["a\nb\n"] and fifo.is_fifo() and _leftovers(tmp_path) == []
