"""The paper's datasets, written from the Hugging Face hub into the files corl's configs read (`corl data`).

    corl data --list                       # what it knows, where each comes from, where it goes
    corl data math500 gsm8k humaneval      # -> data/math500/test.jsonl, data/gsm8k/{train,test}.jsonl, ...
    corl data --verify                     # every file against data/MANIFEST.json (sha256, rows)

Every text and code file has the same schema (one JSON object a line, UTF-8): `id` (unique,
stable), `problem` (the prompt), `answer` (the short final answer; "" for code, graded by its
tests) and `source`, plus the dataset's own extra fields (`solution`, `level`, `subject`;
HumanEval's `prompt`, `test`, `entry_point`; MBPP's `text`, `test_list`, ...). That is the
schema `data.prompt_field: problem` and `data.answer_field: answer` read, so a config names the
file and nothing else. Vision sets are written in their own fields with their images beside
them (`corl.vision.datasets.export_split`), as `vision:<name>:<file>` reads them.

A hub id can be pointed at a local copy (`--mirror DIR`: DIR/<owner>/<name>, a `git clone` or an
`hf download --local-dir` of the dataset repository), for machines without the hub; every file of
the copy is checked against the digests it recorded first (`corl.data.mirror`). Each written file's sha256 and row
count go into `MANIFEST.json`; the row counts of the published splits are checked on write,
so a truncated download is an error, not a smaller benchmark.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from corl.data.mirror import MirrorCheck, MirrorError, check_mirror

MANIFEST = "MANIFEST.json"


class CatalogError(ValueError):
    """A dataset that cannot be written or verified; the message names it and what to do."""


@dataclass(frozen=True)
class Part:
    """One file corl writes: a hub split, mapped row by row, optionally filtered."""

    split: str  # the hub split read
    file: str  # the file written, under <out>/<dataset>/
    rows: int | None = None  # the published row count (checked), None when it is not fixed
    keep: Callable[[dict], bool] | None = None


@dataclass(frozen=True)
class CatalogEntry:
    name: str
    hub: str
    config: str | None
    parts: tuple[Part, ...]
    to_row: Callable[[dict, str, int], dict] | None  # (record, split, index) -> row; None: a vision set
    what: str = ""
    vision: str | None = None  # corl.vision.datasets name
    extra: dict = field(default_factory=dict)


def _boxed(solution: str) -> str:
    from corl.answers import extract_answer

    return extract_answer(solution) or ""


def _number(value) -> str:
    """27.0 -> "27": the hubs store some integer answers as floats."""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value).strip()


def _gsm8k(r: dict, split: str, i: int) -> dict:
    solution, _, answer = r["answer"].rpartition("####")
    return {"id": f"gsm8k/{split}/{i}", "problem": r["question"], "answer": answer.strip(), "source": "gsm8k",
            "solution": solution.strip()}  # fmt: skip


def _math(r: dict, split: str, i: int) -> dict:
    level = r.get("level", "")
    number = level.rpartition(" ")[2]
    return {"id": f"math/{split}/{i}", "problem": r["problem"], "answer": _boxed(r["solution"]), "source": "math",
            "solution": r["solution"], "subject": r.get("type"), "level": int(number) if number.isdigit() else None,
            "level_raw": level}  # fmt: skip


def _math500(r: dict, split: str, i: int) -> dict:
    return {"id": r["unique_id"], "problem": r["problem"], "answer": str(r["answer"]), "source": "math500",
            "solution": r.get("solution"), "subject": r.get("subject"), "level": r.get("level")}  # fmt: skip


def _plain(source: str, problem: str = "problem") -> Callable[[dict, str, int], dict]:
    def to_row(r: dict, split: str, i: int) -> dict:
        pid = r.get("id", i)
        return {"id": f"{source}/{pid}", "problem": r[problem], "answer": _number(r["answer"]), "source": source,
                **{k: v for k, v in r.items() if k not in ("id", problem, "answer")}}  # fmt: skip

    return to_row


def _humaneval(r: dict, split: str, i: int) -> dict:
    return {"id": r["task_id"], "problem": r["prompt"], "answer": "", "source": "humaneval", **r}


def _mbpp(r: dict, split: str, i: int) -> dict:
    return {"id": f"mbpp/{r['task_id']}", "problem": r["text"], "answer": "", "source": "mbpp", **r}


def _level345(row: dict) -> bool:
    return row.get("level") in (3, 4, 5)


CATALOG: dict[str, CatalogEntry] = {
    e.name: e
    for e in (
        CatalogEntry("gsm8k", "openai/gsm8k", "main", (Part("train", "train.jsonl", 7473), Part("test", "test.jsonl", 1319)),
                     _gsm8k, "GSM8K grade-school word problems"),
        CatalogEntry("math", "DigitalLearningGmbH/MATH-lighteval", "default",
                     (Part("train", "train.jsonl", 7500), Part("test", "test.jsonl", 5000),
                      Part("train", "train_level345.jsonl", None, _level345)),
                     _math, "MATH (Hendrycks et al.); train_level345 is the paper's training set"),
        CatalogEntry("math500", "HuggingFaceH4/MATH-500", None, (Part("test", "test.jsonl", 500),), _math500,
                     "MATH-500, the paper's validation and test set"),
        CatalogEntry("aime24", "HuggingFaceH4/aime_2024", None, (Part("train", "test.jsonl", 30),), _plain("aime24"),
                     "AIME 2024"),
        CatalogEntry("amc23", "math-ai/amc23", None, (Part("test", "test.jsonl", 40),), _plain("amc23", "question"),
                     "AMC 2023"),
        CatalogEntry("humaneval", "openai/openai_humaneval", None, (Part("test", "test.jsonl", 164),), _humaneval,
                     "HumanEval (graded by its tests in corl's sandbox)"),
        CatalogEntry("mbpp", "google-research-datasets/mbpp", "full",
                     (Part("train", "train.jsonl", 374), Part("test", "test.jsonl", 500),
                      Part("validation", "validation.jsonl", 90), Part("prompt", "prompt.jsonl", 10)),
                     _mbpp, "MBPP; prompt.jsonl holds the few-shot examples code:<train>:<prompt> reads"),
        CatalogEntry("mathvista", "AI4Math/MathVista", None, (Part("testmini", "testmini.jsonl", 1000),), None,
                     "MathVista testmini, images beside it", vision="mathvista"),
        CatalogEntry("mathverse", "AI4Math/MathVerse", "testmini", (Part("testmini", "testmini.jsonl", 3940),), None,
                     "MathVerse testmini", vision="mathverse"),
        CatalogEntry("mathvision", "MathLLMs/MathVision", None, (Part("test", "test.jsonl", 3040),), None,
                     "MathVision test", vision="mathvision"),
        CatalogEntry("wemath", "We-Math/We-Math", None, (Part("testmini", "testmini.jsonl"),), None,
                     "We-Math testmini", vision="wemath"),
        CatalogEntry("mmr1", "MMR1/MMR1-Math-RL-Data-v0", None, (Part("train", "train.jsonl"),), None,
                     "MMR1 math RL data (the vision training set)", vision="mmr1"),
    )
}  # fmt: skip


HUB_PROBE_TIMEOUT_S = 10.0  # one metadata request; datasets' own download retries take 30 s and more offline


def _mirror_hint(entry: CatalogEntry) -> str:
    return (
        f"give a local copy with --mirror DIR: DIR/{entry.hub}, a `git clone https://huggingface.co/datasets/{entry.hub}` "
        f"or `hf download {entry.hub} --repo-type dataset --local-dir DIR/{entry.hub}` made where the hub is reachable"
    )


def _source(entry: CatalogEntry, mirror: str | Path | None) -> tuple[str, MirrorCheck | None]:
    """What `datasets` reads: the hub id (reachable, or its cache offline), or the checked local copy."""
    if mirror is None:
        _probe_hub(entry)
        return entry.hub, None
    local = Path(mirror) / entry.hub
    if not local.is_dir():
        raise CatalogError(f"{entry.name}: --mirror has no {local} (a copy of the hub's {entry.hub})")
    try:
        return str(local), check_mirror(local)
    except MirrorError as err:
        raise CatalogError(f"{entry.name}: {err}") from None


def _offline() -> bool:
    names = ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE")
    return any(os.environ.get(v, "").lower() in ("1", "true", "yes", "on") for v in names)


def _probe_hub(entry: CatalogEntry) -> None:
    """One metadata request before `datasets` tries (and retries) its downloads: an unreachable hub is said
    in seconds, with what to do. Offline (HF_HUB_OFFLINE, HF_DATASETS_OFFLINE) `datasets` reads its cache."""
    if _offline():
        return
    from huggingface_hub import HfApi
    from huggingface_hub.errors import HfHubHTTPError

    try:
        HfApi().dataset_info(entry.hub, timeout=HUB_PROBE_TIMEOUT_S)
    except HfHubHTTPError:
        return  # the hub answered (a gated or moved dataset): loading says what it is
    except Exception as err:  # why: no connection, DNS, timeout (the HTTP client's own error types)
        raise CatalogError(
            f"{entry.name}: the Hugging Face hub cannot be reached to read {entry.hub} ({type(err).__name__}: {err}); "
            f"{_mirror_hint(entry)} (or set HF_DATASETS_OFFLINE=1 to read it from the datasets cache)"
        ) from None


def _records(entry: CatalogEntry, split: str, source: str) -> Iterable[dict]:
    import datasets

    try:
        return datasets.load_dataset(source, entry.config, split=split)
    except Exception as err:  # datasets raises many types (network, missing config, missing split)
        hint = f"; {_mirror_hint(entry)}" if source == entry.hub else ""
        raise CatalogError(f"{entry.name}: could not load {source} (config {entry.config}, split {split}): {err}{hint}") from err


def _row(entry: CatalogEntry, record: dict, split: str, i: int) -> dict:
    try:
        return entry.to_row(record, split, i)
    except KeyError as err:  # the hub's schema changed: say where, not a traceback
        fields = ", ".join(sorted(record))
        raise CatalogError(f"{entry.name}: {entry.hub} {split} record {i + 1} has no field {err} (fields: {fields})") from None


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _write_jsonl(rows: list[dict], path: Path) -> None:
    """Write through a temporary file and rename: an interrupted download leaves no half file behind."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    with tmp.open("w", encoding="utf-8") as f:
        f.writelines(json.dumps(r, ensure_ascii=False, default=str) + "\n" for r in rows)
    tmp.replace(path)


def write_dataset(name: str, out: str | Path, mirror: str | Path | None = None, say=print) -> dict[str, dict]:
    """Write one catalog dataset under `out/name/`; returns {relative file: {"sha256", "rows"}}."""
    if name not in CATALOG:
        from difflib import get_close_matches

        near = get_close_matches(name, CATALOG, n=1)
        hint = f"; did you mean {near[0]!r}?" if near else ""
        raise CatalogError(f"unknown dataset {name!r}{hint} (known: {', '.join(CATALOG)})")
    entry, out = CATALOG[name], Path(out)
    source, check = _source(entry, mirror)  # a mirror is checked whole before anything is read from it
    origin = _origin(entry, mirror, check)
    if check is not None and not check.verified:
        say(
            f"warning: {source} is a plain folder, with no record of the hub's digests to check it against: "
            f"{name} is written and recorded as unverified in {MANIFEST} (a git clone or an `hf download` copy is checked)"
        )
    written: dict[str, dict] = {}
    for part in entry.parts:
        path = out / name / part.file
        records = _records(entry, part.split, source)
        if entry.vision is not None:
            from corl.vision.datasets import export_split

            export_split(records, path.parent, Path(part.file).stem)
            count = sum(1 for line in path.read_text(encoding="utf-8").splitlines() if line.strip())
        else:
            rows = [_row(entry, dict(r), part.split, i) for i, r in enumerate(records)]
            rows = [r for r in rows if part.keep is None or part.keep(r)]
            count = len(rows)
            if part.rows is not None and count != part.rows:
                raise CatalogError(f"{name}: {part.split} has {count} rows, the published split {part.rows}: not written")
            _write_jsonl(rows, path)
        if entry.vision is not None and part.rows is not None and count != part.rows:
            raise CatalogError(f"{name}: {part.split} has {count} rows, the published split {part.rows}")
        written[f"{name}/{part.file}"] = {"sha256": _sha256(path), "rows": count, "split": part.split, **origin}
        say(f"{path}: {count:,} rows")
    _update_manifest(out, written)
    return written


def _origin(entry: CatalogEntry, mirror, check: MirrorCheck | None) -> dict:
    """Where a file came from, for MANIFEST.json: the hub id, and for a mirror its folder, the commit its
    copy records and whether its files were checked against that commit's digests."""
    if check is None:
        return {"hub": entry.hub, "source": "hub", "verified": True}
    return {"hub": entry.hub, "source": str(Path(mirror) / entry.hub), "copy": check.how, "revision": check.revision,
            "verified": check.verified}  # fmt: skip


def _update_manifest(out: Path, written: dict[str, dict]) -> None:
    path = out / MANIFEST
    manifest = _read_manifest(path) if path.is_file() else {}
    manifest.update(written)
    tmp = path.with_name(MANIFEST + ".tmp")
    tmp.write_text(json.dumps(dict(sorted(manifest.items())), indent=1) + "\n", encoding="utf-8")
    tmp.replace(path)


def _read_manifest(path: Path) -> dict[str, dict]:
    """MANIFEST.json as written: {file: {"sha256", "rows", ...}}; a damaged one is one error saying what to do."""
    again = "write the datasets again (corl data NAME ...), or restore the file"
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError:
        raise CatalogError(f"{path} is not UTF-8 text: {again}") from None
    except json.JSONDecodeError as err:
        raise CatalogError(f"{path} is damaged (not valid JSON: {err.msg} at line {err.lineno}): {again}") from None
    if not isinstance(manifest, dict):
        raise CatalogError(f"{path} is damaged (not a JSON object of files): {again}")
    for rel, entry in manifest.items():
        if not isinstance(entry, dict) or not isinstance(entry.get("sha256"), str):
            raise CatalogError(f"{path} is damaged (its entry {rel!r} has no sha256): {again}")
    return manifest


def verify(out: str | Path) -> list[str]:
    """Problems found checking every file of `out/MANIFEST.json` ([] when all match)."""
    out = Path(out)
    path = out / MANIFEST
    if not path.is_file():
        raise CatalogError(f"{path} not found: write the datasets first (corl data NAME ...)")
    problems = []
    for rel, want in _read_manifest(path).items():
        file = out / rel
        if not file.is_file():
            problems.append(f"{file}: missing")
        elif _sha256(file) != want["sha256"]:
            problems.append(f"{file}: sha256 differs from {MANIFEST} (changed since it was written)")
    return problems


def unverified(out: str | Path) -> list[str]:
    """The files of `out/MANIFEST.json` written from a mirror that nothing could check (a plain folder)."""
    return [rel for rel, entry in _read_manifest(Path(out) / MANIFEST).items() if entry.get("verified") is False]
