"""Proposition 2 and Theorem 1, checked by hand, by the ODEs and through corl's real code.

The simulation tests run toy policies through corl.labels (AnswersTable, majority_vote,
build_label_source), corl.rewards.agreement_rewards and corl.grpo (group_advantages,
token_logprobs, clipped_policy_loss, aggregate_loss);
`test_simulation_uses_the_real_functions` proves that they do.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from typer.testing import CliRunner

import corl.labels.vote
import corl.studies.theory as theory
from corl.cli import app
from corl.studies.theory import (
    CORRECT,
    WRONG,
    SimSettings,
    binomial_pmf,
    integrate,
    label_signal,
    majority_correct,
    peer_gain,
    ring_drift,
    self_drift,
    simulate,
)

SIM = SimSettings()  # the defaults `corl theory` runs with: K=5, 16 groups, 80 steps at lr 0.5

# ------------------------------------------------------------ the ODE ingredients by hand


def test_binomial_pmf_sums_to_one_and_matches_hand_values():
    pmf = binomial_pmf(np.array([0.6]), 3)[0]
    # Bin(3, 0.6): 0.4^3, 3*0.6*0.4^2, 3*0.6^2*0.4, 0.6^3
    np.testing.assert_allclose(pmf, [0.064, 0.288, 0.432, 0.216], atol=1e-12)
    assert binomial_pmf(np.linspace(0, 1, 11), 7).sum(-1) == pytest.approx(np.ones(11))


def test_majority_correct_k3_is_the_closed_form():
    p = np.linspace(0.0, 1.0, 21)
    np.testing.assert_allclose(majority_correct(p, 3), p**3 + 3 * p**2 * (1 - p), atol=1e-12)
    # V_3(0.6) = 0.216 + 3 * 0.36 * 0.4 = 0.216 + 0.432 = 0.648;  phi_3(0.6) = 2 * 0.648 - 1 = 0.296
    assert majority_correct(np.array(0.6), 3) == pytest.approx(0.648)
    assert label_signal(np.array(0.6), 3) == pytest.approx(0.296)


def test_q_and_self_drift_by_hand():
    # K=3: sqrt(C(K-C))/K is 0 for C in {0, 3} and sqrt(2)/3 = 0.4714045 for C in {1, 2}.
    # p=0.6: P(C=1) = 0.288, P(C=2) = 0.432, p(1-p) = 0.24
    #   q_3(0.6) = 0.24 * (0.288 + 0.432) * 0.4714045 = 0.0814587
    #   self:      0.24 * (0.432 - 0.288) * 0.4714045 = 0.0162917 (C=1 < 3/2 counts negative)
    # p=0.5: P(C=1) = P(C=2) = 3/8, p(1-p) = 1/4:  q_3(0.5) = 1/4 * 3/4 * sqrt(2)/3 = sqrt(2)/16
    assert peer_gain(np.array(0.6), 3) == pytest.approx(0.0814587, abs=1e-7)
    assert self_drift(np.array(0.6), 3) == pytest.approx(0.0162917, abs=1e-7)
    assert peer_gain(np.array(0.5), 3) == pytest.approx(math.sqrt(2) / 16)
    assert peer_gain(np.array(0.6), 3, eta=0.5) == pytest.approx(0.5 * 0.0814587, abs=1e-7)
    # p = 1/2 is a fixed point of self-reward for every K, and it repels (Prop. 2)
    for k in (3, 5, 7):
        assert self_drift(np.array(0.5), k) == pytest.approx(0.0, abs=1e-15)
        assert self_drift(np.array(0.4), k) < 0 < self_drift(np.array(0.6), k)


def test_even_k_tie_counts_half():
    # K=2: V_2 = p^2 + 1/2 * 2p(1-p) = p; self-reward has no drift at all (a tie has sign 0,
    # unanimous groups have zero spread).
    p = np.linspace(0, 1, 11)
    np.testing.assert_allclose(majority_correct(p, 2), p, atol=1e-12)
    np.testing.assert_allclose(self_drift(p, 2), 0.0, atol=1e-15)
    # a fair tie-break makes K = 2m exactly as informative as K = 2m - 1
    # V_4(0.6) = 0.1296 + 4 * 0.216 * 0.4 + 1/2 * 6 * 0.36 * 0.16 = 0.1296 + 0.3456 + 0.1728 = 0.648
    np.testing.assert_allclose(majority_correct(p, 4), majority_correct(p, 3), atol=1e-12)
    np.testing.assert_allclose(majority_correct(p, 6), majority_correct(p, 5), atol=1e-12)


def test_ring_drift_teacher_is_the_predecessor_and_the_separatrix_is_invariant():
    # agent 0 is taught by agent 2 (0.1: wrong labels), 1 by 0 (0.9), 2 by 1 (0.5: no signal)
    d = ring_drift(np.array([0.9, 0.5, 0.1]), 5)
    assert d[0] < 0 < d[1] and d[2] == pytest.approx(0.0, abs=1e-15)
    # two agents: on p_A + p_B = 1 the flow keeps p_A + p_B = 1 (Theorem 1's separatrix)
    pa = np.linspace(0.05, 0.95, 19)
    flow = ring_drift(np.stack([pa, 1 - pa], -1), 5)
    np.testing.assert_allclose(flow.sum(-1), 0.0, atol=1e-15)
    # phi is odd and q even around 1/2
    np.testing.assert_allclose(label_signal(1 - pa, 5), -label_signal(pa, 5), atol=1e-12)
    np.testing.assert_allclose(peer_gain(1 - pa, 5), peer_gain(pa, 5), atol=1e-15)


def test_rk4_integrates_exponential_decay():
    traj = integrate(lambda p: -p, np.array([1.0]), t_end=1.0, dt=0.1)
    assert traj.shape == (11, 1)
    assert traj[-1, 0] == pytest.approx(math.exp(-1.0), abs=1e-6)


def test_ode_basin_is_theorem_1():
    starts = np.array([(a, b) for a in np.linspace(0.05, 0.95, 10) for b in np.linspace(0.05, 0.95, 10)])
    far = np.abs(starts.sum(1) - 1) > 0.1 + 1e-9
    end = integrate(lambda p: ring_drift(p, 5, 0.5), starts[far], t_end=100.0, dt=0.25)[-1]
    assert ((end > 0.95).all(1) == (starts[far].sum(1) > 1)).all()
    assert ((end > 0.95).all(1) | (end < 0.05).all(1)).all()


# ------------------------------------------------------------ through corl's real code


def test_simulation_uses_the_real_functions(monkeypatch):
    calls: dict[str, int] = {}

    def spy(module, name):
        real = getattr(module, name)

        def wrapped(*args, **kwargs):
            calls[name] = calls.get(name, 0) + 1
            return real(*args, **kwargs)

        monkeypatch.setattr(module, name, wrapped)

    spy(corl.labels.vote, "majority_vote")  # reached through AnswersTable.majority
    for name in (
        "build_label_source",
        "agreement_rewards",
        "group_advantages",
        "token_logprobs",
        "clipped_policy_loss",
        "aggregate_loss",
    ):
        spy(theory, name)
    simulate(np.array([[0.7, 0.4]]), "peer", SimSettings(k=3, groups=2, steps=2))
    # 2 steps x 2 agents x 2 prompts: 8 votes (each agent's label is its peer's majority)
    assert calls == {
        "majority_vote": 8,
        "build_label_source": 1,
        "agreement_rewards": 4,
        "group_advantages": 4,
        "token_logprobs": 4,
        "clipped_policy_loss": 4,
        "aggregate_loss": 4,
    }


def test_simulation_is_deterministic():
    p0 = np.array([[0.3, 0.8], [0.6, 0.6]])
    s = SimSettings(k=5, groups=4, steps=5, seed=3)
    a, b = simulate(p0, "peer", s), simulate(p0, "peer", s)
    np.testing.assert_array_equal(a, b)
    assert a.shape == (6, 2, 2)
    assert not np.array_equal(a, simulate(p0, "peer", SimSettings(k=5, groups=4, steps=5, seed=4)))


def test_self_reward_is_self_confirming():
    p0 = np.array([[0.2], [0.35], [0.65], [0.8]])
    end = simulate(p0, "self", SIM)[-1, :, 0]
    assert (end[:2] < 0.05).all() and (end[2:] > 0.95).all()


@pytest.fixture(scope="module")
def peer_rows():
    return theory.peer_grid(SIM, points=9, margin=0.1)


@pytest.fixture(scope="module")
def self_rows():
    return theory.self_grid(SIM, points=9, margin=0.1)


def test_corl_basin_is_p_a_plus_p_b_above_one(peer_rows):
    far = [r for r in peer_rows if not r["near_boundary"]]
    assert len(far) == 56  # 81 starts minus the 25 with p_A + p_B in {0.9, 1.0, 1.1}
    for r in far:
        expected = CORRECT if r["p_a"] + r["p_b"] > 1 else WRONG
        assert r["sim"] == expected, r  # both agents end > 0.95 (or both < 0.05)
        assert r["ode"] == expected, r


def test_ode_and_real_code_agree_in_direction_everywhere_on_the_grid(peer_rows, self_rows):
    for r in [*peer_rows, *self_rows]:
        if not r["near_boundary"]:
            assert r["sim"] == r["ode"], r
            start = np.array([r["p_a"], r["p_b"]]) if "p_a" in r else np.array([r["p0"]])
            # the same direction at every agent: each one moved toward where the ODE went
            ode_end, sim_end = np.atleast_1d(r["ode_final"]), np.atleast_1d(r["sim_final"])
            assert (np.sign(ode_end - 0.5) == np.sign(sim_end - 0.5)).all(), (r, start)


def test_paper_example_self_reward_half_corl_all():
    ex = theory.paper_example(SIM, questions=20)
    for agent in ("a", "b"):
        assert ex["self-reward"][f"accuracy_{agent}"] == pytest.approx(0.50, abs=0.05)
        assert ex["co-rl"][f"accuracy_{agent}"] == pytest.approx(1.00, abs=0.05)
        assert ex["co-rl"][f"ode_accuracy_{agent}"] == pytest.approx(1.00, abs=0.05)


def test_even_k_with_first_occurrence_tie_break_keeps_the_basins():
    s = SimSettings(k=4)
    end = simulate(np.array([[0.8, 0.6], [0.3, 0.4], [0.9, 0.2]]), "peer", s)[-1]
    assert (end[0] > 0.95).all() and (end[1] < 0.05).all() and (end[2] > 0.95).all()
    end = simulate(np.array([[0.3], [0.7]]), "self", s)[-1, :, 0]
    assert end[0] < 0.05 and end[1] > 0.95


def test_ring_of_three_runs_and_moves_together():
    end = simulate(np.array([[0.9, 0.8, 0.6], [0.2, 0.4, 0.1]]), "peer", SIM)[-1]
    assert (end[0] > 0.95).all() and (end[1] < 0.05).all()


def test_several_wrong_answers_make_the_vote_a_plurality():
    # three wrong answers share 1 - p: at p = 0.35 each has 0.217, so the correct answer is
    # the most likely one and self-reward confirms it; at p = 0.15 each wrong one has 0.283
    end = simulate(np.array([[0.35], [0.15]]), "self", SimSettings(wrong_answers=3))[-1, :, 0]
    assert end[0] > 0.95 and end[1] < 0.05


# ------------------------------------------------------------ the command


def test_cli_json(tmp_path):
    result = CliRunner().invoke(
        app,
        ["theory", "--json", "--grid", "3", "--example-questions", "10", "--no-extras", "--out", str(tmp_path), "--seed", "1"],
    )
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)  # stdout holds the JSON object and nothing else
    ex = report["example"]
    assert ex["self-reward"]["accuracy_a"] == pytest.approx(0.5, abs=0.05)
    assert ex["self-reward"]["accuracy_b"] == pytest.approx(0.5, abs=0.05)
    assert ex["co-rl"]["accuracy_a"] == pytest.approx(1.0, abs=0.05)
    assert ex["co-rl"]["accuracy_b"] == pytest.approx(1.0, abs=0.05)
    agree = report["peer_grid"]["agreement"]
    # the 3x3 grid 0.1, 0.5, 0.9 minus its anti-diagonal p_A + p_B = 1
    assert agree["sim_matches_theory"] == agree["away_from_boundary"] == 6
    assert (tmp_path / "theory.png").stat().st_size > 10_000
    assert json.loads((tmp_path / "theory.json").read_text())["settings"]["sim"]["seed"] == 1
