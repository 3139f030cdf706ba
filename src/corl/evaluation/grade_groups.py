"""Which rows are one problem's samples.

A generator writes K samples of a problem as K items of one row, or as K rows. Rows are one
problem's samples when they share (in this order of preference):

- a **problem id** (`--id-field`, the format's id, or `id` / `task_id` / `problem_id`);
- a problem id with a **sample suffix** (`v12-s0`, `v12-s1`: a Batch API custom_id must be
  unique, so K requests of one problem carry a sample number). The suffix is stripped only on
  evidence: the ids without it are the ids of `--answers` / `--tests` (and the whole ids are
  not), or, with the gold in the rows, the suffix is tagged as a sample's (`-s0`, `_sample_2`,
  `.rep4`) and every stripped id holds the same sample numbers and one gold answer;
- a **prompt** (no id: vLLM's RequestOutputs, TRL's logs);
- **K consecutive rows** (no id, no prompt: K calls of an API per problem), with
  `--samples-per-problem K`, or K = rows / problems of `--answers`, said in a note.

Rows of different generators (a model field; TRL's steps) are never merged.
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from dataclasses import dataclass

from corl.evaluation.grade import GradeError, Rows, is_csv
from corl.evaluation.grade_formats import PROMPT_FIELDS, samples_at

# a sample number after a separator, optionally tagged: v12-s0, p3_sample_2, q9.rep4, a/b/7-3
SAMPLE_SUFFIX = re.compile(r"(?P<base>.+?)[-_.:#/@](?:(?P<tag>samples?|seed|rep|try|gen|run|s|r|k|n|g)[-_]?)?(?P<n>\d+)", re.I)


@dataclass(frozen=True)
class Grouping:
    """Each row's problem key (None: a problem of its own), and how the keys were found."""

    keys: list[str | None]
    by: str  # id, prompt, rows, none
    field: str | None = None
    note: str | None = None


def problem_keys(
    rows: Rows,
    id_field: str | None,
    explicit: bool,
    known_ids: set[str] | None,
    gold_field: str | None,
    samples_per_problem: int | None,
    problems_in_answers: int | None,
    model_field: str | None = None,
) -> Grouping:
    """How rows group into problems (the module's docstring); `explicit`: the id field was given, use it as it is."""
    if samples_per_problem:
        return _consecutive(rows, samples_per_problem, model_field, f"--samples-per-problem {samples_per_problem}")
    if id_field:
        ids = [None if r.get(id_field) is None else str(r[id_field]) for r in rows.rows]
        if not explicit and None not in ids and len(set(ids)) == len(ids):
            stripped = _without_sample_suffix(ids, known_ids, [r.get(gold_field) for r in rows.rows] if gold_field else None)
            if stripped is not None:
                n, k = len(set(stripped)), len(ids) // len(set(stripped))
                note = (
                    f"ids end in a sample number ({ids[0]!r} is a sample of {stripped[0]!r}): {len(ids)} rows graded as "
                    f"{n} problems of {k} samples; give --id-field to take the ids as they are"
                )
                return Grouping(stripped, "id", id_field, note)
        return Grouping(ids, "id", id_field)
    prompt = next((f for f in PROMPT_FIELDS if f in rows.rows[0]), None)
    if prompt is not None:
        return Grouping([_text_key(r.get(prompt)) for r in rows.rows], "prompt", prompt)
    k = _rows_per_problem(rows, model_field, problems_in_answers)
    if k is not None:
        why = f"{len(rows.rows)} rows for the {problems_in_answers} problems of --answers"
        grouping = _consecutive(rows, k, model_field, why)
        return Grouping(grouping.keys, "rows", None, f"{grouping.note}; give --samples-per-problem K to say so")
    return Grouping([None] * len(rows.rows), "none")


def _text_key(value) -> str | None:
    """A prompt as a grouping key (a chat prompt is a message list)."""
    if value is None:
        return None
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True, ensure_ascii=False)


def _generator_rows(rows: Rows, model_field: str | None) -> dict[str, list[int]]:
    out: dict[str, list[int]] = defaultdict(list)
    for i, row in enumerate(rows.rows):
        out[str(row.get(model_field)) if model_field else ""].append(i)
    return out


def _rows_per_problem(rows: Rows, model_field: str | None, problems: int | None) -> int | None:
    """K when every generator wrote K > 1 rows for each problem of --answers (K = its rows / problems); else None."""
    counts = {len(v) for v in _generator_rows(rows, model_field).values()}
    if not problems or len(counts) != 1:
        return None
    count = counts.pop()
    return count // problems if count > problems and count % problems == 0 else None


def _consecutive(rows: Rows, k: int, model_field: str | None, why: str) -> Grouping:
    """Each k consecutive rows of a generator are one problem's samples."""
    keys: list[str | None] = [None] * len(rows.rows)
    for indices in _generator_rows(rows, model_field).values():
        if len(indices) % k:
            raise GradeError(f"{rows.source}: {len(indices)} rows are not a whole number of problems of {k} samples ({why})")
        for j, i in enumerate(indices):
            keys[i] = str(j // k)
    note = f"rows without an id or a prompt: each {k} consecutive rows are one problem's samples ({why})"
    return Grouping(keys, "rows", None, note)


def _without_sample_suffix(ids: list[str], known: set[str] | None, gold: list | None) -> list[str] | None:
    """The ids without their sample suffix, where the evidence says they are one problem's samples; else None."""
    matches = [SAMPLE_SUFFIX.fullmatch(i) for i in ids]
    if not all(matches):
        return None
    bases = [m["base"] for m in matches]
    if known is not None:  # the answers (or tests) name the problems: the bases must be theirs, the whole ids not
        return bases if not all(i in known for i in ids) and all(b in known for b in bases) else None
    if gold is None or not all(m["tag"] for m in matches):  # a bare number (q-17) is as likely a problem's own
        return None
    numbers: dict[str, set[str]] = defaultdict(set)
    golds: dict[str, set[str]] = defaultdict(set)
    for m, g in zip(matches, gold):
        numbers[m["base"]].add(str(int(m["n"])))
        golds[m["base"]].add(str(g))
    same_numbers = len({frozenset(v) for v in numbers.values()}) == 1
    one_gold = all(len(v) == 1 for v in golds.values())
    return bases if same_numbers and one_gold and len(next(iter(numbers.values()))) >= 2 else None


def first_filter(rows: Rows) -> tuple[Rows, str | None]:
    """lm-eval repeats each document once per filter, with the same samples: the first filter's rows."""
    if not any("filter" in r for r in rows.rows):
        return rows, None
    filters = list(dict.fromkeys(str(r.get("filter")) for r in rows.rows))
    keep = [i for i, r in enumerate(rows.rows) if str(r.get("filter")) == filters[0]]
    note = (
        f"rows of filter {filters[0]!r} read ({len(filters) - 1} other filter(s) repeat the same samples)"
        if len(filters) > 1
        else None
    )
    return Rows(rows.source, [rows.rows[i] for i in keep], [rows.where[i] for i in keep]), note


def gather(rows: Rows, path: str, grouping: Grouping, model_field: str | None = None) -> tuple[Rows, list[str]]:
    """(a row per problem, its samples in `Rows.samples`; notes): rows of one key become one problem.

    Rows of different generators (`model_field`) are never merged. The other fields are the first row's."""
    groups: dict[str, list[int]] = {}
    for i, (row, key) in enumerate(zip(rows.rows, grouping.keys)):
        key = f"#{i}" if key is None else key
        groups.setdefault(f"{row.get(model_field)!s}\x00{key}" if model_field else key, []).append(i)
    merged, where, texts, keys, empty = [], [], [], [], 0
    for members in groups.values():
        samples = []
        for i in members:
            found, missing = samples_at(rows.rows[i], path, rows.where[i], is_csv(rows.where[i]))
            samples += found
            empty += missing
        if not samples:
            raise GradeError(f"{rows.where[members[0]]}: no samples at {path!r} (an empty list)")
        merged.append(rows.rows[members[0]])
        texts.append(samples)
        where.append(rows.where[members[0]])
        keys.append(grouping.keys[members[0]])
    notes = [grouping.note] if grouping.note else []
    if len(merged) < len(rows.rows) and grouping.by in ("id", "prompt") and grouping.note is None:
        sizes = sorted({len(m) for m in groups.values()})
        each = f"{sizes[0]}" if len(sizes) == 1 else f"{sizes[0]} to {sizes[-1]}"
        notes.append(f"{len(rows.rows)} rows share {grouping.field!r}: graded as {len(merged)} problems of {each} samples each")
    if empty:
        notes.append(f"{empty} sample(s) hold no text (a failed request, a refusal or a tool call): graded wrong")
    ids = keys if grouping.by == "id" and None not in keys else None
    return Rows(rows.source, merged, where, texts, ids), notes


def check_same_gold(rows: Rows, grouping: Grouping, answer_field: str) -> None:
    """Rows of one problem must carry one gold answer (a mismatch is a wrong join, not a hedge to average)."""
    seen: dict[str, tuple[str, str]] = {}
    for row, where, key in zip(rows.rows, rows.where, grouping.keys):
        if key is None or row.get(answer_field) is None:
            continue
        gold = str(row[answer_field])
        if key in seen and seen[key][0] != gold:
            raise GradeError(
                f"{where}: {grouping.field or 'problem'} {key[:80]!r} has gold {gold!r} here and {seen[key][0]!r} at {seen[key][1]}"
            )
        seen.setdefault(key, (gold, where))


def gsm8k_target(gold: str) -> str:
    """lm-eval's gsm8k target is the whole worked solution; its answer follows the last '####'."""
    return gold.rsplit("####", 1)[1].strip() if "####" in gold else gold
