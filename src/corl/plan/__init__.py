"""A memory plan before anything loads: will this run fit its devices, and if not, what to change.

    corl plan configs/paper-text-3b.yaml --gpus 8 --device-memory 80GiB

Each agent's model is built on the meta device from its config.json (`corl.plan.models`);
the bytes per rank come from small functions of its shapes (`corl.plan.arithmetic`),
assembled per phase of a step (`corl.plan.planner`); `corl train` prints the verdict first
and refuses a plan that cannot fit (plan.check). benchmarks/memory_plan.py holds the
arithmetic to the measured peak of corl's real step.
"""

from __future__ import annotations

import os
from collections.abc import Callable

from corl.config import ConfigError, RunConfig
from corl.plan.advice import advise
from corl.plan.machine import Machine, parse_size, this_machine
from corl.plan.models import ModelFacts, model_facts
from corl.plan.planner import AgentPlan, RankPlan, RunPlan, assemble
from corl.plan.prompts import PromptLength, prompt_length
from corl.plan.report import render, summary


class Planner:
    """Plans one config and its variants on one machine: the models' facts (built once per
    LoRA setting) and the prompt lengths are read once, every re-plan is arithmetic."""

    def __init__(self, cfg: RunConfig, machine: Machine):
        self.machine = machine
        self._facts: dict[tuple, list[ModelFacts]] = {}
        self.facts(cfg)  # first: a model whose config cannot be read fails here, before its tokenizer is looked for
        self.prompts = [prompt_length(cfg, i) for i in range(len(cfg.agents))]

    def facts(self, cfg: RunConfig) -> list[ModelFacts]:
        lora = cfg.compute.lora
        key = (lora.model_dump_json() if lora else None, tuple((x.model, x.freeze_vision) for x in cfg.agents))
        if key not in self._facts:
            self._facts[key] = [model_facts(agent, i, lora) for i, agent in enumerate(cfg.agents)]
        return self._facts[key]

    def plan(self, cfg: RunConfig) -> RunPlan:
        return assemble(cfg, self.machine, self.facts(cfg), self.prompts)

    def plan_with_advice(self, cfg: RunConfig) -> RunPlan:
        plan = self.plan(cfg)
        plan.advice = advise(cfg, plan, self.plan)
        return plan


def plan_run(cfg: RunConfig, machine: Machine | None = None) -> RunPlan:
    """The memory plan of `cfg` (on this machine unless told), with advice when it does not fit."""
    return Planner(cfg, machine or this_machine(cfg)).plan_with_advice(cfg)


class PlanDoesNotFit(ConfigError):
    """The memory plan says the run cannot fit its devices (corl train exits 2 before loading weights)."""


def check_before_training(cfg: RunConfig, say: Callable[[str], None]) -> RunPlan | None:
    """What `corl train` does first: plan the run, print the verdict (on the first rank), and
    refuse a plan that does not fit (plan.check: stop) before any weight loads."""
    if cfg.plan.check == "off":
        return None
    main = os.environ.get("RANK", "0") == "0"
    try:
        plan = plan_run(cfg)
    except Exception as err:  # noqa: BLE001 - a plan that cannot be made must not stop a run that may work
        if main:
            say(f"memory plan: skipped, it could not be made ({type(err).__name__}: {err})")
        return None
    if plan.fits is False and cfg.plan.check == "stop":
        if main:
            say(render(plan, "this run", cfg.plan.headroom))
        raise PlanDoesNotFit(
            f"{summary(plan)}. Nothing was loaded. "
            "To go on anyway: --set plan.check=warn (or plan: {check: warn} in the config); "
            "to plan for other devices: plan.device_memory"
        )
    if main:
        say(summary(plan))
    return plan


__all__ = [
    "PlanDoesNotFit",
    "check_before_training",
    "AgentPlan",
    "Machine",
    "ModelFacts",
    "Planner",
    "PromptLength",
    "RankPlan",
    "RunPlan",
    "parse_size",
    "plan_run",
    "render",
    "summary",
    "this_machine",
]
