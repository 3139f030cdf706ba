"""Periodic validation: every agent's greedy accuracy on the held-out split, graded by the
run's task kind (its `grade`: math by the final answer, code by the hidden tests)."""

from __future__ import annotations

from corl.evaluate import greedy_completions


def validate(run) -> dict[str, float]:
    """Greedy accuracy of every agent of `run` (a `corl.trainer.run.Run`) on its validation
    data, in the benchmark's wording; {} without data.val."""
    if run.val_data is None:
        return {}
    # the dp ranks of an agent split the problems (strided, as in training) and add up
    problems = [run.val_data.problems[i] for i in run.placement.prompt_positions(len(run.val_data.problems))]
    rows = [run.val_data.row(p.id) for p in problems]
    gold = [run.val_data.gold.get(p.id) for p in problems]
    mine = {}
    for agent in run.agents.values():
        with agent.generating():  # every dp rank enters, also one without problems (FSDP)
            prompts = agent.prompts(problems, run.cfg.data.prompt_field)
            texts = greedy_completions(agent.engine, prompts, run.cfg.cohort.max_new_tokens) if problems else []
        correct = run.task.grade(texts, problems, rows, gold) if problems else []
        mine[agent.name] = (sum(correct), len(problems))  # (correct, evaluated)
    totals: dict[str, list[int]] = {}
    for part in run.exchange.all_gather(mine):
        for name, (correct, count) in part.items():
            total = totals.setdefault(name, [0, 0])
            total[0] += correct
            total[1] += count
    out = {f"{name}/val_accuracy": correct / count for name, (correct, count) in totals.items()}
    out["cohort/val_accuracy"] = sum(out.values()) / len(out)
    return out
