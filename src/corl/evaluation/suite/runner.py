"""Running a suite cell by cell (benchmark x checkpoint), resumable.

Layout of the output folder::

    OUT/cells/<checkpoint tag>/<benchmark>.jsonl   per-problem records, one line per (problem, seed)
    OUT/cells/<checkpoint tag>/<benchmark>.json    the cell: per-seed per-problem scores, written last
    OUT/results.json, OUT/results.md               the table, every figure and its interval

Both cell files are written atomically (a temporary file, fsync, rename), the JSON after
the JSONL, so a cell whose JSON exists is complete. A rerun into the same folder reuses
every finished cell whose protocol fingerprint matches and computes only the others; a
checkpoint whose cells are all finished is not even loaded. Sampling is seeded per
(benchmark, seed) (`torch.manual_seed`), never from a running stream, so a resumed suite
samples what the uninterrupted one would have.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import re
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from corl.data.rows import DataError
from corl.evaluation.suite import graders
from corl.evaluation.suite.external import NotRun, run_lcb
from corl.evaluation.suite.protocol import Benchmark
from corl.files import write_whole

CELL_VERSION = 1


def checkpoint_tag(checkpoint: str) -> str:
    """A folder name for a checkpoint: readable, and unique per path (a hash of the full name)."""
    full = str(Path(checkpoint).resolve()) if Path(checkpoint).exists() else checkpoint
    stem = re.sub(r"[^A-Za-z0-9._-]+", "_", Path(full).name or full)[:40]
    return f"{stem}-{hashlib.sha1(full.encode()).hexdigest()[:8]}"


def cell_paths(out: Path, checkpoint: str, bench: str) -> tuple[Path, Path]:
    base = out / "cells" / checkpoint_tag(checkpoint)
    return base / f"{bench}.json", base / f"{bench}.jsonl"


def finished_cell(out: Path, checkpoint: str, bench: Benchmark) -> dict | None:
    """The stored cell when it is complete and was made under this very protocol, else None."""
    path, records = cell_paths(out, checkpoint, bench.name)
    if not path.is_file() or not records.is_file():
        return None
    try:
        cell = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError:
        return None  # cannot happen with atomic writes; a hand-edited file is recomputed
    if cell.get("version") != CELL_VERSION or cell.get("fingerprint") != bench.fingerprint():
        return None
    return cell


def sampling_seed(bench: str, seed: int) -> int:
    """torch seed of one (benchmark, seed): independent of which cells ran before."""
    return zlib.crc32(f"{bench}/{seed}".encode())


def resolve_engine(name: str) -> str:
    """auto: vLLM when it is installed, Hugging Face generate otherwise."""
    if name == "auto":
        return "vllm" if importlib.util.find_spec("vllm") is not None else "hf"
    return name


@dataclass
class Checkpoint:
    """A checkpoint loaded on first need, with one engine per chat setting (special tokens differ)."""

    name: str
    engine_name: str
    model: object = None
    tokenizer: object = None
    processor: object = None  # a vision-language checkpoint's (None for a causal LM)
    engines: dict = field(default_factory=dict)

    def engine(self, chat: bool):
        if self.model is None:
            from corl.models import load_agent_policy, resolve_device

            self.model, self.tokenizer, self.processor = load_agent_policy(self.name, device=resolve_device("auto"))
        if chat not in self.engines:
            from corl.config import RolloutConfig
            from corl.rollout import build_engine

            self.engines[chat] = build_engine(
                RolloutConfig(engine=self.engine_name),
                self.model,
                self.tokenizer,
                add_special_tokens=not chat,
                processor=self.processor,
            )
        return self.engines[chat]

    def close(self) -> None:
        for e in self.engines.values():
            e.close()
        self.engines.clear()
        self.model = self.tokenizer = self.processor = None


def _generate_cell(
    bench: Benchmark, ckpt: Checkpoint, pool, batch_prompts: int, advance: Callable[[int], None]
) -> tuple[dict, list[dict]]:
    import torch

    from corl.rollout import SamplingParams

    engine = ckpt.engine(bench.chat)
    shots = graders.mbpp_shots(bench) if bench.code_style == "mbpp" else []
    params = SamplingParams(bench.temperature, bench.top_p, bench.max_tokens)
    scores, passes, majs, records, calls, lengths = [], [], [], [], 0, []
    ids: list[str] = []
    for seed in bench.seeds:
        items = graders.load_items(bench, seed)
        ids = [it.id for it in items]
        try:
            prompts = [graders.render(bench, it, ckpt.tokenizer, shots, ckpt.processor) for it in items]
        except ValueError as err:  # e.g. --chat on a tokenizer without a chat template
            raise NotRun(f"prompt: {err}") from None
        if seed == bench.seeds[0]:
            advance(0, len(items) * len(bench.seeds))  # the bar's total, known once the rows are read
        torch.manual_seed(sampling_seed(bench.name, seed))
        texts: list[list[str]] = []
        for start in range(0, len(prompts), batch_prompts):
            chunk = prompts[start : start + batch_prompts]
            rollout = engine.generate(chunk, bench.samples, params)
            calls += 1
            k = bench.samples
            texts += [rollout.texts[i * k : (i + 1) * k] for i in range(len(chunk))]
            lengths += rollout.completion_lengths.float().tolist()
            advance(len(chunk))
        verdicts = graders.grade(bench, items, texts, pool)
        row_scores, row_pass, row_maj = [], [], []
        for item, prompt, group, v in zip(items, prompts, texts, verdicts):
            score = sum(v.correct) / len(v.correct)
            maj = graders.vote_correct(bench, v.answers, v.keys, item.gold)
            row_scores.append(score)
            row_pass.append(float(any(v.correct)))
            row_maj.append(None if maj is None else float(maj))
            shown = prompt.text if hasattr(prompt, "images") else prompt  # an ImagePrompt's images stay in the data
            rec = {"id": item.id, "seed": seed, "gold": item.gold, "prompt": shown, "samples": group}
            rec.update({"answers": v.answers, "keys": v.keys, "verdicts": v.correct, "score": score, "maj": maj})
            if v.details:
                rec["details"] = v.details
            records.append(rec)
        scores.append(row_scores)
        passes.append(row_pass)
        majs.append(row_maj)
    cell = {
        "scores": scores,
        "pass": passes,
        "maj": majs if bench.grader in ("math", "mcq", "vision") else None,
        "ids": ids,
        "generate_calls": calls,
        "mean_length": sum(lengths) / max(len(lengths), 1),
    }
    return cell, records


def _lcb_cell(bench: Benchmark, checkpoint: str, out: Path) -> tuple[dict, list[dict]]:
    rows = run_lcb(bench, checkpoint, out / "cells" / checkpoint_tag(checkpoint) / "lcb-work")
    if not rows:
        raise NotRun("LiveCodeBench returned no problems")
    cell = {"scores": [[r["score"] for r in rows]], "pass": None, "maj": None, "ids": [r["id"] for r in rows]}
    cell.update({"generate_calls": 0, "mean_length": None})
    return cell, [{"id": r["id"], "seed": bench.seeds[0], "score": r["score"], "lcb": r["record"]} for r in rows]


def compute_cell(bench: Benchmark, ckpt: Checkpoint, out: Path, pool, batch_prompts: int, advance) -> dict:
    """Run one cell and store it (records first, then the cell); raises NotRun with a reason."""
    started = time.time()
    try:
        if bench.grader == "lcb":
            cell, records = _lcb_cell(bench, ckpt.name, out)
        else:
            cell, records = _generate_cell(bench, ckpt, pool, batch_prompts, advance)
    except DataError as err:
        raise NotRun(f"data: {err}") from None
    cell.update(
        {
            "version": CELL_VERSION,
            "benchmark": bench.name,
            "checkpoint": ckpt.name,
            "fingerprint": bench.fingerprint(),
            "protocol": bench.as_dict(),
            "engine": ckpt.engine_name if bench.grader != "lcb" else "lcb_runner",
            "wall_s": round(time.time() - started, 3),
        }
    )
    path, rec_path = cell_paths(out, ckpt.name, bench.name)
    write_whole(rec_path, "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records))
    write_whole(path, json.dumps(cell, ensure_ascii=False, indent=1))
    return cell


def preflight(bench: Benchmark) -> str | None:
    """Why a cell cannot run, found before any model loads (a missing data file), or None."""
    if bench.grader == "lcb":
        from corl.evaluation.suite.external import lcb_unavailable

        return lcb_unavailable()
    local = bench.data.startswith("/")
    if local and not Path(bench.data).is_file():
        hint = " (GPQA is gated and not shipped: pass --data gpqa=FILE, see docs/evaluation.md)" if bench.grader == "mcq" else ""
        if bench.grader == "vision":
            hint = f" (not shipped: export it once with corl.vision.datasets.export_split, or --data {bench.name}=FILE; see docs/vision.md)"
        return f"data file {bench.data} not found{hint}"
    return None
