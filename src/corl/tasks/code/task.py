"""The code task kind (`data.task: code`) and its data source (`data.train: code:<file>[:<shots file>]`).

A completion's answer is its program's behaviour on the problem's public inputs (the
behaviour key of `corl.tasks.code.execute`); two answers agree when the keys are equal. A
completion without code, or without the entry point, or whose every input errors, has
no answer (it never votes and never earns an agreement reward).

What the vote may see is computed once, when the rows are loaded through the `code:`
source, from MBPP rows (`text`/`prompt`, `code`, `test_list`[, `test_setup_code` |
`test_imports`]) or HumanEval rows (`prompt`, `test`, `entry_point`), and only these
computed fields reach `Problem.inputs`:

- `code_entry_point`: the function the tests call (for MBPP found through the reference
  solution, of which only the name is kept);
- `code_public_inputs`: calls derived from the *calls* of MBPP's asserts or of HumanEval's
  docstring examples by type-preserving mutation (answers the prompt does not show, so a
  program parroting the shown answers does not share the solution's key), followed by
  those calls; never the expected values of the asserts (corl.tasks.code.inputs);
- `code_prefix`: HumanEval's prompt (signature, imports, helpers a completion relies on);
  empty for MBPP;
- `code_setup`: MBPP's test setup code (imports the calls need).

The same source renders the prompts of lm-evaluation-harness into fields a config names
as `data.prompt_field` (with `data.template: "{problem}"`): `prompt_mbpp` (3-shot when a
shots file is given: its rows with task_id 2, 3, 4 as lm-eval, else its first three) and
`prompt_mbpp_instruct` (the user turn, zero-shot) for MBPP rows; `prompt_humaneval` and
`prompt_humaneval_instruct` for HumanEval rows. The instruct fields are the user turn
for `chat_template: true`; lm-eval's gen_prefix (an opened fence after the assistant
header) cannot follow a chat template in a training prompt, so the model opens its own
fence, which `extract_code` reads. (lm-eval's mbpp prompt shows three asserts to the
model, as the benchmark does; the vote still runs calls only.)

Completions are cut before extraction as lm-eval cuts them: at "[DONE]" (mbpp), and,
when the completion does not make a program as it is, at HumanEval's stop sequences.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence

from corl.data.rows import DataError, load_rows, register_data_source
from corl.tasks.code import prompts as code_prompts
from corl.tasks.code.execute import behaviours_equal, code_answers_grouped, passes_tests_batch
from corl.tasks.code.plus import plus_tests
from corl.tasks.code.programs import entry_point, public_inputs, solution_program
from corl.tasks.registry import TaskSpec, register_task

INPUT_FIELDS = ("code_entry_point", "code_public_inputs", "code_prefix", "code_setup")
LM_EVAL_SHOT_IDS = (2, 3, 4)  # lm-eval's mbpp few-shot samples (MBPP's prompt split)


def is_humaneval(row: Mapping) -> bool:
    return bool(row.get("entry_point")) and "prompt" in row and "test" in row


def is_mbpp(row: Mapping) -> bool:
    return bool(row.get("test_list")) and ("text" in row or "prompt" in row)


def mbpp_view(row: Mapping) -> dict:
    """Sanitized MBPP names the task text `prompt` and its imports `test_imports`: read both as full MBPP."""
    setup = row.get("test_setup_code") or "\n".join(row.get("test_imports") or ())
    return {**{k: v for k, v in row.items() if k != "prompt"}, "text": row.get("text") or row["prompt"], "test_setup_code": setup}


def prepare_row(row: Mapping, shots: Sequence[Mapping] = (), where: str = "row") -> dict:
    """The row with the vote's public fields and the prompt fields added (see the module docstring)."""
    with warnings.catch_warnings():  # MBPP solutions hold "\d" in plain strings: parsing them warns, once per row
        warnings.simplefilter("ignore", (SyntaxWarning, DeprecationWarning))
        return _prepare_row(row, shots, where)


def _prepare_row(row: Mapping, shots: Sequence[Mapping], where: str) -> dict:
    if is_humaneval(row):
        messages, _ = code_prompts.humaneval_instruct(row)
        return {
            **row,
            "code_entry_point": row["entry_point"],
            "code_public_inputs": public_inputs({"entry_point": row["entry_point"], "prompt": row["prompt"]}),
            "code_prefix": row["prompt"],
            "code_setup": "",
            "prompt_humaneval": row["prompt"],
            "prompt_humaneval_instruct": messages[0]["content"],
        }
    if is_mbpp(row):
        view = mbpp_view(row)
        name = entry_point(view)
        if name is None:
            raise DataError(f"{where}: no entry point: no function of `code` is called in `test_list`")
        return {
            **row,
            "test_setup_code": view["test_setup_code"],  # the hidden tests need sanitized MBPP's imports too
            "code_entry_point": name,
            "code_public_inputs": public_inputs({"entry_point": name, "test_list": view["test_list"]}),
            "code_prefix": "",
            "code_setup": view["test_setup_code"],
            "prompt_mbpp": code_prompts.mbpp_prompt(view, [mbpp_view(s) for s in shots]),
            "prompt_mbpp_instruct": _mbpp_instruct_user(view),
        }
    columns = ", ".join(sorted(row)) or "none"
    raise DataError(
        f"{where}: not a code problem: needs MBPP fields (text or prompt, code, test_list) or "
        f"HumanEval fields (prompt, test, entry_point); columns: {columns}"
    )


def _mbpp_instruct_user(view: Mapping) -> str:
    return code_prompts.mbpp_instruct(view)[0][-1]["content"]


def shot_rows(path: str, source: str) -> list[dict]:
    rows = _read_rows(path, source)
    chosen = [r for i in LM_EVAL_SHOT_IDS for r in rows if r.get("task_id") == i] or rows[:3]
    for i, shot in enumerate(chosen):
        if not is_mbpp(shot) or not shot.get("code"):
            raise DataError(f"dataset {source!r}: shots file {path!r} row {i} is not an MBPP row with `code`")
    return chosen


def _read_rows(path: str, source: str) -> list[dict]:
    try:
        return load_rows(path)
    except DataError as err:
        raise DataError(f"dataset {source!r} (code:<file>[:<shots file>]): {err}") from None


def code_rows(spec: str, source: str) -> list[dict]:
    """`code:<file>[:<shots file>]` -> the file's rows, each through `prepare_row`."""
    path, _, shots_path = spec.partition(":")
    if not path:
        raise DataError(f"dataset {source!r}: write code:<file>[:<shots file>]")
    shots = shot_rows(shots_path, source) if shots_path else []
    return [prepare_row(r, shots, f"dataset {source!r} row {i}") for i, r in enumerate(_read_rows(path, source))]


register_data_source("code", code_rows)


# -- completions ----------------------------------------------------------------------------------


def public_view(inputs: Mapping) -> dict:
    """Problem.inputs (or a prepared row) as the row `corl.tasks.code.execute` reads: public fields only."""
    return {
        "entry_point": inputs["code_entry_point"],
        "public_inputs": list(inputs["code_public_inputs"] or ()),
        "prompt": inputs["code_prefix"] or "",
        "test_setup_code": inputs["code_setup"] or "",
    }


def completion_code(text: str | None, row: Mapping) -> str | None:
    """The completion as lm-eval would cut it: before "[DONE]"; before HumanEval's stops
    when that is what makes it a program (a base model continuing past the function)."""
    if text is None:
        return None
    text = code_prompts.cut_at_stop(text, code_prompts.MBPP_STOP)
    if row.get("prompt") and solution_program(text, row) is None:
        cut = code_prompts.cut_at_stop(text, code_prompts.HUMANEVAL_STOP)
        if solution_program(cut, row) is not None:
            return cut
    return text


def _views(problems: Sequence, where: str = "problem") -> list[dict]:
    views = []
    for p in problems:
        inputs = p.inputs if hasattr(p, "inputs") else p
        missing = [f for f in INPUT_FIELDS if f not in inputs]
        if missing:
            pid = getattr(p, "id", "?")
            raise DataError(
                f"{where} {pid!r}: the code task needs {', '.join(missing)} in its inputs; "
                "load the rows through the code source (data.train: code:<file>)"
            )
        views.append(public_view(inputs))
    return views


def code_task_answers(texts: Sequence[str], problems: Sequence, k: int) -> tuple[list[tuple], list[tuple]]:
    """[B*K] completions, B problems -> ([B][K] answers, [B][K] vote keys); an answer is its behaviour key."""
    views = _views(problems)
    cut = [completion_code(t, views[i // k]) for i, t in enumerate(texts)]
    _, keys = code_answers_grouped(cut, views, k)
    # The answer *is* the behaviour: agreement with a label is key equality, and a label's
    # answer (the teacher majority's) reads the same as its key in logs and diagnostics.
    return keys, keys


def behaviour_key_of(answer: str) -> str:
    """A written code answer is already its behaviour key."""
    return answer


def code_grade(texts: Sequence[str], problems: Sequence, rows: Sequence[Mapping], gold: Sequence) -> list[bool]:
    """[B] completions, their B dataset rows -> [B] whether each passes its row's own hidden tests (sandboxed; the
    dataset's tests only, comparable with published pass@1; the `tests` reward adds corl.tasks.code.plus's)."""
    return [passed[0] for passed in passes_hidden_tests(texts, rows, 1, plus=False)]


def check_code_config(cfg) -> None:
    """A program has no final answer to compare with a gold one: its ground truth is its tests."""
    from corl.labels import label_source_spec

    spec = label_source_spec(cfg.cohort.label_source)
    if spec.reads_gold:
        raise ValueError(
            f"cohort.label_source {spec.name!r} compares answers with a gold answer, which a code task does not have; "
            "GT-Reward for code is cohort.reward: tests (with a label-free label_source such as 'self')"
        )


register_task(
    TaskSpec(
        "code",
        code_task_answers,
        behaviours_equal,
        behaviour_key_of,
        "behaviour of the program on the problem's public inputs (code: data source), key equality",
        input_fields=INPUT_FIELDS,
        grade=code_grade,
        grades_answers=False,
        check_config=check_code_config,
        evaluate_as="code",
    )
)


# -- the gold reward's side: hidden tests -----------------------------------------------------------


def hidden_test_view(row: Mapping) -> dict:
    """A dataset row as the hidden-test runner reads it (prepared on the fly if it did not come through code:)."""
    if not all(f in row for f in INPUT_FIELDS):
        row = prepare_row(row)
    return {**public_view(row), "test": row.get("test"), "test_list": row.get("test_list")}


def passes_hidden_tests(texts: Sequence[str], rows: Sequence[Mapping], k: int, plus: bool = True) -> list[list[bool]]:
    """[B*K] completions, B gold rows -> [B][K] whether each passes its row's hidden tests.

    plus (the `tests` reward's default): MBPP rows' tests extended with calls the prompt does
    not show, answered by the row's reference code (corl.tasks.code.plus): the prompt shows the
    asserts of `test_list`, so without them a lookup table of the shown answers passes.
    """
    views = [hidden_test_view(r) for r in rows]
    if plus:
        extra = plus_tests([mbpp_view(r) if is_mbpp(r) else {} for r in rows])
        views = [{**v, "plus_tests": e} if e else v for v, e in zip(views, extra, strict=True)]
    flat_rows = [views[i // k] for i in range(len(texts))]
    passed = passes_tests_batch([completion_code(t, r) for t, r in zip(texts, flat_rows, strict=True)], flat_rows)
    return [passed[b * k : (b + 1) * k] for b in range(len(rows))]
