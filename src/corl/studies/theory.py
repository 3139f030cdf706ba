"""Binary-outcome dynamics of self-reward and Co-RL, as ODEs and through corl's real code.

    corl theory                      # grids, the paper's example, even K, a ring of 3; PNG + JSON
    corl theory --json --k 5         # one JSON object on stdout

The paper's theory follows one question with two outcomes (correct, wrong) and a policy
that answers it correctly with probability p = sigmoid(theta). Each step the policy draws
K answers, a majority vote over some K answers gives the label, a reward of 1 goes to the
answers equal to the label, and GRPO moves theta. Averaging that update over the K draws:

- Self-reward (TTRL; Proposition 2): the label is the agent's own majority.
      dp/dt = eta p(1-p) E_{C~Bin(K,p)}[sign(C - K/2) sqrt(C(K-C))/K]
  With odd K the fixed point p = 1/2 is unstable: below it p -> 0, above it p -> 1.
- Co-RL (Theorem 1): agent n is labelled by its ring teacher n-1 (with two agents, by the
  other one).
      dp_n/dt = q_K(p_n) phi_K(p_{n-1}),
      q_K(p) = eta p(1-p) E[sqrt(C(K-C))/K],   phi_K(p) = 2 V_K(p) - 1,
  V_K(p) the probability that the majority of K samples is correct. Two agents converge
  to the correct answer iff p_A + p_B > 1; the line p_A + p_B = 1 is the separatrix.

Where sqrt(C(K-C))/K comes from: with C correct answers out of K and the label correct,
the group-normalised advantages are +sqrt((K-C)/C) (correct) and -sqrt(C/(K-C)) (wrong);
the gradient of log sigmoid is 1-p resp. -p, and the mean over the K answers of
A * d log pi / d theta is sqrt(C(K-C))/K, whatever p is. With a wrong label the sign flips.

Part 1 below integrates these ODEs (RK4, numpy). Part 2 runs the same dynamics through
corl's own functions: `corl.labels.AnswersTable` + `build_label_source("self"/"peer")`
(majority_vote inside) for labels, `corl.rewards.agreement_rewards` for rewards, and
`corl.grpo.group_advantages`, `token_logprobs`, `clipped_policy_loss`, `aggregate_loss`
with torch SGD on one logit per question. If the reward wiring were wrong (label from the
wrong agent, reward sign, advantage normalisation), the real-code runs would leave the
basins the theorems predict. Part 3 assembles the experiments that `corl theory` reports.

Time: one SGD step at learning rate eta is one unit of ODE time with the same eta (the
simulation is a noisy Euler scheme of the ODE in theta). group_advantages divides by the
unbiased std, so the real drift is the ODE's times sqrt((K-1)/K): a slower clock, the
same directions and basins. Comparisons therefore integrate the ODE to
t = steps * sqrt((K-1)/K) (`sim_horizon`).
"""

from __future__ import annotations

import dataclasses
import math
import operator
from collections.abc import Callable
from dataclasses import asdict, dataclass, field

import numpy as np
import torch

from corl.grpo import aggregate_loss, clipped_policy_loss, group_advantages, token_logprobs
from corl.labels import AnswersTable, build_label_source
from corl.rewards import agreement_rewards
from corl.studies.theory_ode import (  # noqa: F401  (Part 1, the ODEs: its names are offered here too)
    CORRECT,
    UNDECIDED,
    WRONG,
    binomial_pmf,
    integrate,
    label_signal,
    majority_correct,
    outcome,
    peer_gain,
    ring_drift,
    self_drift,
)

# ------------------------------------------------- 2. the same through corl's real code


@dataclass(frozen=True)
class SimSettings:
    """How the real-code simulation runs; one SGD step is one unit of ODE time."""

    k: int = 5
    """answers per group: the vote size and the GRPO group size (the theory's K)."""
    groups: int = 16
    """times each question is asked per step (groups of K): averages the noise, not the drift."""
    steps: int = 80
    """SGD steps."""
    lr: float = 0.5
    """SGD learning rate: the ODE's eta."""
    wrong_answers: int = 1
    """distinct wrong answers; 1 is the theory's binary case, more splits the wrong mass evenly."""
    seed: int = 0


def answer_names(wrong_answers: int) -> tuple[str, ...]:
    """The answers a toy policy can give: index 0 is correct, then the wrong ones."""
    return ("right",) + tuple(f"wrong{j}" for j in range(1, wrong_answers + 1))


def _initial_logits(p0: torch.Tensor, wrong_answers: int) -> torch.Tensor:
    """Free logits [..., M-1] (the last, wrong answer is fixed at 0) giving P(correct) = p0.

    The wrong mass is split evenly, so with one wrong answer this is the theory's
    theta = logit(p0).
    """
    per_wrong = (1.0 - p0) / wrong_answers
    free = torch.zeros(*p0.shape, wrong_answers, dtype=torch.float64)
    free[..., 0] = torch.log(p0 / per_wrong)
    return free.float()


def _full_logits(free: torch.Tensor) -> torch.Tensor:
    """[..., M-1] free logits -> [..., M] with the reference answer's logit 0."""
    return torch.cat([free, torch.zeros_like(free[..., :1])], dim=-1)


def _answers_table(keys: np.ndarray) -> AnswersTable:
    """keys [N, B, K] answer strings (object array) -> corl's AnswersTable over B prompts."""
    nested = tuple(tuple(map(tuple, agent)) for agent in keys.tolist())  # [N][B][K]
    prompt_ids = tuple(f"p{b}" for b in range(keys.shape[1]))
    return AnswersTable(prompt_ids=prompt_ids, answers=nested, keys=nested)


def simulate(p0: np.ndarray, label_source: str, settings: SimSettings) -> np.ndarray:
    """Train one toy policy per agent and question with corl's labels and GRPO loss (1 thread).

    The tensors are tiny; on shared cores, intra-op threads cost far more than they save
    (measured: softmax of [81, 2] 12 ms with 2 threads, 7 us with 1).
    """
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return _simulate(p0, label_source, settings)
    finally:
        torch.set_num_threads(threads)


def _simulate(p0: np.ndarray, label_source: str, settings: SimSettings) -> np.ndarray:
    """Train one toy policy per agent and question with corl's labels and GRPO loss.

    Args:
        p0: [Q, N] initial P(correct) of agent n on question q.
        label_source: "self" (TTRL) or "peer" (Co-RL ring); needs N >= 2 for "peer".
    Returns:
        [steps+1, Q, N] P(correct) after each step.
    """
    s = settings
    p0_t = torch.as_tensor(np.asarray(p0, dtype=float), dtype=torch.float64)
    n_questions, n_agents = p0_t.shape
    names = answer_names(s.wrong_answers)
    labels_of = build_label_source(label_source)

    gen = torch.Generator().manual_seed(s.seed)
    free = [_initial_logits(p0_t[:, n], s.wrong_answers).requires_grad_(True) for n in range(n_agents)]  # [Q, M-1] each
    optimizers = [torch.optim.SGD([theta], lr=s.lr) for theta in free]  # one optimizer per agent, no shared state
    seqs = n_questions * s.groups * s.k
    mask = torch.ones(seqs, 1)  # every "completion" is one answer token

    def p_correct() -> np.ndarray:
        with torch.no_grad():
            return torch.stack([torch.softmax(_full_logits(t), -1)[:, 0] for t in free], dim=1).numpy()

    traj = [p_correct()]
    for _ in range(s.steps):
        # 1. sample: every agent answers every question G*K times, from the same snapshot
        with torch.no_grad():
            probs = torch.stack([torch.softmax(_full_logits(t), -1) for t in free])  # [N, Q, M]
            flat = torch.multinomial(probs.reshape(-1, len(names)), s.groups * s.k, replacement=True, generator=gen)
            samples = flat.reshape(n_agents, n_questions, s.groups, s.k)  # [N, Q, G, K]
        # 2. label: corl's vote and label source on the answers table (prompt b = question b // G)
        keys = np.asarray(names, dtype=object)[samples.reshape(n_agents, -1, s.k).numpy()]  # [N, Q*G, K]
        table = _answers_table(keys)
        labels = labels_of(table)  # [N][Q*G] Vote | None
        # 3. reward: corl's agreement reward, 1 when the answer is the label's, 0 when unlabeled
        #    (two toy answers are equivalent iff they are the same string)
        rewards = [agreement_rewards(table.answers[n], table.keys[n], labels[n], operator.eq) for n in range(n_agents)]
        # 4. GRPO update per agent, only after every label exists
        for n, (theta, opt) in enumerate(zip(free, optimizers)):
            advantages = group_advantages(rewards[n]).reshape(seqs)  # [Q*G, K] -> [Q*G*K]
            logits = _full_logits(theta)[:, None, None, :].expand(n_questions, s.groups * s.k, 1, len(names))
            logprobs = token_logprobs(logits.reshape(seqs, 1, len(names)), samples[n].reshape(seqs, 1))  # [S, 1]
            per_token, _ = clipped_policy_loss(logprobs, logprobs.detach(), advantages)
            # questions have their own logits: the batch mean times Q gives each question the
            # mean over its own G*K answers, i.e. the ODE's drift at learning rate eta.
            loss = aggregate_loss(per_token, mask, "grpo") * n_questions
            opt.zero_grad()
            loss.backward()
            opt.step()
        traj.append(p_correct())
    return np.stack(traj)


# ------------------------------------------------------------- 3. the experiments


@dataclass(frozen=True)
class TheorySettings:
    """What `corl theory` runs."""

    sim: SimSettings = field(default_factory=SimSettings)
    grid: int = 9
    """starting points per axis, p = 0.1 .. 0.9."""
    example_questions: int = 20
    """questions in the paper's example (half at (0.9, 0.2), half at (0.2, 0.9))."""
    margin: float = 0.1
    """grid points with |p_A + p_B - 1| <= margin count as near the boundary (not claimed)."""
    ring_values: tuple[float, ...] = (0.1, 0.3, 0.7, 0.9)
    """starting probabilities per agent for the ring of 3 (the real code runs all 64)."""
    extras: bool = True
    """also run even K, the ring of 3 and several wrong answers."""


def axis(points: int) -> np.ndarray:
    """`points` starting probabilities spread evenly over [0.1, 0.9]."""
    return np.round(np.linspace(0.1, 0.9, points), 6)


def sim_horizon(sim: SimSettings) -> float:
    """ODE time (with eta = lr) that `sim.steps` real steps cover in expectation.

    One step is one unit of time, slowed by sqrt((K-1)/K) because group_advantages
    divides by the unbiased std where the paper's ODE has the population std.
    """
    return sim.steps * math.sqrt((sim.k - 1) / sim.k)


def _ode_end(drift: Callable[[np.ndarray], np.ndarray], p0: np.ndarray, sim: SimSettings) -> np.ndarray:
    """The ODE at the simulation's horizon."""
    return integrate(drift, p0, t_end=sim_horizon(sim), dt=0.25)[-1]


def _joint(ps: np.ndarray) -> str:
    """One verdict for a run of several agents: all correct, all wrong, or not that."""
    verdicts = {outcome(float(p)) for p in ps}
    return verdicts.pop() if len(verdicts) == 1 else UNDECIDED


def self_grid(sim: SimSettings, points: int, margin: float = 0.1) -> list[dict]:
    """Self-reward from each p(0) on the axis: the ODE and the real code side by side.

    A start with |2 p - 1| <= margin is near the boundary (the two-agent margin on p_A = p_B).
    With several wrong answers there is no ODE here; the prediction is then the mode rule
    (the correct answer wins iff it is the most likely one), an observation, not a theorem.
    """
    p0 = axis(points)
    binary = sim.wrong_answers == 1
    ode = _ode_end(lambda p: self_drift(p, sim.k, sim.lr), p0, sim) if binary else [None] * len(p0)
    real = simulate(p0[:, None], "self", sim)[-1, :, 0]
    rows = []
    for p, o, r in zip(p0, ode, real):
        rival = 0.5 if binary else (1.0 - p) / sim.wrong_answers  # P(correct) must beat this
        rows.append(
            {
                "p0": float(p),
                "near_boundary": bool(abs(p - rival) <= margin / 2 + 1e-9),  # binary: |2p - 1| <= margin
                "predicted": CORRECT if p > rival + 1e-9 else WRONG if p < rival - 1e-9 else UNDECIDED,
                "ode_final": None if o is None else float(o),
                "ode": None if o is None else outcome(float(o)),
                "sim_final": float(r),
                "sim": outcome(float(r)),
            }
        )
    return rows


def peer_grid(sim: SimSettings, points: int, margin: float) -> list[dict]:
    """Co-RL (two agents) from each (p_A, p_B) on the grid: ODE, real code, and the theorem."""
    a = axis(points)
    p0 = np.array([(pa, pb) for pa in a for pb in a])  # [Q, 2]
    ode = _ode_end(lambda p: ring_drift(p, sim.k, sim.lr), p0, sim)
    real = simulate(p0, "peer", sim)[-1]
    rows = []
    for (pa, pb), o, r in zip(p0, ode, real):
        gap = float(pa + pb - 1.0)
        rows.append(
            {
                "p_a": float(pa),
                "p_b": float(pb),
                "near_boundary": bool(abs(gap) <= margin + 1e-9),
                "predicted": CORRECT if gap > 1e-9 else WRONG if gap < -1e-9 else UNDECIDED,
                "ode_final": [float(x) for x in o],
                "ode": _joint(o),
                "sim_final": [float(x) for x in r],
                "sim": _joint(r),
            }
        )
    return rows


def paper_example(sim: SimSettings, questions: int) -> dict:
    """Half the questions at (p_A, p_B) = (0.9, 0.2), half at (0.2, 0.9): mean accuracy."""
    half = questions // 2
    p0 = np.array([(0.9, 0.2)] * half + [(0.2, 0.9)] * (questions - half))
    out = {}
    for source, method in (("self", "self-reward"), ("peer", "co-rl")):
        traj = simulate(p0, source, sim)  # [T+1, Q, 2]
        final = traj[-1]
        out[method] = {
            "accuracy_a": float(final[:, 0].mean()),  # expected accuracy: mean P(correct)
            "accuracy_b": float(final[:, 1].mean()),
            "greedy_a": float((final[:, 0] > 0.5).mean()),  # share of questions answered right by argmax
            "greedy_b": float((final[:, 1] > 0.5).mean()),
            "initial_a": float(p0[:, 0].mean()),
            "initial_b": float(p0[:, 1].mean()),
        }
    drifts = {"self-reward": lambda p: self_drift(p, sim.k, sim.lr), "co-rl": lambda p: ring_drift(p, sim.k, sim.lr)}
    if sim.wrong_answers == 1:
        for method, drift in drifts.items():
            ode = _ode_end(drift, np.array([(0.9, 0.2), (0.2, 0.9)]), sim)
            out[method]["ode_accuracy_a"] = float(ode[:, 0].mean())
            out[method]["ode_accuracy_b"] = float(ode[:, 1].mean())
    return out


def ring_of_three(sim: SimSettings, values: tuple[float, ...], ode_points: int = 9) -> dict:
    """Co-RL on a ring of 3 agents (0 <- 2, 1 <- 0, 2 <- 1): no theorem, just what happens.

    The real code runs from every start in values^3; the ODE alone also on the finer
    axis(ode_points)^3, to compare its basin with the rule p_0 + p_1 + p_2 > 3/2.
    """
    drift = lambda p: ring_drift(p, sim.k, sim.lr)  # noqa: E731
    p0 = np.array([(x, y, z) for x in values for y in values for z in values], dtype=float)  # [Q, 3]
    paths = integrate(drift, p0, t_end=sim_horizon(sim), dt=0.25)  # [T, Q, 3]
    # how close the ODE path comes to the saddle (1/2, 1/2, 1/2): small = a knife-edge start
    closest = np.abs(paths - 0.5).max(axis=-1).min(axis=0)  # [Q]
    real = simulate(p0, "peer", sim)[-1]  # [Q, 3]
    rows = [
        {
            "p0": [float(x) for x in start],
            "sum_rule": CORRECT if start.sum() > 1.5 + 1e-9 else WRONG if start.sum() < 1.5 - 1e-9 else UNDECIDED,
            "ode": _joint(o),
            "sim": _joint(r),
            "sim_final": [float(x) for x in r],
            "ode_closest_to_saddle": float(c),
        }
        for start, o, r, c in zip(p0, paths[-1], real, closest)
    ]
    mismatches = [r for r in rows if r["sim"] != r["ode"]]
    mixed = [r for r in rows if {outcome(x) for x in r["sim_final"]} == {CORRECT, WRONG}]

    fine = axis(ode_points)
    starts = np.array([(x, y, z) for x in fine for y in fine for z in fine])  # [F, 3]
    ends = [_joint(e) for e in _ode_end(drift, starts, sim)]
    gap = starts.sum(axis=1) - 1.5
    by_margin = {}
    for m in (0.0, 0.1, 0.2, 0.3):
        sel = np.flatnonzero(np.abs(gap) > m + 1e-9)
        hits = sum(ends[i] == (CORRECT if gap[i] > 0 else WRONG) for i in sel)
        by_margin[f"|sum-1.5|>{m:g}"] = f"{hits}/{len(sel)}"
    counter = [
        {"p0": [float(x) for x in starts[i]], "ode": ends[i]}
        for i in np.argsort(-np.abs(gap))
        if ends[i] != UNDECIDED and ends[i] != (CORRECT if gap[i] > 0 else WRONG)
    ][:3]
    # the ring has a direction: the same three starting skills in two orders
    orders = np.array([(0.3, 0.5, 0.7), (0.3, 0.7, 0.5)])
    orientation = {str(tuple(o)): _joint(e) for o, e in zip(orders.tolist(), _ode_end(drift, orders, sim))}
    return {
        "rows": rows,
        "summary": {
            "ode_orientation": orientation,
            "points": len(rows),
            "sim_matches_ode": f"{len(rows) - len(mismatches)}/{len(rows)}",
            "mismatches": [{k: r[k] for k in ("p0", "ode", "sim", "ode_closest_to_saddle")} for r in mismatches],
            "sim_mixed_endings": len(mixed),
            "ode_matches_sum_rule": by_margin,
            "ode_farthest_counterexamples": counter,
        },
    }


def agreement(rows: list[dict]) -> dict:
    """Counts over a grid: real code vs ODE, ODE vs the theorem, away from the boundary."""
    far = [r for r in rows if not r["near_boundary"]]
    return {
        "points": len(rows),
        "away_from_boundary": len(far),
        "sim_matches_ode": sum(r["sim"] == r["ode"] for r in far),
        "ode_matches_theory": sum(r["ode"] == r["predicted"] for r in far),
        "sim_matches_theory": sum(r["sim"] == r["predicted"] for r in far),
    }


def self_threshold(rows: list[dict]) -> float | None:
    """The smallest p(0) from which self-reward (real code) ended correct, or None."""
    ok = [r["p0"] for r in rows if r["sim"] == CORRECT]
    return min(ok) if ok else None


def run_theory(settings: TheorySettings, progress: Callable[[str], None] | None = None) -> dict:
    """Everything `corl theory` reports, as one JSON-ready dict."""
    say = progress or (lambda _msg: None)
    sim = settings.sim
    report: dict = {"settings": {**asdict(settings), "sim": asdict(sim)}}

    say(f"self-reward, K={sim.k}")
    rows = self_grid(sim, settings.grid, settings.margin)
    report["self_grid"] = {"rows": rows, "agreement": agreement(rows)}
    say(f"Co-RL, two agents, K={sim.k}")
    rows = peer_grid(sim, settings.grid, settings.margin)
    report["peer_grid"] = {"rows": rows, "agreement": agreement(rows)}
    say("the paper's example")
    report["example"] = paper_example(sim, settings.example_questions)
    if not settings.extras:
        return report

    even_k = sim.k + 1 if sim.k % 2 else sim.k
    even = dataclasses.replace(sim, k=even_k)
    say(f"even K={even_k} (first-occurrence tie-break)")
    self_rows = self_grid(even, settings.grid, settings.margin)
    peer_rows = peer_grid(even, settings.grid, settings.margin)
    report["even_k"] = {
        "k": even_k,
        "self_grid": {"rows": self_rows, "agreement": agreement(self_rows)},
        "peer_grid": {"rows": peer_rows, "agreement": agreement(peer_rows)},
        "example": paper_example(even, settings.example_questions),
    }
    say("ring of 3 agents")
    report["ring3"] = ring_of_three(sim, settings.ring_values)
    say("three wrong answers")
    multi = dataclasses.replace(sim, wrong_answers=3)
    rows = self_grid(multi, settings.grid, settings.margin)
    report["multi_wrong"] = {
        "wrong_answers": 3,
        "self_grid": {
            "rows": rows,
            "self_threshold": self_threshold(rows),
            "mode_rule_matches": f"{sum(r['sim'] == r['predicted'] for r in rows if not r['near_boundary'])}"
            f"/{sum(not r['near_boundary'] for r in rows)}",
        },
        "example": paper_example(multi, settings.example_questions),
    }
    return report
