"""The diversity study: select problems, sample each model once (cached), grade, compare every pair."""

from __future__ import annotations

import hashlib
import json
import os
import random
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from corl.studies.diversity.metrics import PairStats, pair_stats
from corl.studies.diversity.report import (  # noqa: F401  (offered here too)
    PAPER_REFERENCE,
    WEAK_PARTNER_RATIO,
    build_report,
    plot_kappa_heatmap,
    recommend,
)

# --------------------------------------------------------------------------------------
# The study: select problems, sample once per model (cached), grade, compare pairs
# --------------------------------------------------------------------------------------

SEED_TWIN_OFFSET = 1  # --seed-pairs samples each model again with seed + 1
SUBSET_SEED = 0  # fixed: every model and every later study draws the same n problems
CACHE_VERSION = 1


@dataclass(frozen=True)
class StudySettings:
    """What a study samples; everything but `batch_size` and `device` enters the cache key."""

    data: str
    split: str | None = None
    filters: tuple[tuple[str, tuple[str, ...]], ...] = ()  # (field, allowed values as text), ANDed
    n: int | None = 500  # None or 0: every selected problem
    problem_field: str = "problem"
    answer_field: str = "answer"
    temperature: float = 0.8  # 0 = greedy
    top_p: float = 1.0
    max_new_tokens: int = 1024
    seed: int = 0
    template: str = "{problem}\n{instruction}"
    instruction: str | None = None  # None: corl's default instruction
    chat: bool = False  # each model's own chat template; a model without one (a base model) gets the plain text
    stop: tuple[str, ...] = ()  # a completion ends at the first of these (a base model prompted few-shot: "\n")
    batch_size: int = 32
    device: str = "auto"
    engine: str = "hf"  # rollout engine (corl.rollout); enters the key only when not hf


@dataclass(frozen=True)
class Sample:
    """One model's single sampled completion per problem, graded."""

    name: str  # display name: the model as given, or "<model> (seed s)" for a seed twin
    model: str
    seed: int
    texts: list[str]
    answers: list[str | None]
    correct: list[bool]
    cache_hit: bool
    cache_file: str
    model_type: str | None

    @property
    def accuracy(self) -> float:
        return sum(self.correct) / len(self.correct)


def parse_filter(spec: str) -> tuple[str, tuple[str, ...]]:
    """`level=3,4,5` -> ("level", ("3", "4", "5")): keep rows whose field, as text, is listed."""
    field_name, sep, values = spec.partition("=")
    allowed = tuple(v.strip() for v in values.split(",") if v.strip())
    if not sep or not field_name.strip() or not allowed:
        raise ValueError(f"filter {spec!r} is not FIELD=VALUE[,VALUE...] (e.g. level=3,4,5)")
    return field_name.strip(), allowed


def select_problems(rows: Sequence[dict], settings: StudySettings) -> tuple[list[dict], int]:
    """Filtered, gradable rows, then a fixed uniform subset of n kept in file order.

    Rows with an empty answer cannot be graded and are dropped (their count is returned).
    The subset is drawn with a fixed RNG (SUBSET_SEED), not the sampling seed, so every
    model of a study, and every later study with the same data, filter and n, sees the
    same problems (MATH files are sorted by subject: the first n would be one subject).

    Returns:
        (rows as {"id", "problem", "answer"}, number of rows dropped for an empty answer).
    """
    from corl.data.rows import DataError

    if not rows:
        raise DataError(f"dataset {settings.data!r} has no rows")
    for name, _ in settings.filters:
        if not any(name in r for r in rows):
            columns = ", ".join(sorted(rows[0])) or "none"
            raise DataError(f"dataset {settings.data!r}: filter field {name!r} is in no row (columns: {columns})")
    kept = [r for r in rows if all(str(r.get(name)) in allowed for name, allowed in settings.filters)]
    problems, dropped = [], 0
    for i, row in enumerate(kept):
        for f, option in ((settings.problem_field, "--problem-field"), (settings.answer_field, "--answer-field")):
            if row.get(f) is None:
                columns = ", ".join(sorted(row)) or "none"
                raise DataError(f"dataset {settings.data!r} row {i}: field {f!r} is missing (columns: {columns}); set {option}")
        answer = str(row[settings.answer_field]).strip()
        if not answer:
            dropped += 1
            continue
        pid = str(row["id"]) if row.get("id") is not None else str(i)
        problems.append({"id": pid, "problem": str(row[settings.problem_field]), "answer": answer})
    if not problems:
        raise DataError(f"dataset {settings.data!r}: no gradable problems left after filters {dict(settings.filters)}")
    if len({p["id"] for p in problems}) != len(problems):
        raise DataError(f"dataset {settings.data!r}: ids repeat; diversity matches answers by id")
    if settings.n and settings.n < len(problems):
        chosen = sorted(random.Random(SUBSET_SEED).sample(range(len(problems)), settings.n))
        problems = [problems[i] for i in chosen]
    return problems, dropped


def model_identity(model: str) -> dict[str, Any]:
    """What a cache entry is valid for: the model string, plus for a local directory the
    name, size and mtime of each file in it (weights, config, tokenizer), so that
    retraining into the same folder invalidates the cache; for `tiny:<family>` the
    family's fingerprint (every field that changes its pretrained weights). Hub ids are
    identified by name only (use --refresh after a hub model changes)."""
    if model.startswith("tiny:"):
        from corl.studies.tiny.families import get_family

        try:
            return {"model": model, "fingerprint": get_family(model[len("tiny:") :]).fingerprint()}
        except KeyError as err:
            raise ValueError(err.args[0]) from None
    path = Path(model).expanduser()
    if path.is_dir():
        files = sorted(p for p in path.iterdir() if p.is_file())
        return {"model": str(path.resolve()), "files": [[p.name, p.stat().st_size, p.stat().st_mtime_ns] for p in files]}
    if path.is_file():
        st = path.stat()
        return {"model": str(path.resolve()), "files": [[path.name, st.st_size, st.st_mtime_ns]]}
    return {"model": model}


def cache_key(model: str, seed: int, problems: Sequence[dict], settings: StudySettings) -> dict[str, Any]:
    """The full key of one model's samples. Problems enter by content (ids and texts), so
    the key covers data file, split, filter and n without trusting file timestamps."""
    digest = hashlib.sha256()
    for p in problems:
        digest.update(json.dumps([p["id"], p["problem"]], ensure_ascii=False).encode())
        digest.update(b"\n")
    return {
        "version": CACHE_VERSION,
        "model": model_identity(model),
        "problems": {"data": settings.data, "split": settings.split, "filters": [list(f) for f in settings.filters],
                     "n": len(problems), "sha256": digest.hexdigest()},
        "temperature": settings.temperature,
        "top_p": settings.top_p,
        "max_new_tokens": settings.max_new_tokens,
        "seed": seed,
        "template": {"format": settings.template, "instruction": settings.instruction, "chat": settings.chat},
        **({"stop": list(settings.stop)} if settings.stop else {}),  # absent when unset: older caches still match
        **({"engine": settings.engine} if settings.engine != "hf" else {}),
    }  # fmt: skip


def cache_path(cache_dir: Path, model: str, key: dict[str, Any]) -> Path:
    slug = re.sub(r"[^A-Za-z0-9._-]+", "_", model.rstrip("/").split("/")[-1] or model)[:48]
    digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:16]
    return cache_dir / f"{slug}-s{key['seed']}-{digest}.json"


def _read_cache(path: Path, key: dict[str, Any]) -> dict[str, Any] | None:
    """The cached entry, or None when absent, unreadable or written for another key."""
    try:
        entry = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return None
    if not isinstance(entry, dict) or entry.get("key") != json.loads(json.dumps(key)):
        return None
    return entry


def _write_cache(path: Path, entry: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".tmp{os.getpid()}")
    tmp.write_text(json.dumps(entry, ensure_ascii=False), encoding="utf-8")
    os.replace(tmp, path)  # atomic: a crash never leaves a half-written cache entry


def generate_texts(
    engine: Any,
    prompts: Sequence[str],
    params: Any,
    seed: int,
    batch_size: int,
    on_batch: Callable[[int], None] | None = None,
) -> list[str]:
    """One completion per prompt, in batches, seeded once up front (the only place that samples).

    `on_batch(done)` is called after each batch with the number of prompts done so far.
    """
    import torch

    torch.manual_seed(seed)
    texts: list[str] = []
    for start in range(0, len(prompts), batch_size):
        batch = list(prompts[start : start + batch_size])
        texts.extend(engine.generate(batch, 1, params).texts)
        if on_batch:
            on_batch(len(texts))
    return texts


def _max_positions(model: Any) -> int | None:
    config = getattr(model, "config", None)
    for attr in ("max_position_embeddings", "n_positions"):
        value = getattr(config, attr, None)
        if isinstance(value, int) and value > 0:
            return value
    return None


ProgressFn = Callable[[str, int, int], None]  # (sample name, problems done, total)


def _sample_model(
    model: str,
    seeds: Sequence[int],
    problems: Sequence[dict],
    settings: StudySettings,
    progress: ProgressFn | None,
) -> tuple[dict[int, list[str]], str | None]:
    """Load `model` once and sample one completion per problem for each seed."""
    from corl.config import RolloutConfig
    from corl.data.rows import PromptTemplate
    from corl.models import load_policy
    from corl.rollout import SamplingParams, build_engine

    policy, tokenizer = load_policy(model, device=settings.device)
    policy.eval()
    # a base model has no chat template: it is prompted with the plain text (the report's samples say which)
    chat = settings.chat and bool(getattr(tokenizer, "chat_template", None))
    template_kwargs = {"format": settings.template, "chat": chat}
    if settings.instruction is not None:
        template_kwargs["instruction"] = settings.instruction
    template = PromptTemplate(**template_kwargs)
    prompts = [template.render(p["problem"], tokenizer) for p in problems]
    max_new = settings.max_new_tokens
    limit = _max_positions(policy)
    if limit is not None:
        longest = max(len(tokenizer(p)["input_ids"]) for p in prompts)
        if longest >= limit:
            raise ValueError(
                f"model {model!r}: a prompt has {longest} tokens but the model's context is {limit}; "
                "filter out long problems or use a shorter --template / --instruction"
            )
        max_new = min(max_new, limit - longest)  # e.g. tiny models have 256 positions
    params = SamplingParams(temperature=settings.temperature, top_p=settings.top_p, max_new_tokens=max_new, stop=settings.stop)
    # a chat template writes its own special tokens: the tokenizer must not add a second BOS
    engine = build_engine(RolloutConfig(engine=settings.engine), policy, tokenizer, add_special_tokens=not chat)
    out: dict[int, list[str]] = {}
    for seed in seeds:
        name = _sample_name(model, seed, settings.seed)
        report = (lambda done, name=name: progress(name, done, len(prompts))) if progress else None
        if report:
            report(0)
        out[seed] = generate_texts(engine, prompts, params, seed, settings.batch_size, report)
        if len(out[seed]) != len(prompts):
            raise RuntimeError(f"engine returned {len(out[seed])} completions for {len(prompts)} prompts")
    return out, getattr(policy.config, "model_type", None)


def _sample_name(model: str, seed: int, base_seed: int) -> str:
    return model if seed == base_seed else f"{model} (seed {seed})"


def _grade(texts: Sequence[str], problems: Sequence[dict]) -> tuple[list[str | None], list[bool]]:
    from corl.answers import extract_answer, grade

    answers = [extract_answer(t) for t in texts]
    correct = [bool(grade(t, p["answer"])) for t, p in zip(texts, problems)]
    return answers, correct


def collect_samples(
    models: Sequence[str],
    problems: Sequence[dict],
    settings: StudySettings,
    cache_dir: Path,
    seed_pairs: bool = False,
    refresh: bool = False,
    progress: ProgressFn | None = None,
) -> dict[str, list[Sample]]:
    """Each model's sample(s), from the cache where the key matches, else sampled and cached.

    Completions are cached, not grades: grading runs on every study, so an improved
    answer checker applies without sampling again.

    Returns:
        model -> [its sample at settings.seed] (+ [its seed twin] with seed_pairs).
    """
    out: dict[str, list[Sample]] = {}
    for model in models:
        seeds = [settings.seed] + ([settings.seed + SEED_TWIN_OFFSET] if seed_pairs else [])
        keys = {s: cache_key(model, s, problems, settings) for s in seeds}
        paths = {s: cache_path(cache_dir, model, keys[s]) for s in seeds}
        entries = {s: None if refresh else _read_cache(paths[s], keys[s]) for s in seeds}
        missing = [s for s in seeds if entries[s] is None]
        hits = {s: entries[s] is not None for s in seeds}
        for s in seeds:
            if hits[s] and progress:
                progress(f"{_sample_name(model, s, settings.seed)} (cached)", len(problems), len(problems))
        if missing:
            texts, model_type = _sample_model(model, missing, problems, settings, progress)
            for s in missing:
                entries[s] = {"key": keys[s], "model_type": model_type, "ids": [p["id"] for p in problems], "texts": texts[s],
                              "batch_size": settings.batch_size}  # fmt: skip
                _write_cache(paths[s], entries[s])
        samples = []
        for s in seeds:
            entry = entries[s]
            answers, correct = _grade(entry["texts"], problems)
            samples.append(Sample(name=_sample_name(model, s, settings.seed), model=model, seed=s, texts=entry["texts"],
                                  answers=answers, correct=correct, cache_hit=hits[s], cache_file=str(paths[s]),
                                  model_type=entry.get("model_type")))  # fmt: skip
        out[model] = samples
    return out


def compare_samples(samples: dict[str, list[Sample]], equivalent: Callable[[str, str], bool] | None = None) -> list[PairStats]:
    """Every pair of different models (first samples), plus each model against its seed
    twin when there is one; sorted by kappa (most decoupled first), then by -c."""
    models = list(samples)
    pairs = []
    for i, ma in enumerate(models):
        for mb in models[i + 1 :]:
            sa, sb = samples[ma][0], samples[mb][0]
            pairs.append(pair_stats(ma, mb, sa.correct, sb.correct, sa.answers, sb.answers, "models", equivalent))
        if len(samples[ma]) > 1:
            s0, s1 = samples[ma][0], samples[ma][1]
            pairs.append(pair_stats(ma, s1.name, s0.correct, s1.correct, s0.answers, s1.answers, "seed", equivalent))
    return sorted(pairs, key=lambda p: (p.kappa, -p.complementarity))


@dataclass
class StudyResult:
    report: dict[str, Any]
    pairs: list[PairStats]
    samples: dict[str, list[Sample]]
    json_path: Path
    heatmap_path: Path
    notes: list[str] = field(default_factory=list)


def run_study(
    models: Sequence[str],
    settings: StudySettings,
    out_dir: Path,
    cache_dir: Path | None = None,
    seed_pairs: bool = False,
    anchor: str | None = None,
    refresh: bool = False,
    progress: ProgressFn | None = None,
) -> StudyResult:
    """Measure error decoupling of every pair of `models`; write diversity.json and kappa_heatmap.png to out_dir."""
    from corl.data.rows import load_rows

    if len(set(models)) != len(models):
        raise ValueError(f"a model is listed twice in {list(models)}; use --seed-pairs for a model against itself")
    if len(models) < 2 and not seed_pairs:
        raise ValueError("give at least two models, or one model with --seed-pairs")
    if anchor is not None and anchor not in models:
        raise ValueError(f"--anchor {anchor!r} is not one of the models {list(models)}")
    rows = load_rows(settings.data, settings.split)
    problems, dropped = select_problems(rows, settings)
    notes = [f"dropped {dropped} rows with an empty answer (cannot be graded)"] if dropped else []
    if seed_pairs and settings.temperature == 0:
        notes.append("--seed-pairs with --temperature 0: greedy decoding ignores the seed, so seed pairs are identical")
    samples = collect_samples(models, problems, settings, cache_dir or out_dir / "cache", seed_pairs, refresh, progress)
    pairs = compare_samples(samples)
    report = build_report(settings, problems, dropped, samples, pairs, anchor)
    report["notes"] = notes
    out_dir.mkdir(parents=True, exist_ok=True)
    json_path = out_dir / "diversity.json"
    json_path.write_text(json.dumps(report, indent=2, ensure_ascii=False, allow_nan=False), encoding="utf-8")
    heatmap_path = plot_kappa_heatmap(pairs, list(models), out_dir / "kappa_heatmap.png")
    return StudyResult(report, pairs, samples, json_path, heatmap_path, notes)
