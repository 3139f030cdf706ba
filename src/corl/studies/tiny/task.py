"""A procedural reasoning task small enough for CPU-pretrained tiny models.

Four problem types, each with a short worked solution ending in `\\boxed{ANSWER}` (the
MATH convention, so the same answer extractor serves real and tiny data):

    arith     7+6*3=?               6*3=18. 7+18=25. \\boxed{25}
    linear    3x+5=20, x=?          3x=20-5=15. x=15/3=5. \\boxed{5}
    mod       47%5=?                5*9=45. 47-45=2. \\boxed{2}
    digitsum  digitsum(472)=?       4+7=11. 11+2=13. \\boxed{13}

Splits are disjoint by construction: a problem's split is a hash of its text (20% test,
10% validation, 70% train), independent of seed and difficulty, so `make_split("test",
..., seed=1)` never shares a problem with `make_split("train", ..., seed=0)`. Within a
split, rows are drawn from a `random.Random` seeded by (seed, split, difficulty), so a
split is the same list on every machine.

A model is prompted with `prompt_text(problem)` and trained to complete it with
`solution` followed by EOS.

`slipped(row)` is the same row as taught by a teacher with one systematic slip: it stops
one step short and boxes the value its last step started from (`47%5=?` -> `5*9=45.
\\boxed{45}`). A family whose pretraining corpus has that teacher for a share of a type's
rows knows the whole procedure but often ends it early (corl.studies.tiny.families).
"""

from __future__ import annotations

import hashlib
import json
import random
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path

TYPES = ("arith", "linear", "mod", "digitsum")
SPLITS = ("train", "validation", "test")
SPLIT_SHARES = {"test": 0.2, "validation": 0.1, "train": 0.7}  # of the problem space, by text hash
DIFFICULTIES = (1, 2, 3)
SOURCE = "tiny"


# The prompt of every tiny text family: the bare problem and a newline (pretraining, the
# quickstart's runs, and `corl eval tiny:<family>` through the plugin's ModelSource.prompt).
PROMPT_TEMPLATE = "{problem}\n"


def prompt_text(problem: str) -> str:
    """The exact text a model sees for `problem` (PROMPT_TEMPLATE)."""
    return PROMPT_TEMPLATE.format(problem=problem)


def boxed(answer: str) -> str:
    """`\\boxed{answer}`: the final-answer marker that ends every solution."""
    return "\\boxed{" + answer + "}"


# --- generators: rng, difficulty -> (problem, solution steps, answer) ------------------


def _arith(rng: random.Random, level: int) -> tuple[str, list[str], int]:
    """2-3 operands (2-4 at level 3) with + - *; products first, then left to right."""
    hi = {1: 9, 2: 19, 3: 49}[level]
    n = rng.randint(2, 4 if level == 3 else 3)
    nums = [rng.randint(1, hi) for _ in range(n)]
    ops = [rng.choice("+-*") for _ in range(n - 1)]
    problem = "".join(f"{a}{op}" for a, op in zip(nums, ops)) + f"{nums[-1]}=?"
    steps = []
    # Multiplications, left to right, each folding into its left neighbour.
    while "*" in ops:
        i = ops.index("*")
        product = nums[i] * nums[i + 1]
        steps.append(f"{nums[i]}*{nums[i + 1]}={product}.")
        nums[i : i + 2] = [product]
        del ops[i]
    value = nums[0]
    for op, b in zip(ops, nums[1:]):
        new = value + b if op == "+" else value - b
        steps.append(f"{value}{op}{b}={new}.")
        value = new
    return problem, steps, value


def _linear(rng: random.Random, level: int) -> tuple[str, list[str], int]:
    """a*x + b = c or a*x - b = c with an integer solution."""
    a = rng.randint(2, 9)
    x = rng.randint(1, {1: 9, 2: 19, 3: 49}[level])
    b = rng.randint(1, {1: 9, 2: 19, 3: 49}[level])
    if rng.random() < 0.5:
        c = a * x + b
        problem, undo = f"{a}x+{b}={c}, x=?", f"{c}-{b}"
    else:
        c = a * x - b
        problem, undo = f"{a}x-{b}={c}, x=?", f"{c}+{b}"
    steps = [f"{a}x={undo}={a * x}.", f"x={a * x}/{a}={x}."]
    return problem, steps, x


def _mod(rng: random.Random, level: int) -> tuple[str, list[str], int]:
    """n % d via the largest multiple d*q not above n (d 2-9, q 1-9 at level 1: times-table facts)."""
    d = rng.randint(2, {1: 9, 2: 9, 3: 19}[level])
    q = rng.randint(1, {1: 9, 2: 19, 3: 49}[level])
    r = rng.randint(0, d - 1)
    n = d * q + r
    return f"{n}%{d}=?", [f"{d}*{q}={d * q}.", f"{n}-{d * q}={r}."], r


def _digitsum(rng: random.Random, level: int) -> tuple[str, list[str], int]:
    """Sum of the digits of a 3-4 digit number (4-5 at level 2, 5-6 at level 3), added left to right."""
    lo = {1: 3, 2: 4, 3: 5}[level]
    digits = [rng.randint(1, 9)] + [rng.randint(0, 9) for _ in range(rng.randint(lo, lo + 1) - 1)]
    steps, total = [], digits[0]
    for d in digits[1:]:
        steps.append(f"{total}+{d}={total + d}.")
        total += d
    return f"digitsum({''.join(map(str, digits))})=?", steps, total


GENERATORS: dict[str, Callable[[random.Random, int], tuple[str, list[str], int]]] = {
    "arith": _arith,
    "linear": _linear,
    "mod": _mod,
    "digitsum": _digitsum,
}


def slipped(row: Mapping) -> dict:
    """`row` solved by a teacher that stops one step short: the last step dropped, the value it
    started from boxed as the answer (with a single step, the problem's first number).

    The slip's answer is wrong except by coincidence (a last step that changes nothing, such
    as a digit 0 or a product by 1); `answer` keeps the true one, only `solution` changes.
    """
    steps = row["solution"].split(" ")[:-1]  # steps have no spaces; the last word is \\boxed{..}
    if len(steps) >= 2:
        value = steps[-2].rstrip(".").rsplit("=", 1)[1]
    else:
        value = re.match(r"-?\d+", row["problem"]).group()
    return {**row, "solution": " ".join([*steps[:-1], boxed(value)])}


# --- splits -----------------------------------------------------------------------------


def split_of(problem: str) -> str:
    """The split a problem text belongs to (stable hash; the same for every seed)."""
    h = int.from_bytes(hashlib.blake2b(problem.encode(), digest_size=8).digest(), "big") / 2**64
    if h < SPLIT_SHARES["test"]:
        return "test"
    if h < SPLIT_SHARES["test"] + SPLIT_SHARES["validation"]:
        return "validation"
    return "train"


def _check(split: str, difficulty: int, types: Sequence[str]) -> None:
    if split not in SPLITS:
        raise ValueError(f"unknown split {split!r}; choose one of {', '.join(SPLITS)}")
    if difficulty not in DIFFICULTIES:
        raise ValueError(f"difficulty must be one of {DIFFICULTIES}, got {difficulty!r}")
    unknown = [t for t in types if t not in GENERATORS]
    if unknown:
        raise ValueError(f"unknown problem type(s) {unknown}; choose from {', '.join(TYPES)}")


def iter_problems(
    split: str,
    seed: int = 0,
    difficulty: int = 1,
    types: Sequence[str] | None = None,
    weights: Mapping[str, float] | None = None,
) -> Iterator[dict]:
    """An endless, seeded stream of rows of `split` (repeats possible; ids number the stream).

    Args:
        types: problem types to mix (default: all of `TYPES`).
        weights: relative frequency per type (default: uniform over `types`); types
            missing from `weights` get weight 0.
    """
    types = list(types or (weights.keys() if weights else TYPES))
    _check(split, difficulty, types)
    w = [float(weights.get(t, 0.0)) if weights else 1.0 for t in types]
    if not any(x > 0 for x in w):
        raise ValueError(f"all mixture weights are zero: {weights}")
    rng = random.Random(f"corl-tiny/{seed}/{split}/{difficulty}")
    i = 0
    while True:
        kind = rng.choices(types, weights=w)[0]
        problem, steps, value = GENERATORS[kind](rng, difficulty)
        if split_of(problem) != split:
            continue
        answer = str(value)
        yield {
            "id": f"{SOURCE}/{split}/{i}",
            "problem": problem,
            "answer": answer,
            "source": SOURCE,
            "solution": " ".join([*steps, boxed(answer)]),
            "type": kind,
        }
        i += 1


def make_split(
    split: str,
    n: int,
    seed: int = 0,
    difficulty: int = 1,
    types: Sequence[str] | None = None,
    weights: Mapping[str, float] | None = None,
) -> list[dict]:
    """`n` distinct problems of `split`, deterministic in (split, n, seed, difficulty, types, weights).

    Rows: {"id": "tiny/<split>/<i>", "problem", "answer", "source": "tiny", "solution", "type"}.
    Raises ValueError when the split has fewer than `n` distinct problems of these types.
    """
    rows: list[dict] = []
    seen: set[str] = set()
    misses = 0  # consecutive repeats; many in a row mean the split's problem space is used up
    for row in iter_problems(split, seed, difficulty, types, weights):
        if row["problem"] in seen:
            misses += 1
            if misses > 1000 + 10 * len(rows):
                raise ValueError(
                    f"split {split!r} (difficulty {difficulty}, types {types or 'all'}) ran out of distinct "
                    f"problems after {len(rows)} of {n}; ask for fewer rows, more types or a higher difficulty"
                )
            continue
        misses = 0
        seen.add(row["problem"])
        rows.append({**row, "id": f"{SOURCE}/{split}/{len(rows)}"})
        if len(rows) == n:
            break
    return rows


def write_jsonl(rows: Sequence[Mapping], path: str | Path) -> Path:
    """Write rows as JSON lines (parents created); returns the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as f:
        for row in rows:
            f.write(json.dumps(row, ensure_ascii=False) + "\n")
    return path
