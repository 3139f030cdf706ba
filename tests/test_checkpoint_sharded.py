"""Which ranks commit checkpoints where, and which checkpoint a multi-node run resumes from,
when nodes do not share a disk (ranks as threads of this process, each with its own run
directory; the whole runs are in tests/test_distributed_fsdp.py)."""

from __future__ import annotations

import threading

import torch

from corl.checkpoint import CheckpointError
from corl.checkpoint_sharded import agreed_checkpoint, disks


class ThreadExchange:
    """`all_gather` and `barrier` between threads standing in for ranks (corl.parallel.WorldExchange)."""

    def __init__(self, world: int):
        self.slots: list = [None] * world
        self.gate = threading.Barrier(world, timeout=30)

    def rank(self, r: int) -> RankExchange:
        return RankExchange(self, r)


class RankExchange:
    def __init__(self, shared: ThreadExchange, rank: int):
        self.shared, self.rank = shared, rank

    def all_gather(self, obj) -> list:
        self.shared.slots[self.rank] = obj
        self.shared.gate.wait()
        out = list(self.shared.slots)
        self.shared.gate.wait()
        return out

    def barrier(self) -> None:
        self.shared.gate.wait()


def on_every_rank(run_dirs: list, fn) -> list:
    """fn(run_dir, rank, exchange) on one thread per rank; results (or exceptions) by rank."""
    shared = ThreadExchange(len(run_dirs))
    out: list = [None] * len(run_dirs)

    def run(r: int) -> None:
        try:
            out[r] = fn(run_dirs[r], r, shared.rank(r))
        except BaseException as err:  # surfaced to the test, not lost in the thread
            out[r] = err

    threads = [threading.Thread(target=run, args=(r,)) for r in range(len(run_dirs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return out


def test_ranks_that_see_one_run_directory_name_its_disk_by_their_lowest_rank(tmp_path):
    node_a, node_b = tmp_path / "a" / "run", tmp_path / "b" / "run"
    assert on_every_rank([node_a, node_a, node_b, node_b], disks) == [[0, 0, 2, 2]] * 4
    assert on_every_rank([node_a] * 3, disks) == [[0, 0, 0]] * 3  # a shared disk: rank 0 commits alone
    assert not (node_a / ".corl-disks").exists() and not (node_b / ".corl-disks").exists()  # the probes are gone


def resume_point(run, rank: int, exchange):
    return agreed_checkpoint(run, exchange)


def write_checkpoint(run, step: int, complete: bool = True) -> None:
    folder = run / "checkpoints" / (f"step_{step:06d}" if complete else f".tmp_step_{step:06d}")
    folder.mkdir(parents=True)
    torch.save({"step": step}, folder / "state.pt")
    if complete:
        (run / "checkpoints" / "latest").write_text(folder.name)


def test_a_resume_takes_the_newest_checkpoint_every_node_holds(tmp_path):
    """Node b was killed after the others committed step 2 but before it did: everyone
    resumes from step 1, each from its own disk."""
    node_a, node_b = tmp_path / "a", tmp_path / "b"
    for step in (1, 2):
        write_checkpoint(node_a, step)
    write_checkpoint(node_b, 1)
    write_checkpoint(node_b, 2, complete=False)
    got = on_every_rank([node_a, node_a, node_b, node_b], resume_point)
    assert got == [node_a / "checkpoints" / "step_000001"] * 2 + [node_b / "checkpoints" / "step_000001"] * 2
    write_checkpoint(node_b, 2)  # both committed: the latest, as on one disk
    assert on_every_rank([node_a, node_b], resume_point) == [
        node_a / "checkpoints" / "step_000002",
        node_b / "checkpoints" / "step_000002",
    ]


def test_no_checkpoint_common_to_every_node_fails_on_every_rank(tmp_path):
    node_a, node_b = tmp_path / "a", tmp_path / "b"
    write_checkpoint(node_a, 1)
    got = on_every_rank([node_a, node_b], resume_point)
    for err in got:
        assert isinstance(err, CheckpointError), got
        assert "no checkpoint step is complete on every node" in str(err) and "rank 1: none" in str(err)
