"""The liveness heartbeat against a real c10d TCPStore: its counter advances while the rank
lives, and `stop_beating` ends the thread before the interpreter finalizes (a daemon thread
caught inside a store call at finalization aborts the process: a finished run fails)."""

import subprocess
import sys
import time

import torch.distributed as dist

from corl.parallel import plan_layout
from corl.parallel.exchange import Heartbeat


def _store() -> dist.TCPStore:
    return dist.TCPStore("127.0.0.1", 0, world_size=1, is_master=True, wait_for_workers=False)


def test_the_counter_advances_while_beating_and_stops_with_the_thread():
    store = _store()
    heartbeat = Heartbeat(store, 0, 30.0, plan_layout(["a"], 1))
    heartbeat.BEAT_S = 0.05
    heartbeat.start_beating()
    time.sleep(0.5)
    thread = heartbeat._beat_thread
    heartbeat.stop_beating()
    assert not thread.is_alive()
    beats = heartbeat.store.add("alive/0", 0)
    assert beats >= 3  # ~10 beats in 0.5 s; a thread that never beat leaves 0
    time.sleep(0.3)
    assert heartbeat.store.add("alive/0", 0) == beats  # no beat after the stop
    heartbeat.stop_beating()  # a second stop (atexit after the explicit one) is harmless


def test_a_process_that_never_stops_its_heartbeat_still_exits_cleanly():
    """The atexit hook ends the thread: many short-lived processes, every one exits 0."""
    script = (
        "import time, torch.distributed as dist\n"
        "from corl.parallel import plan_layout\n"
        "from corl.parallel.exchange import Heartbeat\n"
        "store = dist.TCPStore('127.0.0.1', 0, world_size=1, is_master=True, wait_for_workers=False)\n"
        "hb = Heartbeat(store, 0, 30.0, plan_layout(['a'], 1))\n"
        "hb.BEAT_S = 0.0\n"  # beat continuously: the thread is inside a store call almost always
        "hb.start_beating()\n"
        "time.sleep(0.2)\n"
        "assert hb.store.add('alive/0', 0) > 0\n"
    )
    for _ in range(3):
        done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr[-2000:]
