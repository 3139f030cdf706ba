"""How the answers table travels between processes, and how a peer's failure is named.

Before every collective, the ranks that take part meet in the c10d store (`Heartbeat`).
A rank that does not arrive within distributed.timeout_s is named, with its agents, by
every rank that waited for it; a rank that raises publishes its error so that the others
stop at their next meeting; every collective also carries the same timeout (a peer dying
inside one fails it).
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Protocol

import torch.distributed as dist

from corl.parallel.layout import Layout


class Exchange(Protocol):
    """What the loop needs to see every process's share of a step."""

    def all_gather(self, obj) -> list:
        """Every process's `obj`, in rank order (the identity in one process)."""
        ...

    def barrier(self) -> None: ...


class LocalExchange:
    """One process holds the whole cohort: gathering is the identity."""

    def all_gather(self, obj):
        return [obj]

    def barrier(self) -> None:
        pass


class PeerFailure(RuntimeError):
    """Another rank did not answer, or failed: the message names it (rank and agents)."""

    def __init__(self, message: str, missing: Sequence[int] = ()):
        super().__init__(message)
        self.missing = list(missing)


class LauncherStopped(PeerFailure):
    """SIGTERM: torchrun stops every rank as soon as one of them has exited."""


class Heartbeat:
    """Meetings in the c10d store before each collective, so that a rank that never comes is
    named instead of leaving the others blocked inside a collective.

    Each meeting of a group is numbered; every rank writes its key, then polls until all
    keys of the group are there, the timeout passes (-> PeerFailure naming the absent
    ranks) or a rank has published a failure (-> PeerFailure quoting it). The store is
    torchrun's (hosted by the launcher), so it outlives any one worker.
    """

    def __init__(self, store, rank: int, timeout_s: float, layout: Layout):
        # torchrun --max-restarts keeps its store across restarts: each attempt has its own keys
        self.store = dist.PrefixStore(f"corl/{os.environ.get('TORCHELASTIC_RESTART_COUNT', '0')}", store)
        self.rank = rank
        self.timeout_s = timeout_s
        self.layout = layout
        self.context = "start-up"  # where the run is, for messages ("step 3")
        self.stop_requested = False  # set by the SIGTERM handler (corl.launch.run)
        self._meetings: Counter[str] = Counter()
        self._last_key: dict[str, str] = {}

    def meet(self, group: str, ranks: Sequence[int], what: str) -> None:
        """Wait until every rank of `ranks` has come to this group's next meeting."""
        prefix = f"{group}/{self._meetings[group]}/"
        self._meetings[group] += 1
        self.store.set(prefix + str(self.rank), b"")
        keys = [prefix + str(r) for r in ranks]
        deadline = time.monotonic() + self.timeout_s
        pause, next_failure_check = 0.0005, 0.0
        try:
            while not self.store.check(keys):
                now = time.monotonic()
                if now >= next_failure_check:
                    self._raise_if_published()
                    next_failure_check = now + 0.5
                    if self.stop_requested:  # SIGTERM: preemption (all alive) or torchrun stopping us after a death
                        # only a rank that has not come *and* has stopped beating is gone (one that
                        # came and then exited after its preemption checkpoint is not)
                        stopped = self._silent_ranks()
                        dead = [r for r, key in zip(ranks, keys) if r in stopped and not self.store.check([key])]
                        if dead:
                            raise LauncherStopped("stopped by the launcher (SIGTERM)", dead)
                if now >= deadline:
                    missing = [r for r, key in zip(ranks, keys) if not self.store.check([key])]
                    raise PeerFailure(
                        f"{self.layout.describe(missing)} did not answer within {self.timeout_s:g} s "
                        f"(distributed.timeout_s) at the {what} in {self.context}; "
                        f"{self.layout.describe([self.rank])} gave up waiting",
                        missing,
                    )
                time.sleep(pause)
                pause = min(2 * pause, 0.01)  # at most 10 ms late; a few hundred store reads a second
        except LauncherStopped as err:
            missing = err.missing or [r for r, key in zip(ranks, keys) if not self.store.check([key])]
            raise PeerFailure(
                f"stopped by the launcher while waiting for {self.layout.describe(missing)} at the {what} in "
                f"{self.context} (torchrun stops every rank once one has exited: that one is probably the cause)",
                missing,
            ) from None
        # Everyone has reached this meeting, hence passed the previous one: its key can go.
        if group in self._last_key:
            self.store.delete_key(self._last_key[group])
        self._last_key[group] = prefix + str(self.rank)

    # -- liveness: who stopped answering -----------------------------------------------------
    BEAT_S = 0.5  # a live rank's counter advances this often (a daemon thread: also while it computes)

    def start_beating(self) -> None:
        """Advance this rank's liveness counter in the store every BEAT_S until the process ends,
        so that after a failure the survivors can tell which peer is gone (a SIGKILLed or
        OOM-killed rank writes nothing, and torchrun's SIGTERM names nobody)."""
        import atexit
        import threading

        self._stop_beating = threading.Event()

        def beat() -> None:
            while not self._stop_beating.is_set():
                try:
                    self.store.add(f"alive/{self.rank}", 1)  # the TCPStore client serializes its calls
                except Exception:  # the store is gone (the launcher stopped): nothing left to tell
                    return
                self._stop_beating.wait(self.BEAT_S)

        self._beat_thread = threading.Thread(target=beat, name="corl-heartbeat", daemon=True)
        self._beat_thread.start()
        self._beating = True
        # A daemon thread caught inside the store's C++ call when the interpreter finalizes is
        # unwound by pthread_exit through noexcept frames: std::terminate, SIGABRT, a failed
        # run after it finished. atexit runs before finalization, so the thread ends cleanly.
        atexit.register(self.stop_beating)

    def stop_beating(self) -> None:
        """End the liveness thread and wait for its store call in flight (idempotent)."""
        if getattr(self, "_beat_thread", None) is None:
            return
        self._stop_beating.set()
        self._beat_thread.join(timeout=max(5.0, 4 * self.BEAT_S))
        self._beat_thread = None

    def stopped_ranks(self, wait_s: float | None = None) -> list[int]:
        """The other ranks whose liveness counter did not advance within `wait_s` (default 4
        beats): dead, or stuck outside Python. Empty when this rank does not beat."""
        if not getattr(self, "_beating", False):
            return []
        others = [r for r in range(self.layout.world) if r != self.rank]
        try:
            first = {r: self.store.add(f"alive/{r}", 0) for r in others}
            time.sleep(wait_s if wait_s is not None else 4 * self.BEAT_S)
            return [r for r in others if self.store.add(f"alive/{r}", 0) == first[r]]
        except Exception:  # the store is gone: no one can be named
            return []

    def _silent_ranks(self) -> set[int]:
        """The other ranks whose liveness counter has not moved for 4 beats, judged against the
        counters read at earlier calls: no waiting (a meeting after SIGTERM calls this every
        0.5 s, and `stopped_ranks`' 2 s wait at each one made the preemption checkpoint's
        meetings take seconds while every peer was alive and on its way)."""
        if not getattr(self, "_beating", False):
            return set()
        now, silent = time.monotonic(), set()
        seen = self.__dict__.setdefault("_liveness_seen", {})  # rank -> (counter, when it last moved)
        try:
            for r in (r for r in range(self.layout.world) if r != self.rank):
                count = self.store.add(f"alive/{r}", 0)
                if r not in seen or seen[r][0] != count:
                    seen[r] = (count, now)
                elif now - seen[r][1] >= 4 * self.BEAT_S:
                    silent.add(r)
        except Exception:  # the store is gone: no one can be named
            return set()
        return silent

    def publish(self, record: dict) -> None:
        """Tell every other rank that this one failed (the first published failure stays)."""
        with contextlib.suppress(RuntimeError):  # the store itself is gone: nothing to tell anyone
            self.store.compare_set("failure", "", json.dumps(record))

    def _raise_if_published(self) -> None:
        if self.store.check(["failure"]):
            record = json.loads(self.store.get("failure"))
            if record["rank"] != self.rank:
                raise PeerFailure(f"{self.layout.describe([record['rank']])} failed: {record['error']}", [record["rank"]])


# -- the answers table between processes -----------------------------------------------------------


class WorldExchange:
    """`all_gather` of small Python objects over every rank (the answers table, statistics)."""

    def __init__(self, heartbeat: Heartbeat, group=None):
        self.heartbeat = heartbeat
        self.group = group  # a gloo group; None = the default group (gloo on CPU)
        self.ranks = range(heartbeat.layout.world)

    def all_gather(self, obj) -> list:
        self.heartbeat.meet("world", self.ranks, "exchange between agents")
        out = [None] * len(self.ranks)
        with collective("exchange between agents", self.heartbeat):
            dist.all_gather_object(out, obj, group=self.group)
        return out

    def barrier(self) -> None:
        self.heartbeat.meet("world", self.ranks, "barrier")


@contextmanager
def collective(what: str, heartbeat: Heartbeat) -> Iterator[None]:
    """Turn a failed collective (a peer died inside it, or its timeout passed) into PeerFailure."""
    try:
        yield
    except RuntimeError as err:
        if isinstance(err, PeerFailure):
            raise
        try:
            heartbeat._raise_if_published()  # a peer said why
        except PeerFailure as cause:
            raise cause from err
        raise PeerFailure(
            f"the {what} failed on {heartbeat.layout.describe([heartbeat.rank])} in {heartbeat.context}: {err}"
        ) from err
