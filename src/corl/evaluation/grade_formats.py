"""Other generators' files, read as `corl grade` reads its own: where a sample's text is, and which tool wrote it.

Generators write their samples in many shapes: one row per sample (the commonest vLLM or API
dump), the text deep inside a response object (`choices[].message.content`), a chat transcript
(TRL's conversational completions), the Responses API's output items, or a per-filter copy of
each document (lm-eval's `--log_samples`).

- a **path** names where the text is: dotted keys, `*` for every item of a list, a number for
  one item (`choices.*.message.content`, `outputs.*.text`, `resps.*.*`); a value found there may
  be a text, a chat transcript (its last assistant turn: the final answer comes last), a message,
  or a content-parts list (its text parts, joined). A request that failed (`"response": null`)
  or a message without text (a refusal, a tool call) is an empty sample, graded wrong;
- a **format** (`--format`, or detected from a row's keys: `detect_format`) names the paths, the
  problem id and the gold field of a known tool, each as that tool documents its files.

Why by hand: no library reads these formats into samples; jq-like path libraries
(jsonpath-ng, glom) would add a dependency for the twenty lines `_walk` is.
"""

from __future__ import annotations

import contextlib
import json
from dataclasses import dataclass

from corl.evaluation.grade import GradeError, Rows

PROMPT_FIELDS = ("prompt", "problem", "question")
TEXT_PARTS = ("text", "output_text")  # content-part types that hold text (Chat Completions, Responses API)


@dataclass(frozen=True)
class Preset:
    """Where a tool writes a sample's text, the problem's id and (when it has one) the gold answer."""

    paths: tuple[str, ...]  # tried in order: the first that the rows have is used
    id_field: str | None
    answer_field: str | None = None
    one_filter: bool = False  # lm-eval: one row per (document, filter); the samples are the same in each
    model_field: str | None = None  # a field whose values are different generators (TRL: the step's policy)
    not_ids: tuple[str, ...] = ()  # fields named like a problem id that name something else (a response's "id")
    doc: str = ""


_CHAT = ("choices.*.message.content", "choices.*.text")
PRESETS: dict[str, Preset] = {
    "openai": Preset(
        (*_CHAT, "output"),
        None,
        not_ids=("id",),  # chatcmpl-..., resp_...: the response, not the problem
        doc="Chat Completions, Completions or Responses API objects (the OpenAI SDK's model_dump), one per line; "
        "K samples as n = K choices or K consecutive lines; gold from --answers",
    ),
    "openai-batch": Preset(
        tuple(f"response.body.{p}" for p in (*_CHAT, "output")) + tuple(f"response.{p}" for p in _CHAT),
        "custom_id",
        not_ids=("id",),
        doc="Batch API output lines (also `vllm run-batch`'s); the problem is custom_id (a sample suffix such as "
        "-s0 is stripped when --answers has the rest), gold from --answers joined on it",
    ),
    "vllm": Preset(
        ("outputs.*.text", *_CHAT),
        None,  # request_id is vLLM's counter ("0", "1", ...), not a problem id: rows are grouped by prompt
        not_ids=("request_id",),
        doc="LLM.generate's RequestOutputs (outputs[].text; n = K outputs, or K rows of one prompt), or its "
        "OpenAI server's responses; gold from --answers, joined on the prompt or by order",
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
        model_field="step",
        doc="TRL's completion logs (OUTPUT_DIR/completions/*.parquet, the W&B completions table; graded per step) "
        "and datasets with standard or conversational completions; gold from --answers joined on the prompt",
    ),
    "corl": Preset(
        ("completion",),
        "id",
        model_field="agent",
        doc="corl's own completions log (logging.log_completions: RUN/completions/step_*.jsonl, its W&B table): "
        "graded agent by agent; gold is the rows' own where the training data had answers, else from --answers",
    ),
}


def _is_list_of(value, kind) -> bool:
    return isinstance(value, list) and bool(value) and all(isinstance(v, kind) for v in value)


def detect_format(row: dict) -> tuple[str, str] | None:
    """(format, the keys that tell it) for a row another tool wrote, or None for corl's own shape."""
    if "custom_id" in row and "response" in row:
        return "openai-batch", "'custom_id' and 'response': OpenAI Batch API output (or vllm run-batch's)"
    if "doc_id" in row and "resps" in row:
        return "lm-eval", "'doc_id' and 'resps': an lm-eval --log_samples file"
    if {"step", "agent", "sample", "completion"} <= row.keys():  # before TRL's: corl's rows carry its columns too
        return "corl", "'step', 'agent', 'sample' and 'completion': corl's completions log"
    if {"step", "prompt", "completion"} <= row.keys():
        return "trl", "'step', 'prompt' and 'completion': TRL's completion log"
    if _is_list_of(row.get("outputs"), dict) and "text" in row["outputs"][0]:
        return "vllm", "'outputs' with 'text': vLLM RequestOutputs"
    if _is_list_of(row.get("choices"), dict):
        return "openai", "'choices': Chat Completions / Completions responses (OpenAI SDK, or a vLLM server)"
    if row.get("object") == "response" and isinstance(row.get("output"), list):
        return "openai", "'object': 'response': Responses API objects (OpenAI SDK)"
    return None


def _walk(value, parts: list[str], where: str, path: str) -> list:
    """Every value at `parts` below `value` (`*` fans out over a list; a null on the way is one missing value)."""
    if not parts:
        return [value]
    if value is None:  # a failed request ("response": null) or an empty message: no text
        return [None]
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
    """A sample's text: a string, a message, a transcript (its last assistant turn) or content parts."""
    if value is None:  # e.g. a refused or failed request: no answer, graded wrong
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, dict):
        for key in ("content", "text", "completion"):
            if key in value:
                return text_of(value[key], where, path)
    if isinstance(value, (list, tuple)) and value and all(isinstance(m, dict) for m in value):
        turns = [m for m in value if "role" in m]
        if turns:  # a transcript, or Responses API output items: the answer is the last thing the assistant said
            replies = [m for m in turns if m.get("role") == "assistant"] or turns
            return text_of(replies[-1], where, path)
        return "".join(text_of(part, where, path) for part in value if part.get("type", "text") in TEXT_PARTS)
    raise GradeError(
        f"{where}: {path!r} holds a value of type {type(value).__name__}, not a completion (a text, a chat message or a list of them); "
        "point --completion-field at the text, e.g. choices.*.message.content, or give --format"
    )


def samples_at(row: dict, path: str, where: str, csv: bool = False) -> tuple[list[str], int]:
    """(the samples a row holds at `path`, how many of them had no text); a CSV cell may hold a JSON list."""
    found = _walk(row, path.split("."), where, path)
    if csv and len(found) == 1 and isinstance(found[0], str) and found[0].lstrip().startswith("["):
        with contextlib.suppress(ValueError):
            found = [json.loads(found[0])]
    if len(found) == 1 and isinstance(found[0], (list, tuple)) and not _is_messages(found[0]):
        found = list(found[0])  # a field holding the list of samples
    texts = [text_of(v, where, path) for v in found]
    return texts, sum(not t for t in texts)


def _is_messages(value) -> bool:
    return bool(value) and all(isinstance(m, dict) and ("role" in m or "type" in m) for m in value)


def _reaches(row: dict, path: str, where: str) -> bool:
    """Whether `path` leads to a value in this row (not through a null: a failed request tells nothing)."""
    try:
        return any(v is not None for v in _walk(row, path.split("."), where, path))
    except GradeError:
        return False


def pick_path(rows: Rows, preset: Preset, fmt: str) -> str:
    """The first of the preset's paths that a row has (a failed request's row has none: the next row decides)."""
    for path in preset.paths:
        if any(_reaches(row, path, where) for row, where in zip(rows.rows[:200], rows.where)):
            return path
    keys = ", ".join(sorted(rows.rows[0])) or "none"
    found = detect_format(rows.rows[0])
    hint = f"the rows look like --format {found[0]} ({found[1]})" if found and found[0] != fmt else "is --format right?"
    raise GradeError(f"{rows.where[0]}: none of {', '.join(preset.paths)} is in the row (keys: {keys}); {hint}")
