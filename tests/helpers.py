"""What tests share that is not a fixture: paths and the tiny run config."""

from __future__ import annotations

import random
from pathlib import Path

import torch

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


def format_sft(model, tokenizer, problems: list[str], steps: int = 60, seed: int = 0) -> None:
    """Teach a random model the answer format (`\\boxed{d}`, a random digit d), so its samples vote and disagree."""
    rng = random.Random(seed)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    model.train()
    for _ in range(steps):
        texts = [p + "\n" + "\\boxed{" + str(rng.randint(0, 3)) + "}" + tokenizer.eos_token for p in rng.sample(problems, 16)]
        enc = tokenizer(texts, return_tensors="pt", padding=True, add_special_tokens=False)
        labels = enc["input_ids"].masked_fill(enc["attention_mask"] == 0, -100)
        loss = model(**enc, labels=labels).loss
        opt.zero_grad()
        loss.backward()
        opt.step()
    model.eval()
