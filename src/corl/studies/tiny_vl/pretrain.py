"""Supervised pretraining of a tiny VL family on the synthetic image task, to partial competence.

Each step takes `batch_size` training rows, builds their prompts exactly as a rollout
would (`chat_prompt` + `build_inputs`: left-padded, images attached) and the solution +
EOS as the completion, and minimises the completion tokens' negative log-likelihood
through `vision_sequence_logprobs`: the very forward pass the GRPO update will use, so
pretraining exercises it end to end. A family's weights depend only on (spec, steps,
batch_size, lr, seed) and the float arithmetic of the machine.

Two things make the towers learn to *read* within a few hundred steps (docs/vision.md,
section 5): a curriculum, the first `READ_ONLY_SHARE` of the steps on "read" rows only
(x=?) before the full read / plus / minus mixture, and a loss weight `READ_TOKEN_WEIGHT`
on the completion's first number token (the x of "x=7.", the only token that needs the
image; later copies of x are read from the completion itself). Without them the image
signal is ~1 token in 15 and the models stay near chance (1/9) for 400+ steps.

Cache (`ensure_pretrained_vl`): `<cache_dir>/vision/<name>-<hash>`, cache_dir as for the
text families (`corl.studies.tiny.pretrain.default_cache_dir`), written to a temporary sibling
and renamed when complete.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
import random
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from itertools import islice
from pathlib import Path

import torch

from corl.answers import extract_answer
from corl.studies.tiny.pretrain import default_cache_dir
from corl.studies.tiny.task import slipped
from corl.studies.tiny_vl.families import VLFamilySpec, build_vl_family, get_vl_family, save_vl
from corl.studies.tiny_vl.task import iter_problems, make_split
from corl.vision.inputs import VisionInputs, build_inputs, chat_prompt
from corl.vision.logprobs import generate_with_images, vision_sequence_logprobs

PRETRAIN_VERSION = 4  # 3: the task's b of 1-3, the slipping teacher; 4: arithmetic-heavy mixture, 1,000 steps
DONE_FILE = "corl_vl_family.json"
STEPS, BATCH_SIZE, LR = 1000, 32, 3e-3  # the defaults: ~90-110 CPU-seconds per family on one thread
READ_ONLY_SHARE = 0.25  # first share of the steps on "read" rows only
READ_TOKEN_WEIGHT = 5.0  # loss weight of the first number token of the completion (the x read from the image)


def encode_rows(processor, rows: list[dict]) -> tuple[VisionInputs, torch.Tensor, torch.Tensor]:
    """(prompts [B, P] with images, completion ids [B, C] right-padded, completion mask [B, C]) of task rows."""
    tok = processor.tokenizer
    batch = build_inputs(
        processor, [chat_prompt(processor, r["problem"], len(r["images"])) for r in rows], [r["images"] for r in rows]
    )
    seqs = [tok.encode(r["solution"], add_special_tokens=False) + [tok.eos_token_id] for r in rows]
    width = max(len(s) for s in seqs)
    ids = torch.full((len(seqs), width), tok.pad_token_id, dtype=torch.long)
    mask = torch.zeros((len(seqs), width), dtype=torch.long)
    for i, s in enumerate(seqs):
        ids[i, : len(s)], mask[i, : len(s)] = torch.tensor(s), 1
    return batch, ids, mask


def read_token_weights(tokenizer, completion_ids: torch.Tensor, mask: torch.Tensor, weight: float) -> torch.Tensor:
    """[B, C] float loss weights: `mask`, with `weight` on each row's first token that holds a digit (x in "x=7.")."""
    digit_ids = torch.tensor([i for i in range(len(tokenizer)) if any(c.isdigit() for c in tokenizer.decode([i]))])
    digit = torch.isin(completion_ids, digit_ids) & mask.bool()  # [B, C]
    first = digit & (digit.cumsum(1) == 1)  # [B, C] at most one per row
    return mask.float() + (weight - 1.0) * first.float()


@torch.no_grad()
def accuracy(model, processor, rows: list[dict], batch_size: int = 32, max_new_tokens: int = 24) -> float:
    """Share of rows whose greedy completion's final answer is the hidden answer."""
    was_training = model.training
    model.eval()
    correct = 0
    for start in range(0, len(rows), batch_size):
        part = rows[start : start + batch_size]
        batch, _, _ = encode_rows(processor, part)
        completion, _ = generate_with_images(model, batch, do_sample=False, max_new_tokens=max_new_tokens)
        texts = processor.tokenizer.batch_decode(completion, skip_special_tokens=True)
        correct += sum(extract_answer(t) == r["answer"] for t, r in zip(texts, part))
    model.train(was_training)
    return correct / len(rows)


def _lr(step: int, total: int, warmup: int) -> float:
    if step < warmup:
        return (step + 1) / warmup
    return 0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(1.0, (step - warmup) / max(1, total - warmup))))


def training_rows(spec: VLFamilySpec, steps: int, batch_size: int) -> Iterator[list[dict]]:
    """Each step's rows: "read" rows only for the first READ_ONLY_SHARE of the steps, then the full
    mixture, where a share `spec.slips[type]` of each type's rows is the slipping teacher's solution."""
    read_rows: Iterator[dict] = iter_problems("train", seed=spec.seed, types=("read",))
    rows: Iterator[dict] = iter_problems("train", seed=spec.seed, weights=spec.mixture or None)
    read_only = round(READ_ONLY_SHARE * steps)
    teacher = random.Random(f"corl-vtiny-slips/{spec.seed}")  # which rows the slipping teacher solves
    for step in range(steps):
        part = list(islice(read_rows if step < read_only else rows, batch_size))
        yield [slipped(r) if teacher.random() < spec.slips.get(r["type"], 0.0) else r for r in part]


def pretrain_vl(
    name: str | VLFamilySpec,
    steps: int = STEPS,
    batch_size: int = BATCH_SIZE,
    lr: float = LR,
    on_step: Callable[[int, object, object], None] | None = None,
    progress: bool = False,
) -> tuple[object, object, dict]:
    """Train a tiny VL family from its random init for `steps` AdamW steps; returns (model, processor, stats).

    The first READ_ONLY_SHARE of the steps see "read" rows only, the rest the full mixture;
    the loss is the completion tokens' weighted mean NLL (READ_TOKEN_WEIGHT on the read x).
    on_step(steps_done, model, processor) runs after each update (e.g. to measure accuracy).
    stats: {"steps", "seconds", "losses"} with the per-step weighted mean completion-token NLL.
    """
    spec = get_vl_family(name)
    torch.set_flush_denormal(True)
    model, processor = build_vl_family(spec)
    model.train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, betas=(0.9, 0.98), weight_decay=0.01)
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: _lr(s, steps, min(20, steps)))
    losses, start = [], time.perf_counter()
    for step, part in enumerate(training_rows(spec, steps, batch_size)):
        batch, completion, mask = encode_rows(processor, part)
        weights = read_token_weights(processor.tokenizer, completion, mask, READ_TOKEN_WEIGHT)  # [B, C]
        logprobs = vision_sequence_logprobs(model, batch, completion, mask)  # [B, C]
        loss = -(logprobs * weights).sum() / weights.sum()
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        schedule.step()
        losses.append(round(loss.item(), 4))
        if progress and ((step + 1) % max(1, steps // 10) == 0 or step + 1 == steps):
            recent = sum(losses[-10:]) / len(losses[-10:])
            print(f"pretraining {spec.name}: step {step + 1}/{steps}, loss {recent:.3f}, {time.perf_counter() - start:.0f}s",
                  file=sys.stderr, flush=True)  # fmt: skip
        if on_step is not None:
            on_step(step + 1, model, processor)
    model.eval()
    return model, processor, {"steps": steps, "seconds": round(time.perf_counter() - start, 1), "losses": losses}


def _record(spec: VLFamilySpec, steps: int, batch_size: int, lr: float) -> dict:
    return {"spec": dataclasses.asdict(spec), "steps": steps, "batch_size": batch_size, "lr": lr, "version": PRETRAIN_VERSION}


def vl_cache_path(
    name: str | VLFamilySpec,
    steps: int = STEPS,
    batch_size: int = BATCH_SIZE,
    lr: float = LR,
    cache_dir: str | Path | None = None,
) -> Path:
    """The cache entry of a VL family pretrained so: `<cache_dir>/vision/<name>-<hash>` (complete when it holds DONE_FILE)."""
    spec = get_vl_family(name)
    digest = hashlib.sha256(json.dumps(_record(spec, steps, batch_size, lr), sort_keys=True).encode()).hexdigest()[:10]
    return (Path(cache_dir) if cache_dir is not None else default_cache_dir()) / "vision" / f"{spec.name}-{digest}"


def ensure_pretrained_vl(
    name: str | VLFamilySpec,
    steps: int = STEPS,
    batch_size: int = BATCH_SIZE,
    lr: float = LR,
    cache_dir: str | Path | None = None,
    progress: bool = False,
) -> Path:
    """Directory of the pretrained family (model + processor, `load_vl` loads it), built when missing;
    `progress`: a line on stderr every tenth of the steps."""
    spec = get_vl_family(name)
    record = _record(spec, steps, batch_size, lr)
    final = vl_cache_path(spec, steps, batch_size, lr, cache_dir)
    if (final / DONE_FILE).is_file():
        return final
    final.parent.mkdir(parents=True, exist_ok=True)
    if progress:
        print(f"corl: pretraining tiny VL family {spec.name!r} ({steps} steps) into {final}", file=sys.stderr, flush=True)
    model, processor, stats = pretrain_vl(spec, steps, batch_size, lr, progress=progress)
    tmp = Path(tempfile.mkdtemp(prefix=f".{final.name}.tmp-", dir=final.parent))
    try:
        save_vl(model, processor, tmp)
        (tmp / "pretrain_stats.json").write_text(json.dumps(stats))
        (tmp / DONE_FILE).write_text(json.dumps(record, indent=2))  # last: its presence marks a complete build
        if final.exists():
            shutil.rmtree(final)
        os.replace(tmp, final)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return final


def accuracy_curve(
    name: str, steps: int, every: int, eval_rows: int = 64, batch_size: int = BATCH_SIZE, lr: float = LR
) -> list[dict]:
    """[{"step", "accuracy", "seconds"}] on `eval_rows` validation rows every `every` steps (for measurements)."""
    rows = make_split("validation", eval_rows, seed=7)
    curve, start = [], time.perf_counter()

    def measure(step, model, processor):
        if step % every == 0:
            curve.append(
                {"step": step, "accuracy": accuracy(model, processor, rows), "seconds": round(time.perf_counter() - start)}
            )

    pretrain_vl(name, steps, batch_size, lr, on_step=measure)
    return curve
