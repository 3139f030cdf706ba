"""`corl export`: a checkpoint's agents as Hugging Face model folders that load anywhere.

A gathered checkpoint already holds them; a sharded one (FSDP2 steps other than the last and
the published best) holds each agent's shards alone, which are read into the run's own model,
as the run built it, and saved beside them.

An export is written whole or not at all: into a hidden folder beside the agent's, whose files
are then renamed into it (config.json last), and recorded in the checkpoint's manifest. "Already"
means verified against that manifest: a model folder a killed export left half-written, or one
no manifest vouches for, is written again. A full disk is one line (`ExportFailed`), and nothing
of the half-written export is left.
"""

from __future__ import annotations

import os
import shutil
import warnings
from pathlib import Path

from corl.checkpoints.checkpoint import (
    CheckpointError,
    _free_space,
    _is_disk_full,
    _last_line,
    add_to_manifest,
    checkpoint_step,
    manifest_lists,
    verify_checkpoint,
)
from corl.checkpoints.sharded import SHARDED_FOLDER, state_dict_options


class ExportFailed(CheckpointError):
    """The export could not be written (a full disk): nothing of it is left; `corl export` exits 1."""


def holds_gathered(agent_folder: Path) -> bool:
    """Whether a checkpoint's agent folder holds the Hugging Face model (else only its shards)."""
    return (agent_folder / "config.json").is_file()


def holds_verified_model(agent_folder: Path) -> bool:
    """Whether the agent folder holds a Hugging Face model its checkpoint's manifest vouches for,
    every file intact (what "already exported" means)."""
    checkpoint = agent_folder.parent
    model = _model_files(agent_folder)
    if not holds_gathered(agent_folder) or not manifest_lists(checkpoint, [str(f.relative_to(checkpoint)) for f in model]):
        return False
    try:
        verify_checkpoint(checkpoint, [agent_folder.name])
    except CheckpointError:
        return False
    return True


def _model_files(agent_folder: Path) -> list[Path]:
    """The files of the model itself (not the tokenizer, trainer state or shards): what an export writes."""
    names = ("config.json", "generation_config.json", "model.safetensors.index.json")
    files = [agent_folder / n for n in names if (agent_folder / n).is_file()]
    files += sorted(agent_folder.glob("*.safetensors"))
    adapter = agent_folder / "adapter"
    return files + (sorted(p for p in adapter.rglob("*") if p.is_file()) if adapter.is_dir() else [])


def export_agent(cfg, index: int, folder: Path) -> list[Path]:
    """Write the Hugging Face model folder of agent `index` (`folder`), from its shards, whole or not
    at all (see the module); returns the files written."""
    tmp = folder.parent / f".export_{folder.name}.tmp"
    shutil.rmtree(tmp, ignore_errors=True)  # a killed export's
    try:
        tmp.mkdir()
        _gather_into(cfg, index, folder, tmp)
    except CheckpointError:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    except Exception as err:  # torch, safetensors and transformers each report a full disk their own way
        free = _free_space(tmp)  # before the half-written files go
        shutil.rmtree(tmp, ignore_errors=True)
        if _is_disk_full(err, free):
            raise ExportFailed(
                f"could not export {folder}: the disk is full ({free / 2**20:.1f} MiB free); nothing of the export was "
                "kept and the checkpoint is as it was. Free space, then run the same corl export again"
            ) from None
        raise ExportFailed(f"could not export {folder}: {_last_line(err)}") from err
    return _move_into(tmp, folder)


def _move_into(tmp: Path, folder: Path) -> list[Path]:
    """Rename every file of `tmp` into `folder`, config.json last (what marks a model folder)."""
    files = sorted((p for p in tmp.rglob("*") if p.is_file()), key=lambda p: p.name == "config.json")
    if (tmp / "adapter").is_dir():
        shutil.rmtree(folder / "adapter", ignore_errors=True)
    moved = []
    for file in files:
        target = folder / file.relative_to(tmp)
        target.parent.mkdir(parents=True, exist_ok=True)
        os.replace(file, target)
        moved.append(target)
    shutil.rmtree(tmp, ignore_errors=True)
    return moved


def _gather_into(cfg, index: int, folder: Path, out: Path) -> None:
    """Gather the shards in `folder`/sharded/ of agent `index` of the run `cfg` into a Hugging Face
    model folder `out` (LoRA merged, its adapters also unmerged in adapter/, as a gathered
    checkpoint holds them), in one process: the run's own model with its LoRA adapters and frozen
    vision tower, as the run built it, then every saved tensor read into it (DCP reads all shards)."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.api import CheckpointException
    from torch.distributed.checkpoint.state_dict import get_model_state_dict, set_model_state_dict

    from corl.models import ADAPTER_FOLDER, add_lora, load_agent_policy, save_adapter, save_policy

    agent = cfg.agents[index]
    model, _, processor = load_agent_policy(agent.model, agent.tokenizer, "cpu")
    if agent.freeze_vision and processor is not None:  # as Agent: every parameter outside the language model and head
        language = {id(p) for p in model.get_decoder().parameters()} | {id(p) for p in model.get_output_embeddings().parameters()}
        for parameter in model.parameters():
            if id(parameter) not in language:
                parameter.requires_grad_(False)
    if cfg.compute.lora is not None:
        model = add_lora(model, cfg.compute.lora)
    if not agent.train:
        model.requires_grad_(False)
    shards = folder / SHARDED_FOLDER
    try:
        state = {"model": get_model_state_dict(model, options=state_dict_options())}
        with warnings.catch_warnings():  # "torch.distributed is disabled ... load in a single process": as meant
            warnings.filterwarnings("ignore", message="torch.distributed is disabled", category=UserWarning)
            dcp.load(state, storage_reader=dcp.FileSystemReader(shards))
    except (Exception, CheckpointException) as err:  # noqa: BLE001 - DCP's CheckpointException is a BaseException
        raise CheckpointError(f"cannot read the sharded model in {shards}: {err}") from err
    set_model_state_dict(model, state["model"], options=state_dict_options())
    save_policy(model, out)
    if cfg.compute.lora is not None:
        save_adapter(model, out / ADAPTER_FOLDER)


def export_checkpoint(run_dir: Path, checkpoint: Path, say=print) -> list[Path]:
    """Write the Hugging Face folder of every agent of `checkpoint` (a step of run `run_dir`) that
    holds only its shards; returns every agent folder, exported now or before."""
    from corl.checkpoints.model_card import write_model_cards
    from corl.config import load_config

    cfg = load_config(run_dir / "config.yaml")
    folders, written = [], []
    for index, agent in enumerate(cfg.agents):
        folder = checkpoint / agent.name
        if not folder.is_dir():
            continue
        folders.append(folder)
        if holds_verified_model(folder):
            say(f"{folder}: a Hugging Face model folder already (every file as its checkpoint's manifest records it)")
            continue
        if not (folder / SHARDED_FOLDER).is_dir():
            if holds_gathered(folder):
                verify_checkpoint(checkpoint, [agent.name])  # names the damaged file; no shards to write it again from
            raise CheckpointError(f"{folder} holds neither a model (config.json) nor its shards ({SHARDED_FOLDER}/)")
        written += export_agent(cfg, index, folder)
        say(f"{folder}: written from {folder / SHARDED_FOLDER}")
    if not folders:
        raise CheckpointError(f"checkpoint {checkpoint} holds no folder of the run's agents")
    if written:
        write_model_cards(checkpoint, run_dir, checkpoint_step(checkpoint))
        add_to_manifest(checkpoint, [*written, *(f / "README.md" for f in folders if (f / "README.md").is_file())])
    return folders
