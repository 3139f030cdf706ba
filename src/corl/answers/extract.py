"""Final answers of completions: what did the completion commit to?

Candidates, the last one in the text counts: a box (several boxes that only a separator
parts, ``\\boxed{-2} \\quad \\text{and} \\quad \\boxed{1}``, are one list of solutions), a
``#### x`` line, a statement "the (final) answer is x" / "Answer: x" / "Answer $x$". A
statement after the last box replaces it only when it is explicit (a math span, a number,
or "final answer"): "the answer is correct" after a box is prose. A completion that is one
formula and nothing else is that answer.

Strict mode (the reward policy) stops there: None when nothing is stated, when the last
box is unclosed or the statement is cut inside its formula, and when the answer is blank
(``\\boxed{\\text{}}``, ``\\boxed{\\quad}``, ``\\boxed{-}``, ``\\boxed{{}}``: `normalize.blank`): a
reward must never come from a guess.
Flexible mode then falls back to the last number of the text, for benchmark parity with
lm-eval's GSM8K "flexible-extract".
"""

from __future__ import annotations

import re

from corl.answers.normalize import BOX, balanced, blank, closing_brace, strip_tex

EXTRACTION_MODES = ("strict", "flexible")

_ANSWER_IS = re.compile(r"(?i)\b(final\s+)?answer\b(?:\s*(?:is\b|:)|\s*(?=\$|\\\(|\\\[))[\s:]*")
_SENTENCE_END = re.compile(r"\.(?=\s|$)|\n")
_FILLER = re.compile(r"^(?:therefore|thus|then|hence|so|simply|clearly|just|indeed|exactly|equal to|given by)\b[\s,:]*", re.I)
_BOX_GAP = re.compile(r"^(?:\s|\$|\\[()\[\]]|[,;&]|\\q?quad\b|\\[,;:! ]|~|\\text\{\s*(?:and|or|,)?\s*\}|\b(?:and|or)\b)*$")
_SPANS = (("$$", "$$"), ("$", "$"), ("\\(", "\\)"), ("\\[", "\\]"))
_LAST_NUMBER = re.compile(r"-?\d(?:[\d,]*\d)?(?:\.\d+)?|-?\.\d+")
_FORMULA = re.compile(r"^[^A-Za-z]*(?:(?:\\[A-Za-z]+|(?<![A-Za-z])[A-Za-z](?![A-Za-z])|pct|percent|sqrt|pi)[^A-Za-z]*)*$")


def _inline(rest: str) -> tuple[str | None, bool]:
    """(the answer that opens `rest`, whether it was a math span): a whole span, else the sentence."""
    rest = _FILLER.sub("", rest.lstrip(" *\t"), count=1).lstrip(" *\t")
    for open_, close in _SPANS:
        if rest.startswith(open_):
            end = rest.find(close, len(open_))
            while end > 0 and rest[end - 1] == "\\" and close == "$":  # "\$" is a dollar sign
                end = rest.find(close, end + 1)
            if end < 0:  # why: an unclosed span means the completion was cut inside the answer
                return None, True
            body = rest[len(open_) : end]
            if close in ("$", "\\)") and "\n" in body.strip(" \t"):
                return None, True  # an inline formula does not cross lines
            return body.strip() or None, True
    end = _SENTENCE_END.search(rest)
    text = (rest[: end.start()] if end else rest).strip().rstrip(" .,;:!*").strip()
    if not text or text.startswith(("not ", "that ", "to ")) or len(text.split()) > 8:
        return None, False  # "the answer is not obvious", a sentence rather than an answer
    m = re.search(r"\s(?:is|are)\s+(\S.*)$", text)  # "Final Answer: the largest $n$ is 34"
    return (m.group(1) if m else text), False


def _boxes(text: str) -> list[tuple[int, int, int]]:
    """(start of the box, start of its content, end of its content) of each box.

    The end is -1 for an unclosed box (the last one read) and -2 for a box without braces.
    """
    out = []
    for m in BOX.finditer(text):
        j = m.end()
        while j < len(text) and text[j].isspace():
            j += 1
        end = closing_brace(text, j) if j < len(text) and text[j] == "{" else -2
        out.append((m.start(), j + 1 if end != -2 else m.end(), end))
        if end == -1:
            break
    return out


def _last_box(text: str) -> tuple[int, str | None] | None:
    """(position, answer) of the last box or group of boxes, or None without a box."""
    boxes = _boxes(text)
    if not boxes:
        return None
    at, start, end = boxes[-1]
    if end == -1:
        return at, None
    if end == -2:  # "\boxed 5", or "\boxed" at the very end
        rest = text[start:]
        if not rest.strip() or not rest[0].isspace():
            return at, None
        answer, _ = _inline(rest.lstrip().split("$")[0])
        return at, answer if answer and balanced(answer) else None
    group = [strip_tex(text[start:end])]
    for (_, s0, e0), (b1, _, _) in zip(reversed(boxes[:-1]), reversed(boxes[1:])):
        if e0 < 0 or not _BOX_GAP.match(text[e0 + 1 : b1]):
            break
        group.insert(0, strip_tex(text[s0:e0]))
    return at, ", ".join(x for x in group if not blank(x)) or None


def _last_statement(text: str) -> tuple[int, str | None, bool] | None:
    """(position, answer, explicit) of the last "answer is x", or None without one."""
    said = None
    for said in _ANSWER_IS.finditer(text):  # noqa: B007 -- the last statement counts
        pass
    if said is None:
        return None
    answer, span = _inline(text[said.end() :])
    if not answer or not balanced(answer):
        return said.start(), None, False
    explicit = span or bool(said.group(1)) or bool(re.match(r"[-+]?\.?\d", answer))
    return said.start(), answer, explicit


def _hashes(text: str) -> tuple[int, str | None] | None:
    at = text.rfind("####")
    if at < 0:
        return None
    line = text[at + 4 :].split("\n")[0].strip()
    line = line[1:-1].strip() if len(line) > 1 and line[0] == line[-1] == "$" else line
    return at, line.rstrip(".").strip() or None


def _whole_formula(text: str) -> str | None:
    """The text when it is one formula and nothing else ("$(3,2)$", "\\[x=5\\]", "12")."""
    s = text.strip().rstrip(".").strip()
    if "\n" in s and not s.startswith(("$$", "\\[")):
        return None
    for open_, close in _SPANS:
        if s.startswith(open_) and s.endswith(close) and len(s) > len(open_) + len(close):
            body = s[len(open_) : -len(close)]
            return body.strip() if close not in body and "\n" not in body.strip() and balanced(body) else None
    # an unbalanced formula ("{1333", a cut-off "\frac{1}{2") is a fragment, not an answer
    return s if len(s) <= 80 and _FORMULA.match(s) and re.search(r"\d", s) and balanced(s) else None


def _stated(text: str) -> str | None:
    """The last explicitly stated final answer, or None."""
    box, said, hashes = _last_box(text), _last_statement(text), _hashes(text)
    candidates = [c for c in (box, hashes) if c is not None]
    if said is not None and (box is None or (said[2] and said[0] > box[0])):
        candidates.append(said[:2])
    if not candidates:
        return _whole_formula(text)
    answer = max(candidates, key=lambda c: c[0])[1]
    return answer if answer is not None and not blank(answer) else None  # a blank box is no answer


def extract_answer(text: str | None, mode: str = "strict") -> str | None:
    """The completion's final answer as written, or None when it commits to none.

    mode: "strict" (default, the reward policy) or "flexible" (else the last number).
    """
    if mode not in EXTRACTION_MODES:
        raise ValueError(f"mode must be one of {EXTRACTION_MODES}, got {mode!r}")
    if not text:
        return None
    answer = _stated(text)
    if answer is None and mode == "flexible":
        numbers = _LAST_NUMBER.findall(text)
        return numbers[-1] if numbers else None
    return answer
