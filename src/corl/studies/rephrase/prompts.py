"""Chat messages asking for a rewrite, and the rewrite made clean of what models wrap it in."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator

DEFAULT_REPHRASE_INSTRUCTION = (
    "Rewrite the math problem you are given as a concrete real-world scenario, about twice as long as the original. "
    "Keep every number, quantity and condition of the original exactly, so that the answer stays the same, "
    "and keep formulas as they are. Ask for the same quantity as the original. "
    "Do not solve the problem and do not add hints. Output only the rewritten problem."
)

Messages = list[dict[str, str]]
Outcome = tuple[int, str | None, str | None]  # (job index, rewrite or None, error or None)
Rewriter = Callable[[list[Messages]], Iterator[Outcome]]  # jobs -> outcomes, in completion order


def build_messages(problem: str, instruction: str = DEFAULT_REPHRASE_INSTRUCTION) -> Messages:
    """Chat messages asking for one rewrite of `problem`.

    An instruction containing `{problem}` is a user-message template, filled by plain
    replacement (LaTeX braces in problems are safe); otherwise the instruction is the
    system message and the problem is the user message.
    """
    if "{problem}" in instruction:
        return [{"role": "user", "content": instruction.replace("{problem}", problem)}]
    return [{"role": "system", "content": instruction}, {"role": "user", "content": problem}]


def render_chat(messages: Messages, tokenizer) -> str:
    """Prompt text for a local model: its chat template if it has one, else plain paragraphs."""
    if getattr(tokenizer, "chat_template", None):
        return tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    return "\n\n".join(m["content"] for m in messages) + "\n\n"


_THINK_BLOCK = re.compile(r"^\s*<think>.*?</think>", re.DOTALL)


def clean_rewrite(text: str) -> str:
    """The rewrite without a leading <think>...</think> block and surrounding whitespace."""
    return _THINK_BLOCK.sub("", text, count=1).strip()
