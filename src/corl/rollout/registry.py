"""Rollout engines by name: `rollout.engine` in the config picks one.

An engine registers itself with `@register_engine("name")` on a class that has
`from_config(model, tokenizer, options, *, add_special_tokens[, processor]) -> RolloutEngine`
(`processor` only for engines that sample vision-language models).
Engines of this package register when `corl.rollout` is imported; an engine living
elsewhere registers when its module is imported (name it in `rollout.plugins`).
"""

from __future__ import annotations

from collections.abc import Callable

from corl.registry import ENGINES


def register_engine(name: str) -> Callable:
    return ENGINES.register(name)


def build_engine(options, model, tokenizer, *, add_special_tokens: bool = True, processor=None):
    """The engine `options.engine` names, sampling from `model` (options: a RolloutConfig).
    `processor`: a vision-language model's (image prompts); only engines that take one are given it."""
    engine = ENGINES.get(options.engine)
    if processor is None:
        return engine.from_config(model, tokenizer, options, add_special_tokens=add_special_tokens)
    return engine.from_config(model, tokenizer, options, add_special_tokens=add_special_tokens, processor=processor)
