"""What tests share that is not a fixture: paths and the tiny run config."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]  # the checkout
SHARED_DATA = ROOT.parent / "shared" / "data"


def tiny_config(tmp_path: Path, models: dict[str, Path], data: dict[str, Path], agents: int = 2, **sections) -> dict:
    """A raw run config for `agents` tiny agents (alternating families), few cheap steps."""
    names = list(models)
    raw = {
        "output_dir": str(tmp_path / "run"),
        "agents": [{"name": f"agent{i}", "model": str(models[names[i % 2]]), "lr": 1e-3} for i in range(agents)],
        "data": {
            "train": str(data["train"]),
            "val": str(data["test"]),
            "val_size": 6,
            "template": "{problem}\n",
            "instruction": "",
        },
        "cohort": {"steps": 3, "prompts_per_step": 4, "samples_per_prompt": 4, "max_new_tokens": 12, "seed": 0},
        "logging": {"tensorboard": True, "progress": False},
    }
    for section, values in sections.items():
        raw.setdefault(section, {}).update(values)
    return raw
