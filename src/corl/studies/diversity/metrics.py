"""Error-decoupling metrics on correctness vectors: kappa, complementarity c, wrong agreement w, oracle u."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

# --------------------------------------------------------------------------------------
# Pure metrics
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Contingency:
    """The four-cell correctness table of two models on the same N problems."""

    both: int  # both correct
    only_a: int  # A correct, B wrong
    only_b: int  # B correct, A wrong
    neither: int  # both wrong

    @property
    def n(self) -> int:
        return self.both + self.only_a + self.only_b + self.neither

    @property
    def accuracy_a(self) -> float:
        return (self.both + self.only_a) / self.n

    @property
    def accuracy_b(self) -> float:
        return (self.both + self.only_b) / self.n

    @property
    def observed_agreement(self) -> float:
        """p_o: share of problems on which both are right or both are wrong."""
        return (self.both + self.neither) / self.n

    @property
    def chance_agreement(self) -> float:
        """p_e = acc_a * acc_b + (1 - acc_a)(1 - acc_b): p_o if the two erred independently."""
        pa, pb = self.accuracy_a, self.accuracy_b
        return pa * pb + (1 - pa) * (1 - pb)


def contingency(correct_a: Sequence[bool], correct_b: Sequence[bool]) -> Contingency:
    """Count the four cells from two [N] correctness vectors over the same problems."""
    if len(correct_a) != len(correct_b):
        raise ValueError(f"correctness vectors differ in length ({len(correct_a)} vs {len(correct_b)}): same problems needed")
    if not correct_a:
        raise ValueError("no problems: error decoupling needs at least one graded problem")
    both = only_a = only_b = neither = 0
    for a, b in zip(correct_a, correct_b):
        if a and b:
            both += 1
        elif a:
            only_a += 1
        elif b:
            only_b += 1
        else:
            neither += 1
    return Contingency(both, only_a, only_b, neither)


def cohens_kappa(t: Contingency) -> float:
    """Cohen's kappa on correctness: (p_o - p_e) / (1 - p_e) (Cohen 1960).

    1 = the two are right and wrong on exactly the same problems; 0 = they agree no more
    than independent models of the same accuracies would; < 0 = they err on opposite
    problems. Since p_o = 1 - c, kappa = 1 - c / (1 - p_e): kappa and complementarity
    are one measurement seen twice (the paper's r = -0.98).

    Degenerate case, p_e = 1: this happens exactly when both models are constant and
    equal (both always right, or both always wrong), which forces p_o = 1, so the
    formula is 0/0. We return 1.0, not NaN, because
    - kappa = 1 if and only if the two correctness vectors are identical in every
      non-degenerate case, and here they are identical: 1.0 keeps that rule true;
    - for partner choice it is the right answer: such a pair has c = 0, nothing one can
      teach the other, and it must rank last, not drop out of sorting as NaN would.
    One constant model against a varying one is *not* degenerate: p_o = p_e, kappa = 0.
    """
    p_o, p_e = t.observed_agreement, t.chance_agreement
    if math.isclose(p_e, 1.0, rel_tol=0.0, abs_tol=1e-12):
        return 1.0
    return (p_o - p_e) / (1 - p_e)


def kappa_standard_error(t: Contingency) -> float:
    """Large-sample standard error of kappa, sqrt(p_o (1 - p_o) / (N (1 - p_e)^2)) (Cohen 1960).

    A guide to whether two kappas differ by more than noise (at N = 500 and kappa near
    0.4 it is about 0.04). 0.0 when p_e = 1 (identical constant vectors, p_o = 1).
    """
    p_o, p_e = t.observed_agreement, t.chance_agreement
    if math.isclose(p_e, 1.0, rel_tol=0.0, abs_tol=1e-12):
        return 0.0
    return math.sqrt(p_o * (1 - p_o) / t.n) / (1 - p_e)


BOOTSTRAP_DRAWS = 1000
BOOTSTRAP_SEED = 0  # fixed: a report is reproducible


def resampled_problems(n: int, draws: int = BOOTSTRAP_DRAWS, seed: int = BOOTSTRAP_SEED):
    """[draws, n] indices of problems drawn with replacement (the unit the test set draws is a problem)."""
    import numpy as np

    return np.random.default_rng(seed).integers(0, n, size=(draws, n))


def kappas_of(correct_a: Sequence[bool], correct_b: Sequence[bool], rows) -> list[float]:
    """Cohen's kappa of each resample `rows` ([draws, n] problem indices), vectorised (same rules as cohens_kappa)."""
    import numpy as np

    a, b = np.asarray(correct_a, dtype=bool)[rows], np.asarray(correct_b, dtype=bool)[rows]  # [draws, n]
    pa, pb = a.mean(1), b.mean(1)
    p_o = (a == b).mean(1)
    p_e = pa * pb + (1 - pa) * (1 - pb)
    degenerate = np.isclose(p_e, 1.0, rtol=0.0, atol=1e-12)
    return np.where(degenerate, 1.0, (p_o - p_e) / np.where(degenerate, 1.0, 1 - p_e)).tolist()


def percentile_interval(values: Sequence[float], level: float = 0.95) -> tuple[float, float]:
    """The central `level` share of bootstrap values (percentile interval)."""
    import numpy as np

    tail = 100 * (1 - level) / 2
    low, high = np.percentile(np.asarray(values, dtype=float), [tail, 100 - tail])
    return float(low), float(high)


def kappa_interval(correct_a: Sequence[bool], correct_b: Sequence[bool]) -> tuple[float, float]:
    """95% bootstrap interval of kappa over problems (1,000 resamples, fixed seed)."""
    return percentile_interval(kappas_of(correct_a, correct_b, resampled_problems(len(correct_a))))


def complementarity(t: Contingency) -> float:
    """c: share of problems exactly one of the two gets right (where one can teach the other)."""
    return (t.only_a + t.only_b) / t.n


def oracle_accuracy(t: Contingency) -> float:
    """u: share of problems at least one of the two gets right (an oracle picking the right one)."""
    return (t.both + t.only_a + t.only_b) / t.n


def wrong_agreement(
    correct_a: Sequence[bool],
    correct_b: Sequence[bool],
    answers_a: Sequence[str | None],
    answers_b: Sequence[str | None],
    equivalent: Callable[[str, str], bool] | None = None,
) -> float:
    """w: share of all N problems on which both are wrong *with the same wrong answer*.

    These are the errors a peer label cannot correct: the teacher confirms the
    student's mistake. The denominator is N (like c and u), not the both-wrong count.
    "Same" is `equivalent(a, b) or equivalent(b, a)` (default `corl.answers.is_equivalent`,
    tried both ways because it distinguishes prediction and gold, and here neither is
    gold). A missing answer (None) never agrees, not even with another None: "no
    answer" is not a shared belief, and a peer with no answer gives no label at all
    (the prompt is unlabeled), so it cannot confirm a mistake.
    """
    if equivalent is None:
        from corl.answers import is_equivalent as equivalent
    n = len(correct_a)
    if not (n == len(correct_b) == len(answers_a) == len(answers_b)):
        raise ValueError("correctness and answer vectors must all cover the same problems")
    if n == 0:
        raise ValueError("no problems: error decoupling needs at least one graded problem")
    shared = 0
    for ok_a, ok_b, ans_a, ans_b in zip(correct_a, correct_b, answers_a, answers_b):
        if ok_a or ok_b or ans_a is None or ans_b is None:
            continue
        if equivalent(ans_a, ans_b) or equivalent(ans_b, ans_a):
            shared += 1
    return shared / n


def pearson(xs: Sequence[float], ys: Sequence[float]) -> float:
    """Pearson correlation of two equal-length sequences; NaN when fewer than 2 points or
    either has zero variance (the correlation is then undefined, and saying so is more
    honest than any number)."""
    if len(xs) != len(ys):
        raise ValueError(f"pearson needs equal lengths ({len(xs)} vs {len(ys)})")
    if len(xs) < 2:
        return math.nan
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    sxy = sum((x - mx) * (y - my) for x, y in zip(xs, ys))
    sxx = sum((x - mx) ** 2 for x in xs)
    syy = sum((y - my) ** 2 for y in ys)
    if sxx <= 0 or syy <= 0:
        return math.nan
    return max(-1.0, min(1.0, sxy / math.sqrt(sxx * syy)))


@dataclass(frozen=True)
class PairStats:
    """Every error-decoupling metric of one pair of samples."""

    a: str
    b: str
    kind: str  # "models": two different models; "seed": one model, two seeds (the paper's "seed only")
    table: Contingency
    kappa: float
    kappa_se: float
    complementarity: float  # c
    oracle_accuracy: float  # u
    wrong_agreement: float  # w
    kappa_ci95: tuple[float, float] | None = None  # bootstrap over problems
    # the [N] correctness vectors (the gap between pair kinds is bootstrapped over the same problems)
    correct_a: tuple[bool, ...] = ()
    correct_b: tuple[bool, ...] = ()

    @property
    def accuracy_a(self) -> float:
        return self.table.accuracy_a

    @property
    def accuracy_b(self) -> float:
        return self.table.accuracy_b

    def partner_of(self, name: str) -> str:
        return self.b if name == self.a else self.a

    def as_dict(self) -> dict[str, Any]:
        t = self.table
        return {
            "a": self.a,
            "b": self.b,
            "kind": self.kind,
            "n": t.n,
            "both_correct": t.both,
            "only_a": t.only_a,
            "only_b": t.only_b,
            "both_wrong": t.neither,
            "accuracy_a": t.accuracy_a,
            "accuracy_b": t.accuracy_b,
            "p_o": t.observed_agreement,
            "p_e": t.chance_agreement,
            "kappa": self.kappa,
            "kappa_se": self.kappa_se,
            "kappa_ci95": list(self.kappa_ci95) if self.kappa_ci95 is not None else None,
            "c": self.complementarity,
            "u": self.oracle_accuracy,
            "w": self.wrong_agreement,
        }


def pair_stats(
    a: str,
    b: str,
    correct_a: Sequence[bool],
    correct_b: Sequence[bool],
    answers_a: Sequence[str | None],
    answers_b: Sequence[str | None],
    kind: str = "models",
    equivalent: Callable[[str, str], bool] | None = None,
) -> PairStats:
    """All metrics of one pair from its [N] correctness and extracted-answer vectors."""
    t = contingency(correct_a, correct_b)
    return PairStats(
        a=a,
        b=b,
        kind=kind,
        table=t,
        kappa=cohens_kappa(t),
        kappa_se=kappa_standard_error(t),
        complementarity=complementarity(t),
        oracle_accuracy=oracle_accuracy(t),
        wrong_agreement=wrong_agreement(correct_a, correct_b, answers_a, answers_b, equivalent),
        kappa_ci95=kappa_interval(correct_a, correct_b),
        correct_a=tuple(bool(x) for x in correct_a),
        correct_b=tuple(bool(x) for x in correct_b),
    )


def kappa_gap(pairs: Sequence[PairStats]) -> dict[str, Any] | None:
    """The paper's Table 6 claim as one number: mean seed-only kappa minus mean cross-family kappa
    (positive: another family errs more independently than another sample of the same model), with
    a 95% bootstrap interval over the same resampled problems for every pair. None without both kinds."""
    cross = [p for p in pairs if p.kind == "models"]
    seed = [p for p in pairs if p.kind == "seed"]
    if not cross or not seed:
        return None
    import numpy as np

    rows = resampled_problems(cross[0].table.n)
    draws = np.mean([kappas_of(p.correct_a, p.correct_b, rows) for p in seed], 0) - np.mean(
        [kappas_of(p.correct_a, p.correct_b, rows) for p in cross], 0
    )
    gap = sum(p.kappa for p in seed) / len(seed) - sum(p.kappa for p in cross) / len(cross)
    low, high = percentile_interval(draws.tolist())
    return {"seed_only_minus_cross_family": gap, "ci95": [low, high], "cross_family_pairs": len(cross), "seed_pairs": len(seed)}


def rank_partners(pairs: Sequence[PairStats], anchor: str) -> list[PairStats]:
    """The pairs that include `anchor`, best partner first: lowest kappa, then highest c."""
    mine = [p for p in pairs if anchor in (p.a, p.b)]
    return sorted(mine, key=lambda p: (p.kappa, -p.complementarity))
