"""Several training files mixed with weights (`data.train: [{path, weight}, ...]`): which rows a step draws.

Each step's B prompts are shared out among the files by their weights, seat by seat, by the
Sainte-Laguë rule (a seat goes to the file with the highest weight / (seats so far + 1/2)):
after any step t each file's count is within about a row of its share B x t x w (divisor
methods can stray further only with many files of very unequal weights), every batch holds
close to each file's share, and a file of small weight gets its seats at regular intervals. Within a file, rows are visited as `batch_indices`
visits a single file: a seeded permutation per epoch, so every row comes once per pass over the
file. The order is a pure function of (step, seed, the files' sizes and weights): a resumed
run draws what the uninterrupted run draws, and one file of weight 1 draws exactly the
batches of `batch_indices`.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field, replace

import numpy as np

from corl.data.rows import AnswerKey, DataError, Problem


def stream_rows(start: int, count: int, num_rows: int, seed: list[int]) -> list[int]:
    """Positions `start` to `start + count` of a file's row stream: the rows of one seeded permutation
    per epoch (`np.random.default_rng([*seed, epoch])`), epoch after epoch."""
    out: list[int] = []
    while len(out) < count:
        epoch, offset = divmod(start + len(out), num_rows)
        perm = np.random.default_rng([*seed, epoch]).permutation(num_rows)
        take = min(count - len(out), num_rows - offset)
        out.extend(int(i) for i in perm[offset : offset + take])
    return out


@dataclass
class Mix:
    """Files of `sizes` rows, concatenated in this order, drawn from with `weights` (any positive numbers)."""

    sizes: list[int]
    weights: list[float]
    # the seats dealt so far: (next step, batch size, the rule's heap, rows given per file, -); see _step
    _cursor: tuple | None = field(default=None, repr=False)
    _last: tuple = field(default=((), ()), repr=False)  # the last step dealt: (its seats, rows drawn before it)

    def __post_init__(self) -> None:
        if len(self.sizes) != len(self.weights) or not self.sizes:
            raise ValueError("a mix needs one weight per file, and at least one file")
        if any(w <= 0 for w in self.weights) or any(n <= 0 for n in self.sizes):
            raise ValueError("every file of a mix needs rows and a positive weight")
        total = sum(self.weights)
        self.shares = [w / total for w in self.weights]

    def batch(self, step: int, batch_size: int, seed: int) -> list[int]:
        """Indices (into the concatenated files) of step `step`'s batch of `batch_size` rows."""
        seats, drawn = self._step(step, batch_size)
        offsets = np.cumsum([0, *self.sizes[:-1]])
        # file k's rows of this step: the next ones of its own stream (the first file's seed is
        # batch_indices' own, so a lone file draws what it always drew)
        rows = {
            k: iter(stream_rows(drawn[k], seats.count(k), self.sizes[k], [seed] if k == 0 else [seed, k])) for k in set(seats)
        }
        return [int(offsets[k]) + next(rows[k]) for k in seats]

    def counts(self, step: int, batch_size: int) -> list[int]:
        """Rows each file gives step `step`'s batch."""
        seats, _ = self._step(step, batch_size)
        return [seats.count(k) for k in range(len(self.sizes))]

    def _step(self, step: int, batch_size: int) -> tuple[list[int], list[int]]:
        """The seats of step `step` and each file's rows drawn before it. The seats of every step before
        it decide those: they are dealt in order from the last step asked for (a resumed run deals the
        steps before it once), from the start when an earlier step is asked for."""
        if self._cursor is None or self._cursor[0] > step or self._cursor[1] != batch_size:
            heap = [(0.5 / w, k) for k, w in enumerate(self.shares)]
            heapq.heapify(heap)
            self._cursor = (0, batch_size, heap, [0] * len(self.sizes), [])
        at, _, heap, given, seats = self._cursor
        while at <= step:
            drawn, seats = list(given), []
            for _ in range(batch_size):
                _, k = heapq.heappop(heap)
                seats.append(k)
                given[k] += 1
                heapq.heappush(heap, ((given[k] + 0.5) / self.shares[k], k))
            at += 1
            self._last = (seats, drawn)
        self._cursor = (at, batch_size, heap, given, seats)
        return self._last


@dataclass(frozen=True)
class TrainPart:
    """One training file's problems, answers and rows, as `build_problems` made them."""

    source: str
    problems: list[Problem]
    gold: AnswerKey
    rows: list[dict]


def join_files(parts: list[TrainPart], id_field: str) -> tuple[list[Problem], AnswerKey, list[dict]]:
    """The files' problems one after the other, as one training set.

    A row without an id is `<file number>/<row number>` (both from 0), so that files without ids mix;
    an id two files share is refused, because labels and wordings are matched by id. Answers are kept
    only when every file has them: the diagnostics' accuracies would count an unlabeled file's rows
    as wrong."""
    if len(parts) == 1:
        return parts[0].problems, parts[0].gold, parts[0].rows
    problems: list[Problem] = []
    gold: AnswerKey = {}
    owner: dict[str, str] = {}
    for k, part in enumerate(parts):
        for i, (problem, row) in enumerate(zip(part.problems, part.rows, strict=True)):
            pid = problem.id if row.get(id_field) is not None else f"{k}/{i}"
            if pid in owner:
                raise DataError(
                    f"dataset '{part.source}' row {i + 1}: id {pid!r} is also in '{owner[pid]}'; ids must be unique "
                    f"across the files of data.train (labels and wordings are matched by id): give the rows other ids "
                    f"(data.id_field)"
                )
            owner[pid] = part.source
            problems.append(replace(problem, id=pid))
            if problem.id in part.gold:
                gold[pid] = part.gold[problem.id]
    labeled = all(part.gold for part in parts)
    return problems, gold if labeled else {}, [row for part in parts for row in part.rows]
