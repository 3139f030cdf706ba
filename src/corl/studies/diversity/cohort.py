"""The recommended cohort of a diversity study: which measured candidates to train together.

Every cohort is scored on its ring's edges (Co-RL: agent n is labeled by agent n-1, so a
pair has one edge and a ring of m >= 3 agents has m): the mean over its edges of u - kappa,
the oracle accuracy u (at least one of the two right: what the pair can teach at all) minus
Cohen's kappa (how alike their errors are). Higher is better; ties go to the lower mean kappa,
then to the candidates' order as given. u - kappa rewards both halves of the paper's
Appendix A criterion in one number (low kappa, high u) on the same [0, 1]-ish scale.

With 2 candidates the recommendation is the pair; with N >= 3, the best ring over all N
(every distinct cyclic order; a ring and its mirror image have the same edges), and the best
pair beside it. Seed-only pairs (a model with itself) are no candidates.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import combinations, permutations
from typing import Any

from corl.studies.diversity.metrics import PairStats

MAX_RING = 8  # (N-1)!/2 orders: 2520 at 8 candidates; beyond, only pairs are scored


def _edges(members: Sequence[str]) -> list[tuple[str, str]]:
    """(teacher, student) of every agent: n is labeled by n-1 (one edge for a pair)."""
    if len(members) == 2:
        return [(members[0], members[1])]
    return [(members[n - 1], members[n]) for n in range(len(members))]


def score_cohort(members: Sequence[str], pairs: dict[frozenset, PairStats]) -> dict[str, Any]:
    """A cohort's edges with their kappa and u, and its score (mean of u - kappa over the edges)."""
    edges = []
    for teacher, student in _edges(members):
        p = pairs[frozenset((teacher, student))]
        edges.append({"teacher": teacher, "student": student, "kappa": p.kappa, "u": p.oracle_accuracy})
    kappa = sum(e["kappa"] for e in edges) / len(edges)
    u = sum(e["u"] for e in edges) / len(edges)
    kind = "pair" if len(members) == 2 else "ring"
    return {"kind": kind, "members": list(members), "edges": edges, "kappa": kappa, "u": u, "score": u - kappa}


def _best(cohorts: list[dict[str, Any]]) -> dict[str, Any]:
    # sorted() is stable: among equal (score, kappa) the earlier-generated cohort (candidates' order) wins
    return sorted(cohorts, key=lambda c: (-c["score"], c["kappa"]))[0]


def recommend_cohort(pairs: Sequence[PairStats], candidates: Sequence[str]) -> dict[str, Any] | None:
    """{"recommended": cohort, "pair": best pair, "ring": best ring or None, "rule": text}; None
    with fewer than 2 candidates."""
    if len(candidates) < 2:
        return None
    table = {frozenset((p.a, p.b)): p for p in pairs if p.kind == "models"}
    pair = _best([score_cohort(two, table) for two in combinations(candidates, 2)])
    ring = None
    if 3 <= len(candidates) <= MAX_RING:
        first, rest = candidates[0], list(candidates[1:])
        orders = [[first, *o] for o in permutations(rest) if rest.index(o[0]) < rest.index(o[-1])]
        ring = _best([score_cohort(order, table) for order in orders])
    return {
        "recommended": ring or pair,
        "pair": pair,
        "ring": ring,
        "rule": "highest mean over the ring's edges (teacher -> student) of u - kappa; ties: lower mean kappa, then the "
        "candidates' order",
    }


def agents_yaml(cohort: dict[str, Any], lr: float = 1e-6) -> str:
    """The `agents:` block of a run config for `cohort` (names from the model ids; a ring's order)."""
    import yaml

    agents, used = [], set()
    for model in cohort["members"]:
        name = model.rstrip("/").split("/")[-1].split(":")[-1] or "agent"
        while name in used:
            name += "_"
        used.add(name)
        agents.append({"name": name, "model": model, "lr": lr})
    return yaml.safe_dump({"agents": agents}, sort_keys=False)
