"""Supervised pretraining of a tiny family from scratch, and the cache that holds the result.

Usage:
    from corl.studies.tiny.pretrain import ensure_pretrained
    model_dir = ensure_pretrained("llama-char")   # built once (~3 min on 2 CPU cores), then cached
    # model_dir holds save_pretrained model + tokenizer, loadable offline with
    # AutoModelForCausalLM.from_pretrained(model_dir, attn_implementation="eager")

Each sequence is `prompt_text(problem)` + `solution` + EOS, tokenized as prompt and
completion separately (exactly the ids a rollout sees), with the loss on completion
tokens only. Training stops after a fixed number of optimizer steps, so a family's
weights depend only on its spec (and the float arithmetic of the machine).

Cache: `<cache_dir>/<name>-<spec fingerprint>`, where cache_dir defaults to
`$CORL_CACHE/tiny`, else `$XDG_CACHE_HOME/corl/tiny`, else `~/.cache/corl/tiny`. A build
is written to a temporary sibling directory and renamed into place when complete, so an
interrupted build never leaves a half-written cache entry.
"""

from __future__ import annotations

import json
import math
import multiprocessing
import os
import random
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict
from itertools import islice
from pathlib import Path

import torch
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from corl.studies.tiny.families import FamilySpec, build_random_model, get_family
from corl.studies.tiny.task import TYPES, iter_problems, prompt_text, slipped
from corl.studies.tiny.tokenizers import bpe_tokenizer, char_tokenizer

PRETRAIN_VERSION = 3  # bump when this file changes what a spec trains to (invalidates caches)
# Rows per forward pass: a step's batch is sorted by length and cut into passes of this many
# rows, each trimmed to its own longest row, their gradients summed into the one step. The
# step's gradient is the whole batch's (up to float summation order), but the padding goes:
# a batch of 128 tiny-task rows is ~35% padding, its passes of 32 ~5%
# (benchmarks/pretrain_speed.py: 0.66x / 0.86x the step time for llama-char / qwen2-bpe).
ROWS_PER_PASS = 32
BPE_CORPUS_ROWS = 4000
BPE_CORPUS_SEED = 1  # fixed, so seed siblings of a BPE family share its tokenizer
SPEC_FILE = "corl_family.json"  # written last into a cache entry: its presence marks a complete build


def default_cache_dir() -> Path:
    """Where pretrained tiny families live unless told otherwise."""
    if os.environ.get("CORL_CACHE"):
        return Path(os.environ["CORL_CACHE"]) / "tiny"
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "corl" / "tiny"


def build_tokenizer(spec: FamilySpec) -> PreTrainedTokenizerBase:
    """The family's tokenizer; BPE is trained on a fixed uniform mix of training problems (deterministic)."""
    if spec.tokenizer == "char":
        return char_tokenizer()
    rows = islice(iter_problems("train", BPE_CORPUS_SEED, spec.difficulty, types=TYPES), BPE_CORPUS_ROWS)
    corpus = [prompt_text(r["problem"]) + r["solution"] for r in rows]
    return bpe_tokenizer(corpus, vocab_size=spec.bpe_vocab_size)


def training_batches(spec: FamilySpec, tokenizer: PreTrainedTokenizerBase) -> Iterator[dict[str, torch.Tensor]]:
    """Endless right-padded batches with labels = -100 on prompt and padding tokens; a share
    `spec.slips[type]` of each type's rows is the slipping teacher's solution (task.slipped).

    Yields: input_ids [B, T], attention_mask [B, T], labels [B, T].
    """
    rows = iter_problems("train", seed=spec.seed, difficulty=spec.difficulty, weights=spec.mixture)
    teacher = random.Random(f"corl-tiny-slips/{spec.seed}")  # which rows the slipping teacher solves
    eos, pad = tokenizer.eos_token_id, tokenizer.pad_token_id
    while True:
        batch = [slipped(r) if teacher.random() < spec.slips.get(r["type"], 0.0) else r for r in islice(rows, spec.batch_size)]
        # one call per batch: the fast tokenizer encodes a list in Rust at half the cost of
        # row-by-row calls (the same ids; ~10% of a step otherwise)
        prompts = tokenizer([prompt_text(r["problem"]) for r in batch], add_special_tokens=False)["input_ids"]
        completions = tokenizer([r["solution"] for r in batch], add_special_tokens=False)["input_ids"]
        seqs = [(p, c + [eos]) for p, c in zip(prompts, completions)]
        width = max(len(p) + len(c) for p, c in seqs)
        input_ids = torch.full((len(seqs), width), pad, dtype=torch.long)
        labels = torch.full((len(seqs), width), -100, dtype=torch.long)
        mask = torch.zeros((len(seqs), width), dtype=torch.long)
        for i, (p, c) in enumerate(seqs):
            n = len(p) + len(c)
            input_ids[i, :n] = torch.tensor(p + c)
            labels[i, len(p) : n] = torch.tensor(c)
            mask[i, :n] = 1
        yield {"input_ids": input_ids, "attention_mask": mask, "labels": labels}


def length_passes(batch: dict[str, torch.Tensor], rows: int = ROWS_PER_PASS) -> list[dict[str, torch.Tensor]]:
    """`batch` as forward passes of at most `rows` rows of similar length, each trimmed to its
    own longest row (right padding only, so trimming drops padding alone)."""
    lengths = batch["attention_mask"].sum(dim=1)
    order = torch.sort(lengths, stable=True).indices
    passes = []
    for chunk in order.split(rows):
        width = int(lengths[chunk].max())
        passes.append({key: value[chunk, :width] for key, value in batch.items()})
    return passes


def accumulate_gradients(model: PreTrainedModel, batch: dict[str, torch.Tensor], rows: int = ROWS_PER_PASS) -> torch.Tensor:
    """Backward of the batch's mean completion-token cross-entropy, pass by pass (`length_passes`):
    each pass's summed token loss is divided by the whole batch's token count, so the gradients
    add up to the single-pass gradient. Returns the batch's mean loss (detached)."""
    # HF's causal-LM loss shifts labels by one; the first label is a prompt token's -100, so
    # the tokens that carry loss are exactly the labels that are not -100.
    tokens = int((batch["labels"] != -100).sum())
    total = torch.zeros(())
    for part in length_passes(batch, rows):
        loss = model(**part, num_items_in_batch=tokens).loss
        loss.backward()
        total += loss.detach()
    return total


def lr_factor(step: int, total: int, warmup: int, floor: float = 0.1) -> float:
    """Linear warmup over `warmup` steps, then cosine decay to `floor` of the peak at `total`."""
    if step < warmup:
        return (step + 1) / warmup
    progress = (step - warmup) / max(1, total - warmup)
    return floor + (1 - floor) * 0.5 * (1 + math.cos(math.pi * min(1.0, progress)))


def pretrain(
    spec: FamilySpec,
    progress: bool = True,
    on_step: Callable[[int, PreTrainedModel, PreTrainedTokenizerBase], None] | None = None,
) -> tuple[PreTrainedModel, PreTrainedTokenizerBase, dict]:
    """Train `spec` from scratch for `spec.steps` AdamW steps; returns (model, tokenizer, stats).

    Args:
        on_step: called as on_step(steps_done, model, tokenizer) after each update (e.g. to
            evaluate along the way; it must leave the model in train mode).

    stats: {"steps", "seconds", "loss_first", "loss_last", "losses"} where losses are
    per-step mean completion-token cross-entropies (loss_last: mean of the last 10).
    """
    torch.set_flush_denormal(True)  # cheap insurance against denormal slowdowns (CPU-NOTES)
    tokenizer = build_tokenizer(spec)
    model = build_random_model(
        spec.arch, tokenizer, hidden=spec.hidden, layers=spec.layers, heads=spec.heads, ffn=spec.ffn, seed=spec.seed
    )
    model.train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=spec.lr, betas=(0.9, 0.98), weight_decay=0.01)
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda s: lr_factor(s, spec.steps, min(spec.warmup_steps, spec.steps))
    )
    losses: list[float] = []
    start = time.perf_counter()
    with _progress_bar(spec, progress) as advance:
        for step, batch in enumerate(islice(training_batches(spec, tokenizer), spec.steps)):
            optimizer.zero_grad(set_to_none=True)
            loss = accumulate_gradients(model, batch)
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            schedule.step()
            losses.append(loss.item())
            advance(step, losses)
            if on_step is not None:
                on_step(step + 1, model, tokenizer)
    model.eval()
    stats = {
        "steps": len(losses),
        "seconds": round(time.perf_counter() - start, 2),
        "loss_first": losses[0] if losses else None,
        "loss_last": sum(losses[-10:]) / len(losses[-10:]) if losses else None,
        "losses": [round(x, 4) for x in losses],
    }
    return model, tokenizer, stats


@contextmanager
def _progress_bar(spec: FamilySpec, enabled: bool) -> Iterator[Callable[[int, list[float]], None]]:
    """Yields advance(step, losses): a rich bar on a terminal, a line per 10% of steps otherwise."""
    if not enabled:
        yield lambda step, losses: None
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    columns = (
        TextColumn(f"pretraining tiny family [bold]{spec.name}[/]"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TextColumn("loss {task.fields[loss]}"),
    )
    console = Console(stderr=True)
    # In a study's worker process (corl.studies.jobs), lines: two live bars would overwrite each other.
    bar_on = console.is_terminal and multiprocessing.parent_process() is None
    every = max(1, spec.steps // 10)
    start = time.perf_counter()
    with Progress(*columns, console=console, disable=not bar_on) as bar:
        task = bar.add_task("pretrain", total=spec.steps, loss="-")

        def advance(step: int, losses: list[float]) -> None:
            recent = sum(losses[-10:]) / len(losses[-10:])
            bar.update(task, completed=step + 1, loss=f"{recent:.3f}")
            if not bar_on and ((step + 1) % every == 0 or step + 1 == spec.steps):
                elapsed = time.perf_counter() - start
                print(f"pretraining {spec.name}: step {step + 1}/{spec.steps}, loss {recent:.3f}, {elapsed:.0f}s",
                      file=sys.stderr, flush=True)  # fmt: skip

        yield advance


def cache_path(spec: FamilySpec, cache_dir: str | Path | None = None) -> Path:
    """The cache entry of `spec`: `<cache_dir>/<name>-<fingerprint>`."""
    root = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    return root / f"{spec.name}-{spec.fingerprint()}-v{PRETRAIN_VERSION}"


def _check_reloaded_tokenizer(model_dir: Path, tokenizer: PreTrainedTokenizerBase, spec: FamilySpec) -> None:
    """Fail loudly if `AutoTokenizer` would load `model_dir` with other ids than the model was trained on."""
    from transformers import AutoTokenizer

    loaded = AutoTokenizer.from_pretrained(model_dir)
    for row in islice(iter_problems("validation", 0, spec.difficulty), 50):
        text = prompt_text(row["problem"]) + row["solution"]
        if loaded.encode(text, add_special_tokens=False) != tokenizer.encode(text, add_special_tokens=False):
            raise RuntimeError(
                f"tiny family {spec.name!r}: AutoTokenizer loads the saved tokenizer as "
                f"{type(loaded).__name__}, which tokenizes {text!r} differently from training; "
                "this transformers version needs another arch/tokenizer pairing"
            )


@contextmanager
def _build_lock(final: Path, progress: bool) -> Iterator[None]:
    """Exclusive lock on one cache entry, so concurrent processes build it once (POSIX; no-op elsewhere)."""
    try:
        import fcntl
    except ImportError:  # Windows: concurrent builds just race; the rename below keeps the cache whole
        yield
        return
    with open(final.parent / f".{final.name}.lock", "w") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if progress:
                print(f"corl: waiting for another process to finish building {final.name}", file=sys.stderr)
            fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def ensure_pretrained(name: str | FamilySpec, cache_dir: str | Path | None = None, progress: bool = True) -> Path:
    """Directory of the pretrained family `name` (model + tokenizer), building it when missing.

    Args:
        name: a key of FAMILIES, a seed sibling such as "llama-char-seed3", or a FamilySpec.
        cache_dir: cache root (default: `default_cache_dir()`).
        progress: show a progress bar while pretraining.
    """
    spec = get_family(name) if isinstance(name, str) else name
    final = cache_path(spec, cache_dir)
    if (final / SPEC_FILE).is_file():
        return final
    final.parent.mkdir(parents=True, exist_ok=True)
    with _build_lock(final, progress):
        if (final / SPEC_FILE).is_file():  # built by the process we waited for
            return final
        for stale in final.parent.glob(f".{final.name}.tmp-*"):  # left by killed builds
            shutil.rmtree(stale, ignore_errors=True)
        if final.exists():  # an entry without its spec file is incomplete
            shutil.rmtree(final)
        if progress:
            print(f"corl: pretraining tiny family {spec.name!r} ({spec.steps} steps) into {final}", file=sys.stderr)
        model, tokenizer, stats = pretrain(spec, progress=progress)
        tmp = Path(tempfile.mkdtemp(prefix=f".{final.name}.tmp-", dir=final.parent))
        try:
            model.save_pretrained(tmp)
            tokenizer.save_pretrained(tmp)
            _check_reloaded_tokenizer(tmp, tokenizer, spec)
            (tmp / "pretrain_stats.json").write_text(json.dumps(stats))
            record = {"spec": asdict(spec), "fingerprint": spec.fingerprint(), "pretrain_version": PRETRAIN_VERSION}
            (tmp / SPEC_FILE).write_text(json.dumps(record, indent=2))
            os.replace(tmp, final)
        finally:
            if tmp.exists():
                shutil.rmtree(tmp, ignore_errors=True)
    return final
