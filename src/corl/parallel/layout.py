"""Which process hosts which agent: the ("agent", "dp") layout of a torchrun world.

A world of P processes is split between the N agents (`plan_layout`):

  P >= N  P must be a multiple of N. Agent n owns the D = P // N ranks n*D ... n*D + D-1: a
          device mesh ("agent", "dp") of shape (N, D). The agent's model is replicated over
          its own "dp" ranks (gradients summed by all-reduce: `DataParallel`) or, with
          distributed.fsdp (NCCL or gloo), sharded by FSDP2 over that 1-D "dp" sub-mesh only
          (fully_shard on the 2-D mesh would be HSDP, which averages gradients *across*
          agents). Every rank
          of an agent samples the same strided share of each batch as its peers' ranks of the
          same dp rank, so every exchange covers the same prompt ids.
  P <  N  each process hosts several whole agents (distributed.placement: contiguous blocks
          or round robin); no data parallelism.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass

from corl.config import ConfigError


@dataclass(frozen=True)
class Placement:
    """The agents this process hosts and its share of each agent's prompts."""

    agents: tuple[int, ...]  # indices into cfg.agents
    dp_rank: int = 0  # rank within the agent's data-parallel group
    dp_size: int = 1
    is_main: bool = True  # writes logs, metrics and config.yaml
    # creates, commits and prunes the checkpoints on its disk (rank 0 alone when every node
    # sees the run directory; one rank per node without a shared disk: corl.launch.run decides)
    commits_checkpoints: bool = True

    @staticmethod
    def single(num_agents: int) -> Placement:
        return Placement(agents=tuple(range(num_agents)))

    def prompt_positions(self, batch_size: int) -> list[int]:
        """Positions of the batch this process samples: a strided shard over dp ranks."""
        return list(range(self.dp_rank, batch_size, self.dp_size))


@dataclass(frozen=True)
class Layout:
    """Which agents every rank hosts; `dp_size` ranks share each agent (1 when P < N)."""

    names: tuple[str, ...]  # agent names, by index
    hosts: tuple[tuple[int, ...], ...]  # hosts[rank] = indices of the agents on that rank
    dp_size: int

    @property
    def world(self) -> int:
        return len(self.hosts)

    def placement(self, rank: int) -> Placement:
        main = rank == 0
        return Placement(self.hosts[rank], rank % self.dp_size, self.dp_size, is_main=main, commits_checkpoints=main)

    def dp_ranks(self, rank: int) -> tuple[int, ...]:
        """The ranks that share rank `rank`'s agent (its "dp" group), in dp-rank order."""
        first = rank - rank % self.dp_size
        return tuple(range(first, first + self.dp_size))

    def describe(self, ranks: Sequence[int]) -> str:
        """'rank 1 (agent1)', 'ranks 2, 3 (agent1 dp 0, agent1 dp 1)'."""
        parts = []
        for r in ranks:
            agents = ", ".join(self.names[n] for n in self.hosts[r])
            parts.append(f"{agents} dp {r % self.dp_size}" if self.dp_size > 1 else agents)
        word = "rank" if len(ranks) == 1 else "ranks"
        return f"{word} {', '.join(map(str, ranks))} ({'; '.join(parts)})"


def plan_layout(names: Sequence[str], world: int, placement: str = "contiguous") -> Layout:
    """Split a world of `world` ranks between the agents `names` (see the module docstring)."""
    n = len(names)
    if world >= n:
        if world % n:
            raise ConfigError(
                f"{world} processes cannot be split evenly between {n} agents: use a multiple of {n} processes "
                f"(each agent then gets {world // n + 1} or {world // n} data-parallel ranks), or fewer processes than agents"
            )
        dp = world // n
        return Layout(tuple(names), tuple((r // dp,) for r in range(world)), dp)
    if placement == "round_robin":
        hosts = tuple(tuple(range(r, n, world)) for r in range(world))
    elif placement == "contiguous":
        sizes = [n // world + (r < n % world) for r in range(world)]
        starts = [sum(sizes[:r]) for r in range(world)]
        hosts = tuple(tuple(range(s, s + size)) for s, size in zip(starts, sizes))
    else:
        raise ConfigError(f"distributed.placement must be 'contiguous' or 'round_robin', got {placement!r}")
    return Layout(tuple(names), hosts, 1)


def under_torchrun() -> bool:
    return "TORCHELASTIC_RUN_ID" in os.environ or ("RANK" in os.environ and "WORLD_SIZE" in os.environ)
