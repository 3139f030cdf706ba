"""Hugging Face models as a rollout engine: works on any device, samples from the very
weights that train (so `sync_weights` has nothing to do). Text models sample through
`corl.rollout.compact` (sequences leave the batch when they end); vision-language models,
and any model with `rollout.decode: generate`, through transformers' `generate`."""

from __future__ import annotations

import contextlib

import torch

from corl.rollout.base import (
    ImagePrompt,
    Prompt,
    Rollout,
    SamplingParams,
    SyncStats,
    eos_ids_of,
    finish_completions,
    multimodal_token_ids,
    pad_right,
)
from corl.rollout.compact import sample_compacting, sampling_warpers, supports_compact_sampling
from corl.rollout.options import HFOptions
from corl.rollout.registry import register_engine


class _LogprobRecorder:
    """A logits processor, run last, that keeps the log-prob of each *sampled* token.

    `output_scores=True` would stack every step's processed logits into an [n, C, V]
    tensor (tens of GB at a 151k vocabulary); this keeps one step's [n, V] log-softmax
    and gathers the token the sampler picked from it at the next call.
    """

    def __init__(self) -> None:
        self.previous: torch.Tensor | None = None  # [n, V] log-probs of the last step
        self.picked: list[torch.Tensor] = []  # C x [n]

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        self._collect(input_ids[:, -1])
        self.previous = torch.log_softmax(scores.float(), dim=-1)
        return scores

    def _collect(self, tokens: torch.Tensor) -> None:
        if self.previous is not None:
            self.picked.append(self.previous.gather(-1, tokens.unsqueeze(-1)).squeeze(-1))
            self.previous = None

    def finish(self, completion: torch.Tensor) -> torch.Tensor:
        """[n, c] sampled completion -> [n, c] log-probs of its tokens."""
        if completion.shape[1] > len(self.picked):
            self._collect(completion[:, len(self.picked)])
        if not self.picked:
            return torch.zeros(completion.shape, dtype=torch.float32, device=completion.device)
        return torch.stack(self.picked[: completion.shape[1]], dim=1)


def _generation_config(
    params: SamplingParams, eos_ids: list[int], pad_id: int, suppress: list[int] | None = None, cache: str = "dynamic"
):
    """Every field set here, none inherited from the checkpoint's generation_config.json
    (a repetition penalty or min_p there would sample a distribution the loss does not score)."""
    from transformers import GenerationConfig

    greedy = params.temperature == 0
    return GenerationConfig(
        do_sample=not greedy,
        # temperature and top-p are applied by our own processors (see `_processors`), so that
        # the recorder runs after them; transformers adds its warpers after custom processors.
        temperature=1.0,
        top_p=1.0,
        # no hidden top-k when sampling (the library default is 50); greedy has no top-k to set,
        # and a sampling flag on a greedy config is what transformers warns about
        top_k=None if greedy else 0,
        min_p=None,
        typical_p=1.0,
        epsilon_cutoff=0.0,
        eta_cutoff=0.0,
        repetition_penalty=1.0,
        no_repeat_ngram_size=0,
        encoder_repetition_penalty=1.0,
        length_penalty=1.0,
        bad_words_ids=None,
        suppress_tokens=suppress or None,  # runs before our processors: the recorder sees it
        begin_suppress_tokens=None,
        forced_bos_token_id=None,
        forced_eos_token_id=None,
        min_new_tokens=0,
        num_beams=1,
        max_new_tokens=params.max_new_tokens,
        eos_token_id=eos_ids,
        pad_token_id=pad_id,
        return_dict_in_generate=True,
        cache_implementation="static" if cache == "static" else None,
    )


def _processors(params: SamplingParams, recorder: _LogprobRecorder):
    from transformers import LogitsProcessorList

    return LogitsProcessorList([*sampling_warpers(params), recorder])


@contextlib.contextmanager
def _own_generation_defaults(model, config):
    """generate() fills unset fields from model.generation_config: give it ours meanwhile."""
    saved = model.generation_config
    model.generation_config = config
    try:
        yield
    finally:
        model.generation_config = saved


@contextlib.contextmanager
def _evaluating(model):
    """Eval mode (no dropout) while sampling; the model's own mode back afterwards, also after an error."""
    was_training = model.training
    model.eval()
    try:
        yield
    finally:
        model.train(was_training)


@register_engine("hf")
class HFGenerateEngine:
    """Batched sampling from the weights that train: the compacting loop or `model.generate`.

    With a `processor` (a vision-language model) it also takes `ImagePrompt`s: their images
    go through the processor with the text, and the rollout keeps the prompt-level inputs
    (`Rollout.vision`) for the update's forward pass.
    """

    Options = HFOptions  # rollout.hf: {...} (or the same keys flat under rollout:)

    def __init__(
        self,
        model,
        tokenizer,
        batch_size: int | None = None,
        add_special_tokens: bool = True,
        processor=None,
        kv_cache: str = "auto",
        decode: str = "auto",
    ):
        self.model = model
        self.tokenizer = tokenizer
        self.batch_size = batch_size
        self.add_special_tokens = add_special_tokens
        self.processor = processor
        self.eos_ids = eos_ids_of(model, tokenizer)
        self.suppressed_ids = tuple(multimodal_token_ids(model)) if processor is not None else ()
        if kv_cache == "auto":
            # Measured on CPU (benchmarks/vs_trl.py's job): a static cache writes each token's keys
            # and values in place where the dynamic one concatenates, 16% of the sampling time.
            # On GPUs attention over the whole preallocated length would cost more than it saves.
            on_cpu = next(model.parameters()).device.type == "cpu"
            kv_cache = "static" if on_cpu and processor is None else "dynamic"
        self.kv_cache = kv_cache
        if decode == "auto":
            decode = "compact" if processor is None and supports_compact_sampling(model) else "generate"
        elif decode == "compact" and (processor is not None or not supports_compact_sampling(model)):
            raise ValueError(
                f"rollout.decode: compact needs a decoder-only text model taking a cache and position ids; "
                f"{type(model).__name__} {'has a processor (vision)' if processor is not None else 'does not'}: "
                "use decode: generate"
            )
        self.decode = decode

    @classmethod
    def from_config(cls, model, tokenizer, options, *, add_special_tokens: bool = True, processor=None) -> HFGenerateEngine:
        return cls(
            model,
            tokenizer,
            batch_size=options.batch_size,
            add_special_tokens=add_special_tokens,
            processor=processor,
            kv_cache=options.kv_cache,
            decode=options.decode,
        )

    def _encode(self, prompts: list[Prompt], device) -> tuple[dict[str, torch.Tensor], object | None]:
        """The prompts' model inputs ([B, P] left-padded), and their VisionInputs when they have images."""
        if not any(isinstance(p, ImagePrompt) for p in prompts):
            enc = self.tokenizer(prompts, return_tensors="pt", padding=True, add_special_tokens=self.add_special_tokens)
            return {"input_ids": enc["input_ids"].to(device), "attention_mask": enc["attention_mask"].to(device)}, None
        if self.processor is None:
            raise ValueError("image prompts need a vision-language model with its processor (this engine has none)")
        from corl.vision.inputs import build_inputs

        rows = [p if isinstance(p, ImagePrompt) else ImagePrompt(p) for p in prompts]
        vision = build_inputs(self.processor, [r.text for r in rows], [list(r.images) for r in rows]).to(device)
        return vision.model_kwargs(), vision

    @torch.no_grad()
    def generate(self, prompts: list[Prompt], num_samples: int, params: SamplingParams) -> Rollout:
        tok = self.tokenizer
        tok.padding_side = "left"
        device = next(self.model.parameters()).device
        inputs, vision = self._encode(prompts, device)
        prompt_ids, prompt_mask = inputs["input_ids"], inputs["attention_mask"]  # [B, P]
        config = _generation_config(params, self.eos_ids, tok.pad_token_id, list(self.suppressed_ids), self.kv_cache)
        chunks = []
        total = len(prompts) * num_samples  # N
        step = self.batch_size or total
        with _evaluating(self.model), _own_generation_defaults(self.model, config):
            for start in range(0, total, step):
                rows = torch.arange(start, min(start + step, total)) // num_samples  # [n] the prompt of each sequence
                if self.decode == "compact":  # text models only (see __init__)
                    rows = rows.to(device)
                    chunks.append(
                        sample_compacting(self.model, prompt_ids, prompt_mask, rows, params, self.eos_ids, tok.pad_token_id)
                    )
                    continue
                if vision is None:
                    rows = rows.to(device)
                    kwargs = {"input_ids": prompt_ids[rows], "attention_mask": prompt_mask[rows]}
                else:
                    kwargs = vision.select(rows).model_kwargs()
                recorder = _LogprobRecorder()
                out = self.model.generate(**kwargs, generation_config=config, logits_processor=_processors(params, recorder))
                completion = out.sequences[:, prompt_ids.shape[1] :]  # [n, c]
                chunks.append((completion, recorder.finish(completion)))

        width = max(c.shape[1] for c, _ in chunks)
        completion = torch.cat([pad_right(c, width, tok.pad_token_id) for c, _ in chunks])  # [N, C]
        sampling_logprobs = torch.cat([pad_right(lp, width, 0.0) for _, lp in chunks])  # [N, C]
        completion, mask, texts, stopped = finish_completions(completion, self.eos_ids, tok, params.stop)  # [N, C]
        prompt_ids = prompt_ids.repeat_interleave(num_samples, dim=0)  # [N, P]
        prompt_mask = prompt_mask.repeat_interleave(num_samples, dim=0)
        return Rollout(
            input_ids=torch.cat([prompt_ids, completion], dim=1),
            attention_mask=torch.cat([prompt_mask, mask], dim=1),
            completion_mask=mask,
            sampling_logprobs=sampling_logprobs * mask,
            texts=texts,
            prompt_length=prompt_ids.shape[1],
            num_samples=num_samples,
            eos_ids=tuple(self.eos_ids),
            vision=vision,
            suppressed_ids=self.suppressed_ids,
            top_p=params.top_p if params.temperature != 0 else 1.0,  # sampling_warpers' nucleus
            stopped=stopped,
        )

    def sync_weights(self, model) -> SyncStats:
        return SyncStats()  # generate runs on the training weights themselves

    def sleep(self) -> None:
        pass

    def wake(self) -> None:
        pass

    def close(self) -> None:
        pass
