"""95% intervals: a percentile bootstrap over problems, and over seeds where there are several.

The procedure, exactly (so that anyone can recompute an interval from the per-problem
records):

1. A figure is the mean of ``x[s, i]``, the score of problem i under seed s (its mean
   correctness over the k samples of that seed; 0/1 for maj@k), over the S seeds and n
   problems.
2. The generator is ``numpy.random.default_rng([bootstrap_seed, zlib.crc32(benchmark)])``:
   fixed, and the same for every checkpoint on a benchmark, so checkpoints are compared on
   the same resampled problem sets (a paired bootstrap).
3. ``problems = rng.integers(0, n, size=(B, n))``, then, when S > 1,
   ``seeds = rng.integers(0, S, size=(B, S))``; replicate b is the mean of
   ``x[seeds[b, j], problems[b, m]]`` over j and m (seeds and problems drawn independently,
   each with replacement; with S = 1 only problems are drawn).
4. The interval is ``numpy.percentile(replicates, [2.5, 97.5])`` (linear interpolation).

The average over benchmarks has, as replicates, the mean of the benchmarks' replicates
(independent draws per benchmark, since each has its own generator).
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence

import numpy as np

LEVEL = 0.95


def generator(benchmark: str, bootstrap_seed: int) -> np.random.Generator:
    return np.random.default_rng([bootstrap_seed, zlib.crc32(benchmark.encode())])


def replicates(x: Sequence[Sequence[float]], resamples: int, rng: np.random.Generator) -> np.ndarray:
    """[S][n] per-seed per-problem scores -> [B] bootstrap means (step 3 above)."""
    a = np.asarray(x, dtype=float)
    if a.ndim != 2 or a.size == 0:
        raise ValueError(f"scores must be a non-empty [seeds][problems] table, got shape {a.shape}")
    s, n = a.shape
    problems = rng.integers(0, n, size=(resamples, n))
    per_seed = np.stack([a[k][problems].mean(axis=1) for k in range(s)])  # [S, B]: seed k on draw b
    if s == 1:
        return per_seed[0]
    seeds = rng.integers(0, s, size=(resamples, s))
    return per_seed[seeds, np.arange(resamples)[:, None]].mean(axis=1)


def interval(reps: np.ndarray, level: float = LEVEL) -> tuple[float, float]:
    tail = (100 - 100 * level) / 2  # 2.5 exactly at 95%
    lo, hi = np.percentile(reps, [tail, 100 - tail])
    return float(lo), float(hi)


def summarize(x: Sequence[Sequence[float]], benchmark: str, resamples: int, bootstrap_seed: int) -> tuple[dict, np.ndarray]:
    """({"value", "ci95", "per_seed"}, replicates) of one figure."""
    a = np.asarray(x, dtype=float)
    reps = replicates(a, resamples, generator(benchmark, bootstrap_seed)) if resamples > 0 else np.array([a.mean()])
    return {
        "value": float(a.mean()),
        "ci95": list(interval(reps)) if resamples > 0 else None,
        "per_seed": [float(v) for v in a.mean(axis=1)],
    }, reps


def average(values: Sequence[float], reps: Sequence[np.ndarray]) -> dict:
    """Mean of figures over benchmarks, with the interval of the mean of their replicates."""
    stacked = np.stack([np.asarray(r, dtype=float) for r in reps])
    return {"value": float(np.mean(values)), "ci95": list(interval(stacked.mean(axis=0))) if stacked.shape[1] > 1 else None}
