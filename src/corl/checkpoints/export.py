"""`corl export`: a checkpoint's agents as Hugging Face model folders that load anywhere.

A gathered checkpoint already holds them; a sharded one (FSDP2 steps other than the last and
the published best) holds each agent's shards alone, which are read into the run's own model,
as the run built it, and saved beside them.
"""

from __future__ import annotations

from pathlib import Path

from corl.checkpoints.checkpoint import CheckpointError, checkpoint_step
from corl.checkpoints.sharded import SHARDED_FOLDER, state_dict_options


def holds_gathered(agent_folder: Path) -> bool:
    """Whether a checkpoint's agent folder holds the Hugging Face model (else only its shards)."""
    return (agent_folder / "config.json").is_file()


def export_agent(cfg, index: int, folder: Path) -> None:
    """Gather the shards in `folder`/sharded/ of agent `index` of the run `cfg` into a Hugging Face
    model folder beside them (LoRA merged, its adapters also unmerged in adapter/, as a gathered
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
        dcp.load(state, storage_reader=dcp.FileSystemReader(shards))
    except (Exception, CheckpointException) as err:  # noqa: BLE001 - DCP's CheckpointException is a BaseException
        raise CheckpointError(f"cannot read the sharded model in {shards}: {err}") from err
    set_model_state_dict(model, state["model"], options=state_dict_options())
    save_policy(model, folder)
    if cfg.compute.lora is not None:
        save_adapter(model, folder / ADAPTER_FOLDER)


def export_checkpoint(run_dir: Path, checkpoint: Path, say=print) -> list[Path]:
    """Write the Hugging Face folder of every agent of `checkpoint` (a step of run `run_dir`) that
    holds only its shards; returns every agent folder, exported now or before."""
    from corl.checkpoints.model_card import write_model_cards
    from corl.config import load_config

    cfg = load_config(run_dir / "config.yaml")
    folders = []
    for index, agent in enumerate(cfg.agents):
        folder = checkpoint / agent.name
        if not folder.is_dir():
            continue
        folders.append(folder)
        if holds_gathered(folder):
            say(f"{folder}: a Hugging Face model folder already")
            continue
        if not (folder / SHARDED_FOLDER).is_dir():
            raise CheckpointError(f"{folder} holds neither a model (config.json) nor its shards ({SHARDED_FOLDER}/)")
        export_agent(cfg, index, folder)
        say(f"{folder}: written from {folder / SHARDED_FOLDER}")
    if not folders:
        raise CheckpointError(f"checkpoint {checkpoint} holds no folder of the run's agents")
    write_model_cards(checkpoint, run_dir, checkpoint_step(checkpoint))
    return folders
