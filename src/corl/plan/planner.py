"""Assemble a run's memory plan: per rank, what stays (the states) and what comes and goes
(sampling, scoring, the update, the optimizer step), from the config, the models' facts
and the machine. Pure: `assemble` reads nothing, so the advice can re-plan changed configs.

A rank holds its agents' states all the time; the agents it hosts sample and update one
after another (corl.trainer.loop: all sample, then all update), so a phase's peak is the states
of every hosted agent plus the largest single agent's share of that phase.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from corl.config import RunConfig
from corl.plan import arithmetic as a
from corl.plan.machine import Machine
from corl.plan.models import ModelFacts
from corl.plan.prompts import PromptLength

PHASES = ("sample", "score", "update", "optimizer step")


@dataclass(frozen=True)
class Item:
    what: str
    bytes: int
    note: str = ""


@dataclass
class AgentPlan:
    """One agent on one of its ranks."""

    index: int
    name: str
    facts: ModelFacts
    prompt: PromptLength
    precision: a.Precision
    dp: int  # ranks that share the agent
    sequences: int  # this rank's share of a step's trained samples (K a prompt)
    sampled: int  # this rank's share of a step's sampled ones (V a prompt, cohort.votes_per_prompt)
    trains: bool  # agents[].train: a frozen agent holds no gradients or optimizer state and never updates
    sampled_at_once: int
    minibatch: int
    completion: int
    states: list[Item] = field(default_factory=list)  # held all the time
    engine: Item | None = None  # a vLLM engine's memory (all the time, or while sampling with sleep_mode)
    engine_sleeps: bool = False
    engine_sequences: int | None = None  # full-length sequences its KV cache holds (GPU, memory known)
    engine_max_len: int = 0  # the engine's max_model_len
    engine_needs: str = ""  # what its share and weights are, for the verdict when it holds none
    phases: dict[str, list[Item]] = field(default_factory=dict)  # what each phase adds
    notes: list[str] = field(default_factory=list)


@dataclass
class RankPlan:
    ranks: tuple[int, ...]
    agents: list[AgentPlan]
    totals: dict[str, int]  # phase -> peak bytes of the rank

    @property
    def peak_phase(self) -> str:
        return max(self.totals, key=self.totals.get)

    @property
    def peak(self) -> int:
        return self.totals[self.peak_phase]


@dataclass
class RunPlan:
    machine: Machine
    usable: int | None  # memory minus plan.headroom; None when the memory is unknown
    ranks: list[RankPlan]
    advice: list[str] = field(default_factory=list)

    @property
    def worst(self) -> RankPlan:
        return max(self.ranks, key=lambda r: r.peak)

    @property
    def short_engines(self) -> list[AgentPlan]:
        """Agents whose vLLM engine cannot hold one full-length sequence (vLLM refuses to start)."""
        seen = {ag.index: ag for rank in self.ranks for ag in rank.agents}
        return [ag for ag in seen.values() if ag.engine_sequences is not None and ag.engine_sequences < 1]

    @property
    def fits(self) -> bool | None:
        if self.usable is None:
            return None
        return self.worst.peak <= self.usable and not self.short_engines


def precision_of(cfg: RunConfig) -> a.Precision:
    if not cfg.compute.bf16:
        return "fp32"
    return "fsdp_bf16" if cfg.distributed.fsdp else "autocast"


def assemble(cfg: RunConfig, machine: Machine, facts: list[ModelFacts], prompts: list[PromptLength]) -> RunPlan:
    """The plan of `cfg` on `machine` (facts and prompt lengths per agent, in config order)."""
    from corl.parallel import plan_layout

    layout = plan_layout([x.name for x in cfg.agents], machine.ranks, cfg.distributed.placement)
    groups: dict[tuple[int, ...], list[int]] = {}
    for rank, hosted in enumerate(layout.hosts):  # ranks hosting the same agents have the same plan
        groups.setdefault(tuple(hosted), []).append(rank)
    ranks = []
    for hosted, members in groups.items():
        agents = [agent_plan(cfg, machine, i, facts[i], prompts[i], layout.dp_size) for i in hosted]
        ranks.append(RankPlan(tuple(members), agents, rank_totals(agents)))
    usable = None if machine.memory is None else int(machine.memory * (1 - cfg.plan.headroom))
    return RunPlan(machine, usable, ranks)


def rank_totals(agents: list[AgentPlan]) -> dict[str, int]:
    """Per phase: every hosted agent's states and awake engines, plus the largest agent's share."""
    standing = sum(x.bytes for ag in agents for x in ag.states)
    standing += sum(ag.engine.bytes for ag in agents if ag.engine is not None and not ag.engine_sleeps)
    totals = {}
    for phase in PHASES:
        shares = []
        for ag in agents:
            share = sum(x.bytes for x in ag.phases.get(phase, []))
            if phase == "sample" and ag.engine is not None and ag.engine_sleeps:
                share += ag.engine.bytes
            shares.append(share)
        totals[phase] = standing + max(shares, default=0)
    return totals


def microbatch_rows(cfg: RunConfig, sequences: int, seq: int) -> int:
    """Full-length sequences (`seq` input tokens) in the update's largest micro-batch: grpo.minibatch_size,
    or with grpo.max_tokens_per_microbatch as many as its tokens hold (corl.trainer.packing): padded,
    rows x seq within the budget; packed, the budget's tokens (ceil: a last sequence may fill the rest).
    A sequence longer than the budget still runs, alone."""
    rows = min(cfg.grpo.minibatch_size or sequences, sequences)
    budget = cfg.grpo.max_tokens_per_microbatch
    if budget is None:
        return rows
    fit = -(-budget // seq) if cfg.grpo.padding_free else budget // seq
    return max(1, min(rows, fit))


def agent_plan(cfg: RunConfig, machine: Machine, index: int, facts: ModelFacts, prompt: PromptLength, dp: int) -> AgentPlan:
    """What agent `index` holds on each of its `dp` ranks, phase by phase."""
    cohort = cfg.cohort
    prompts = -(-cohort.prompts_per_step // dp)  # strided shards: dp rank 0 has the most
    sequences, sampled = prompts * cohort.samples_per_prompt, prompts * cohort.votes
    val = -(-cfg.data.val_size // dp) if cfg.data.val else 0  # greedy validation: 1 sample a prompt
    at_once = max(min(cfg.rollout.batch_size or sampled, sampled), min(cfg.rollout.batch_size or val, val))
    plan = AgentPlan(
        index=index,
        name=cfg.agents[index].name,
        facts=facts,
        prompt=prompt,
        precision=precision_of(cfg),
        dp=dp,
        sequences=sequences,
        sampled=sampled,
        trains=cfg.agents[index].train,
        sampled_at_once=at_once,
        minibatch=microbatch_rows(cfg, sequences, prompt.tokens + cohort.max_new_tokens - 1),
        completion=cohort.max_new_tokens,
    )
    plan.states = states(cfg, facts, dp, plan.trains)
    plan.engine, plan.engine_sleeps = vllm_engine(cfg, machine, facts, prompt.tokens + cohort.max_new_tokens, plan)
    plan.phases = {
        "sample": sample_items(cfg, plan),
        "score": score_items(cfg, plan),
        "update": update_items(cfg, plan) if plan.trains else [],
        "optimizer step": optimizer_items(cfg, machine, plan) if plan.trains else [],
    }
    return plan


def _shards(facts: ModelFacts, ranks: int, trainable_only: bool) -> int:
    return sum(a.shard(t.numel, t.first_dim, ranks) for t in facts.tensors if t.trainable or not trainable_only)


def states(cfg: RunConfig, facts: ModelFacts, dp: int, trains: bool = True) -> list[Item]:
    """Parameters, gradients, AdamW moments (FSDP2: this rank's shards), and frozen copies.
    A frozen agent (agents[].train: false) holds its parameters alone (and an EMA teacher)."""
    fsdp = cfg.distributed.fsdp
    ranks = dp if fsdp else 1
    params, trainable = _shards(facts, ranks, False), _shards(facts, ranks, True)
    where = f"FSDP2 shard, 1/{dp}" if fsdp and dp > 1 else "whole"
    lora = " (LoRA adapters)" if cfg.compute.lora is not None else ""
    items = [Item("parameters", a.parameter_bytes(params), f"float32, {where}: {params:,} of {facts.params:,}")]
    if trains:
        items.append(Item("gradients", a.gradient_bytes(trainable), f"float32{lora}, {trainable:,} trainable"))
        items.append(Item("AdamW moments", a.adamw_bytes(trainable), "2 x float32 per trainable parameter"))
    if cfg.grpo.beta > 0 and trains:
        items.append(reference_item(cfg, facts, dp))
    from corl.labels import label_source_spec

    if label_source_spec(cfg.cohort.label_source).needs_teacher:
        items.append(Item("EMA teacher copy", a.parameter_bytes(facts.params), "label source ema: a whole float32 copy"))
    return items


def reference_item(cfg: RunConfig, facts: ModelFacts, dp: int) -> Item:
    """The KL reference (corl.models.prepare_reference): without FSDP a whole float32 copy; under
    FSDP2 this rank's shard of it, in bfloat16 with compute.bf16 (the dtype it computes in)."""
    if not cfg.distributed.fsdp:
        return Item("KL reference copy", a.parameter_bytes(facts.params), "grpo.beta > 0: a whole float32 copy")
    width = a.BF16 if cfg.compute.bf16 else a.FP32
    held = _shards(facts, dp, False)
    note = f"grpo.beta > 0: {'bfloat16' if cfg.compute.bf16 else 'float32'}, FSDP2 shard, 1/{dp}: {held:,} of {facts.params:,}"
    return Item("KL reference shard", width * held, note)


def vllm_engine(cfg: RunConfig, machine: Machine, facts: ModelFacts, model_len: int, plan: AgentPlan):
    """A colocated vLLM engine: on GPUs its share of the device (rollout.gpu_memory_utilization);
    on CPU its float32 weights and the KV cache corl sizes for it (corl.rollout.vllm)."""
    if cfg.rollout.engine != "vllm":
        return None, False
    from corl.rollout import vllm as engine

    # as VLLMEngine: rollout.max_model_len, else the model's context up to MAX_DEFAULT_MODEL_LEN
    max_len = cfg.rollout.max_model_len or min(facts.context or engine.MAX_DEFAULT_MODEL_LEN, engine.MAX_DEFAULT_MODEL_LEN)
    plan.engine_max_len = max_len
    if max_len < model_len:
        plan.notes.append(
            f"vLLM's max_model_len {max_len:,} < prompt + completion {model_len:,}: set rollout.max_model_len: {model_len}"
        )
    kv_token = a.kv_bytes_per_token(facts.shape, "fsdp_bf16" if machine.on_gpu else "fp32")
    tp = cfg.rollout.tensor_parallel_size
    if not machine.on_gpu:
        from corl.plan.machine import system_ram

        # corl.rollout.vllm.cpu_kv_cache_bytes: room for MAX_NUM_SEQS full sequences, capped by a share of RAM
        want, floor = kv_token * max_len * engine.MAX_NUM_SEQS, 4 * kv_token * max_len
        kv = max(min(want, int(system_ram() * engine.CPU_KV_CACHE_SHARE)), floor)
        weights = a.parameter_bytes(facts.params) // tp
        note = f"float32 weights {a.size(weights)} + KV cache {a.size(kv)}"
        return Item("vLLM engine", weights + kv, note), False
    share = cfg.rollout.gpu_memory_utilization or engine.GPU_MEMORY_UTILIZATION
    budget = int(share * (machine.memory or 0))
    weights = (a.FP32 if cfg.rollout.dtype == "float32" else a.BF16) * facts.params // tp
    kv = budget - weights
    fits = max(kv, 0) // max(kv_token * max_len // tp, 1)
    room = f"KV cache up to {a.gib(kv):.1f} GiB = {fits:,} sequences" if kv > 0 else "no room left for a KV cache"
    note = (
        f"{share:g} of the device: weights {a.gib(weights):.2f} GiB, {room} of {max_len:,} tokens at once "
        f"(this rank samples {plan.sampled:,})"
    )
    if machine.memory is not None:
        plan.engine_sequences = fits
        plan.engine_needs = (
            f"rollout.gpu_memory_utilization {share:g} x {a.size(machine.memory)} = {a.size(budget)}, its weights "
            f"{a.size(weights)}, one sequence of {max_len:,} tokens {a.size(kv_token * max_len // tp)}"
        )
    return Item("vLLM engine", budget, note), cfg.rollout.sleep_mode


def _head_chunk(cfg: RunConfig, facts: ModelFacts) -> int | None:
    """corl's chunked head applies where logprobs.completion_hidden does: plain-head text models,
    FSDP2-sharded or not (the root unit, which holds the head, stays gathered through the backward)."""
    from corl.trainer.logprobs import LOGIT_CHUNK_ELEMENTS, PLAIN_HEAD_MODEL_TYPES

    if facts.vision is not None or facts.model_type not in PLAIN_HEAD_MODEL_TYPES:
        return None
    return LOGIT_CHUNK_ELEMENTS


def sample_items(cfg: RunConfig, plan: AgentPlan) -> list[Item]:
    """Sampling: the HF engine samples from the policy itself, so FSDP gathers the whole model
    (Agent.generating), and its KV cache. vLLM samples from its own copy (its engine item): the
    policy stays sharded, and its weights reach the engine one tensor at a time (sync_weights)."""
    items = []
    facts, prec = plan.facts, plan.precision
    if cfg.distributed.fsdp and cfg.rollout.engine == "hf":
        width = a.BF16 if cfg.compute.bf16 else a.FP32
        items.append(Item("gathered weights", width * facts.params, "FSDP2 unshards the whole model to sample"))
    if cfg.rollout.engine == "hf":
        n, p, c = plan.sampled_at_once, plan.prompt.tokens, plan.completion
        kv = a.hf_sampling_bytes(facts.shape, prec, n, p, c)
        items.append(Item("KV cache + decode", kv, f"{n:,} sequences x {p + c:,} tokens at once"))
        if facts.vision is not None and plan.prompt.image_patches:
            patches = n * plan.prompt.image_patches  # generate encodes every sequence's images
            vision = a.vision_bytes(facts.vision, prec, patches, grad=False)
            items.append(Item("images + vision tower", vision, f"{patches:,} patches, estimated (ViT layer)"))
    return items


def score_items(cfg: RunConfig, plan: AgentPlan) -> list[Item]:
    """Passes without autograd before the update: old log-probs (grpo.num_passes > 1) and the KL
    reference's log-probs (grpo.beta > 0), one update minibatch at a time as `Agent` runs them,
    and rewards read from logits (entropy, self_certainty) 64 sequences at a time."""
    from corl.rewards import weighted_reward

    from_logits = weighted_reward(cfg.cohort.reward_terms()).reads_logits
    whole = plan.trains and (cfg.grpo.num_passes > 1 or cfg.grpo.beta > 0)  # a frozen agent scores nothing for an update
    if not (whole or from_logits):
        return []
    # the larger of the passes that run: a minibatch of frozen log-probs, 64 sequences of a reward's logits
    n = max(plan.minibatch if whole else 0, min(64, plan.sequences) if from_logits else 0)
    seq = plan.prompt.tokens + plan.completion
    chunk = _head_chunk(cfg, plan.facts)
    logits = a.head_elements(n, plan.completion, plan.facts.shape.vocab, chunk)
    forward = a.no_grad_forward_bytes(plan.facts.shape, plan.precision, n, seq) + 12 * logits
    items = [Item("forward without grad", forward, f"{n:,} sequences x {seq:,} tokens")]
    if cfg.distributed.fsdp:  # each pass gathers the model it scores with (the policy, then the KL reference)
        width = a.BF16 if cfg.compute.bf16 else a.FP32
        items.append(
            Item("gathered weights", width * plan.facts.params, "FSDP2 unshards the scoring model (policy or reference)")
        )
    return items


def update_items(cfg: RunConfig, plan: AgentPlan) -> list[Item]:
    """One minibatch's forward and backward, its logits and loss, and what bf16 adds."""
    facts, prec, n, c = plan.facts, plan.precision, plan.minibatch, plan.completion
    seq = plan.prompt.tokens + c - 1  # the last completion token is never an input
    gc = cfg.compute.gradient_checkpointing
    chunk = _head_chunk(cfg, facts)
    logits = a.head_elements(n, c, facts.shape.vocab, chunk)
    kind = "chunked head" if chunk else "all at once"
    total = a.update_peak_bytes(facts.shape, prec, n, seq, gc, logits)
    other = a.update_peak_bytes(facts.shape, prec, n, seq, not gc, logits)  # the other compute.gradient_checkpointing
    items = [
        Item(
            "activations + logits",
            total,
            f"{n:,} sequence{'s' * (n != 1)} x {seq:,} tokens, {'checkpointed' if gc else 'no checkpointing'} "
            f"({a.size(other)} {'without' if gc else 'with'}); of it {logits:,} logits ({kind}): "
            f"{a.size(a.logit_bytes(logits))}",
        ),
        Item("loss terms", a.loss_bytes(n, c), "[n, C] float32 tensors of the GRPO loss"),
    ]
    if prec == "autocast":
        copies = a.autocast_weight_copies(facts.linear_params, gc, facts.shape.layers)
        items.append(Item("bf16 weight copies", copies, "autocast keeps a bf16 cast of each weight for the backward"))
    if cfg.distributed.fsdp:
        width = a.BF16 if cfg.compute.bf16 else a.FP32
        gathered = a.fsdp_gather_bytes(facts.block_params, facts.root_params, width)
        items.append(Item("FSDP2 gathers", gathered, "root parameters, two blocks (prefetch), a block's gradient"))
        if facts.head_params:
            dtype = "bfloat16" if cfg.compute.bf16 else "float32"
            tied = " (tied to the embedding)" if facts.head_tied else ""
            note = f"the output head's{tied}: {facts.head_params:,} parameters, unsharded in {dtype} through the backward"
            items.append(Item("root gradient", a.root_gradient_bytes(facts.head_params, width), note))
    if facts.vision is not None and plan.prompt.image_patches:
        patches = n * plan.prompt.image_patches  # every row of the minibatch brings its prompt's images
        vision = a.vision_bytes(facts.vision, prec, patches, grad=True)
        items.append(Item("images + vision tower", vision, f"{patches:,} patches, estimated (ViT layers)"))
    return items


def optimizer_items(cfg: RunConfig, machine: Machine, plan: AgentPlan) -> list[Item]:
    """AdamW's step, and plain data parallelism's flat gradient buffer (DataParallel.sum_gradients)."""
    ranks = plan.dp if cfg.distributed.fsdp else 1
    trainable = _shards(plan.facts, ranks, True)
    items = [
        Item(
            "AdamW step",
            a.optimizer_step_bytes(trainable, plan.facts.largest_trainable, machine.on_gpu),
            "foreach sqrt of every moment" if machine.on_gpu else "per parameter",
        )
    ]
    if plan.dp > 1 and not cfg.distributed.fsdp:
        items.append(Item("gradient all-reduce", a.gradient_bytes(trainable), "one flat float32 copy of the gradients"))
    return items
