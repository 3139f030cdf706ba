"""Checkpoints of sharded and multi-node runs.

FSDP2: each rank of an agent writes only its own shards of the model and the optimizer
with torch.distributed.checkpoint (DCP) into `<agent>/sharded/` (one file per rank and the
metadata). A resume on any number of ranks per agent reads the pieces it needs: DCP
addresses every tensor by name and global offsets, not by the rank that wrote it. With
LoRA only the trainable tensors are there; the base model is the run's own. The plain
Hugging Face folder beside it (gathered, by the agent's dp rank 0; loads with from_pretrained
and vLLM whatever the world size that wrote it) is written for the final step and the steps
best/ publishes; the other steps hold the shards alone (a whole-model gather and a full copy
per step saved), and `corl export RUN --step N` (corl.checkpoints.export) writes it from them.

Nodes without a shared disk: at start the ranks that see the same run directory find each
other (`disks`); the lowest of each set commits the checkpoints on its disk
(temporary folder, manifest, rename, `latest`, pruning: `corl.checkpoints.checkpoint.save_checkpoint`),
so every node holds its own agents' parts and a loop state, while metrics.jsonl and
config.yaml stay with the main rank. A resume takes the newest checkpoint that every rank
can see (`agreed_checkpoint`): a node killed between the others' commit and its own falls
back, with everyone, to the previous one.
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
from pathlib import Path

from corl.checkpoints.checkpoint import CheckpointError, checkpoint_step, latest_checkpoint

SHARDED_FOLDER = "sharded"  # <agent>/sharded/: DCP's files (.metadata, __<rank>_0.distcp)


def state_dict_options():
    from torch.distributed.checkpoint.state_dict import StateDictOptions

    # Frozen parameters (a LoRA run's base model) come from the run's model, not the checkpoint;
    # so the model's state dict is partial (strict=False). DCP itself still refuses a checkpoint
    # that lacks any tensor asked of it.
    return StateDictOptions(ignore_frozen_params=True, strict=False)


def save_sharded(model, optimizer, folder: Path, group) -> None:
    """Write this rank's shards of `model` and `optimizer` into `folder` (every rank of the
    agent's dp `group` calls it: it is a collective; each writes its own file)."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import get_state_dict

    fresh = not optimizer.state  # no optimizer step yet (every step so far without signal)
    model_state, optimizer_state = get_state_dict(model, optimizer, options=state_dict_options())
    if fresh:  # get_state_dict gave it a zero state with an lr-0 step; AdamW's first step must stay its first
        optimizer.state.clear()
    state = {"model": model_state} if fresh else {"model": model_state, "optimizer": optimizer_state}
    folder.mkdir(parents=True, exist_ok=True)  # also on a node whose disk no other rank shares
    dcp.save(state, storage_writer=_writer(folder, group), process_group=group)


def _writer(folder: Path, group):
    """DCP's file writer; under the TEST-ONLY CORL_TEST_FAULT="AGENT:kill-writing:STEP" the agent's
    dp rank 0 is SIGKILLed once its shards of step STEP's checkpoint are on disk, inside DCP's
    save (its peers wait for its write results; the metadata is not written). tests/launch/test_faults_fsdp.py."""
    import torch.distributed as dist
    import torch.distributed.checkpoint as dcp

    spec = os.environ.get("CORL_TEST_FAULT", "").split(":")
    attempt = os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")
    if len(spec) != 3 or spec[1] != "kill-writing" or attempt != "0" or folder.parent.name != spec[0]:
        return dcp.FileSystemWriter(folder)
    if folder.parent.parent.name.removeprefix(".tmp_step_").lstrip("0") != spec[2] or dist.get_rank(group) != 0:
        return dcp.FileSystemWriter(folder)

    class KilledAfterItsShards(dcp.FileSystemWriter):
        def write_data(self, plan, planner):
            written = super().write_data(plan, planner)
            written.wait()
            os.kill(os.getpid(), signal.SIGKILL)

    return KilledAfterItsShards(folder)


def load_sharded(model, optimizer, folder: Path, group) -> None:
    """Load what `save_sharded` wrote, on whatever number of ranks `group` now has (None
    and no process group: one process reads every shard)."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.api import CheckpointException
    from torch.distributed.checkpoint.state_dict import get_state_dict, set_model_state_dict, set_state_dict

    try:
        reader = dcp.FileSystemReader(folder)
        with_optimizer = any(key.startswith("optimizer.") for key in reader.read_metadata().state_dict_metadata)
        # get_state_dict gives a fresh optimizer its (zero) state first: DCP needs tensors to load into
        model_state, optimizer_state = get_state_dict(model, optimizer, options=state_dict_options())
        state = {"model": model_state, "optimizer": optimizer_state} if with_optimizer else {"model": model_state}
        dcp.load(state, storage_reader=reader, process_group=group)
    except (Exception, CheckpointException) as err:  # noqa: BLE001 - DCP's CheckpointException is a BaseException
        raise CheckpointError(f"cannot load the sharded model and optimizer state in {folder}: {err}") from err
    if with_optimizer:
        set_state_dict(
            model, optimizer, model_state_dict=state["model"], optim_state_dict=state["optimizer"], options=state_dict_options()
        )
    else:  # saved before the first optimizer step: the optimizer starts fresh, as it was
        set_model_state_dict(model, state["model"], options=state_dict_options())
        optimizer.state.clear()


# -- which ranks write where ------------------------------------------------------------------------


def disks(run_dir: Path, rank: int, exchange) -> list[int]:
    """For every rank, the lowest rank that sees the same run directory: a name for its disk
    (all 0 on a shared one). Every rank calls it (a collective).

    Every rank leaves a file named after itself in a folder named by rank 0's random token,
    and after a barrier looks up the others' files by name (a lookup, not a directory
    listing: NFS serves listings from a cache, lookups of new names from the server)."""
    tokens = exchange.all_gather(secrets.token_hex(8))
    token, world = tokens[0], len(tokens)
    probe = Path(run_dir) / ".corl-disks" / token
    probe.mkdir(parents=True, exist_ok=True)
    (probe / f"rank{rank}").touch()
    exchange.barrier()
    first = min(r for r in range(world) if (probe / f"rank{r}").exists())
    everyone = exchange.all_gather(first)  # also: every rank has looked before any folder goes
    if first == rank:
        shutil.rmtree(probe.parent, ignore_errors=True)
    return everyone


def agreed_checkpoint(run_dir: Path, exchange) -> Path | None:
    """The checkpoint every process resumes from: its run directory's latest when all agree
    (one disk, or every node committed the same), else the newest step that every process
    holds complete. Every process calls it (a collective) and gets the same step."""
    root = Path(run_dir) / "checkpoints"
    mine = latest_checkpoint(run_dir)
    complete = sorted(checkpoint_step(p) for p in root.glob("step_*") if (p / "state.pt").is_file())
    views = exchange.all_gather((checkpoint_step(mine) if mine is not None else None, complete))
    if len({latest for latest, _ in views}) == 1:
        return mine
    common = set.intersection(*(set(steps) for _, steps in views))
    if not common:
        held = "; ".join(f"rank {r}: {steps or 'none'}" for r, (_, steps) in enumerate(views))
        raise CheckpointError(
            f"no checkpoint step is complete on every node (steps held, by rank: {held}): the run cannot resume "
            "from its own checkpoints; start a new run (another output_dir)"
        )
    return root / f"step_{max(common):06d}"
