"""Training-dynamics diagnostics of one step (the paper's Figures 4 and 5).

Per agent: reward mean/std, the share of prompts whose K rewards are all equal (no
learning signal), completion length, the share of prompts that got a label, and, when
the data has answers, the accuracy of the labels it was given (pseudo-label accuracy)
and of its own majority (diagnostic only: this is the one place, besides the `truth`
label source, that reads the ground truth). Per pair of agents: how often their
majority answers agree.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from itertools import combinations

import torch

from corl.labels import AnswersTable, Labels, Vote


def _votes_agree(a: Vote | None, b: Vote | None, equivalent: Callable[[str, str], bool]) -> bool:
    if a is None or b is None:
        return False
    return a.key == b.key or equivalent(a.answer, b.answer)


def _correct(vote: Vote | None, gold: str | None, equivalent: Callable[[str, str], bool]) -> bool:
    return vote is not None and gold is not None and equivalent(vote.answer, gold)


def step_diagnostics(
    names: Sequence[str],
    table: AnswersTable,
    labels: Labels,
    rewards: Sequence[torch.Tensor],
    completion_lengths: Sequence[torch.Tensor],
    equivalent: Callable[[str, str], bool],
    gold: Mapping[str, str] | None = None,
) -> dict[str, float]:
    """Flat metrics `<agent>/<metric>` and `agreement/<a>~<b>` for one step.

    Args:
        rewards: per agent, [B, K] rewards.
        completion_lengths: per agent, [B*K] completion token counts.
        gold: row id -> answer, for the diagnostic accuracies (omit for unlabeled data).
    """
    out: dict[str, float] = {}
    n_prompts = len(table.prompt_ids)
    majorities = [[table.majority(n, b) for b in range(n_prompts)] for n in range(len(names))]
    for n, name in enumerate(names):
        r = rewards[n].float()  # [B, K]
        out[f"{name}/reward_mean"] = float(r.mean())
        out[f"{name}/reward_std"] = float(r.std(unbiased=False))
        out[f"{name}/uniform_reward_fraction"] = float((r.max(1).values == r.min(1).values).float().mean())
        out[f"{name}/completion_length"] = float(completion_lengths[n].float().mean())
        answered = [a is not None for group in table.answers[n] for a in group]
        out[f"{name}/answer_rate"] = sum(answered) / max(len(answered), 1)
        out[f"{name}/labeled_fraction"] = sum(lbl is not None for lbl in labels[n]) / max(n_prompts, 1)
        if gold is not None:
            pids = table.prompt_ids
            labeled = [(lbl, gold.get(pid)) for lbl, pid in zip(labels[n], pids) if lbl is not None]
            if labeled:
                out[f"{name}/pseudo_label_accuracy"] = sum(_correct(lbl, g, equivalent) for lbl, g in labeled) / len(labeled)
            out[f"{name}/majority_accuracy"] = sum(
                _correct(majorities[n][b], gold.get(pid), equivalent) for b, pid in enumerate(pids)
            ) / max(n_prompts, 1)
    for a, b in combinations(range(len(names)), 2):
        agree = sum(_votes_agree(majorities[a][i], majorities[b][i], equivalent) for i in range(n_prompts))
        out[f"agreement/{names[a]}~{names[b]}"] = agree / max(n_prompts, 1)
    return out
