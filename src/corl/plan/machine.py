"""The machine a plan is checked against: how many ranks, and how much memory each one has."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from corl.config import ConfigError, RunConfig

_UNITS = {"": 1, "b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12}
_UNITS.update({"kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40})


def parse_size(text: str, option: str = "plan.device_memory") -> int:
    """'80GiB' -> 85899345920 bytes; GB is 10**9, GiB 2**30, B bytes. A bare number is refused:
    80 could mean GiB, GB or bytes, and a plan for 80 bytes would only mislead."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([KMGT]i?B|B)?\s*", text, re.IGNORECASE)
    if not match:
        raise ConfigError(f"{option}: {text!r} is not a size; write it like 80GiB, 24GB or 512MiB")
    if match.group(2) is None:
        number = match.group(1)
        raise ConfigError(f"{option}: {text!r} has no unit; write {number}GiB (2**30 bytes) or {number}GB (10**9 bytes)")
    return int(float(match.group(1)) * _UNITS[match.group(2).lower()])


@dataclass(frozen=True)
class Machine:
    """`ranks` processes (a torchrun world), each with `memory` bytes on its device."""

    ranks: int
    memory: int | None  # None: unknown (a GPU config planned where there is no GPU, without an override)
    device: str  # "cuda" or "cpu"
    described: str  # for the report: where the memory figure comes from

    @property
    def on_gpu(self) -> bool:
        return self.device == "cuda"


def system_ram() -> int:
    """Physical memory, or the container's cgroup limit when that is lower."""
    ram = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    for limit in (Path("/sys/fs/cgroup/memory.max"), Path("/sys/fs/cgroup/memory/memory.limit_in_bytes")):
        try:
            text = limit.read_text().strip()
        except OSError:
            continue
        if text.isdigit():
            ram = min(ram, int(text))
    return ram


def this_machine(cfg: RunConfig, ranks: int | None = None, device_memory: str | None = None) -> Machine:
    """The machine to plan for: `ranks` (default: torchrun's WORLD_SIZE, else 1) ranks with
    `device_memory` each (default: plan.device_memory, else this machine's GPU or RAM)."""
    from corl.models import resolve_device

    device = resolve_device(cfg.device).type
    world = ranks or int(os.environ.get("WORLD_SIZE", "1"))
    override = device_memory or cfg.plan.device_memory
    if override:
        option = "--device-memory" if device_memory else "plan.device_memory"
        return Machine(world, parse_size(override, option), device, option)
    if device == "cuda":
        import torch

        if not torch.cuda.is_available():
            return Machine(world, None, device, "no GPU here: give --device-memory (e.g. 80GiB) to plan for one")
        index = int(os.environ.get("LOCAL_RANK", "0")) % torch.cuda.device_count()
        props = torch.cuda.get_device_properties(index)
        return Machine(world, int(props.total_memory), device, f"{props.name}, its total memory")
    # CPU ranks on one machine share its RAM: torchrun says how many run here (or all of --ranks)
    local = int(os.environ.get("LOCAL_WORLD_SIZE", "0")) or world
    ram = system_ram()
    shared = f", shared by {local} ranks" if local > 1 else ""
    return Machine(world, ram // local, device, f"system RAM {ram / 2**30:.1f} GiB{shared}")
