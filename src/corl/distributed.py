"""Where agents live, how the answers table travels between them, and how a run fails.

    corl train CONFIG                                                # one process, every agent
    torchrun --standalone --nproc-per-node 2 -m corl train CONFIG    # one machine, 2 processes
    torchrun --nnodes 2 --nproc-per-node 8 --rdzv-backend c10d \\
             --rdzv-endpoint HEAD:29500 -m corl train CONFIG         # on every node
    srun --nodes 2 --ntasks-per-node 1 torchrun --nnodes 2 --nproc-per-node 8 --rdzv-backend c10d \\
         --rdzv-endpoint $(scontrol show hostnames | head -1):29500 -m corl train CONFIG

A torchrun world of P processes is split between the N agents (`plan_layout`):

  P >= N  P must be a multiple of N. Agent n owns the D = P // N ranks n*D ... n*D + D-1: a
          device mesh ("agent", "dp") of shape (N, D). The agent's model is replicated over
          its own "dp" ranks (gradients summed by all-reduce: `DataParallel`) or, on GPUs with
          distributed.fsdp, sharded by FSDP2 over that 1-D "dp" sub-mesh only (fully_shard
          on the 2-D mesh would be HSDP, which averages gradients *across* agents). Every rank
          of an agent samples the same strided share of each batch as its peers' ranks of the
          same dp rank, so every exchange covers the same prompt ids.
  P <  N  each process hosts several whole agents (distributed.placement: contiguous blocks
          or round robin); no data parallelism.

Across agents only the answers table and per-step statistics travel, by all_gather_object
over the whole world (gloo: objects are small). Agents of any architecture and size mix.

Failure. Before every collective, the ranks that take part meet in the c10d store
(`Heartbeat`). A rank that does not arrive within distributed.timeout_s is named, with its
agents, by every rank that waited for it; a rank that raises publishes its error so that
the others stop at their next meeting; every collective also carries the same timeout (a
peer dying inside one fails it). The first rank to fail writes RUN_DIR/failure.json, and
every rank exits non-zero (torchrun then stops the rest).

Multi-node: checkpoints and metrics are written into the run directory by several ranks,
so it must be on a filesystem that every node sees; training itself needs none.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path

import torch
import torch.distributed as dist

from corl.config import ComputeConfig, ConfigError, LoRAConfig, RunConfig

FAILURE_FILE = "failure.json"
FAULT_ENV = "CORL_TEST_FAULT"  # test-only fault injection, see `_injected_fault`


class PeerFailure(RuntimeError):
    """Another rank did not answer, or failed: the message names it (rank and agents)."""

    def __init__(self, message: str, missing: Sequence[int] = ()):
        super().__init__(message)
        self.missing = list(missing)


class LauncherStopped(PeerFailure):
    """SIGTERM: torchrun stops every rank as soon as one of them has exited."""


# -- which rank hosts which agent ----------------------------------------------------------------


@dataclass(frozen=True)
class Layout:
    """Which agents every rank hosts; `dp_size` ranks share each agent (1 when P < N)."""

    names: tuple[str, ...]  # agent names, by index
    hosts: tuple[tuple[int, ...], ...]  # hosts[rank] = indices of the agents on that rank
    dp_size: int

    @property
    def world(self) -> int:
        return len(self.hosts)

    def placement(self, rank: int):
        from corl.cohort import Placement  # cohort -> agent -> distributed: import late

        return Placement(agents=self.hosts[rank], dp_rank=rank % self.dp_size, dp_size=self.dp_size, is_main=rank == 0)

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


# -- meeting before every collective -------------------------------------------------------------


class Heartbeat:
    """Meetings in the c10d store before each collective, so that a rank that never comes is
    named instead of leaving the others blocked inside a collective.

    Each meeting of a group is numbered; every rank writes its key, then polls until all
    keys of the group are there, the timeout passes (-> PeerFailure naming the absent
    ranks) or a rank has published a failure (-> PeerFailure quoting it). The store is
    torchrun's (hosted by the launcher), so it outlives any one worker.
    """

    def __init__(self, store, rank: int, timeout_s: float, layout: Layout):
        self.store = dist.PrefixStore("corl", store)
        self.rank = rank
        self.timeout_s = timeout_s
        self.layout = layout
        self.context = "start-up"  # where the run is, for messages ("step 3")
        self._meetings: Counter[str] = Counter()
        self._last_key: dict[str, str] = {}

    def meet(self, group: str, ranks: Sequence[int], what: str) -> None:
        """Wait until every rank of `ranks` has come to this group's next meeting."""
        prefix = f"{group}/{self._meetings[group]}/"
        self._meetings[group] += 1
        self.store.set(prefix + str(self.rank), b"")
        keys = [prefix + str(r) for r in ranks]
        deadline = time.monotonic() + self.timeout_s
        pause, next_failure_check = 0.0005, 0.0
        try:
            while not self.store.check(keys):
                now = time.monotonic()
                if now >= next_failure_check:
                    self._raise_if_published()
                    next_failure_check = now + 0.5
                if now >= deadline:
                    missing = [r for r, key in zip(ranks, keys) if not self.store.check([key])]
                    raise PeerFailure(
                        f"{self.layout.describe(missing)} did not answer within {self.timeout_s:g} s "
                        f"(distributed.timeout_s) at the {what} in {self.context}; "
                        f"{self.layout.describe([self.rank])} gave up waiting",
                        missing,
                    )
                time.sleep(pause)
                pause = min(2 * pause, 0.01)  # at most 10 ms late; a few hundred store reads a second
        except LauncherStopped:
            missing = [r for r, key in zip(ranks, keys) if not self.store.check([key])]
            raise PeerFailure(
                f"stopped by the launcher while waiting for {self.layout.describe(missing)} at the {what} in "
                f"{self.context} (torchrun stops every rank once one has exited: that one is probably the cause)",
                missing,
            ) from None
        # Everyone has reached this meeting, hence passed the previous one: its key can go.
        if group in self._last_key:
            self.store.delete_key(self._last_key[group])
        self._last_key[group] = prefix + str(self.rank)

    def publish(self, record: dict) -> None:
        """Tell every other rank that this one failed (the first published failure stays)."""
        with contextlib.suppress(RuntimeError):  # the store itself is gone: nothing to tell anyone
            self.store.compare_set("failure", "", json.dumps(record))

    def _raise_if_published(self) -> None:
        if self.store.check(["failure"]):
            record = json.loads(self.store.get("failure"))
            if record["rank"] != self.rank:
                raise PeerFailure(f"{self.layout.describe([record['rank']])} failed: {record['error']}", [record["rank"]])


# -- the answers table between processes -----------------------------------------------------------


class WorldExchange:
    """`all_gather` of small Python objects over every rank (the answers table, statistics)."""

    def __init__(self, heartbeat: Heartbeat, group=None):
        self.heartbeat = heartbeat
        self.group = group  # a gloo group; None = the default group (gloo on CPU)
        self.ranks = range(heartbeat.layout.world)

    def all_gather(self, obj) -> list:
        self.heartbeat.meet("world", self.ranks, "exchange between agents")
        out = [None] * len(self.ranks)
        with _collective("exchange between agents", self.heartbeat):
            dist.all_gather_object(out, obj, group=self.group)
        return out

    def barrier(self) -> None:
        self.heartbeat.meet("world", self.ranks, "barrier")


@contextmanager
def _collective(what: str, heartbeat: Heartbeat) -> Iterator[None]:
    """Turn a failed collective (a peer died inside it, or its timeout passed) into PeerFailure."""
    try:
        yield
    except RuntimeError as err:
        if isinstance(err, PeerFailure):
            raise
        try:
            heartbeat._raise_if_published()  # a peer said why
        except PeerFailure as cause:
            raise cause from err
        raise PeerFailure(
            f"the {what} failed on {heartbeat.layout.describe([heartbeat.rank])} in {heartbeat.context}: {err}"
        ) from err


# -- one agent's data-parallel group -----------------------------------------------------------------


class DataParallel:
    """The ranks that hold one agent's model (its "dp" group) and how their gradients meet.

    The default, size 1, is a single copy: every method is then the identity. With plain
    data parallelism (CPU/gloo, or GPUs without FSDP) each rank holds a full copy and
    `sum_gradients` adds the ranks' gradients; under FSDP2 (`mesh` set) the backward pass
    reduce-scatters them itself.
    """

    def __init__(
        self,
        group=None,
        ranks: Sequence[int] = (0,),
        rank: int = 0,
        heartbeat: Heartbeat | None = None,
        mesh=None,
        device: torch.device | None = None,
    ):
        self.group = group
        self.ranks = tuple(ranks)
        self.size = len(self.ranks)
        self.rank = rank  # position in the group: 0 writes checkpoints
        self.heartbeat = heartbeat
        self.mesh = mesh  # the 1-D "dp" DeviceMesh when the model is sharded with FSDP2
        self.device = device or torch.device("cpu")  # where this group's collectives run

    @property
    def fsdp(self) -> bool:
        return self.mesh is not None

    @property
    def loss_scale(self) -> int:
        """FSDP *averages* gradients over the group; every rank's loss is already its share of
        the whole batch's loss, so the loss is scaled by the group size to undo the average."""
        return self.size if self.fsdp else 1

    def sum(self, tensor: torch.Tensor) -> torch.Tensor:
        return self._all_reduce(tensor, dist.ReduceOp.SUM, "count all-reduce")

    def max(self, tensor: torch.Tensor) -> torch.Tensor:
        return self._all_reduce(tensor, dist.ReduceOp.MAX, "count all-reduce")

    def sum_gradients(self, params) -> None:
        """Plain data parallelism: every rank's gradients become the sum over the group.

        A rank whose shard had no sequence with signal ran no backward pass (gradients None):
        it contributes zeros, and a parameter keeps no gradient only if no rank gave it one,
        exactly as in a single process with the whole batch (AdamW skips it).
        """
        if self.size == 1 or self.fsdp:
            return
        by_dtype: dict[torch.dtype, list] = {}
        for p in params:
            if p.requires_grad:
                by_dtype.setdefault(p.dtype, []).append(p)
        for dtype, group in by_dtype.items():
            present = torch.tensor([p.grad is not None for p in group], dtype=dtype, device=group[0].device)
            flat = torch.cat([present] + [(p.grad if p.grad is not None else torch.zeros_like(p)).reshape(-1) for p in group])
            self._all_reduce(flat, dist.ReduceOp.SUM, "gradient all-reduce")
            offset = len(group)
            for i, p in enumerate(group):
                p.grad = flat[offset : offset + p.numel()].view_as(p) if flat[i] > 0 else None
                offset += p.numel()

    def check_replicas(self, model) -> None:
        """Plain data parallelism keeps identical copies on every rank; a fingerprint compared
        at each checkpoint catches a divergence (which would be a bug) before it is saved."""
        if self.size == 1 or self.fsdp:
            return
        with torch.no_grad():
            fingerprint = torch.stack([torch.stack([p.double().sum(), p.double().abs().sum()]) for p in model.parameters()]).sum(
                0
            )
        high = self.max(fingerprint.clone())
        low = -self.max(-fingerprint)
        if not torch.equal(high, low):
            raise RuntimeError(
                f"the data-parallel copies on ranks {self.ranks} have diverged (parameter sums {low.tolist()} "
                f"to {high.tolist()}): please report this as a bug"
            )

    def clip_grad_norm(self, params, max_norm: float | None) -> float:
        """Clip to `max_norm` (None: only measure); returns the norm before clipping."""
        if not self.fsdp:
            return float(torch.nn.utils.clip_grad_norm_(params, max_norm or float("inf")))
        from torch.distributed.tensor import DTensor

        params = [p for p in params if p.grad is not None]
        norm = torch.nn.utils.get_total_norm([p.grad for p in params])
        if isinstance(norm, DTensor):  # each rank holds part of the sum of squares
            norm = norm.full_tensor()
        if max_norm:
            torch.nn.utils.clip_grads_with_norm_(params, max_norm, norm)
        return float(norm)

    @contextmanager
    def gathered(self, model) -> Iterator[None]:
        """FSDP: keep the whole model on every rank while inside (forwards run no collective).

        Generation and no-grad passes run as many forwards as each rank's own data needs
        (sampling stops when a rank's sequences have ended): with sharded parameters the
        ranks' all-gathers would then not pair up, and the run would hang. Every rank of the
        group must enter and leave together (the gather is a collective).
        """
        if not self.fsdp:
            yield
            return
        from torch.distributed.fsdp import FSDPModule

        modules = [m for m in model.modules() if isinstance(m, FSDPModule)]  # the FSDP root comes first
        modules[0].set_reshard_after_forward(False)
        for m in modules:
            m.unshard()
        try:
            yield
        finally:
            for m in modules:
                m.reshard()
                m.set_reshard_after_forward(m is not modules[0], recurse=False)  # FSDP's defaults: root keeps, blocks free

    def full_model_state(self, model) -> dict | None:
        """FSDP: every tensor of the model, whole and on the CPU, on dp rank 0 (a collective);
        None otherwise (the model's own state_dict will do)."""
        if not self.fsdp:
            return None
        from torch.distributed.tensor import DTensor

        out = {}
        for key, value in model.state_dict().items():
            whole = value.full_tensor() if isinstance(value, DTensor) else value
            if self.rank == 0:
                out[key] = whole.detach().cpu()
        return out

    def full_optimizer_state(self, optimizer) -> dict:
        """The optimizer's state_dict, with FSDP shards gathered whole onto the CPU (a collective)."""
        state = optimizer.state_dict()
        if not self.fsdp:
            return state
        from torch.distributed.tensor import DTensor

        def whole(v):
            return v.full_tensor().cpu() if isinstance(v, DTensor) else v

        state["state"] = {i: {k: whole(v) for k, v in s.items()} for i, s in state["state"].items()}
        return state

    def load_optimizer_state(self, optimizer, state: dict) -> None:
        """Load a state written by `full_optimizer_state`, re-sharding it like the parameters."""
        if self.fsdp:
            from torch.distributed.tensor import DTensor, distribute_tensor

            params = [p for group in optimizer.param_groups for p in group["params"]]
            for i, s in state["state"].items():
                p = params[int(i)]
                for k, v in s.items():
                    if isinstance(p, DTensor) and torch.is_tensor(v) and v.shape == p.shape:
                        s[k] = distribute_tensor(v.to(p.device), p.device_mesh, p.placements)
        optimizer.load_state_dict(state)

    def _all_reduce(self, tensor: torch.Tensor, op, what: str) -> torch.Tensor:
        if self.size == 1:
            return tensor
        self.heartbeat.meet(f"dp{self.ranks[0]}", self.ranks, what)
        moved = tensor.to(self.device)
        with _collective(what, self.heartbeat):
            dist.all_reduce(moved, op=op, group=self.group)
        if moved is not tensor:
            tensor.copy_(moved)
        return tensor


# -- how a policy is held: checkpointing, adapters, sharding, precision ----------------------------


def prepare_model(model, compute: ComputeConfig | None, dp: DataParallel):
    """The trainable policy as configured: gradient checkpointing, LoRA adapters, then FSDP2
    sharding over the agent's own dp ranks (or bf16 autocast, without FSDP)."""
    compute = compute or ComputeConfig()
    if compute.gradient_checkpointing:
        # Non-reentrant: works with frozen inputs (LoRA) and with FSDP2. HF turns the KV cache
        # off only in training mode, so generation keeps it.
        if hasattr(model, "activation_checkpointing_enable"):  # transformers >= 5 renamed it
            model.activation_checkpointing_enable(activation_checkpointing_kwargs={"use_reentrant": False})
        else:
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    if compute.lora is not None:
        model = add_lora(model, compute.lora)
    if dp.fsdp:
        shard_with_fsdp(model, dp.mesh, compute.bf16)
    elif compute.bf16:
        _autocast_bf16(model)
    return model


def prepare_frozen(model, compute: ComputeConfig | None):
    """A frozen copy (KL reference, EMA teacher) computes in the policy's precision."""
    if compute is not None and compute.bf16:
        _autocast_bf16(model)
    return model


def _autocast_bf16(model) -> None:
    # float32 master weights, bfloat16 matmuls: wrap forward, which generate() also calls
    device_type = next(model.parameters()).device.type
    model.forward = torch.autocast(device_type=device_type, dtype=torch.bfloat16)(model.forward)


def add_lora(model, lora: LoRAConfig):
    try:
        from peft import LoraConfig, get_peft_model
    except ModuleNotFoundError:
        raise ModuleNotFoundError(
            "compute.lora needs the `peft` package: pip install peft (or pip install 'corl[gpu]')"
        ) from None
    config = LoraConfig(
        r=lora.r, lora_alpha=lora.alpha, lora_dropout=lora.dropout, target_modules=lora.target_modules, task_type="CAUSAL_LM"
    )
    return get_peft_model(model, config)


def shard_with_fsdp(model, mesh, bf16: bool) -> None:
    """FSDP2 over the 1-D `mesh` (this agent's dp ranks): each transformer block, then the rest."""
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    if mesh.ndim != 1:
        raise ValueError("FSDP must shard over one agent's 1-D 'dp' mesh; a 2-D mesh would average gradients across agents")
    # The root is the Hugging Face model even under a peft wrapper: generate() calls its
    # forward directly, and FSDP needs the first forward to enter through the root.
    root = model.get_base_model() if hasattr(model, "get_base_model") else model
    block_names = set(getattr(root, "_no_split_modules", None) or ())
    blocks = [m for m in root.modules() if type(m).__name__ in block_names]
    if not blocks:
        raise ValueError(f"cannot find the transformer blocks of {type(root).__name__} to shard (its _no_split_modules is empty)")
    policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32) if bf16 else MixedPrecisionPolicy()
    for block in blocks:
        fully_shard(block, mesh=mesh, mp_policy=policy)
    fully_shard(root, mesh=mesh, mp_policy=policy)


def save_policy(model, folder: Path, state: dict | None = None) -> None:
    """Write a plain Hugging Face model folder (from_pretrained and eval harnesses load it).

    `state` is the whole state dict when the live model is sharded. LoRA adapters are merged
    into the weights they adapt (W + scale * B @ A), computed on the saved tensors so the
    live weights stay untouched.
    """
    if not hasattr(model, "get_base_model"):  # not a peft model
        with _writes_on_this_rank(model):
            model.save_pretrained(folder, state_dict=state)
        return
    state = dict(state if state is not None else {k: v.detach().cpu() for k, v in model.state_dict().items()})
    prefix = "base_model.model."
    for name, module in model.named_modules():
        if not hasattr(module, "lora_A") or f"{name}.base_layer.weight" not in state:
            continue
        for adapter in module.lora_A:  # "default"
            a = state.pop(f"{name}.lora_A.{adapter}.weight").float()  # [r, in]
            b = state.pop(f"{name}.lora_B.{adapter}.weight").float()  # [out, r]
            delta = (b @ a) * module.scaling[adapter]  # [out, in]
            if getattr(module, "fan_in_fan_out", False):  # GPT-2's Conv1D stores [in, out]
                delta = delta.T
            weight = state[f"{name}.base_layer.weight"]
            state[f"{name}.base_layer.weight"] = (weight.float() + delta).to(weight.dtype)
    clean = {}
    for key, value in state.items():
        if "lora_" in key:
            continue
        clean[key.removeprefix(prefix).replace(".base_layer.", ".")] = value
    with _writes_on_this_rank(model.get_base_model()) as base:
        base.save_pretrained(folder, state_dict=clean)


@contextmanager
def _writes_on_this_rank(model) -> Iterator:
    """transformers >= 5 writes a model only on *global* rank 0 once torch.distributed is up
    (`should_save_on_this_rank`); here each agent's own dp rank 0 writes its agent."""
    if not hasattr(model, "should_save_on_this_rank"):
        yield model
        return
    model.should_save_on_this_rank = lambda is_main_process: is_main_process
    try:
        yield model
    finally:
        del model.should_save_on_this_rank


# -- the entry point -----------------------------------------------------------------------------------


def under_torchrun() -> bool:
    return "TORCHELASTIC_RUN_ID" in os.environ or ("RANK" in os.environ and "WORLD_SIZE" in os.environ)


def launch(cfg: RunConfig, run_dir: str | Path, resume: bool = False, progress_factory=None) -> dict | None:
    """Run a cohort in this process, or as this rank of a torchrun world.

    Returns the last metrics on the main process (None on the other ranks).
    """
    if resume and cfg.compute.lora is not None:
        raise ConfigError(
            "resuming a run with compute.lora is not supported yet: its checkpoints hold the merged weights; "
            "start a new run from them (agents.N.model=RUN_DIR/checkpoints/step_.../NAME)"
        )
    if under_torchrun():
        return _launch_distributed(cfg, Path(run_dir), resume, progress_factory)
    if cfg.distributed.fsdp:
        raise ConfigError("distributed.fsdp needs torchrun, also on one GPU: torchrun --nproc-per-node 1 -m corl train CONFIG")
    from corl.cohort import CohortTrainer

    return _train(CohortTrainer(cfg, run_dir, resume=resume), progress_factory)


def _train(trainer, progress_factory=None, on_step: Callable[[int, dict], None] | None = None) -> dict:
    if progress_factory is None:
        return trainer.train(on_step=on_step)
    with progress_factory(trainer) as progress:

        def both(step: int, metrics: dict) -> None:
            progress(step, metrics)
            if on_step is not None:
                on_step(step, metrics)

        return trainer.train(on_step=both)


def _device(cfg: RunConfig) -> torch.device:
    from corl.models import resolve_device

    device = resolve_device(cfg.device)
    if device.type == "cuda":  # one GPU per local rank, whatever index the config names
        device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
        torch.cuda.set_device(device)
    return device


def _launch_distributed(cfg: RunConfig, run_dir: Path, resume: bool, progress_factory) -> dict | None:
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    layout = plan_layout([a.name for a in cfg.agents], world, cfg.distributed.placement)
    device = _device(cfg)
    if cfg.distributed.fsdp and device.type != "cuda":
        raise ConfigError(
            "distributed.fsdp runs on GPUs only: FSDP2 over gloo averages gradients wrongly (pytorch#162338). "
            "On CPU leave it off: each agent's ranks then use plain data parallelism"
        )
    if layout.dp_size > cfg.cohort.prompts_per_step:
        raise ConfigError(
            f"each agent has {layout.dp_size} data-parallel ranks but cohort.prompts_per_step is {cfg.cohort.prompts_per_step}: "
            "every rank needs at least one prompt per step"
        )
    timeout = timedelta(seconds=cfg.distributed.timeout_s)
    backend = "nccl" if device.type == "cuda" else "gloo"
    store, _, _ = next(dist.rendezvous("env://", timeout=timeout))
    dist.init_process_group(backend, store=store, rank=rank, world_size=world, timeout=timeout)
    heartbeat = Heartbeat(store, rank, cfg.distributed.timeout_s, layout)
    previous_handler = signal.signal(signal.SIGTERM, _stopped_by_launcher)
    try:
        # Objects travel over gloo: NCCL would move every pickled table through the GPU.
        objects = dist.new_group(backend="gloo", timeout=timeout) if backend != "gloo" else None
        dp = _data_parallel(layout, rank, device, backend, timeout, heartbeat, cfg.distributed.fsdp)
        from corl.cohort import CohortTrainer

        placement = layout.placement(rank)
        trainer = CohortTrainer(
            cfg,
            run_dir,
            resume=resume,
            placement=placement,
            exchange=WorldExchange(heartbeat, objects),
            device=device,
            data_parallel=dp,
        )
        heartbeat.context = f"step {trainer.start_step}"
        fault = _injected_fault(cfg, placement)

        def on_step(step: int, metrics: dict) -> None:
            heartbeat.context = f"step {step + 1}"
            if fault is not None:
                fault(step + 1)

        last = _train(trainer, progress_factory if placement.is_main else None, on_step)
    except BaseException as err:
        _report_failure(run_dir, rank, layout, heartbeat, err)
        raise
    finally:
        signal.signal(signal.SIGTERM, previous_handler)
    dist.destroy_process_group()
    return last if rank == 0 else None


def _data_parallel(
    layout: Layout, rank: int, device: torch.device, backend: str, timeout: timedelta, heartbeat: Heartbeat, fsdp: bool
) -> DataParallel:
    """The ("agent", "dp") device mesh; this rank's agent group is its 1-D "dp" sub-mesh."""
    from torch.distributed.device_mesh import init_device_mesh

    shape = (layout.world // layout.dp_size, layout.dp_size)  # with P < N the first axis counts processes
    try:
        options = dist.ProcessGroupNCCL.Options() if backend == "nccl" else dist.ProcessGroupGloo._Options()
        options._timeout = timeout  # sub-groups would otherwise get torch's default (30 min)
        mesh = init_device_mesh(device.type, shape, mesh_dim_names=("agent", "dp"), backend_override={"dp": (backend, options)})
    except (AttributeError, TypeError):  # torch < 2.6: no backend_override
        mesh = init_device_mesh(device.type, shape, mesh_dim_names=("agent", "dp"))
    dp_mesh = mesh["dp"]
    return DataParallel(
        group=dp_mesh.get_group(),
        ranks=layout.dp_ranks(rank),
        rank=rank % layout.dp_size,
        heartbeat=heartbeat,
        mesh=dp_mesh if fsdp else None,
        device=device,
    )


def _stopped_by_launcher(signum, frame) -> None:
    raise LauncherStopped("stopped by the launcher (SIGTERM)")


def _report_failure(run_dir: Path, rank: int, layout: Layout, heartbeat: Heartbeat, err: BaseException) -> None:
    """Publish this rank's failure to the others and write RUN_DIR/failure.json (first writer wins)."""
    if isinstance(err, LauncherStopped):
        message = f"{err} in {heartbeat.context}: another rank has probably exited; see the launcher's summary"
    elif isinstance(err, PeerFailure):
        message = str(err)
    else:
        message = f"{type(err).__name__}: {err}"
    me = layout.describe([rank])
    record = {
        "rank": rank,
        "agents": [layout.names[n] for n in layout.hosts[rank]],
        "error": message,
        "missing": [{"rank": r, "agents": [layout.names[n] for n in layout.hosts[r]]} for r in getattr(err, "missing", [])],
        "where": heartbeat.context,
        "time": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }
    if not isinstance(err, PeerFailure):  # a PeerFailure's cause is already known to the others
        heartbeat.publish(record)
    try:
        run_dir.mkdir(parents=True, exist_ok=True)
        fd = os.open(run_dir / FAILURE_FILE, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    except OSError:
        pass  # an earlier failure is already recorded (or the directory is unwritable)
    else:
        with os.fdopen(fd, "w") as f:
            json.dump({"reported_by": me, **record}, f, indent=1)
    print(f"corl: {me}: {message}", file=sys.stderr, flush=True)


def _injected_fault(cfg: RunConfig, placement) -> Callable[[int], None] | None:
    """TEST-ONLY fault injection: CORL_TEST_FAULT="AGENT:hang|exit:STEP" makes the first
    (dp rank 0) process of agent AGENT hang forever, or exit at once with status 17, just
    before step STEP (>= 1). Used by tests/test_distributed.py; never set it in real runs."""
    spec = os.environ.get(FAULT_ENV)
    if not spec:
        return None
    name, mode, at = spec.split(":")
    names = [a.name for a in cfg.agents]
    if names.index(name) not in placement.agents or placement.dp_rank != 0:
        return None

    def fault(step: int) -> None:
        if step != int(at):
            return
        if mode == "hang":
            while True:
                time.sleep(3600)
        os._exit(17)

    return fault
