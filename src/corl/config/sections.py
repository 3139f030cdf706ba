"""The sections of a run configuration (agents, data, cohort, rollout, grpo, ...): one pydantic
model each, every value checked when the file is read (`corl.config`)."""

from __future__ import annotations

import math
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from corl.registry import ENGINES, LABEL_SOURCES, REWARDS, TASKS, Registry
from corl.rollout.options import HFOptions, VLLMOptions

MAX_LR = 1.0  # agents[].lr: see AgentConfig._a_usable_lr
DEFAULT_INSTRUCTION = "Please reason step by step, and put your final answer within \\boxed{}."


class ConfigError(ValueError):
    """A configuration value is missing or not allowed; the message says which and why."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)


def _registered(table: Registry, name: str) -> str:
    """`name` if the registry has it; the registry is the one list of allowed names."""
    if name not in table:
        raise ValueError(f"{table.kind} {name!r} is not registered; choose one of: {', '.join(table.names())}")
    return name


class AgentConfig(_Strict):
    """One member of the cohort: its own model, tokenizer, optimizer and prompt wording."""

    name: str = Field(min_length=1, description="Unique name; used in metrics and checkpoint folders.")
    model: str = Field(
        min_length=1,
        description="Hugging Face model id, local path, `tiny:<family>` (embedded default) or `tiny-vl:<family>` (vision-language). "
        "A vision-language model (its config has a vision tower) is loaded with its processor and sees the rows' images.",
    )
    tokenizer: str | None = Field(None, description="Tokenizer id or path; defaults to the model's.")
    chat_template: bool = Field(False, description="Wrap prompts in the tokenizer's chat template.")
    lr: float = Field(1e-6, description="AdamW learning rate of this agent (0 < lr <= 1).")
    weight_decay: float = Field(0.0, ge=0, description="AdamW weight decay of this agent (decoupled, as torch.optim.AdamW).")
    prompt_field: str | None = Field(
        None,
        description="Dataset field this agent reads its prompt from (data decoupling, 'Different family+'); defaults to data.prompt_field.",
    )
    data: str | None = Field(
        None,
        description="This agent's own file of wordings (rows aligned with data.train by id); defaults to data.train.",
    )
    seed: int | None = Field(None, description="Sampling seed of this agent (seed-only cohorts); defaults to its index.")
    train: bool = Field(
        True,
        description="false = a frozen peer: it samples, its answers are in the table (it still teaches and is "
        "validated), but it never updates (no optimizer state, no KL reference; its weights stay as loaded). "
        "Co-RL with a frozen teacher is the 'is it just distillation?' control. At least one agent must train.",
    )
    freeze_vision: bool = Field(
        False,
        description="Vision-language models: train the language model only (the vision encoder and its projector stay as loaded).",
    )

    @field_validator("lr")
    @classmethod
    def _a_usable_lr(cls, lr: float) -> float:
        # AdamW moves every weight by about lr on each step whatever the gradient's size, so an
        # lr above 1 destroys any model in one step (and from ~3e37 on, AdamW's float32 step
        # size overflows with a traceback).
        if not math.isfinite(lr) or lr <= 0 or lr > MAX_LR:
            raise ValueError(
                f"must be a number with 0 < lr <= {MAX_LR:g}: AdamW moves every weight by about lr per step "
                "(typical values: 1e-6 to 1e-4 for pretrained models, 1e-3 for the tiny ones)"
            )
        return lr


class TrainFile(_Strict):
    """One training file of several mixed with weights (data.train as a list; corl.data.mix)."""

    path: str = Field(min_length=1, description="Local JSONL/Parquet/CSV file or Hugging Face dataset name.")
    weight: float = Field(
        1.0, gt=0, allow_inf_nan=False, description="Its share of every batch: weight / the sum of the weights."
    )
    split: str | None = Field(None, description="Split name for a Hugging Face dataset; defaults to data.split.")


class DataConfig(_Strict):
    """Where prompts come from. Ground-truth answers are optional and never reach a label-free reward."""

    train: str | list[TrainFile] = Field(
        min_length=1,
        description="Local JSONL/Parquet/CSV file or Hugging Face dataset name; or several, mixed with weights: "
        "[{path: a.jsonl, weight: 3}, {path: b.parquet, weight: 1}]. Each batch then holds each file's share of "
        "cohort.prompts_per_step (a fixed, seeded order: a resumed run draws the same batches), and each file's "
        "rows come once per pass over it. Ids must be unique across the files (a row without one is <file "
        "number>/<row number>).",
    )
    split: str = Field("train", description="Split name for Hugging Face datasets.")
    val: str | None = Field(None, description="Held-out file or dataset for periodic validation (needs answers).")
    val_split: str = Field("test", description="Split name of data.val when it is a Hugging Face dataset.")
    val_size: int = Field(64, ge=1, description="Validation problems evaluated each time (first N rows).")
    max_rows: int | None = Field(None, ge=1, description="Use only the first N training rows (of each file of a mix).")
    max_prompt_tokens: int | None = Field(
        None,
        ge=1,
        description="Drop training rows whose prompt (template, instruction and chat template applied) is longer "
        "than this in any agent's tokens, as verl's filter_overlong_prompts; the count is printed when the run "
        "starts, and a run with no row left is refused. Dropped, not cut: TRL's max_prompt_length keeps a "
        "prompt's last tokens, which for a word problem is another, unanswerable problem that still earns rewards. "
        "Text tokens only: a vision-language agent's images are not counted. null = every row.",
    )
    id_field: str = Field(
        "id",
        description="Column of a row's unique id: labels, other wordings (agents[].data) and answers are matched by it; "
        "rows without it are numbered by their position.",
    )
    prompt_field: str = Field(
        "problem", description="Column of the problem text (train; validation too unless val_prompt_field)."
    )
    answer_field: str | None = Field(
        "answer",
        description="Ground-truth column of the training rows, for diagnostics and label source 'truth' only. Unlabeled "
        "training data needs no setting: a train file without this column trains label-free, and the run records "
        "null here (config.yaml and its record), so a resume needs no setting either (an explicitly set column must "
        "exist); null ignores it even where it exists.",
    )
    val_prompt_field: str | None = Field(None, description="Column of the validation problem text; defaults to prompt_field.")
    val_answer_field: str | None = Field(
        None,
        description="Column of the validation answers; defaults to answer_field (or 'answer' when that is null: "
        "unlabeled training data with a labeled validation set needs no setting).",
    )
    image_field: str | None = Field(
        "images",
        description="Column of a row's image(s) (paths relative to the file, PIL images, {bytes, path}): "
        "vision-language agents see them before the text; text-only agents read the text alone.",
    )
    template: str = Field("{problem}\n{instruction}", description="Prompt text; placeholders {problem} and {instruction}.")
    instruction: str = Field(
        DEFAULT_INSTRUCTION,
        description="The text put in the template's {instruction}: what to do with the problem (the default asks for "
        "a \\boxed{} answer, which the math task extracts).",
    )
    task: str = Field(
        "math", description="A registered task kind (corl.tasks): what a completion's answer is and how answers agree."
    )

    def train_files(self) -> list[TrainFile]:
        """data.train as a list of files (one of weight 1 when it names one)."""
        return [TrainFile(path=self.train)] if isinstance(self.train, str) else list(self.train)

    @model_validator(mode="after")
    def _template_has_problem(self) -> DataConfig:
        if "{problem}" not in self.template:
            raise ValueError("data.template must contain the placeholder {problem}")
        return self

    @field_validator("task")
    @classmethod
    def _known_task(cls, name: str) -> str:
        return _registered(TASKS, name)


class RewardTerm(_Strict):
    """One part of the step's reward: a registered reward and its weight."""

    name: str = Field(description="A registered reward (corl.rewards).")
    weight: float = Field(1.0, allow_inf_nan=False, description="Its weight in the sum.")

    @field_validator("name")
    @classmethod
    def _known_reward(cls, name: str) -> str:
        return _registered(REWARDS, name)


class StopConfig(_Strict):
    """Early stopping at the validation points, from label-free signals only (corl.trainer.selection)."""

    rule: Literal["none", "plateau", "collapse"] = Field(
        "none",
        description="plateau: the label-free score of the trained points (not the base model's, eval_on_start) has "
        "not improved by more than min_delta for `patience` points; collapse: any one agent's commonest greedy answer "
        "covers >= collapse_share of the validation prompts (the worst agent: one collapsed agent teaches its collapse "
        "to its peers), or the last steps' reward std is ~0 (<= 1e-3) while the agents' agreement (one agent: its "
        "majority share) is ~1 (>= 0.99): every sample the same answer. The run writes its final checkpoint there, says "
        "why, and exits 0.",
    )
    patience: int = Field(3, ge=1, description="plateau: validation points without improvement before stopping.")
    min_delta: float = Field(0.0, ge=0, description="plateau: an improvement must exceed this.")
    collapse_share: float = Field(
        0.9,
        gt=0,
        le=1,
        description="A point where one agent gives one greedy answer on >= this share of the validation prompts is "
        "collapsed: logging.select label_free never chooses it, and stop.rule collapse stops there.",
    )


class CohortConfig(_Strict):
    """Algorithm 1's knobs: who labels whom, how much is sampled, for how long."""

    label_source: str = Field(
        "peer",
        description="A registered label source (corl.labels): peer = Co-RL ring (agent n taught by n-1); self = TTRL; "
        "truth = GT-Reward; ema = Co-rewarding-II (majority of an EMA copy of the agent); random = control (one of "
        "agent n-1's answers drawn uniformly); ring2, pooled, star = topologies for 3+ agents.",
    )
    reward: str = Field(
        "agreement",
        description="A registered reward (corl.rewards): agreement = 1 if the answer matches the label; entropy = RENT "
        "(minus mean token entropy, arXiv:2505.22660); self_certainty = Intuitor (mean KL(U || p), arXiv:2505.19590); "
        "confidence = agreement x the label's vote share (needs grpo.scale_rewards: none); vote_share = the share of "
        "the teacher's samples that give the completion's answer. "
        "The intrinsic rewards ignore labels (still computed for the diagnostics).",
    )

    rewards: list[RewardTerm] | None = Field(
        None,
        min_length=1,
        description="Rewards summed with weights, e.g. [{name: agreement, weight: 1.0}, {name: my_format, weight: 0.1}]; "
        "unset = cohort.reward with weight 1. When both are set, cohort.reward names the first term.",
    )

    @model_validator(mode="after")
    def _one_reward_setting(self) -> CohortConfig:
        if self.rewards is not None:
            if "reward" in self.model_fields_set and self.reward != self.rewards[0].name:
                raise ValueError(
                    f"set cohort.rewards or cohort.reward, not both (cohort.reward {self.reward!r} is not its first term)"
                )
            self.__dict__["reward"] = self.rewards[0].name  # the primary reward (model cards, method names)
        return self

    def reward_terms(self) -> list[tuple[str, float]]:
        """[(reward name, weight)]: cohort.rewards, or cohort.reward with weight 1."""
        if self.rewards is None:
            return [(self.reward, 1.0)]
        return [(term.name, term.weight) for term in self.rewards]

    @field_validator("label_source")
    @classmethod
    def _known_label_source(cls, name: str) -> str:
        return _registered(LABEL_SOURCES, name)

    @field_validator("reward")
    @classmethod
    def _known_reward(cls, name: str) -> str:
        return _registered(REWARDS, name)

    ema_momentum: float = Field(0.99, gt=0, lt=1, description="EMA teacher momentum for label_source 'ema'.")
    teacher: int = Field(
        0, ge=0, description="label_source 'star': the agent (its index in agents) that teaches every other agent."
    )
    samples_per_prompt: int = Field(8, ge=1, description="K completions per prompt and agent (at least 2).")

    @field_validator("samples_per_prompt")
    @classmethod
    def _a_group(cls, k: int) -> int:
        # Every method updates with GRPO, whose advantage is a reward minus the mean of its
        # prompt's K rewards: with K = 1 it is 0 for every completion, so nothing would train.
        if k < 2:
            raise ValueError(
                "must be at least 2: GRPO's advantage compares the K samples of a prompt with each other, "
                "so with K = 1 every advantage is 0 and no agent ever updates (a majority vote also needs several samples)"
            )
        return k

    votes_per_prompt: int | None = Field(
        None,
        ge=1,
        description="V completions each agent samples per prompt; all V are in the answers table (what labels are "
        "voted from, and the diagnostics), while rewards and the GRPO update use only the first K "
        "(samples_per_prompt) in sample order. The samples of a prompt are i.i.d. draws, so the first K are an "
        "unbiased subset; picking them by reward or answer would bias the advantage's baseline. "
        "None = samples_per_prompt (vote and train on the same K). Must be >= samples_per_prompt.",
    )

    @model_validator(mode="after")
    def _votes_cover_the_group(self) -> CohortConfig:
        if self.votes_per_prompt is not None and self.votes_per_prompt < self.samples_per_prompt:
            raise ValueError(
                f"cohort.votes_per_prompt ({self.votes_per_prompt}) must be at least cohort.samples_per_prompt "
                f"({self.samples_per_prompt}): the K trained samples are the first K of the V voted on; "
                "raise votes_per_prompt or leave it unset"
            )
        return self

    @property
    def votes(self) -> int:
        """V: samples per prompt and agent in the answers table (votes_per_prompt, else K)."""
        return self.votes_per_prompt if self.votes_per_prompt is not None else self.samples_per_prompt

    prompts_per_step: int = Field(
        16, ge=1, description="B: prompts drawn per step, the same ids for every agent (each samples V completions of each)."
    )
    steps: int = Field(
        100,
        ge=1,
        description="Training steps: each draws a batch, labels it, rewards every agent and updates each once. "
        "It may be raised when a run is resumed (to train longer).",
    )
    seed: int = Field(
        0,
        description="Seed of the run: the batch order, label source 'random', validation sampling and every agent's "
        "sampling where agents[].seed is unset.",
    )
    temperature: float = Field(1.0, gt=0, description="Sampling temperature of the rollouts.")
    top_p: float = Field(
        1.0,
        gt=0,
        le=1,
        description="Nucleus sampling: draw from the smallest set of tokens whose probabilities sum to top_p (1 = off).",
    )
    max_new_tokens: int = Field(
        512, ge=1, description="Completion budget; a truncated completion has no answer (see truncated_answers)."
    )
    stop_strings: list[str] = Field(
        default_factory=list,
        description="A completion ends at the first of these strings, which its text drops (vLLM's stop, generate's "
        'stop_strings): a base model prompted few-shot goes on to write the next problem; ["\\n"] ends it at its '
        "line. Such a completion is not truncated. Also used for validation; corl eval RUN takes them from the run.",
    )
    truncated_answers: Literal["drop", "keep"] = Field(
        "drop",
        description="A completion that hit max_new_tokens without EOS: drop = it has no answer, so it neither votes nor "
        "earns a reward (as TRL's mask_truncated_completions); keep = an answer it closed before the cut still counts.",
    )
    min_agreement: float = Field(
        0.0, ge=0, le=1, description="A label needs at least this share of the teacher's K votes, else the prompt is unlabeled."
    )
    stop: StopConfig = Field(
        StopConfig(), description="Stop early on a label-free plateau or collapse signal at the validation points."
    )


class RolloutConfig(HFOptions, VLLMOptions):
    """Who samples the rollouts: the engine and its options (see `corl.rollout`).

    An engine declares its own option block as a pydantic model (`Options` on its class) and
    reads it with `options.block(name)`: `rollout: {engine: mine, mine: {beams: 4}}`. The
    built-in engines' blocks (`HFOptions`, `VLLMOptions`) are also read flat, as they always
    were: `rollout: {engine: vllm, vllm: {dtype: bfloat16}}` equals `rollout: {engine: vllm, dtype: bfloat16}`."""

    model_config = ConfigDict(extra="allow", validate_assignment=True)

    engine: str = Field("hf", description="Rollout engine: hf (Hugging Face generate, any device) or vllm (colocated vLLM).")

    @field_validator("engine")
    @classmethod
    def _known_engine(cls, name: str) -> str:
        return _registered(ENGINES, name)

    @model_validator(mode="after")
    def _engine_blocks(self) -> RolloutConfig:
        """Every key not declared above is an engine's option block, checked by that engine's `Options`."""
        if not self.__pydantic_extra__:
            return self  # importing corl.rollout loads torch: not for a config without blocks (corl --help)
        for name, value in (self.__pydantic_extra__ or {}).items():
            if name not in ENGINES:
                raise ValueError(
                    f"{name!r} is neither a rollout option nor a registered engine's option block ({', '.join(ENGINES.names())})"
                )
            options = getattr(ENGINES.get(name), "Options", None)
            if options is None:
                raise ValueError(
                    f"rollout engine {name!r} declares no options (no Options model on its class); remove rollout.{name}"
                )
            if not isinstance(value, options):
                try:
                    self.__pydantic_extra__[name] = options.model_validate(value if value is not None else {})
                except ValidationError as err:
                    where = "; ".join(f"rollout.{name}.{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in err.errors())
                    raise ValueError(where) from None
            if options in (HFOptions, VLLMOptions):
                self._flatten(name, self.__pydantic_extra__[name])
        return self

    def _flatten(self, name: str, block: BaseModel) -> None:
        """A built-in engine's block sets its keys flat, where the built-in engines read them."""
        for key in block.model_fields_set:
            if key in self.model_fields_set and getattr(self, key) != getattr(block, key):
                raise ValueError(f"rollout.{key} and rollout.{name}.{key} differ: set one of them")
            self.__dict__[key] = getattr(block, key)

    def block(self, engine: str):
        """Engine `engine`'s option block (its `Options` model): as given, else its defaults."""
        if engine in ("hf", "vllm"):  # read flat, where a block's keys also land (_flatten)
            options = HFOptions if engine == "hf" else VLLMOptions
            return options.model_construct(**{key: getattr(self, key) for key in options.model_fields})
        given = (self.__pydantic_extra__ or {}).get(engine)
        if given is not None:
            return given
        return ENGINES.get(engine).Options()
