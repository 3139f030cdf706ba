"""data.max_prompt_tokens: training rows whose prompt is too long for any agent are dropped before the
run starts, with their count said, as verl's filter_overlong_prompts drops them.

Dropped rather than cut: TRL's max_prompt_length keeps a prompt's last tokens, and a word problem
without its beginning is another problem, one no sample can answer, that still earns rewards
(a peer's majority is a label whatever the prompt). Every agent must see the same batch of
problems, so a row too long for one agent is dropped for all. A prompt is measured as the agent's
engine receives it: template, instruction and chat template applied, in its own tokenizer
(`corl.trainer.inputs.reader_without_weights`, which the memory plan measures with too).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

from corl.config import ConfigError, RunConfig
from corl.data.rows import Problem, PromptTemplate
from corl.trainer.inputs import reader_without_weights


@dataclass(frozen=True)
class TooLong:
    """What one agent finds too long: the problems' positions and the longest prompt's tokens."""

    agent: str
    rows: frozenset[int]
    longest: int
    shortest: int


def prompt_tokens(cfg: RunConfig, index: int, problems: list[Problem]) -> list[int]:
    """Agent `index`'s prompt length, in its tokens, of every problem."""
    agent = cfg.agents[index]
    reader = reader_without_weights(agent.model, agent.tokenizer, False)
    if reader is None:
        raise ConfigError(
            f"data.max_prompt_tokens: agent {agent.name!r} has no tokenizer to measure its prompts with "
            f"({agent.tokenizer or agent.model!r} cannot be read here); give a local folder (agents.{index}.tokenizer) or "
            "remove data.max_prompt_tokens"
        )
    tokenizer = getattr(reader, "tokenizer", reader)  # a processor's text tokenizer: images are not counted
    template = PromptTemplate(cfg.data.template, cfg.data.instruction, agent.chat_template)
    key = cfg.text_key(agent)
    texts = [template.render(p.texts[key], tokenizer) for p in problems]
    return [len(ids) for ids in tokenizer(texts, add_special_tokens=not agent.chat_template)["input_ids"]]


def too_long(cfg: RunConfig, problems: list[Problem]) -> list[TooLong]:
    """Per agent, the problems whose prompt exceeds data.max_prompt_tokens."""
    limit = cfg.data.max_prompt_tokens
    found = []
    for index, agent in enumerate(cfg.agents):
        lengths = prompt_tokens(cfg, index, problems)
        rows = frozenset(i for i, n in enumerate(lengths) if n > limit)
        found.append(TooLong(agent.name, rows, max(lengths), min(lengths)))
    return found


def keep_short_prompts(cfg: RunConfig, problems: list[Problem]) -> list[int]:
    """Positions of the problems every agent's prompt of which fits data.max_prompt_tokens (all of them
    when it is unset); says how many were dropped, and refuses a run with none left."""
    limit = cfg.data.max_prompt_tokens
    if limit is None:
        return list(range(len(problems)))
    found = too_long(cfg, problems)
    dropped = frozenset().union(*(f.rows for f in found))
    if len(dropped) == len(problems):
        shortest = ", ".join(f"agent {f.agent!r}'s {f.shortest}" for f in found)
        raise ConfigError(
            f"data.max_prompt_tokens {limit}: every one of the {len(problems)} training prompts is longer for some "
            f"agent (the shortest prompts, in tokens: {shortest}); raise data.max_prompt_tokens"
        )
    if dropped:
        per_agent = "; ".join(f"agent {f.agent!r}: {len(f.rows)}, up to {f.longest} tokens" for f in found if f.rows)
        warnings.warn(
            f"data.max_prompt_tokens {limit}: dropped {len(dropped)} of {len(problems)} training rows whose prompt "
            f"is longer ({per_agent}); {len(problems) - len(dropped)} rows train",
            UserWarning,
            stacklevel=3,
        )
    return [i for i in range(len(problems)) if i not in dropped]
