"""Periodic validation: every agent's greedy accuracy on the held-out split, graded by the
run's task kind (its `grade`: math by the final answer, code by the hidden tests), and, when
a run selects or stops on label-free scores, the agents' greedy and sampled vote keys
(`corl.trainer.selection`), which come from the completions alone."""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from corl.evaluation.evaluate import greedy_completions, sample_completions


@dataclass
class ValidationPoint:
    metrics: dict[str, float]
    keys: list[list[str | None]] = field(default_factory=list)  # [N][B] greedy vote keys, in val_data order
    samples: list[list[list[str | None]]] = field(default_factory=list)  # [N][B][M] sampled vote keys
    accuracy: float | None = None  # cohort/val_accuracy; None without answers


def validate(run) -> dict[str, float]:
    """Greedy accuracy of every agent of `run` (a `corl.trainer.run.Run`) on its validation
    data, in the benchmark's wording; {} without data.val."""
    return validation_point(run).metrics


def validation_point(run, keys: bool = False, samples: int = 0, seed: int = 0) -> ValidationPoint:
    """`validate`, plus each agent's greedy vote keys (`keys`) and `samples` sampled ones per
    prompt (drawn from `seed` in a forked RNG: the training's random stream is untouched).
    Accuracy is measured only where the data can grade it (answers, or the row's tests)."""
    if run.val_data is None:
        return ValidationPoint({})
    # the dp ranks of an agent split the problems (strided, as in training) and add up
    problems = [run.val_data.problems[i] for i in run.placement.prompt_positions(len(run.val_data.problems))]
    rows = [run.val_data.row(p.id) for p in problems]
    gold = [run.val_data.gold.get(p.id) for p in problems]
    gradable = bool(run.val_data.gold) or not run.task.grades_answers
    mine = {}
    for agent in run.agents.values():
        with agent.generating():  # every dp rank enters, also one without problems (FSDP)
            prompts = agent.prompts(problems, run.cfg.data.val_prompt_field or run.cfg.data.prompt_field)
            texts = (
                greedy_completions(agent.engine, prompts, run.cfg.cohort.max_new_tokens, stop=run.params.stop) if problems else []
            )
            drawn = _sampled(run, agent, prompts, samples, seed) if samples and problems else []
        correct = run.task.grade(texts, problems, rows, gold) if problems and gradable else []
        greedy = [k[0] for k in run.task.answers(texts, problems, 1)[1]] if keys and problems else []
        drawn_keys = [list(k) for k in run.task.answers([t for g in drawn for t in g], problems, samples)[1]] if drawn else []
        ids = [p.id for p in problems]
        mine[agent.name] = (sum(correct), len(problems), dict(zip(ids, greedy)), dict(zip(ids, drawn_keys)))
    return _gathered(run, run.exchange.all_gather(mine), gradable, keys, samples)


def _sampled(run, agent, prompts, samples: int, seed: int) -> list[list[str]]:
    devices = list(range(torch.cuda.device_count())) if torch.cuda.is_available() else []
    with torch.random.fork_rng(devices=devices):
        torch.manual_seed(seed)
        texts, _ = sample_completions(agent.engine, prompts, samples, run.params)
    return texts


def _gathered(run, parts, gradable: bool, keys: bool, samples: int) -> ValidationPoint:
    totals: dict[str, list[int]] = {}
    greedy: dict[str, dict] = {}
    drawn: dict[str, dict] = {}
    for part in parts:
        for name, (correct, count, g, d) in part.items():
            total = totals.setdefault(name, [0, 0])
            total[0] += correct
            total[1] += count
            greedy.setdefault(name, {}).update(g)
            drawn.setdefault(name, {}).update(d)
    point = ValidationPoint({})
    if gradable:
        point.metrics = {f"{name}/val_accuracy": correct / count for name, (correct, count) in totals.items()}
        point.accuracy = point.metrics["cohort/val_accuracy"] = sum(point.metrics.values()) / len(point.metrics)
    ids = [p.id for p in run.val_data.problems]
    if keys:
        point.keys = [[greedy[name].get(i) for i in ids] for name in run.names]
    if samples:
        point.samples = [[drawn[name].get(i, []) for i in ids] for name in run.names]
    return point
