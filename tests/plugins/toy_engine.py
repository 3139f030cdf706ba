"""A rollout engine from outside corl (docs/architecture.md, "Add a rollout engine").

`short_hf`: Hugging Face generate with a completion budget of its own, declared in its own
option block (`rollout: {engine: short_hf, short_hf: {max_new_tokens: 4}}`).
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from corl.rollout import HFGenerateEngine, Rollout, SamplingParams, register_engine

CALLS: list[int] = []  # prompts per generate call: evidence that this engine sampled


@register_engine("short_hf")
class ShortEngine:
    class Options(BaseModel):
        max_new_tokens: int = Field(8, ge=1, description="at most this many completion tokens, whatever the cohort asks")

    def __init__(self, inner: HFGenerateEngine, budget: int):
        self.inner, self.budget = inner, budget

    @classmethod
    def from_config(cls, model, tokenizer, options, *, add_special_tokens: bool = True):
        inner = HFGenerateEngine(model, tokenizer, add_special_tokens=add_special_tokens)
        return cls(inner, options.block("short_hf").max_new_tokens)

    def generate(self, prompts, num_samples: int, params: SamplingParams) -> Rollout:
        CALLS.append(len(prompts))
        budget = min(params.max_new_tokens, self.budget)
        return self.inner.generate(prompts, num_samples, SamplingParams(params.temperature, params.top_p, budget))

    def sync_weights(self, model):
        return self.inner.sync_weights(model)

    def sleep(self) -> None:
        self.inner.sleep()

    def wake(self) -> None:
        self.inner.wake()

    def close(self) -> None:
        self.inner.close()
