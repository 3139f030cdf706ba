"""Each problem's gold answer from `--answers` (a dataset file): joined on the id, the prompt, or the order.

- **id**: the problems' ids (a sample suffix already stripped) against the answers' id field;
- **prompt**: problems grouped by their prompt (vLLM's RequestOutputs, TRL's logs) take the
  gold row whose problem text is the prompt, or, as a prompt wraps the problem in a template
  (a chat template, an instruction), the longest problem text found inside the prompt. When no
  prompt holds any problem text (the prompts were rephrased), the join falls back to the order;
  when some do and some do not, the first that does not is an error;
- **order**: the i-th problem takes the i-th gold row (the counts must match).
"""

from __future__ import annotations

import json
from collections import defaultdict

from corl.evaluation.grade import GradeError, Rows
from corl.evaluation.grade_formats import PROMPT_FIELDS, text_of

PREFIX = 24  # characters of a problem text that index it for the search inside prompts


def join_answers(
    rows: Rows, answers: Rows, answer_field: str, answer_id: str | None, key_field: str | None, prompt_field: str | None
) -> tuple[Rows, str | None]:
    """(rows with the gold of `answers` in `answer_field`, a note saying how they were joined).

    `key_field`: the rows' id field (their ids are `rows.keys`); `prompt_field`: the field they were grouped by."""
    note = None
    if rows.keys is not None and answer_id is not None:
        pairs = _on_id(rows, answers, answer_id, key_field or "id")
    else:
        text_field = next((f for f in PROMPT_FIELDS if f in answers.rows[0]), None)
        pairs = _on_prompt(rows, answers, prompt_field, text_field) if prompt_field and text_field else None
        if pairs is not None:
            note = f"gold joined on the prompt ({text_field!r} of {answers.source} inside {prompt_field!r})"
        else:
            pairs = _in_order(rows, answers)
    joined = []
    for row, (gold_row, where) in zip(rows.rows, pairs):
        if gold_row.get(answer_field) is None:
            columns = ", ".join(sorted(gold_row)) or "none"
            raise GradeError(f"{where}: field {answer_field!r} is missing (columns: {columns}); set --answer-field")
        joined.append({**row, answer_field: gold_row[answer_field]})
    return Rows(rows.source, joined, rows.where, rows.samples, rows.keys), note


def _on_id(rows: Rows, answers: Rows, answer_id: str, key_field: str) -> list[tuple[dict, str]]:
    by_id = {str(r.get(answer_id)): (r, w) for r, w in zip(answers.rows, answers.where)}
    pairs = []
    for key, where in zip(rows.keys, rows.where):
        if key not in by_id:
            raise GradeError(
                f"{where}: {key_field} {key!r} has no row in --answers {answers.source} ({answer_id!r}); set --id-field"
            )
        pairs.append(by_id[key])
    return pairs


def _in_order(rows: Rows, answers: Rows) -> list[tuple[dict, str]]:
    if len(answers.rows) != len(rows.rows):
        raise GradeError(
            f"{answers.source}: {len(answers.rows)} rows, but {rows.source} has {len(rows.rows)} problems; "
            "rows without a problem id are joined by order (give --id-field to join on an id)"
        )
    return list(zip(answers.rows, answers.where))


def _prompt_text(value) -> str:
    """A prompt's text: a chat prompt's messages, joined."""
    if isinstance(value, str):
        return value
    if isinstance(value, list) and all(isinstance(m, dict) for m in value):
        return "\n".join(text_of(m, "", "prompt") for m in value)
    return json.dumps(value, ensure_ascii=False)


def _on_prompt(rows: Rows, answers: Rows, prompt_field: str, text_field: str) -> list[tuple[dict, str]] | None:
    """Each problem's gold row by its prompt (module docstring); None when no prompt holds any problem text."""
    texts = [(str(r.get(text_field) or "").strip(), r, w) for r, w in zip(answers.rows, answers.where)]
    texts = [t for t in texts if t[0]]
    exact = {}
    for t in texts:
        exact.setdefault(t[0], t)
    width = min([PREFIX, *(len(t[0]) for t in texts)])
    index: dict[str, list] = defaultdict(list)
    for t in texts:
        index[t[0][:width]].append(t)
    found: dict[str, tuple | None] = {}
    pairs: list = []
    for row, where in zip(rows.rows, rows.where):
        prompt = _prompt_text(row.get(prompt_field)).strip()
        if prompt not in found:
            found[prompt] = exact.get(prompt) or _inside(prompt, index, width, where)
        pairs.append((found[prompt], where))
    matched = [p for p in pairs if p[0] is not None]
    if not matched:
        return None
    missing = next((where for hit, where in pairs if hit is None), None)
    if missing is not None:
        raise GradeError(
            f"{missing}: no problem of --answers {answers.source} ({text_field!r}) is in this row's {prompt_field!r}, "
            f"though {len(matched)} other rows' are; give --id-field, or answers for every prompt"
        )
    return [(hit[1], hit[2]) for hit, _ in pairs]


def _inside(prompt: str, index: dict[str, list], width: int, where: str) -> tuple | None:
    """The gold row whose problem text is the longest one inside `prompt` (two of that length: an error)."""
    hits = {}
    for start in range(len(prompt) - width + 1):
        for text, row, at in index.get(prompt[start : start + width], ()):
            if prompt.startswith(text, start):
                hits[text] = (text, row, at)
    if not hits:
        return None
    longest = max(len(t) for t in hits)
    best = [h for t, h in hits.items() if len(t) == longest]
    if len({str(h[1]) for h in best}) > 1:
        raise GradeError(f"{where}: the prompt holds two problems of --answers ({best[0][2]}, {best[1][2]}); give --id-field")
    return best[0]
