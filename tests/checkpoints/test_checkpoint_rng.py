"""Restoring a checkpoint's RNG states in a process that sees fewer GPUs than the one that saved it.

CUDA does not run on the CI machine, so the devices are played by a stand-in with the real
setter's contract: torch.cuda.set_rng_state(state, i) on a device the process does not see
raises IndexError (torch.cuda.default_generators[i], as torch does)."""

from __future__ import annotations

import random

import numpy as np
import torch

from corl.checkpoints.checkpoint import rng_state, set_rng_state


def gpus(monkeypatch, count: int) -> dict[int, torch.Tensor]:
    """Pretend this process sees `count` GPUs; returns the states the restore set, by device."""
    restored: dict[int, torch.Tensor] = {}

    def set_state(state, device=0):
        index = torch.device(device).index if not isinstance(device, int) else device
        if index >= count:
            raise IndexError("tuple index out of range")  # torch.cuda.default_generators[index]
        restored[index] = state

    monkeypatch.setattr(torch.cuda, "is_available", lambda: count > 0)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: count)
    monkeypatch.setattr(torch.cuda, "set_rng_state", set_state)
    monkeypatch.setattr(torch.cuda.random, "set_rng_state", set_state)  # what set_rng_state_all calls
    return restored


def saved_on_gpus(n: int) -> dict:
    state = {"python": random.getstate(), "numpy": np.random.get_state(), "torch": torch.get_rng_state()}
    state["cuda"] = [torch.full((16,), i, dtype=torch.uint8) for i in range(n)]  # a state per device of the saver
    return state


def test_a_state_saved_on_eight_gpus_restores_on_two(monkeypatch):
    restored = gpus(monkeypatch, 2)
    set_rng_state(saved_on_gpus(8))
    assert sorted(restored) == [0, 1]  # the devices this process has, in order; the rest skipped
    assert all(int(restored[i][0]) == i for i in restored)


def test_a_state_saved_on_gpus_restores_on_a_cpu_only_process(monkeypatch):
    restored = gpus(monkeypatch, 0)
    torch.manual_seed(7)
    state = saved_on_gpus(4)
    expected = torch.rand(3)
    torch.manual_seed(8)
    set_rng_state(state)
    assert restored == {} and torch.equal(torch.rand(3), expected)  # the CPU generator came back
    assert "cuda" not in rng_state()
