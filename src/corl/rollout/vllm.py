"""vLLM as a rollout engine, colocated with its trainer (one engine per agent, same process).

The engine is built from the model object the trainer holds, not from a hub id: its
weights (LoRA merged, FSDP shards gathered) are written with its config and tokenizer to
a private temporary folder and `vllm.LLM` starts on that, so tiny in-memory models and
adapters work as well as checkpoints. After every optimizer step `sync_weights` streams
the new weights into the running engine (vLLM's in-place `reload_weights`), so it never
samples from a stale policy.

What the trainer gets back is exactly what the HF engine returns (`corl.rollout.hf`):
prompts tokenised by corl's own tokenizer call and left-padded, the completion token ids
vLLM sampled (never re-tokenised text), the per-token log-probs the sampler used (after
temperature and top-p, as the HF engine records them), the same EOS and truncation rules
and the same grouping (row b*K + k).

Vision-language models (an engine built with their processor): the folder also holds the
processor, vLLM receives each prompt's token ids with one placeholder per image and the
images themselves (`multi_modal_data`; vLLM expands the placeholders with its own copy of
the processor), while the trainer's rollout carries the HF processor's expanded prompt and
pixels (`Rollout.vision`), as the HF engine's does. Image placeholder tokens are excluded
from sampling (`allowed_token_ids`), and the update scores the same restricted distribution.
vLLM's multimodal models import torchvision (through transformers' image processors).

vLLM is optional: nothing here imports it until an engine is built, and then a missing or
broken install fails with the command that installs it.

Processes: the engine runs in-process (`VLLM_ENABLE_V1_MULTIPROCESSING=0`), which weight
sync relies on (the tensors are handed over, not serialised). Under torchrun it uses
vLLM's `external_launcher` backend on the existing process group. With
tensor_parallel_size 1 every rank's engine samples on its own (tested on CPU over gloo:
2 ranks, FSDP2-sharded policy, tests/rollout/test_vllm_torchrun.py). With tensor_parallel_size T
> 1 (written per vLLM's documentation, untested here: no GPUs) each group of T
consecutive ranks shards one engine: it must be one agent's ranks, given the same prompts.
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
import time
from pathlib import Path

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
)
from corl.rollout.options import VLLMOptions
from corl.rollout.registry import register_engine
from corl.rollout.vllm_process import (  # noqa: F401  (CPU_KV_CACHE_SHARE, MAX_NUM_SEQS: read by corl.plan)
    _DTYPES,
    CPU_KV_CACHE_SHARE,
    INSTALL,
    MAX_NUM_SEQS,
    _Counted,
    _engine_dtype,
    _import_vllm,
    _reload,
    _rng_kept,
    _save_for_engine,
    _shared_state_kept,
    _text_config,
    _under_torchrun,
    cpu_kv_cache_bytes,
    vllm_weight_names,
)
from corl.rollout.vllm_weights import hf_model_of, iter_full_weights

logger = logging.getLogger(__name__)

GPU_MEMORY_UTILIZATION = 0.45  # the paper's colocated runs: the rest stays with the trainer
MAX_DEFAULT_MODEL_LEN = 8192  # when neither the config nor the options bound it

_LIVE_ENGINES = 0  # vLLM engines open in this process (they share vLLM's process-global parallel state)


@register_engine("vllm")
class VLLMEngine:
    """Batched sampling with vLLM, colocated with the trainer that owns `model`."""

    Options = VLLMOptions  # rollout.vllm: {...} (or the same keys flat under rollout:)
    # It samples from its own copy of the weights: the trainer keeps its policy sharded while
    # it samples (Agent.sample enters no gather); sync_weights brings each step's weights over.
    holds_weights = True

    def __init__(
        self,
        model,
        tokenizer,
        *,
        add_special_tokens: bool = True,
        gpu_memory_utilization: float | None = None,
        max_model_len: int | None = None,
        enforce_eager: bool = True,
        sleep_mode: bool = False,
        tensor_parallel_size: int = 1,
        dtype: str = "auto",
        max_num_seqs: int = MAX_NUM_SEQS,
        processor=None,
        max_images_per_prompt: int = 4,
    ):
        vllm = _import_vllm()
        from vllm.platforms import current_platform

        self.tokenizer = tokenizer
        self.add_special_tokens = add_special_tokens
        self.processor = processor
        self.max_images_per_prompt = max_images_per_prompt
        base = hf_model_of(model)
        self.config = base.config
        self.suppressed_ids = tuple(multimodal_token_ids(base)) if processor is not None else ()
        banned = set(self.suppressed_ids)
        vocab = _text_config(base.config).vocab_size
        self.allowed_ids = [i for i in range(vocab) if i not in banned] if banned else None
        self.device = next(base.parameters()).device  # where the trainer wants its rollouts
        self.eos_ids = eos_ids_of(base, tokenizer)
        self.on_cpu = current_platform.is_cpu()
        self.dtype = _engine_dtype(dtype, model, self.on_cpu)
        self.tensor_parallel_size = tensor_parallel_size
        # A tied lm_head is written once (safetensors refuses shared storage; vLLM ties it
        # again at load) but always pushed: the CPU backend repacks it apart from the embedding.
        # (a VLM may state the tie on its top-level config only, so it is told by shared storage)
        self.skip_tied = True
        context = getattr(_text_config(base.config), "max_position_embeddings", None) or MAX_DEFAULT_MODEL_LEN
        self.max_model_len = max_model_len or min(context, MAX_DEFAULT_MODEL_LEN)
        if sleep_mode and self.on_cpu:
            logger.warning("rollout.sleep_mode has no effect on CPU (vLLM's sleep mode frees GPU memory): sleep/wake do nothing")
        self.sleep_mode = sleep_mode and not self.on_cpu
        self._asleep: set[str] = set()  # tags vLLM still holds asleep: "weights", "kv_cache"
        self.external = _under_torchrun()

        self._folder = Path(tempfile.mkdtemp(prefix="corl-vllm-"))
        self.llm = None
        self.startup_seconds = 0.0
        try:
            _save_for_engine(model, tokenizer, self._folder, self.dtype, self.skip_tied, processor)
            kwargs = dict(
                model=str(self._folder),
                # corl tokenises prompts and decodes completions itself: vLLM sees token ids only
                # (its multimodal processor needs the tokenizer: a vision-language model keeps it)
                skip_tokenizer_init=processor is None,
                dtype={v: k for k, v in _DTYPES.items()}[self.dtype],
                max_model_len=self.max_model_len,
                max_num_seqs=max_num_seqs,
                enforce_eager=enforce_eager,
                tensor_parallel_size=tensor_parallel_size,
                # log-probs after temperature and top-p: the distribution the tokens were drawn from
                logprobs_mode="processed_logprobs",
                # no sampling defaults from the checkpoint's generation_config.json: every field is ours
                generation_config="vllm",
                enable_sleep_mode=self.sleep_mode,
                seed=0,  # vLLM reseeds with it at start-up (undone by _rng_kept); sampling draws from torch's RNG
            )
            if processor is not None:
                limits = {"image": max_images_per_prompt}
                if getattr(base.config, "video_token_id", None) is not None:
                    limits["video"] = 0  # corl prompts hold images only: no memory profiled for videos
                kwargs["limit_mm_per_prompt"] = limits
            if self.on_cpu and gpu_memory_utilization is None:
                kwargs["kv_cache_memory_bytes"] = cpu_kv_cache_bytes(base.config, self.max_model_len, self.dtype, max_num_seqs)
            else:
                kwargs["gpu_memory_utilization"] = gpu_memory_utilization or GPU_MEMORY_UTILIZATION
            if tensor_parallel_size > 1 and not self.external:
                # without torchrun vLLM would start worker processes, which an in-process sync cannot reach
                raise ValueError("rollout.tensor_parallel_size > 1 needs torchrun: the agent's ranks shard its engine")
            if self.external:
                kwargs["distributed_executor_backend"] = "external_launcher"
                world = torch.distributed.get_world_size()
                if world % tensor_parallel_size:
                    raise ValueError(
                        f"rollout.tensor_parallel_size {tensor_parallel_size} does not divide the world of {world} ranks"
                    )
            if os.environ.get("VLLM_ENABLE_V1_MULTIPROCESSING") not in (None, "0"):
                logger.warning(
                    "VLLM_ENABLE_V1_MULTIPROCESSING=%s ignored: a colocated engine runs in-process",
                    os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"],
                )
            os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"
            start = time.perf_counter()
            with _rng_kept():
                self.llm = vllm.LLM(**kwargs)
            global _LIVE_ENGINES
            _LIVE_ENGINES += 1
            self.startup_seconds = time.perf_counter() - start
        finally:
            # loaded into memory; later weights arrive through sync_weights, never from disk
            shutil.rmtree(self._folder, ignore_errors=True)

    @classmethod
    def from_config(cls, model, tokenizer, options, *, add_special_tokens: bool = True, processor=None) -> VLLMEngine:
        """`options`: a corl.config.RolloutConfig."""
        return cls(
            model,
            tokenizer,
            add_special_tokens=add_special_tokens,
            processor=processor,
            gpu_memory_utilization=options.gpu_memory_utilization,
            max_model_len=options.max_model_len,
            enforce_eager=options.enforce_eager,
            sleep_mode=options.sleep_mode,
            tensor_parallel_size=options.tensor_parallel_size,
            dtype=options.dtype,
            max_images_per_prompt=options.max_images_per_prompt,
        )

    # -- sampling -------------------------------------------------------------------------------

    def _sampling_params(self, params: SamplingParams, num_samples: int, **overrides):
        """Every field that changes what is sampled, set here (vLLM's defaults are mostly
        neutral, but a default is not a decision)."""
        from vllm import SamplingParams as VLLMSamplingParams
        from vllm.sampling_params import RequestOutputKind

        greedy = params.temperature == 0
        fields = dict(
            n=num_samples,
            temperature=0.0 if greedy else params.temperature,
            top_p=1.0 if greedy else params.top_p,
            top_k=0,  # 0 = off
            min_p=0.0,
            presence_penalty=0.0,
            frequency_penalty=0.0,
            repetition_penalty=1.0,
            watermarking=False,
            seed=self._request_seed(),
            stop=None,
            stop_token_ids=list(self.eos_ids),
            ignore_eos=False,
            max_tokens=params.max_new_tokens,
            min_tokens=0,
            logprobs=0,  # the sampled token's log-prob only
            prompt_logprobs=None,
            logit_bias=None,
            # a vision-language model never samples its image placeholders (the HF engine's suppress_tokens)
            allowed_token_ids=self.allowed_ids,
            bad_words=None,
            detokenize=False,  # corl decodes with its own tokenizer, as the HF engine does
            output_kind=RequestOutputKind.FINAL_ONLY,
        )
        fields.update(overrides)
        return VLLMSamplingParams(**fields)

    def _request_seed(self) -> int | None:
        """None: in-process vLLM samples from torch's global RNG, so the trainer's seed governs
        it. Tensor-parallel ranks must sample alike: one seed, drawn on the group's first rank."""
        if not (self.external and self.tensor_parallel_size > 1):
            return None
        from vllm.distributed import get_tp_group

        seed = int(torch.randint(0, 2**31 - 1, ()))
        return get_tp_group().broadcast_object(seed, src=0)

    def _prompt_ids(self, prompts: list[str]) -> tuple[torch.Tensor, torch.Tensor]:
        """[B, P] left-padded ids and mask, from the same tokenizer call as the HF engine."""
        tok = self.tokenizer
        tok.padding_side = "left"
        enc = tok(prompts, return_tensors="pt", padding=True, add_special_tokens=self.add_special_tokens)
        return enc["input_ids"], enc["attention_mask"]

    def _image_requests(self, prompts: list[Prompt]):
        """(requests for vLLM, the trainer's [B, P] ids and mask, its VisionInputs) of image prompts.

        The trainer's prompt is the HF processor's (placeholders expanded, pixels made);
        vLLM gets the same text tokenised with one placeholder per image, and the images.
        """
        from vllm.inputs import TokensPrompt

        from corl.vision.inputs import build_inputs, load_image

        if self.processor is None:
            raise ValueError("image prompts need a vision-language model with its processor (this engine has none)")
        rows = [p if isinstance(p, ImagePrompt) else ImagePrompt(p) for p in prompts]
        vision = build_inputs(self.processor, [r.text for r in rows], [list(r.images) for r in rows])
        placeholder = self.processor.image_token_id
        requests = []
        for i, row in enumerate(rows):
            if len(row.images) > self.max_images_per_prompt:
                raise ValueError(
                    f"prompt {i} has {len(row.images)} images; the vLLM engine was built for at most "
                    f"{self.max_images_per_prompt} (rollout.max_images_per_prompt)"
                )
            ids = self.processor.tokenizer(row.text)["input_ids"]  # the processor's own call, before expansion
            if ids.count(placeholder) != len(row.images):
                raise ValueError(f"prompt {i}: {ids.count(placeholder)} image placeholders for {len(row.images)} images")
            request = TokensPrompt(prompt_token_ids=ids)
            if row.images:
                request["multi_modal_data"] = {"image": [load_image(x) for x in row.images]}
            requests.append(request)
        return requests, vision.input_ids, vision.attention_mask, vision

    @torch.no_grad()
    def generate(self, prompts: list[Prompt], num_samples: int, params: SamplingParams) -> Rollout:
        from vllm.inputs import TokensPrompt

        self._wake("weights", "kv_cache")
        tok = self.tokenizer
        vision = None
        if any(isinstance(p, ImagePrompt) for p in prompts):
            requests, prompt_ids, prompt_mask, vision = self._image_requests(prompts)  # [B, P]
        else:
            prompt_ids, prompt_mask = self._prompt_ids(prompts)  # [B, P]
            requests = [TokensPrompt(prompt_token_ids=ids[m.bool()].tolist()) for ids, m in zip(prompt_ids, prompt_mask)]
        # vLLM refuses n > 1 when greedy; the K samples of a greedy prompt are one, repeated (as HF's are)
        greedy = params.temperature == 0
        n_per_prompt = 1 if greedy else num_samples
        outputs = self.llm.generate(requests, self._sampling_params(params, n_per_prompt), use_tqdm=False)

        sampled: list[list[int]] = []
        logprobs: list[list[float]] = []
        for out in outputs:  # in the order of `requests`
            samples = sorted(out.outputs, key=lambda c: c.index)
            if len(samples) != n_per_prompt:
                raise RuntimeError(f"vLLM returned {len(samples)} samples of a prompt, not {n_per_prompt}")
            for c in samples * (num_samples // n_per_prompt):
                ids = list(c.token_ids)
                sampled.append(ids)
                logprobs.append([step[t].logprob for step, t in zip(c.logprobs, ids)])

        n, width = len(sampled), max((len(s) for s in sampled), default=0)
        completion = torch.full((n, width), tok.pad_token_id, dtype=torch.long)  # [N, C]
        sampling_logprobs = torch.zeros((n, width), dtype=torch.float32)  # [N, C]
        for i, (ids, lps) in enumerate(zip(sampled, logprobs)):
            completion[i, : len(ids)] = torch.tensor(ids, dtype=torch.long)
            sampling_logprobs[i, : len(lps)] = torch.tensor(lps, dtype=torch.float32)
        # vLLM stops at the first EOS and keeps it; stop strings and the mask rule are the HF engine's all the same
        completion, mask, texts, stopped = finish_completions(completion, self.eos_ids, tok, params.stop)  # [N, C]
        prompt_ids = prompt_ids.repeat_interleave(num_samples, dim=0)  # [N, P], row b*K + k
        prompt_mask = prompt_mask.repeat_interleave(num_samples, dim=0)
        return Rollout(
            input_ids=torch.cat([prompt_ids, completion], dim=1).to(self.device),
            attention_mask=torch.cat([prompt_mask, mask], dim=1).to(self.device),
            completion_mask=mask.to(self.device),
            sampling_logprobs=(sampling_logprobs * mask).to(self.device),
            texts=texts,
            prompt_length=prompt_ids.shape[1],
            num_samples=num_samples,
            eos_ids=tuple(self.eos_ids),
            separate_sampler=True,  # its own copy of the weights: the update corrects with importance weights
            vision=vision.to(self.device) if vision is not None else None,
            suppressed_ids=self.suppressed_ids,
            top_p=params.top_p if params.temperature != 0 else 1.0,  # its processed_logprobs are over this nucleus
            stopped=stopped.to(self.device) if stopped is not None else None,
        )

    @torch.no_grad()
    def token_logprobs(self, sequences: list[list[int]]) -> list[torch.Tensor]:
        """The engine's log-prob of every token of each sequence given the ones before it
        (temperature 1): [len - 1] per sequence. Checks that a sync reached the engine."""
        from vllm.inputs import TokensPrompt

        self._wake("weights", "kv_cache")
        params = self._sampling_params(SamplingParams(temperature=1.0, max_new_tokens=1), 1, prompt_logprobs=0, logprobs=None)
        outputs = self.llm.generate([TokensPrompt(prompt_token_ids=s) for s in sequences], params, use_tqdm=False)
        # prompt_logprobs[0] is None (nothing predicts the first token)
        return [
            torch.tensor([step[t].logprob for step, t in zip(o.prompt_logprobs[1:], s[1:])]) for o, s in zip(outputs, sequences)
        ]

    # -- weights --------------------------------------------------------------------------------

    def sync_weights(self, model) -> SyncStats:
        """Stream `model`'s whole weights into the engine (a collective under FSDP: every rank
        of the agent calls it) and drop the prefix cache, whose KV came from the old ones."""
        start = time.perf_counter()
        self._wake("weights")  # the KV cache may sleep on until the next generate
        weights = _Counted(vllm_weight_names(self.config, iter_full_weights(model, self.dtype)))
        self.llm.collective_rpc(_reload, args=(weights,))
        self.llm.reset_prefix_cache()
        if self.processor is not None:
            # the worker dropped its image embeddings with the old weights, the scheduler still
            # counts them as cached: without this the next request of an image fails ("Encoder cache miss")
            self.llm.llm_engine.reset_encoder_cache()
        return SyncStats(seconds=time.perf_counter() - start, bytes=weights.bytes)

    # -- memory ---------------------------------------------------------------------------------

    def sleep(self) -> None:
        """GPU: level 1 (weights to host memory, KV cache dropped; vLLM's share of the device
        is free for the update); the next sync or generate wakes what it needs. Level 1, not 2:
        a step without an optimizer step syncs nothing, and the engine then needs its old
        weights back. CPU: nothing (said once when the engine was built)."""
        if not self.sleep_mode or self._asleep:
            return
        self.llm.sleep(level=1)
        self._asleep = {"weights", "kv_cache"}

    def wake(self) -> None:
        self._wake("weights", "kv_cache")

    def _wake(self, *tags: str) -> None:
        todo = [t for t in tags if t in self._asleep]
        if todo:
            if torch.cuda.is_available():
                # the update's freed blocks go back to the device first: vLLM maps its share
                # again with its own allocator, which cannot use what torch's cache holds
                torch.cuda.empty_cache()
            self.llm.wake_up(tags=todo)
            self._asleep -= set(todo)

    def close(self) -> None:
        """Free the engine. Under torchrun vLLM's shutdown would destroy the
        default process group, which belongs to the trainer: it is kept."""
        global _LIVE_ENGINES
        llm, self.llm = self.llm, None
        if llm is not None:
            _LIVE_ENGINES -= 1
            with _shared_state_kept(parallel_state=_LIVE_ENGINES > 0, process_group=self.external):
                llm.llm_engine.engine_core.shutdown()
            del llm
            import gc

            gc.collect()
            if torch.cuda.is_available():
                torch.cuda.empty_cache()
