"""The real-model study's task: one-digit arithmetic, prompted as bare equations, eight shots.

Chosen on problems drawn apart from the test split (the study's validation seed), measured on
both models before any RL (docs/real-models.md, "Choosing the task"):
- a chat prompt asking for `\\boxed{}` gave SmolLM2-135M-Instruct 0 boxed answers in 32 (it
  answers in prose), and Gemma-3-270M is a base model without a chat template;
- a "Q: ... A: ..." few-shot prompt made both copy an exemplar's answer (2-digit sums: 0-3%);
- eight bare equations ("8 * 2 + 5 = 21") then "a + b =" put both models in the band where RL
  has something to learn (greedy 15-82% by type), erring on different problems.

Each completion is the text up to its first newline (the model would go on to write the next
equation): the config's `cohort.stop_strings: ["\\n"]`.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

TYPES = ("add11", "add12", "mul11", "three1")  # a + b; a + bc (either order); a * b; a + b + c or a * b + c
SPLIT_SEEDS = {"train": 0, "val": 1, "test": 2}
SHOTS_SEED = 12345  # the exemplars come from a seed no split uses
STOP = "\n"


def expression(kind: str, rng: random.Random) -> str:
    """One problem of a type, as an expression the prompt's equations end with."""
    if kind == "add11":
        return f"{rng.randint(1, 9)} + {rng.randint(1, 9)}"
    if kind == "add12":
        a, b = rng.randint(2, 9), rng.randint(10, 99)
        return f"{a} + {b}" if rng.random() < 0.5 else f"{b} + {a}"
    if kind == "mul11":
        return f"{rng.randint(2, 9)} * {rng.randint(2, 9)}"
    if kind == "three1":
        a, b, c = rng.randint(2, 9), rng.randint(2, 9), rng.randint(1, 9)
        return f"{a} + {b} + {c}" if rng.random() < 0.5 else f"{a} * {b} + {c}"
    raise ValueError(f"unknown problem type {kind!r}; the types are {', '.join(TYPES)}")


def value(expr: str) -> int:
    """The exact value of an expression of the task (digits, +, *, spaces): no eval of anything else."""
    total = 0
    for term in expr.split("+"):
        product = 1
        for factor in term.split("*"):
            product *= int(factor)
        total += product
    return total


def rows(split: str, n: int, labeled: bool = True) -> list[dict]:
    """`n` problems of `split`, the types in turn; `labeled` False drops the answers (label-free training data)."""
    rng = random.Random(SPLIT_SEEDS[split])
    out = []
    for i in range(n):
        kind = TYPES[i % len(TYPES)]
        expr = expression(kind, rng)
        row = {"id": f"{split}-{i}", "problem": expr, "type": kind}
        if labeled:
            row["answer"] = str(value(expr))
        out.append(row)
    return out


def template(shots: int = 8) -> str:
    """The prompt: `shots` solved equations (two of each type, from their own seed), then the problem."""
    rng = random.Random(SHOTS_SEED)
    lines = [f"{e} = {value(e)}" for e in (expression(TYPES[i % len(TYPES)], rng) for i in range(shots))]
    rng.shuffle(lines)
    return "\n".join(lines) + "\n{problem} ="


def write(path: Path, data: list[dict]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in data))
    return path
