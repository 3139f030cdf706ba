"""One cohort member: a policy with its own weights, optimizer, rollout engine and prompt wording.

Agents never share parameters, gradients or optimizer state; the only thing that
crosses between them is the answers table (see `corl.trainer.loop`).
"""

from __future__ import annotations

import copy
import os
import warnings
from pathlib import Path

import torch

from corl.checkpoints.sharded import SHARDED_FOLDER, load_sharded, save_sharded
from corl.config import AgentConfig, ComputeConfig, GRPOConfig, RolloutConfig
from corl.data.rows import IMAGES_INPUT, Problem, PromptTemplate
from corl.models import prepare_frozen, prepare_model, prepare_reference, save_policy
from corl.parallel import DataParallel
from corl.rollout import Rollout, SamplingParams, build_engine
from corl.rollout.base import Prompt
from corl.trainer import logprobs
from corl.trainer.update import UpdateStats, grpo_update

SCHEDULER_FILE = "scheduler.pt"  # under FSDP (no trainer.pt): the lr schedule's state, beside the shards


def vision_parameters(model) -> list[torch.nn.Parameter]:
    """A vision-language model's vision encoder and projector: every parameter outside its
    language model (`get_decoder()`) and output head."""
    language = {id(p) for p in model.get_decoder().parameters()} | {id(p) for p in model.get_output_embeddings().parameters()}
    return [p for p in model.parameters() if id(p) not in language]


@torch.no_grad()
def ema_update(ema_model: torch.nn.Module, model: torch.nn.Module, momentum: float) -> None:
    """ema <- momentum * ema + (1 - momentum) * online, parameter by parameter."""
    for e, p in zip(ema_model.parameters(), model.parameters(), strict=True):
        e.lerp_(p.detach(), 1.0 - momentum)


def lr_scheduler(optimizer: torch.optim.Optimizer, grpo: GRPOConfig, total_steps: int | None):
    """The optimizer's lr schedule (grpo.lr_scheduler_type, grpo.warmup_steps) over `total_steps` training steps,
    by transformers' own schedules (TRL's)."""
    from transformers import get_scheduler

    if total_steps is None and grpo.lr_scheduler_type != "constant":
        raise ValueError(f"grpo.lr_scheduler_type {grpo.lr_scheduler_type!r} needs the run's number of steps")
    steps = total_steps or 1
    return get_scheduler(grpo.lr_scheduler_type, optimizer, num_warmup_steps=grpo.warmup(steps), num_training_steps=steps)


class Agent:
    """A policy plus everything it needs to sample and to update itself."""

    def __init__(
        self,
        config: AgentConfig,
        model,
        tokenizer,
        template: PromptTemplate,
        prompt_field: str,
        grpo: GRPOConfig,
        rollout: RolloutConfig | None = None,
        ema_momentum: float | None = None,
        dp: DataParallel | None = None,
        compute: ComputeConfig | None = None,
        processor=None,
        total_steps: int | None = None,
    ):
        """`total_steps`: the run's cohort.steps, over which grpo.lr_scheduler_type moves the lr."""
        self.config = config
        self.name = config.name
        self.tokenizer = tokenizer
        self.processor = processor  # a vision-language model's (images + text); None for a text model
        self.template = template
        self.prompt_field = prompt_field  # key into Problem.texts: this agent's wording
        self.grpo = grpo
        self.dp = dp or DataParallel()  # the ranks that share this agent's model (size 1: just this one)
        rollout = rollout or RolloutConfig()
        self.trains = config.train  # false: a frozen peer that samples and teaches but never updates
        # Frozen copies come first, from the plain model: they never train, shard or carry adapters.
        self.reference = None
        if grpo.beta > 0 and self.trains:
            # Only with a KL term is a frozen copy of the initial policy worth its memory. Under
            # FSDP2 it is sharded as the policy is, and computes as the policy does (prepare_reference).
            self.reference = prepare_reference(copy.deepcopy(model).eval().requires_grad_(False), compute, self.dp)
        self.ema_momentum = ema_momentum
        self.teacher = None  # Co-rewarding-II: a slowly moving copy of this agent labels it
        self.teacher_engine = None
        if ema_momentum is not None:
            self.teacher = prepare_frozen(copy.deepcopy(model).eval().requires_grad_(False), compute)
            self.teacher_engine = build_engine(
                rollout, self.teacher, tokenizer, add_special_tokens=not template.chat, processor=processor
            )
        if config.freeze_vision:
            if processor is None:
                raise ValueError(f"agent {config.name!r}: freeze_vision is set but its model is not a vision-language model")
            for parameter in vision_parameters(model):
                parameter.requires_grad_(False)
        # Gradient checkpointing, LoRA, FSDP sharding, bf16 (compute: / distributed:), then the optimizer.
        self.model = model = prepare_model(model, compute, self.dp)
        # Chat templates already contain BOS; adding special tokens again would double it.
        self.engine = build_engine(rollout, model, tokenizer, add_special_tokens=not template.chat, processor=processor)
        self.optimizer = self.scheduler = None
        if self.trains:
            trainable = [p for p in model.parameters() if p.requires_grad]  # all of them, or only the LoRA adapters
            self.optimizer = torch.optim.AdamW(trainable, lr=config.lr, weight_decay=config.weight_decay)
            self.scheduler = lr_scheduler(self.optimizer, grpo, total_steps)
        else:
            # A frozen peer is held as a training one is (LoRA adapters, FSDP shards: the same
            # checkpoint folder), but none of its parameters takes a gradient and it has no optimizer.
            model.requires_grad_(False)

    def prompts(self, problems: list[Problem], text_key: str | None = None) -> list[Prompt]:
        """Rendered prompts in this agent's wording (or in the wording `text_key`).

        A vision-language agent's prompts are ImagePrompts: the problem's images (Problem.inputs
        "images", none for a text-only row) before the text, in its processor's chat template.
        """
        key = text_key or self.prompt_field
        if self.processor is None:
            return [self.template.render(p.texts[key], self.tokenizer) for p in problems]
        from corl.vision.inputs import image_prompt

        return [image_prompt(self.processor, self.template.text(p.texts[key]), p.inputs.get(IMAGES_INPUT)) for p in problems]

    def generating(self):
        """Context for generation and no-grad passes: under FSDP it gathers the whole model
        (every rank of the agent enters together); otherwise it does nothing."""
        return self.dp.gathered(self.model)

    def sample(self, problems: list[Problem], num_samples: int, params: SamplingParams) -> Rollout:
        if getattr(self.engine, "holds_weights", False):
            # vLLM samples from its own copy (synced after each step, one tensor gathered at a
            # time): the policy stays sharded, and ranks need not pair any collective here.
            rollout = self.engine.generate(self.prompts(problems), num_samples, params)
        else:
            with self.generating():  # the HF engine samples from the policy itself
                rollout = self.engine.generate(self.prompts(problems), num_samples, params)
        # vLLM's sleep mode (GPUs) frees the engine's memory while the agent trains; the weight
        # sync and the next generate wake it. The HF engine shares the weights: nothing to free.
        self.engine.sleep()
        return rollout

    def sample_teacher(self, problems: list[Problem], num_samples: int, params: SamplingParams) -> Rollout:
        """Samples of the EMA teacher (Co-rewarding-II); only agents built with ema_momentum have one."""
        if self.teacher_engine is None:
            raise RuntimeError(f"agent {self.name!r} has no EMA teacher (label source 'ema' builds one)")
        rollout = self.teacher_engine.generate(self.prompts(problems), num_samples, params)
        self.teacher_engine.sleep()
        return rollout

    def close(self) -> None:
        """Release the rollout engines (a vLLM engine holds memory until closed)."""
        for engine in (self.engine, self.teacher_engine):
            if engine is not None:
                engine.close()

    def logit_rewards(self, rollout: Rollout, reward_fn, temperature: float, batch: int = 64) -> torch.Tensor:
        """Rewards scored from this policy's own logits (RENT, Intuitor): [B, K] (`logprobs.logit_rewards`)."""
        self.model.eval()
        with self.generating():
            return logprobs.logit_rewards(self.model, rollout, reward_fn, temperature, batch)

    def update(
        self, rollout: Rollout, rewards: torch.Tensor, params: SamplingParams, exclude: torch.Tensor | None = None
    ) -> UpdateStats:
        """One GRPO update on this agent's own rollouts and rewards ([B, K]), then the new
        weights go to the rollout engine.

        `exclude` ([N] bool) leaves sequences out of the loss (cohort.truncated_answers: drop),
        as TRL's mask_truncated_completions: their tokens are masked (no loss, no KL, not counted
        by dapo's token total), while their rewards still count in their group's advantages
        and they still count as sequences for grpo's and dr_grpo's divisor.

        With data parallelism (`self.dp`: D ranks, each holding a shard of the batch) every
        rank scales its loss by the *whole* batch's sizes and the ranks' gradients are summed,
        so the step is the single-process step on the whole batch. The ranks first agree on
        those sizes, so all of them run the same collectives even when some have no sequence
        with signal.
        """
        if not self.trains:  # agents[].train: false: its weights stay as loaded
            return UpdateStats(frozen=True)
        lr = self.optimizer.param_groups[0]["lr"]
        stats = grpo_update(self, rollout, rewards, params, exclude)
        stats.lr = lr
        # one scheduler step per training step, whether or not this one had a sequence with signal:
        # the schedule is a function of the steps done, as the batch order is
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=r"Detected call of `lr_scheduler.step\(\)` before")
            self.scheduler.step()
        return stats

    def after_update(self, stats: UpdateStats, stepped: bool) -> None:
        """The EMA teacher follows the policy; the rollout engines get the new weights."""
        if self.teacher is not None:
            ema_update(self.teacher, self.model, self.ema_momentum)
            self.teacher_engine.sync_weights(self.teacher)
        if stepped:
            stats.sync = self.engine.sync_weights(self.model)

    def state_dict(self) -> dict:
        """The optimizer's (and an EMA teacher's) state, whole: without FSDP every rank holds it all."""
        state = {"optimizer": self.optimizer.state_dict() if self.optimizer is not None else None}
        if self.scheduler is not None:
            state["scheduler"] = self.scheduler.state_dict()
        if self.teacher is not None:
            state["teacher"] = self.teacher.state_dict()
        return state

    def load_state_dict(self, state: dict) -> None:
        if self.optimizer is not None and state["optimizer"] is not None:  # None: saved while frozen
            self.optimizer.load_state_dict(state["optimizer"])
        if self.scheduler is not None and "scheduler" in state:  # absent: a checkpoint from before schedules (constant)
            self.scheduler.load_state_dict(state["scheduler"])
        if self.teacher is not None:
            self.teacher.load_state_dict(state["teacher"])
            # its engine was built from the policy's weights (the teacher's copy before this load)
            self.teacher_engine.sync_weights(self.teacher)

    def save(self, folder: Path, gathered: bool = True) -> None:
        """Write this agent: a Hugging Face model folder (weights, tokenizer), with LoRA its
        unmerged adapters in folder/adapter/, and what a resume needs: trainer.pt, or under
        FSDP each rank's shards of the model and optimizer in folder/sharded/ and the lr
        schedule's state in scheduler.pt.

        Under FSDP `gathered=False` writes the shards and the tokenizer only (no whole-model
        gather): what a resume needs; `corl export` writes the model folder from them later.
        Every rank of the agent's dp group calls it (gathering a sharded model is a
        collective); its dp rank 0 writes the folder.
        """
        self.dp.check_replicas(self.model)
        if self.dp.fsdp and not gathered:
            save_sharded(self.model, self.optimizer, folder / SHARDED_FOLDER, self.dp.group)
            self._save_scheduler(folder)
            if self.dp.rank == 0:
                (self.processor or self.tokenizer).save_pretrained(folder)
            return
        weights = self.dp.full_model_state(self.model)
        if self.dp.fsdp:
            save_sharded(self.model, self.optimizer, folder / SHARDED_FOLDER, self.dp.group)
            self._save_scheduler(folder)
        if self.dp.rank != 0:
            return
        save_policy(self.model, folder, weights)
        if hasattr(self.model, "get_base_model"):  # a peft model
            from corl.models import ADAPTER_FOLDER, save_adapter

            save_adapter(self.model, folder / ADAPTER_FOLDER, weights)
        # A processor writes its tokenizer and image processor: the folder loads with AutoProcessor.
        (self.processor or self.tokenizer).save_pretrained(folder)
        if not self.dp.fsdp:
            torch.save(self.state_dict(), folder / "trainer.pt")

    def _save_scheduler(self, folder: Path) -> None:
        """Under FSDP (no trainer.pt) the lr schedule's state goes beside the shards, from every rank: each
        reads it back on resume, also on a node whose disk holds no other rank's files. The ranks write
        the same bytes; each through its own temporary name, so none reads a half-written file."""
        if self.scheduler is None:
            return
        folder.mkdir(parents=True, exist_ok=True)
        tmp = folder / f".{SCHEDULER_FILE}.{os.getpid()}.{self.dp.rank}.tmp"
        torch.save(self.scheduler.state_dict(), tmp)
        os.replace(tmp, folder / SCHEDULER_FILE)

    def load(self, folder: Path) -> None:
        """Resume from what `save` wrote (the weights themselves came with the model folder or
        the adapters), then hand the rollout engines the restored weights: an engine holding
        its own copy (vLLM) was built before they were loaded."""
        if (folder / SHARDED_FOLDER).is_dir():
            load_sharded(self.model, self.optimizer, folder / SHARDED_FOLDER, self.dp.group)
            if self.scheduler is not None and (folder / SCHEDULER_FILE).is_file():
                self.scheduler.load_state_dict(torch.load(folder / SCHEDULER_FILE, weights_only=False))
        else:
            self.load_state_dict(torch.load(folder / "trainer.pt", weights_only=False))
        self.engine.sync_weights(self.model)
        if self.teacher_engine is not None:
            self.teacher_engine.sync_weights(self.teacher)
