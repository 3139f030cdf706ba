"""The code task kind: a completion's answer is its program's behaviour on the problem's public inputs.

Pure functions over (completion texts, problem rows); programs run in corl.sandbox.

- Code of a completion (`extract_code`): the last fenced ```python block (``` py/python3 or an
  untagged block when no block is tagged python); an unclosed last fence runs to the end
  (a truncated generation); with no fence the whole completion is the code. With
  `opened_fence=True` (the prompt itself opened the fence, as instruct prompts with a
  gen_prefix do) the code is everything before the first fence line. The code must parse.
- Program (`solution_program`): code that defines the entry point, prefixed by the
  HumanEval prompt (its imports and helpers); or, for HumanEval, prompt + code when the
  completion continues the prompt's function. None when neither defines the entry point.
- Public inputs (`public_inputs`): an explicit `public_inputs` list of call expressions; else
  calls derived from the examples the prompt shows (the entry-point calls in MBPP's
  `test_list` asserts, or those written in a HumanEval docstring, `>>> f(x)` and the
  `f(x) == y` / `f(x) ➞ y` styles alike) by type-preserving mutation, whose answers the
  prompt does not show, followed by the shown calls (`corl.tasks.code.inputs`).
- Behaviour key: JSON of [["ok", canonical text of the value] | ["err", exception class]] per
  input (`corl.tasks.code.values.canonical_text`), computed by the judge (`corl.tasks.code.execute`).
"""

from __future__ import annotations

import ast
import builtins
import re
from collections.abc import Mapping

from corl.tasks.code.inputs import behaviour_inputs

_FENCE = re.compile(r"^\s*```\s*([\w+-]*)\s*$")
_PY_TAGS = {"python", "py", "python3"}
MAX_PUBLIC_INPUTS = 10


def _parses(code: str) -> bool:
    try:
        ast.parse(code)
    except (SyntaxError, ValueError):
        return False
    return True


def _blocks(lines: list[str]) -> list[tuple[str, str]]:
    """(tag, body) of each fenced block, in order; an unclosed last block runs to the end."""
    blocks, tag, body = [], None, []
    for line in lines:
        m = _FENCE.match(line)
        if tag is None and (m or line.strip().startswith("```")):
            tag, body = (m.group(1).lower() if m else line.strip()[3:].strip().lower()), []
        elif tag is not None and m and not m.group(1):
            blocks.append((tag, "\n".join(body)))
            tag = None
        elif tag is not None:
            body.append(line)
    if tag is not None:
        blocks.append((tag, "\n".join(body)))
    return blocks


def extract_code(text: str | None, opened_fence: bool = False) -> str | None:
    """The completion's code (rules in the module docstring); None when there is none that parses."""
    if not text or not text.strip():
        return None
    lines = text.splitlines()
    if opened_fence:
        end = next((i for i, line in enumerate(lines) if line.strip().startswith("```")), len(lines))
        code = "\n".join(lines[:end])
    else:
        blocks = _blocks(lines)
        tagged = [b for t, b in blocks if t in _PY_TAGS]
        untagged = [b for t, b in blocks if not t]
        code = (tagged or untagged or [None])[-1] if blocks else text
    return code if code is not None and code.strip() and _continues(code) else None


def _continues(code: str) -> bool:
    """Parses alone, or as a function body (a HumanEval continuation is indented)."""
    return _parses(code) or _parses("def _():\n" + code)


def _defines(code: str, name: str) -> bool:
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError):
        return False
    return any(isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef) and n.name == name for n in tree.body)


def _called_names(test: str) -> list[str]:
    try:
        tree = ast.parse(test)
    except (SyntaxError, ValueError):
        return []
    return [n.func.id for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)]


def entry_point(problem: Mapping) -> str | None:
    """The function the tests call: HumanEval's `entry_point`, else the first non-builtin called in MBPP's asserts."""
    if problem.get("entry_point"):
        return problem["entry_point"]
    defined = _top_level_defs(problem["code"]) if problem.get("code") else set()
    for test in problem.get("test_list") or ():
        for name in _called_names(test):
            if name in defined or (not defined and not hasattr(builtins, name)):
                return name
    return None


def _top_level_defs(code: str) -> set[str]:
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError):
        return set()
    return {n.name for n in tree.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)}


def _calls_in_assert(test: str, name: str) -> list[str]:
    """The outermost call to `name` in one assert line, as source."""
    try:
        tree = ast.parse(test)
    except (SyntaxError, ValueError):
        return []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == name:
            return [ast.get_source_segment(test, node)]
    return []


def _calls_in_docstring(prompt: str, name: str) -> list[str]:
    """Every `name(...)` written in the entry point's docstring that parses as a call."""
    doc = _docstring(prompt, name)
    found = []
    for m in re.finditer(rf"(?<![\w.]){re.escape(name)}\(", doc):
        call = _balanced_call(doc, m.start())
        if call is not None:
            found.append(call)
    return found


def _docstring(prompt: str, name: str) -> str:
    try:
        tree = ast.parse(prompt)
    except (SyntaxError, ValueError):
        return ""
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == name:
            return ast.get_docstring(node, clean=True) or ""
    return ""


def _balanced_call(text: str, start: int) -> str | None:
    """The shortest text[start:j] that parses as a call expression."""
    for j in range(text.find("(", start) + 1, min(len(text), start + 2000) + 1):
        if text[j - 1] != ")":
            continue
        candidate = " ".join(text[start:j].split())
        try:
            node = ast.parse(candidate, mode="eval").body
        except (SyntaxError, ValueError):
            continue
        if isinstance(node, ast.Call):
            return candidate
    return None


def public_inputs(problem: Mapping) -> list[str]:
    """Call expressions whose results make a completion's behaviour (sources in the module docstring)."""
    if problem.get("public_inputs") is not None:
        return list(problem["public_inputs"])[:MAX_PUBLIC_INPUTS]
    name = entry_point(problem)
    if name is None:
        return []
    return behaviour_inputs(shown_calls(problem), MAX_PUBLIC_INPUTS)


def shown_calls(problem: Mapping) -> list[str]:
    """The entry-point calls the prompt shows with their answers: MBPP's asserts, HumanEval's docstring examples."""
    name = entry_point(problem)
    calls = []
    if name is None:
        return calls
    if problem.get("test_list"):
        calls = [c for t in problem["test_list"] for c in _calls_in_assert(t, name)]
    elif problem.get("prompt"):
        calls = _calls_in_docstring(problem["prompt"], name)
    return list(dict.fromkeys(calls))


def solution_program(text: str | None, problem: Mapping, opened_fence: bool = False) -> str | None:
    """Source that defines the problem's entry point from this completion, or None (no answer)."""
    code, name = extract_code(text, opened_fence), entry_point(problem)
    if code is None or name is None:
        return None
    prompt = problem.get("prompt") or ""
    if _defines(code, name):
        # The HumanEval prompt brings the imports (typing.List ...) and helpers the function may use.
        return prompt + "\n" + code + "\n" if prompt else code + "\n"
    if prompt and _defines(prompt + code, name):
        return prompt + code + "\n"
    return None


def hidden_tests(problem: Mapping) -> tuple[str, str]:
    """(setup, tests): MBPP's setup code and asserts (then the row's `plus_tests`, corl.tasks.code.plus), or
    HumanEval's `check` applied to the entry point."""
    if problem.get("test_list"):
        return problem.get("test_setup_code") or "", "\n".join([*problem["test_list"], *problem.get("plus_tests", ())]) + "\n"
    return "", problem["test"] + f"\ncheck({problem['entry_point']})\n"


def trusted_prompt(problem: Mapping) -> str:
    """HumanEval's prompt (its helpers the tests call), run apart from the solution; empty for MBPP."""
    return "" if problem.get("test_list") else problem.get("prompt") or ""
