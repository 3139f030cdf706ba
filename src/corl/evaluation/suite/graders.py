"""Problems, prompts and verdicts per grader kind (math answers, boxed MCQ letters, code tests).

GPQA-style multiple choice. The data is gated and not shipped; a local JSONL/CSV in
either form is accepted:

* ``{"id"?, "question": str, "choices": [4 str], "answer": "B" | 1 | "<text of the right choice>"}``
* the GPQA release's own columns: ``Question``, ``Correct Answer``, ``Incorrect Answer 1..3``
  (``Record ID`` as id when present).

The four choices are shuffled deterministically per (evaluation seed, problem id):
``random.Random(f"gpqa/{seed}/{id}").shuffle(choices)`` (a string seed is hashed with
SHA-512 by `random`, so the order is the same on every machine and Python run). Like
lm-eval's gpqa tasks the right answer must not sit in a fixed place (the release lists
it first); unlike Co-RL's fixed per-row order each seed sees another order, so the
spread over seeds also covers position bias. The gold letter is the right choice's
position after the shuffle; the model's answer is the **last** ``\\boxed{X}`` letter
(case-insensitive, ``\\boxed{(B)}`` and ``\\boxed{\\text{B}}`` too), the CoMAS / Co-RL rule.
"""

from __future__ import annotations

import random
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from corl.data.rows import DataError, PromptTemplate, load_rows, row_ids
from corl.evaluation.suite.protocol import Benchmark

LETTERS = "ABCD"
_BOXED_LETTER = re.compile(r"\\?boxed\{\s*(?:\\(?:text|textbf|mathrm)\{\s*)?\(?\s*([A-D])\s*\)?\s*\}", re.IGNORECASE)


@dataclass(frozen=True)
class Item:
    """One problem as a seed sees it: the text to prompt with, the gold answer, the raw row."""

    id: str
    problem: str
    gold: str
    row: Mapping = field(default_factory=dict, repr=False)


@dataclass
class Verdicts:
    """One problem's k samples under one seed: what each said and whether it is right."""

    answers: list[str | None]  # extracted answer, gold letter, or the program tested
    keys: list[str | None]  # what a vote counts (None = no answer); empty for code
    correct: list[bool]
    details: list[str | None] = field(default_factory=list)  # code: sandbox status / error


def last_boxed_letter(text: str | None) -> str | None:
    found = _BOXED_LETTER.findall(text or "")
    return found[-1].upper() if found else None


def _mcq_row(row: Mapping, where: str) -> tuple[str, list[str], int]:
    """(question, choices, index of the right one) from either accepted form."""
    if "Question" in row and "Correct Answer" in row:
        wrong = [row.get(f"Incorrect Answer {i}") for i in (1, 2, 3)]
        if any(w is None for w in wrong):
            raise DataError(f"{where}: GPQA columns need 'Incorrect Answer 1', '2' and '3'")
        return str(row["Question"]).strip(), [str(row["Correct Answer"]).strip(), *(str(w).strip() for w in wrong)], 0
    missing = [k for k in ("question", "choices", "answer") if k not in row]
    if missing:
        raise DataError(f"{where}: missing {missing}; expected question, choices (4), answer (letter, index or text)")
    choices = [str(c).strip() for c in row["choices"]] if isinstance(row["choices"], list) else None
    if choices is None or len(choices) != 4:
        raise DataError(f"{where}: 'choices' must be a list of 4 strings")
    ans = row["answer"]
    if isinstance(ans, int) and not isinstance(ans, bool) and 0 <= ans < 4:
        return str(row["question"]).strip(), choices, ans
    s = str(ans).strip()
    if s.upper() in LETTERS and len(s) == 1:
        return str(row["question"]).strip(), choices, LETTERS.index(s.upper())
    if s in choices:
        return str(row["question"]).strip(), choices, choices.index(s)
    raise DataError(f"{where}: 'answer' {ans!r} is neither A-D, 0-3 nor the text of one of the choices")


def mcq_item(row: Mapping, rid: str, seed: int, where: str) -> Item:
    question, choices, right = _mcq_row(row, where)
    order = list(range(4))
    random.Random(f"gpqa/{seed}/{rid}").shuffle(order)  # order[j] = original index shown at position j
    shown = "\n".join(f"({LETTERS[j]}) {choices[i]}" for j, i in enumerate(order))
    text = f"What is the correct answer to this question: {question}\n\nChoices:\n{shown}"
    return Item(rid, text, LETTERS[order.index(right)], row)


def load_items(bench: Benchmark, seed: int) -> list[Item]:
    """The benchmark's problems under `seed` (only MCQ choices depend on it), first `limit` rows."""
    if bench.grader == "vision":
        return _vision_items(bench)
    rows = load_rows(bench.data, bench.split)
    if bench.limit is not None:
        rows = rows[: bench.limit]
    if not rows:
        raise DataError(f"{bench.name}: dataset {bench.data!r} has no rows")
    id_field = "id" if "id" in rows[0] else ("Record ID" if "Record ID" in rows[0] else "id")
    ids = row_ids(rows, bench.data, id_field)
    items = []
    for i, (rid, row) in enumerate(zip(ids, rows)):
        where = f"{bench.name}: {bench.data} row {i}"
        if bench.grader == "mcq":
            items.append(mcq_item(row, rid, seed, where))
        elif bench.grader == "code":
            from corl.tasks.code.prompts import HUMANEVAL_FIELDS, MBPP_FIELDS

            need = HUMANEVAL_FIELDS if bench.code_style == "humaneval" else MBPP_FIELDS
            missing = [k for k in need if k not in row]
            if missing:
                raise DataError(f"{where}: missing {missing} ({bench.code_style} rows need {', '.join(need)})")
            items.append(Item(rid, "", "", row))
        else:
            for key in ("problem", "answer"):
                if row.get(key) is None:
                    raise DataError(f"{where}: field {key!r} is missing (columns: {', '.join(sorted(row))})")
            items.append(Item(rid, str(row["problem"]), str(row["answer"]), row))
    return items


def _vision_items(bench: Benchmark) -> list[Item]:
    """A vision benchmark's rows in corl's row shape (images, options; the gold letter for MCQ)."""
    from corl.vision.datasets import load_hub_rows
    from corl.vision.datasets import load_rows as load_vision_rows

    if not bench.format:
        raise DataError(f"{bench.name}: a vision benchmark needs its record format (Benchmark.format)")
    try:
        if Path(bench.data).suffix in (".jsonl", ".json"):
            if not Path(bench.data).is_file():
                raise DataError(f"{bench.name}: data file {bench.data} not found")
            rows = load_vision_rows(bench.data, bench.format, bench.limit)
        else:
            rows = load_hub_rows(bench.format, None, bench.limit)
    except (KeyError, ValueError) as err:  # a record without a field its format needs
        raise DataError(f"{bench.name}: {bench.data}: {err}") from err
    if not rows:
        raise DataError(f"{bench.name}: dataset {bench.data!r} has no rows")
    return [Item(str(r["id"]), str(r["problem"]), str(r["answer"]), r) for r in rows]


def mbpp_shots(bench: Benchmark) -> list[dict]:
    """lm-eval's three MBPP shots: tasks 2, 3 and 4 of the prompt split."""
    if not bench.fewshot:
        return []
    by_id = {int(r["task_id"]): r for r in load_rows(bench.fewshot)}
    missing = [t for t in (2, 3, 4) if t not in by_id]
    if missing:
        raise DataError(f"{bench.name}: few-shot file {bench.fewshot!r} lacks MBPP task_ids {missing}")
    return [by_id[t] for t in (2, 3, 4)]


def render(bench: Benchmark, item: Item, tokenizer, shots: Sequence[Mapping] = (), processor=None):
    """The exact text the checkpoint is prompted with (vision: an ImagePrompt, its images first)."""
    from corl.tasks.code import prompts as code_prompts

    if bench.grader == "vision":
        from corl.vision.inputs import image_prompt

        if processor is None:
            raise ValueError("a text-only checkpoint cannot see the images of a vision benchmark")
        return image_prompt(
            processor, PromptTemplate(bench.template, bench.instruction).text(item.problem), item.row.get("images")
        )
    if bench.grader != "code":
        return PromptTemplate(bench.template, bench.instruction, bench.chat).render(item.problem, tokenizer)
    if bench.code_style == "humaneval":
        if bench.chat:
            return code_prompts.chat_prompt(tokenizer, *code_prompts.humaneval_instruct(item.row))
        return code_prompts.humaneval_prompt(item.row)
    if bench.chat:
        return code_prompts.chat_prompt(tokenizer, *code_prompts.mbpp_instruct(item.row, shots))
    return code_prompts.mbpp_prompt(item.row, shots)


def code_style(bench: Benchmark) -> str:
    return f"{bench.code_style}_instruct" if bench.chat else str(bench.code_style)


def grade_math(bench: Benchmark, items: Sequence[Item], texts: Sequence[Sequence[str]]) -> list[Verdicts]:
    from corl.answers import answer_key, extract_answer, is_equivalent
    from corl.answers.equivalence import answer_part

    out = []
    for item, group in zip(items, texts, strict=True):
        gold = answer_part(item.gold)
        answers = [extract_answer(t, bench.extract) for t in group]
        out.append(
            Verdicts(
                answers,
                [answer_key(a) if a is not None else None for a in answers],
                [a is not None and is_equivalent(a, gold) for a in answers],
            )
        )
    return out


def grade_vision(items: Sequence[Item], texts: Sequence[Sequence[str]]) -> list[Verdicts]:
    """The picked option (any form) against the gold letter; free-form answers by equivalence."""
    from corl.answers import is_equivalent
    from corl.tasks.math import completion_answer

    out = []
    for item, group in zip(items, texts, strict=True):
        options = item.row.get("options")
        pairs = [completion_answer(t, options) for t in group]
        answers, keys = [a for a, _ in pairs], [key for _, key in pairs]
        out.append(Verdicts(answers, keys, [_vision_correct(a, item.gold, options, is_equivalent) for a in answers]))
    return out


def _vision_correct(answer: str | None, gold: str, options, equivalent) -> bool:
    if answer is None:
        return False
    if options:
        return answer == gold  # both letters: completion_answer maps a value to its option
    return equivalent(answer, gold)


def grade_mcq(items: Sequence[Item], texts: Sequence[Sequence[str]]) -> list[Verdicts]:
    out = []
    for item, group in zip(items, texts, strict=True):
        letters = [last_boxed_letter(t) for t in group]
        out.append(Verdicts(letters, list(letters), [a is not None and a == item.gold for a in letters]))
    return out


def grade_code(bench: Benchmark, items: Sequence[Item], texts: Sequence[Sequence[str]], pool) -> list[Verdicts]:
    from corl.evaluation.code_eval import evaluate
    from corl.tasks.code.prompts import program_for

    style = code_style(bench)
    rows = [item.row for item in items]
    report = evaluate(rows, [list(g) for g in texts], style, ks=(1,), pool=pool)
    records = iter(report.records)  # in (problem, sample) order
    out = []
    for row, group in zip(rows, texts):
        recs = [next(records) for _ in group]
        out.append(
            Verdicts(
                [program_for(row, t, style) for t in group],
                [],
                [r.passed for r in recs],
                [r.status if r.error is None else f"{r.status}: {r.error}" for r in recs],
            )
        )
    return out


def grade(bench: Benchmark, items: Sequence[Item], texts: Sequence[Sequence[str]], pool=None) -> list[Verdicts]:
    """[n] problems x [k] completion texts -> [n] verdicts."""
    if bench.grader == "math":
        return grade_math(bench, items, texts)
    if bench.grader == "mcq":
        return grade_mcq(items, texts)
    if bench.grader == "code":
        return grade_code(bench, items, texts, pool)
    if bench.grader == "vision":
        return grade_vision(items, texts)
    raise ValueError(f"{bench.name}: grader {bench.grader!r} does not grade in-process completions")


def vote_correct(bench: Benchmark, answers: Sequence[str | None], keys: Sequence[str | None], gold: str) -> bool | None:
    """Whether the majority answer of these samples is right (corl's vote and tie-break); None for code."""
    from corl.labels import majority_vote

    if bench.grader not in ("math", "mcq", "vision"):
        return None  # code has no answer to vote on without running behaviour probes
    vote = majority_vote(list(keys), list(answers))
    if vote is None:
        return False
    if bench.grader == "mcq":
        return vote.answer == gold
    if bench.grader == "vision" and vote.answer == gold:  # the gold letter, or the very answer
        return True
    from corl.answers import is_equivalent
    from corl.answers.equivalence import answer_part

    return is_equivalent(vote.answer, answer_part(gold))
