"""The local backend: rewrites with a Hugging Face model through corl's rollout engine."""

from __future__ import annotations

from collections.abc import Iterator

from corl.studies.rephrase.prompts import Messages, Outcome, Rewriter, clean_rewrite, render_chat


def hf_rewriter(model, tokenizer, temperature: float = 0.7, max_new_tokens: int = 1024, batch_size: int = 8) -> Rewriter:
    """Rewrites with a local Hugging Face model through corl's rollout engine, in batches."""
    import torch

    from corl.config import RolloutConfig
    from corl.rollout import SamplingParams, build_engine

    chat = bool(getattr(tokenizer, "chat_template", None))
    # a chat template writes its own BOS
    engine = build_engine(RolloutConfig(engine="hf"), model, tokenizer, add_special_tokens=not chat)
    eos_ids = torch.tensor(engine.eos_ids)
    params = SamplingParams(temperature=temperature, top_p=1.0, max_new_tokens=max_new_tokens)

    def run(jobs: list[Messages]) -> Iterator[Outcome]:
        for start in range(0, len(jobs), batch_size):
            chunk = jobs[start : start + batch_size]
            rollout = engine.generate([render_chat(m, tokenizer) for m in chunk], 1, params)
            cut_off = ~torch.isin(rollout.completion_ids.cpu(), eos_ids).any(1)  # [B] no EOS within the budget
            for j, raw in enumerate(rollout.texts):
                text = clean_rewrite(raw)
                if cut_off[j]:
                    yield start + j, None, "the rewrite was cut off by the token limit; raise --max-tokens"
                elif not text:
                    yield start + j, None, "the model wrote an empty rewrite"
                else:
                    yield start + j, text, None

    return run
