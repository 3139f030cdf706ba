"""Other generators' files, read as `corl grade` reads its own: one problem a row, its samples in a list.

Generators write their samples in many shapes: one row per sample (the commonest vLLM or API
dump), the text deep inside a response object (`choices[].message.content`), a chat-message
list (TRL's conversational completions), or a per-filter copy of each document (lm-eval's
`--log_samples`). `gather` turns all of them into corl's shape before grading:

- a **path** names where the text is: dotted keys, `*` for every item of a list, a number for
  one item (`choices.*.message.content`, `outputs.*.text`, `resps.*.*`); a value found there may
  be a text, a chat-message list (the last assistant message's content), a message, or a
  content-parts list (its text parts, joined);
- rows that share a problem id (or, with no id field, a prompt) are **grouped** into one
  problem whose samples are theirs, in file order, and a warning says so;
- a **preset** (`--format`) names the path, the id field and the gold field of a known tool.

Why by hand: no library reads these formats into samples; jq-like path libraries
(jsonpath-ng, glom) would add a dependency for the twenty lines `_walk` is.
"""

from __future__ import annotations

import contextlib
import json
from dataclasses import dataclass

from corl.evaluation.grade import GradeError, Rows

PROMPT_FIELDS = ("prompt", "problem", "question")


@dataclass(frozen=True)
class Preset:
    """Where a tool writes a sample's text, the problem's id and (when it has one) the gold answer."""

    paths: tuple[str, ...]  # tried in order: the first that a row has is used
    id_field: str | None
    answer_field: str | None = None
    one_filter: bool = False  # lm-eval: one row per (document, filter); the samples are the same in each
    doc: str = ""


PRESETS: dict[str, Preset] = {
    "openai": Preset(
        ("choices.*.message.content", "choices.*.text"),
        None,  # a response's "id" (chatcmpl-...) names the response, not the problem
        doc="Chat Completions / Completions response objects, one per line; gold from --answers (by line order) "
        "or an answer field you added",
    ),
    "openai-batch": Preset(
        ("response.body.choices.*.message.content", "response.body.choices.*.text"),
        "custom_id",
        doc="Batch API output lines; the problem is custom_id, gold from --answers joined on it",
    ),
    "vllm": Preset(
        ("outputs.*.text", "choices.*.message.content", "choices.*.text"),
        "request_id",
        doc="vLLM RequestOutput dumps (outputs[].text), or its OpenAI server's responses",
    ),
    "lm-eval": Preset(
        ("resps.*.*",),
        "doc_id",
        "target",
        one_filter=True,
        doc="lm-eval --log_samples files (samples_<task>_<date>.jsonl); gold is target",
    ),
    "trl": Preset(
        ("completion", "completions"),
        None,
        doc="TRL datasets and completion logs: standard (text) or conversational (message lists) completions",
    ),
}


def _walk(value, parts: list[str], where: str, path: str) -> list:
    """Every value at `parts` below `value` (`*` fans out over a list)."""
    if not parts:
        return [value]
    head, rest = parts[0], parts[1:]
    if head == "*":
        if not isinstance(value, (list, tuple)):
            raise GradeError(f"{where}: {path!r}: '*' needs a list, found {type(value).__name__}")
        return [found for item in value for found in _walk(item, rest, where, path)]
    if isinstance(value, (list, tuple)) and head.lstrip("-").isdigit():
        index = int(head)
        if not -len(value) <= index < len(value):
            raise GradeError(f"{where}: {path!r}: index {index} of a list of {len(value)}")
        return _walk(value[index], rest, where, path)
    if isinstance(value, dict):
        if head not in value:
            keys = ", ".join(sorted(map(str, value))) or "none"
            raise GradeError(f"{where}: {path!r}: no key {head!r} (keys there: {keys}); give the path with --completion-field")
        return _walk(value[head], rest, where, path)
    raise GradeError(f"{where}: {path!r}: cannot take {head!r} of a {type(value).__name__}")


def text_of(value, where: str, path: str) -> str:
    """A sample's text: a string, a message, a chat-message list (its last assistant turn) or content parts."""
    if value is None:  # e.g. a refused or failed request: no answer, graded wrong
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, dict):
        for key in ("content", "text", "completion"):
            if key in value:
                return text_of(value[key], where, path)
    if isinstance(value, (list, tuple)) and value and all(isinstance(m, dict) for m in value):
        if all("role" in m for m in value):
            replies = [m for m in value if m.get("role") == "assistant"] or list(value)
            return text_of(replies[-1], where, path)
        return "".join(text_of(part, where, path) for part in value if part.get("type", "text") == "text")
    raise GradeError(
        f"{where}: {path!r} holds a value of type {type(value).__name__}, not a completion (a text, a chat message or a list of them); "
        "point --completion-field at the text, e.g. choices.*.message.content, or give --format"
    )


def samples_at(row: dict, path: str, where: str, csv: bool = False) -> list[str]:
    """The samples a row holds at `path` (a plain field name is a path of one key; a CSV cell may hold a JSON list)."""
    found = _walk(row, path.split("."), where, path)
    if csv and len(found) == 1 and isinstance(found[0], str) and found[0].lstrip().startswith("["):
        with contextlib.suppress(ValueError):
            found = [json.loads(found[0])]
    if len(found) == 1 and isinstance(found[0], (list, tuple)) and not _is_messages(found[0]):
        found = list(found[0])  # a field holding the list of samples
    return [text_of(v, where, path) for v in found]


def _is_messages(value) -> bool:
    return bool(value) and all(isinstance(m, dict) and ("role" in m or "type" in m) for m in value)


def pick_path(rows: Rows, preset: Preset) -> str:
    """The first of the preset's paths that the first row has."""
    for path in preset.paths:
        try:
            _walk(rows.rows[0], path.split("."), rows.where[0], path)
            return path
        except GradeError:
            continue
    keys = ", ".join(sorted(rows.rows[0])) or "none"
    raise GradeError(f"{rows.where[0]}: none of {', '.join(preset.paths)} is in the row (keys: {keys}); is --format right?")


def gather(
    rows: Rows, path: str, key_field: str | None, model_field: str | None = None, one_filter: bool = False
) -> tuple[Rows, str | None]:
    """(a row per problem, its samples in `Rows.samples`; a warning or None): rows sharing `key_field` become one problem.

    `key_field` is the problem id, or a prompt field; None keeps one problem a row. Rows of different
    generators (`model_field`) are never merged. The other fields are the first row's."""
    keep = list(range(len(rows.rows)))
    note = None
    if one_filter and any("filter" in r for r in rows.rows):  # lm-eval repeats each document once per filter
        filters = list(dict.fromkeys(str(r.get("filter")) for r in rows.rows))
        keep = [i for i in keep if str(rows.rows[i].get("filter")) == filters[0]]
        if len(filters) > 1:
            note = f"rows of filter {filters[0]!r} read ({len(filters) - 1} other filter(s) repeat the same samples)"
    groups: dict[str, list[int]] = {}
    for i in keep:
        row = rows.rows[i]
        key = str(row.get(key_field)) if key_field and row.get(key_field) is not None else f"#{i}"
        groups.setdefault(f"{row.get(model_field)!s}\x00{key}" if model_field else key, []).append(i)
    merged, where, texts = [], [], []
    csv = rows.source.lower().endswith(".csv")
    for members in groups.values():
        first = rows.rows[members[0]]
        samples = [s for i in members for s in samples_at(rows.rows[i], path, rows.where[i], csv)]
        if not samples:
            raise GradeError(f"{rows.where[members[0]]}: no samples at {path!r} (an empty list)")
        merged.append(first)
        texts.append(samples)
        where.append(rows.where[members[0]])
    if len(merged) < len(keep):
        sizes = sorted({len(m) for m in groups.values()})
        each = f"{sizes[0]}" if len(sizes) == 1 else f"{sizes[0]} to {sizes[-1]}"
        grouped = f"{len(keep)} rows share {key_field!r}: graded as {len(merged)} problems of {each} samples each"
        note = f"{note}; {grouped}" if note else grouped
    return Rows(rows.source, merged, where, texts), note


def check_same_gold(rows: Rows, key_field: str | None, answer_field: str) -> None:
    """Rows of one problem must carry one gold answer (a mismatch is a wrong join, not a hedge to average)."""
    seen: dict[str, tuple[str, str]] = {}
    for row, where in zip(rows.rows, rows.where):
        if not key_field or row.get(key_field) is None or row.get(answer_field) is None:
            continue
        key, gold = str(row[key_field]), str(row[answer_field])
        if key in seen and seen[key][0] != gold:
            raise GradeError(f"{where}: {key_field} {key!r} has gold {gold!r} here and {seen[key][0]!r} at {seen[key][1]}")
        seen.setdefault(key, (gold, where))


def gsm8k_target(gold: str) -> str:
    """lm-eval's gsm8k target is the whole worked solution; its answer follows the last '####'."""
    return gold.rsplit("####", 1)[1].strip() if "####" in gold else gold


def join_answers(rows: Rows, answers: Rows, key_field: str | None, answer_field: str, answer_id: str | None) -> Rows:
    """Rows with the gold of `answers` (a dataset file) in `answer_field`: joined on the id, else by line order."""
    if key_field is None or answer_id is None:
        if len(answers.rows) != len(rows.rows):
            raise GradeError(
                f"{answers.source}: {len(answers.rows)} rows, but {rows.source} has {len(rows.rows)} problems; "
                "rows without a problem id are joined by line order (give --id-field to join on an id)"
            )
        pairs = list(zip(rows.rows, answers.rows))
    else:
        by_id = {str(r.get(answer_id)): r for r in answers.rows}
        pairs = []
        for row, where in zip(rows.rows, rows.where):
            key = str(row.get(key_field))
            if key not in by_id:
                raise GradeError(f"{where}: {key_field} {key!r} has no row in --answers {answers.source}; set --id-field")
            pairs.append((row, by_id[key]))
    joined = []
    for (row, gold_row), where in zip(pairs, answers.where):
        if gold_row.get(answer_field) is None:
            columns = ", ".join(sorted(gold_row)) or "none"
            raise GradeError(f"{where}: field {answer_field!r} is missing (columns: {columns}); set --answer-field")
        joined.append({**row, answer_field: gold_row[answer_field]})
    return Rows(rows.source, joined, rows.where, rows.samples)
