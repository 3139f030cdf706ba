"""Where label-free selection can tell: simulated validation histories over answer sets of each kind,
driven through the run's own `Selector` (scores, trust verdict, fallback).

A history is two agents validated five times: the bases (at 30%), then a cohort that learns (50, 70,
90%) or that peaks and collapses (70%, then 50% and 40% with ever more prompts answered by two
values both agents share). An agent is right where a prompt's fixed difficulty is below the point's
accuracy, with 10% of its prompts flipped on its own (errors decoupled, not independent of the
prompt); each draws 4 samples (right with probability 0.8 where its greedy answer is, else 0.3).
Wrong answers are what the answer set's kind makes them:

    FILE.jsonl   gold answers drawn from the file's `answer` column; wrong ones scatter (math-like keys)
    choice4      4-option multiple choice (gold uniform over A-D); wrong: another letter
    yes-no-85    yes on 85% of the prompts; wrong: the other answer
    values-10    gold answers take 10 values; wrong ones scatter
    shared-wrong every prompt its own answer and one wrong answer both agents give when wrong

Prints, per answer set, validation size and history, over the repetitions: the trust verdict's
failed checks (how many repetitions), the accuracy the label-free score alone chooses (`choose`),
the one the run chooses (its fallback where the verdict says it cannot tell) and the best point's.

    python -m corl.studies.selection_trust /work/shared/data/math/test.jsonl /work/shared/data/gsm8k/test.jsonl
    python -m corl.studies.selection_trust --kinds choice4 yes-no-85 values-10 shared-wrong --sizes 100 500
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
from collections import Counter
from collections.abc import Callable
from pathlib import Path

from corl.config import validate_config
from corl.trainer.selection import Selector, choose

HISTORIES = {"learns": [(0.3, 0), (0.5, 0), (0.7, 0), (0.9, 0)], "collapses": [(0.3, 0), (0.7, 0), (0.5, 0.5), (0.4, 0.9)]}
FLIP = 0.1  # share of an agent's prompts it answers the other way from the point's accuracy, on its own
SAMPLES = 4


def answer_set(kind: str, size: int, rng: random.Random) -> tuple[list[str], Callable[[int, str], str]]:
    """(gold answers, wrong(prompt, tag) -> a wrong answer) for `size` prompts of an answer set."""
    scatter = lambda i, tag: f"{tag}:{i}"  # noqa: E731 (an agent's own wrong answer: nobody else's)
    if kind == "choice4":
        gold = [rng.choice("ABCD") for _ in range(size)]
        return gold, lambda i, tag: rng.choice([c for c in "ABCD" if c != gold[i]])
    if kind == "yes-no-85":
        gold = ["yes" if rng.random() < 0.85 else "no" for _ in range(size)]
        return gold, lambda i, tag: "no" if gold[i] == "yes" else "yes"
    if kind == "values-10":
        return [str(rng.randrange(10)) for _ in range(size)], scatter
    if kind == "shared-wrong":
        return [f"g{i}" for i in range(size)], lambda i, tag: f"w{i}"
    from corl.answers import answer_key

    answers = [answer_key(str(json.loads(line)["answer"])) for line in Path(kind).read_text().splitlines() if line.strip()]
    return rng.sample(answers, size), scatter


def point(gold, wrong, difficulty, flips, accuracy: float, collapsed: float, tag: str, rng: random.Random):
    """Greedy keys [2][B] and samples [2][B][SAMPLES] of one validation point."""
    top = [k for k, _ in Counter(gold).most_common(2)]
    keys, samples = [], []
    for n in range(2):
        agent_keys, agent_samples = [], []
        for i, g in enumerate(gold):
            if difficulty[i] > 1 - collapsed:  # the collapse: two values, the same for both agents
                agent_keys.append(top[i % len(top)])
                agent_samples.append([top[i % len(top)]] * SAMPLES)
                continue
            right = (difficulty[i] < accuracy) != flips[n][i]
            agent_keys.append(g if right else wrong(i, f"{tag}{n}"))
            p = 0.8 if right else 0.3
            agent_samples.append([g if rng.random() < p else wrong(i, f"{tag}{n}s{m}") for m in range(SAMPLES)])
        keys.append(agent_keys)
        samples.append(agent_samples)
    return keys, samples


def one_history(kind: str, size: int, history: str, seed: int) -> dict:
    """One simulated run through a Selector: the verdict and the accuracy of each choice."""
    rng = random.Random(seed)
    gold, wrong = answer_set(kind, size, rng)
    difficulty = [rng.random() for _ in gold]
    flips = [[rng.random() < FLIP for _ in gold] for _ in range(2)]
    cfg = validate_config(
        {
            "agents": [{"name": "a", "model": "m"}, {"name": "b", "model": "m"}],
            "data": {"train": "t.jsonl", "val": "v.jsonl"},
            "logging": {"select": "label_free", "select_samples": SAMPLES},
        }
    )
    sel = Selector(cfg, ["a", "b"], {})
    for step, (accuracy, collapsed) in enumerate(HISTORIES[history]):
        keys, samples = point(gold, wrong, difficulty, flips, accuracy, collapsed, f"p{step}", rng)
        right = sum(k == g for agent in keys for k, g in zip(agent, gold, strict=True)) / (2 * size)
        sel.observe(10 * step - 1, keys, samples, right)
    points, trust = sel.state["points"], sel.state["trust"]

    def accuracy_of(p) -> float | None:
        return None if p is None else p["val_accuracy"]

    return {
        "failed": trust["failed"],
        "score": accuracy_of(choose(points, "label_free")),
        "run": accuracy_of(sel.choice("label_free")),
        "best": max(p["val_accuracy"] for p in points if p["candidate"]),
    }


def _mean(values) -> str:
    values = [v for v in values if v is not None]
    return f"{100 * statistics.fmean(values):.1f}" if values else "-"


def table(kinds: list[str], sizes: list[int], repeats: int) -> str:
    lines = [
        "| answer set | prompts | history | cannot tell (checks failed) | score alone | the run's choice | best point |",
        "|---|---|---|---|---|---|---|",
    ]
    for kind in kinds:
        for size in sizes:
            for history in HISTORIES:
                rows = [one_history(kind, size, history, seed) for seed in range(repeats)]
                failed = Counter(c for r in rows for c in r["failed"])
                told = sum(bool(r["failed"]) for r in rows)
                checks = ", ".join(f"{c} {n}" for c, n in failed.items())
                name = Path(kind).parent.name if kind.endswith(".jsonl") else kind
                lines.append(
                    f"| {name} | {size} | {history} | {told}/{repeats}" + (f" ({checks})" if checks else "") + " | "
                    f"{_mean(r['score'] for r in rows)} | {_mean(r['run'] for r in rows)} | {_mean(r['best'] for r in rows)} |"
                )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="*", help="JSONL files whose `answer` column is a math-like answer set")
    parser.add_argument("--kinds", nargs="*", default=[], help="choice4, yes-no-85, values-10, shared-wrong")
    parser.add_argument("--sizes", type=int, nargs="+", default=[100, 500], help="validation prompts")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    print("Validation accuracy (%) of the point chosen, mean over repetitions:\n")
    print(table([*args.files, *args.kinds], args.sizes, args.repeats))


if __name__ == "__main__":
    main()
