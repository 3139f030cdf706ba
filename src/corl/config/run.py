"""The whole run's configuration: its sections, the plugins to import first, and the checks
that involve more than one section."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, model_validator

from corl.config.runtime import (
    ComputeConfig,
    DistributedConfig,
    HealthConfig,
    LoggingConfig,
    PlanConfig,
    SuiteConfig,
)
from corl.config.sections import (
    AgentConfig,
    CohortConfig,
    DataConfig,
    RolloutConfig,
    _Strict,
)
from corl.config.update import GRPOConfig
from corl.registry import LABEL_SOURCES, REWARDS, TASKS


class RunConfig(_Strict):
    """A whole run: the cohort, its data, the update rule, and where results go."""

    @model_validator(mode="before")
    @classmethod
    def _import_plugins(cls, raw: Any) -> Any:
        import importlib
        import os
        import sys

        modules = (raw.get("plugins") or []) if isinstance(raw, dict) else []
        if modules and os.getcwd() not in sys.path and "" not in sys.path:
            sys.path.append(os.getcwd())  # a module beside the config, as `python -m corl` would find it
        for module in modules:
            try:
                importlib.import_module(module)
            except ImportError as err:
                raise ValueError(
                    f"plugins: cannot import {module!r}: {err} (a module in the working directory or on PYTHONPATH)"
                ) from None
        return raw

    plugins: list[str] = Field(
        default_factory=list,
        description="Modules imported before anything is looked up by name: your own rollout engines, label sources, "
        "rewards or task kinds, registered when their module is imported (found in the working directory too, as "
        "`python -m` finds it; docs/own-experiment.md has a reward).",
    )
    output_dir: str = Field(
        "runs/corl",
        description="The run folder: config.yaml, metrics.jsonl, checkpoints/, best/ (`corl train -o DIR` overrides it).",
    )
    resume: Literal["never", "auto"] = Field(
        "never",
        description="auto: continue from the run directory's last checkpoint when it has one (torchrun --max-restarts "
        "and requeued jobs then resume by themselves); never: start afresh.",
    )
    device: str = Field("auto", description="auto, cpu, cuda or cuda:N.")
    agents: list[AgentConfig] = Field(min_length=1)
    data: DataConfig
    cohort: CohortConfig = CohortConfig()
    rollout: RolloutConfig = RolloutConfig()
    grpo: GRPOConfig = GRPOConfig()
    logging: LoggingConfig = LoggingConfig()
    compute: ComputeConfig = ComputeConfig()
    distributed: DistributedConfig = DistributedConfig()
    health: HealthConfig = HealthConfig()
    plan: PlanConfig = PlanConfig()
    suite: SuiteConfig = SuiteConfig()

    @model_validator(mode="after")
    def _consistent(self) -> RunConfig:
        names = [a.name for a in self.agents]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"agent names must be unique; repeated: {', '.join(dupes)}")
        if not any(a.train for a in self.agents):
            raise ValueError("agents[].train is false for every agent: at least one agent must train (set train: true)")
        if self.distributed.fsdp and not all(a.train for a in self.agents):
            # its sharded checkpoint would hold no trainable state to resume from: not built yet
            raise ValueError("agents[].train: false does not work with distributed.fsdp yet; run the frozen peer without FSDP")
        spec = LABEL_SOURCES.get(self.cohort.label_source)
        if len(self.agents) < spec.min_agents:
            raise ValueError(
                f"cohort.label_source {spec.name!r} needs at least {spec.min_agents} agents (use 'self' for a single agent)"
            )
        task = TASKS.get(self.data.task)
        if task.check_config is not None:
            task.check_config(self)  # what this task kind cannot train (code: a gold-answer label source)
        for name, _ in self.cohort.reward_terms():
            if REWARDS.get(name).check_config is not None:
                REWARDS.get(name).check_config(self)  # e.g. confidence: advantages must not be divided by the group std
        if not 0 <= self.cohort.teacher < len(self.agents):
            raise ValueError(
                f"cohort.teacher {self.cohort.teacher} is not an agent: the cohort has {len(self.agents)} agents, "
                f"numbered 0 to {len(self.agents) - 1} in the order of agents:"
            )
        if spec.reads_gold and not self.data.answer_field:
            raise ValueError(f"cohort.label_source {spec.name!r} needs data.answer_field")
        if spec.needs_teacher and (self.compute.lora is not None or self.distributed.fsdp):
            # the EMA teacher is a plain copy updated parameter by parameter from the policy
            raise ValueError(f"cohort.label_source {spec.name!r} does not work with compute.lora or distributed.fsdp yet")
        selecting = [f"logging.select {r!r}" for r in {self.logging.select, *self.logging.select_also} - {"last"}]
        if self.cohort.stop.rule != "none":
            selecting.append(f"cohort.stop.rule {self.cohort.stop.rule!r}")
        if selecting and not self.data.val:
            raise ValueError(
                f"{', '.join(sorted(selecting))} scores the validation points: set data.val (prompts; answers only for truth)"
            )
        return self

    def prompt_field(self, agent: AgentConfig) -> str:
        return agent.prompt_field or self.data.prompt_field

    def text_key(self, agent: AgentConfig) -> str:
        """Key of this agent's wording in `Problem.texts`: its field, qualified by its own file if any."""
        field = self.prompt_field(agent)
        return f"{agent.data}#{field}" if agent.data else field
