"""A resume finishes publishing the best folders: a folder counts as published only when it holds
its rule's chosen checkpoint step (corl.trainer.best_folders)."""

import json
from pathlib import Path

import torch

from corl.trainer.best_folders import finish_publishing, published_step


def checkpoint(folder: Path, step: int) -> Path:
    """A checkpoint folder as far as publishing reads it: its loop state and one weight file."""
    folder.mkdir(parents=True)
    torch.save({"step": step}, folder / "state.pt")
    (folder / "weights.bin").write_bytes(bytes([step]))
    return folder


def record(step: int) -> dict:
    return {"folders": {"best": "label_free"}, "chosen": {"label_free": {"step": step, "checkpoint_step": step}}, "points": []}


def test_a_best_folder_holding_another_step_is_published_again(tmp_path):
    # the kill came after step 20's checkpoint (whose record chooses it) and before best/ was
    # rewritten: best/ is whole, nothing is left in .tmp_best/, but it holds step 10
    checkpoint(tmp_path / "checkpoints" / "step_000010", 10)
    checkpoint(tmp_path / "checkpoints" / "step_000020", 20)
    checkpoint(tmp_path / "best", 10)
    assert published_step(tmp_path / "best") == 10

    assert finish_publishing(tmp_path, record(20)) == ["best"]
    assert published_step(tmp_path / "best") == 20 and (tmp_path / "best" / "weights.bin").read_bytes() == bytes([20])
    assert json.loads((tmp_path / "best" / "selection.json").read_text())["chosen"]["label_free"]["checkpoint_step"] == 20
    assert finish_publishing(tmp_path, record(20)) == []  # now it holds the chosen step: nothing to redo


def test_a_missing_or_unreadable_best_folder_is_published_and_a_pruned_choice_leaves_what_is_there(tmp_path):
    checkpoint(tmp_path / "checkpoints" / "step_000020", 20)
    assert finish_publishing(tmp_path, record(20)) == ["best"] and published_step(tmp_path / "best") == 20
    (tmp_path / "best" / "state.pt").unlink()  # a hard link to the checkpoint's: replaced, not written through
    (tmp_path / "best" / "state.pt").write_bytes(b"half")  # a half-written state: not a published step
    assert published_step(tmp_path / "best") is None
    assert finish_publishing(tmp_path, record(20)) == ["best"]
    # the chosen step's checkpoint was pruned: the folder that is there stays
    assert finish_publishing(tmp_path, record(30)) == [] and published_step(tmp_path / "best") == 20
