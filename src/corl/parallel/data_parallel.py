"""One agent's data-parallel group: the ranks that hold its model and how their gradients meet."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager

import torch
import torch.distributed as dist

from corl.parallel.exchange import Heartbeat, collective


class DataParallel:
    """The ranks that hold one agent's model (its "dp" group) and how their gradients meet.

    The default, size 1, is a single copy: every method is then the identity. With plain
    data parallelism (no FSDP) each rank holds a full copy and
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

        # Tied weights (lm_head = embeddings) are one parameter under two names: gathered once, they
        # stay one tensor, so save_pretrained still sees the tie and writes it once, as unsharded.
        named = [*model.named_parameters(remove_duplicate=False), *model.named_buffers(remove_duplicate=False)]
        owner = {name: id(tensor) for name, tensor in named}
        out, gathered = {}, {}
        for key, value in model.state_dict().items():
            where = owner.get(key, key)
            if where not in gathered:  # the same decisions on every rank: the gathers pair up
                whole = value.full_tensor() if isinstance(value, DTensor) else value
                gathered[where] = whole.detach().cpu() if self.rank == 0 else None
            if self.rank == 0:
                out[key] = gathered[where]
        return out

    def _all_reduce(self, tensor: torch.Tensor, op, what: str) -> torch.Tensor:
        if self.size == 1:
            return tensor
        self.heartbeat.meet(f"dp{self.ranks[0]}", self.ranks, what)
        moved = tensor.to(self.device)
        with collective(what, self.heartbeat):
            dist.all_reduce(moved, op=op, group=self.group)
        if moved is not tensor:
            tensor.copy_(moved)
        return tensor
