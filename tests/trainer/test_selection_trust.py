"""label_free on answer spaces unlike math's: hand-built validation histories driven through the
Selector, where the score alone prefers the worse checkpoint (issue 52), and the run says that it
cannot tell, why, and which stated rule chose instead."""

import math

import pytest

from corl.config import validate_config
from corl.trainer.scores import confirmed_answers, repeat_variety, shared_alternatives
from corl.trainer.selection import Selector, choose
from corl.trainer.selection_trust import CHANCE_LIMIT, KEPT_LIMIT, SHARED_LIMIT, capped_scores, fallback_choice, verdict

LETTERS = "ABCD"


def selector(agents: int = 2) -> Selector:
    cfg = validate_config(
        {
            "agents": [{"name": n, "model": "m"} for n in "ab"[:agents]],
            "data": {"train": "t.jsonl", "val": "v.jsonl"},
            "cohort": {"label_source": "peer" if agents > 1 else "self"},
            "logging": {"select": "label_free", "select_also": ["truth"], "select_samples": 2},
        }
    )
    return Selector(cfg, list("ab"[:agents]), {})


def greedy_twice(keys):
    """Samples that repeat each agent's greedy answer (M = 2): no second answer anywhere."""
    return [[[k, k] for k in agent] for agent in keys]


def accuracy(keys, gold) -> float:
    return sum(k == g for agent in keys for k, g in zip(agent, gold)) / (len(keys) * len(gold))


def drive(sel: Selector, history, gold) -> list[dict]:
    """history: [(step, keys, samples)]; every point's metrics."""
    return [sel.observe(step, keys, samples, accuracy(keys, gold)) for step, keys, samples in history]


def shift(letter: str, k: int) -> str:
    return LETTERS[(LETTERS.index(letter) + k) % 4]


def test_four_option_choice_collapsing_onto_two_letters_is_flagged_and_the_varied_point_kept():
    # 80 prompts, gold A B C D A B C D ...: every block of 4 holds each letter once, so an agent that
    # answers a whole block right or shifted answers each letter on 1/4 of the prompts
    gold = [LETTERS[i % 4] for i in range(80)]

    def blocks(right: range, k: int) -> list[str]:
        return [g if i // 4 in right else shift(g, k) for i, g in enumerate(gold)]

    base = [blocks(range(0, 20, 2), 1), blocks(range(0, 20, 2), 3)]  # right on even blocks: 0.50, agree there
    good = [blocks(range(0, 13), 1), blocks(range(7, 20), 2)]  # 0.65 each; both right on blocks 7-12 only
    two = [["A" if g in "AB" else "B" for g in gold]] * 2  # A or B: right where gold is A, 0.25
    sel = selector()
    drive(sel, [(-1, base, greedy_twice(base)), (9, good, greedy_twice(good)), (19, two, greedy_twice(two))], gold)
    base_point, good_point, two_point = sel.state["points"]
    # good: agreement 24/80 = 0.30, chance 4 x (1/4 x 1/4) = 0.25, variety kept 4/4: 0.05
    assert good_point["label_free"] == pytest.approx(0.30 - 0.25)
    # two letters: agreement 1, chance 2 x (1/2 x 1/2) = 0.5, variety 2 of the bar's 4: 0.25
    assert two_point["label_free"] == pytest.approx(0.25) and not two_point["collapsed"]
    assert accuracy(good, gold) == 0.65 and accuracy(two, gold) == 0.25
    assert choose(sel.state["points"], "label_free") is two_point  # the score alone: 0.25 over 0.65

    # the base point already shows it: its answers take 4 values (chance 0.25 >= 0.15)
    trust = sel.record()["label_free_trust"]
    assert base_point["chance_agreement"] == pytest.approx(0.25) and trust["measured_at"] == 0
    assert not trust["trusted"] and trust["failed"] == ["chance_agreement"] and trust["fallback"] == "last_varied"
    # the fallback: the last point that kept 3/4 of the variety bar; two letters of four kept 1/2
    assert sel.record()["chosen"]["label_free"] == {"step": 10, "checkpoint_step": 10, "fallback": "last_varied"}
    assert sel.folders_at(10) == ["best", "best-truth"] and sel.folders_at(20) == []
    (note,) = sel.notes()
    assert "cannot tell" in note and "chance agreement 0.25" in note and "about 4 equally common answers" in note
    assert "RUN/best/ holds the last checkpoint that kept 75% of the answers' variety" in note
    assert sel.notes() == []  # said once


def test_yes_no_at_85_percent_yes_is_flagged():
    # 100 prompts: gold "yes" on 0-84, "no" on 85-99
    gold = ["yes"] * 85 + ["no"] * 15

    def flipped(rows: range) -> list[str]:
        return [("no" if g == "yes" else "yes") if i in rows else g for i, g in enumerate(gold)]

    good = [flipped(range(0, 25)), flipped(range(25, 50))]  # 0.75 each, errors on different prompts
    alternating = [["yes" if i % 2 == 0 else "no" for i in range(100)]] * 2  # both agree on a guess: 0.51
    base = [flipped(range(0, 40)), flipped(range(30, 70))]
    sel = selector()
    drive(
        sel, [(-1, base, greedy_twice(base)), (9, alternating, greedy_twice(alternating)), (19, good, greedy_twice(good))], gold
    )
    _, guess, learnt = sel.state["points"]
    assert accuracy(alternating, gold) == 0.51 and accuracy(good, gold) == 0.75
    # guess: agreement 1, chance 1/2, both answers equally often (the bar, 2): 0.5; learnt: agreement
    # 50/100, chance 0.6^2 + 0.4^2 = 0.52: below chance, times its variety exp(H(0.6, 0.4)) = 1.96 of 2
    kept = math.exp(-(0.6 * math.log(0.6) + 0.4 * math.log(0.4))) / 2
    assert guess["label_free"] == pytest.approx(0.5) and learnt["label_free"] == pytest.approx(-0.02 * kept)
    assert choose(sel.state["points"], "label_free") is guess
    # base: "no" on 40 + 15 prompts of 100 for agent a (0-39 and 85-99), the same for b: 0.55^2 + 0.45^2
    trust = sel.state["trust"]
    assert trust["checks"]["chance_agreement"] == pytest.approx(0.55**2 + 0.45**2) and trust["fallback"] == "last_varied"
    assert sel.record()["chosen"]["label_free"]["step"] == 20  # the last point, varied as the bases: the better one here
    assert sel.folders_at(20) == ["best", "best-truth"]


def test_agents_sharing_their_wrong_answer_is_flagged_from_their_samples():
    # math-like keys (every prompt its own answer), but each prompt has one wrong answer both agents
    # favour: wherever an agent is wrong, it says w<i>
    gold = [f"g{i}" for i in range(100)]

    def agent(right: range) -> list[str]:
        return [g if i in right else f"w{i}" for i, g in enumerate(gold)]

    base = [agent(range(0, 50)), agent(range(25, 75))]
    # T=1 samples of a base hesitate between the two answers of its prompt: the right one and the shared wrong one
    base_samples = [[[f"g{i}", f"w{i}"] for i in range(100)]] * 2
    same_wrong = [agent(range(0, 25))] * 2  # 0.25 each, agreeing everywhere: on 75 prompts on w<i>
    decoupled = [agent(range(0, 57)), agent(range(43, 100))]  # 0.57 each, both right on 43-56 only
    sel = selector()
    drive(
        sel,
        [(-1, base, base_samples), (9, same_wrong, greedy_twice(same_wrong)), (19, decoupled, greedy_twice(decoupled))],
        gold,
    )
    _, copied, learnt = sel.state["points"]
    # agreement beyond chance by construction: 1.0 - 100 x 0.01^2 (100 distinct answers) against
    # 0.14 - 14 x 0.01^2 (the 14 right answers both give; their wrong ones differ)
    assert copied["label_free"] == pytest.approx(0.99) and learnt["label_free"] == pytest.approx(0.1386)
    assert choose(sel.state["points"], "label_free") is copied  # the score alone: 0.25 over 0.57
    # at the base both agents' answers hold g<i> and w<i> on every prompt
    trust = sel.state["trust"]
    assert trust["checks"]["shared_alternatives"] == 1.0 and trust["failed"] == ["shared_alternatives"]
    assert "errors coincide: on 100% of the prompts" in sel.notes()[0]
    assert sel.record()["chosen"]["label_free"] == {"step": 20, "checkpoint_step": 20, "fallback": "last_varied"}


def test_gold_answers_of_ten_values_with_scattering_bases_lower_the_variety_bar():
    # 100 prompts whose answers take 10 values (i mod 10); wrong answers scatter: each its own key
    gold = [str(i % 10) for i in range(100)]

    def agent(name: str, right: int, tag: str) -> list[str]:
        return [g if i < right else f"{tag}{name}{i}" for i, g in enumerate(gold)]

    def cohort(right: int, tag: str) -> list[list[str]]:
        return [agent("a", right, tag), agent("b", right, tag)]

    base, mid, learnt = cohort(40, "x"), cohort(40, "y"), cohort(90, "z")
    sel = selector()
    drive(sel, [(-1, base, greedy_twice(base)), (9, mid, greedy_twice(mid)), (19, learnt, greedy_twice(learnt))], gold)
    first, at_40, at_90 = sel.state["points"]
    # variety of 60 single answers and 10 values x 4: exp(0.6 ln 100 + 0.4 ln 25) = 57.43 (the bar);
    # 10 single answers and 10 values x 9: exp(0.1 ln 100 + 0.9 ln(100/9)) = 13.84, so 13.84 / 57.43 kept
    bar = math.exp(0.6 * math.log(100) + 0.4 * math.log(25))
    kept_90 = math.exp(0.1 * math.log(100) + 0.9 * math.log(100 / 9)) / bar
    assert at_90["variety_kept"] == pytest.approx(kept_90)
    # 0.40 - 10 x 0.04^2 = 0.384 against (0.90 - 10 x 0.09^2) x 0.241 = 0.197: the score prefers 0.40 to 0.90
    assert at_40["label_free"] == pytest.approx(0.384) and at_90["label_free"] == pytest.approx(0.819 * kept_90)
    assert choose(sel.state["points"], "label_free") is at_40
    # the base agrees on 40 prompts, 4 per value: 40 x 39 / (10 x 4 x 3) = 13 values, 13 / 57.43 = 0.226 of the bar
    assert first["confirmed_variety"] == pytest.approx(13.0) and first["kept_if_right"] == pytest.approx(13 / bar)
    trust = sel.state["trust"]
    assert trust["failed"] == ["kept_if_right"] and trust["fallback"] == "capped_bar"
    # the fallback lowers the bar to 13: the 0.90 point keeps all of it (13.84 answers), 0.819 against 0.384
    assert sel.record()["chosen"]["label_free"] == {"step": 20, "checkpoint_step": 20, "fallback": "capped_bar"}
    assert "repeat about 13 values" in sel.notes()[0]


def test_math_like_keys_pass_every_check_and_keep_the_scores_choice():
    # every prompt its own right answer, wrong answers scattered (greedy and sampled), a cohort that
    # learns and then piles onto 4 values: the score's choice stands and nothing is said
    gold = [f"g{i}" for i in range(100)]

    def agent(name: str, right: range, tag: str) -> list[str]:
        return [g if i in right else f"{tag}{name}{i}" for i, g in enumerate(gold)]

    base = [agent("a", range(0, 40), "x"), agent("b", range(20, 60), "x")]
    scattered = [[[k, f"s{n}{i}"] for i, k in enumerate(keys)] for n, keys in enumerate(base)]
    learnt = [agent("a", range(0, 70), "y"), agent("b", range(10, 80), "y")]
    piled = [[str(i % 4) for i in range(100)]] * 2
    sel = selector()
    drive(sel, [(-1, base, scattered), (9, learnt, greedy_twice(learnt)), (19, piled, greedy_twice(piled))], gold)
    trust = sel.state["trust"]
    # 20 agreed answers, all different (chance 20 x 0.01^2): no repeat seen; the one answer both agents
    # give on a prompt is the right one
    assert trust["trusted"] and trust["checks"] == {
        "chance_agreement": pytest.approx(0.002),
        "shared_alternatives": 0.0,
        "kept_if_right": None,
    }
    assert sel.record()["chosen"]["label_free"] == {"step": 10, "checkpoint_step": 10}
    assert sel.notes() == [] and sel.state["points"][-1]["label_free"] < sel.state["points"][1]["label_free"]


def test_one_agent_answering_yes_or_no_is_flagged_by_its_own_chance_level():
    # TTRL: its greedy yes on 60 prompts, its samples yes on 60% of them: chance 0.6 x 0.6 + 0.4 x 0.4
    keys = [["yes"] * 60 + ["no"] * 40]
    samples = [[[k, k] for k in keys[0]]]
    sel = selector(agents=1)
    metrics = sel.observe(-1, keys, samples, None)
    assert sel.state["trust"]["checks"]["chance_agreement"] == pytest.approx(0.52)
    assert sel.state["trust"]["checks"]["shared_alternatives"] is None  # no peer to share with
    assert metrics["select/trusted"] == 0.0 and not sel.state["trust"]["trusted"]


def test_the_checks_limits_are_where_the_verdict_turns():
    def first(**checks) -> dict:
        return {
            "done": 0,
            "chance_agreement": 0.0,
            "shared_alternatives": 0.0,
            "kept_if_right": None,
            "confirmed_variety": 5.0,
        } | checks

    assert verdict(first())["trusted"]
    assert verdict(first(chance_agreement=CHANCE_LIMIT))["failed"] == ["chance_agreement"]
    assert verdict(first(chance_agreement=CHANCE_LIMIT - 1e-9))["trusted"]
    assert verdict(first(shared_alternatives=SHARED_LIMIT))["failed"] == ["shared_alternatives"]
    assert verdict(first(shared_alternatives=SHARED_LIMIT - 1e-9))["trusted"]
    assert verdict(first(kept_if_right=KEPT_LIMIT - 1e-9))["fallback"] == "capped_bar"
    assert verdict(first(kept_if_right=KEPT_LIMIT))["trusted"]
    # agreement that is no evidence outranks the bar: no fallback that reads the agreement
    assert verdict(first(kept_if_right=0.1, shared_alternatives=0.5))["fallback"] == "last_varied"


def test_shared_alternatives_confirmed_answers_and_their_repeat_variety_by_hand():
    keys = [["1", "2", "3"], ["1", "5", "3"]]
    # prompt 0: a {1, 7}, b {1, 7}: two shared; prompt 1: a {2}, b {5, 2}: one; prompt 2: a {3, 4}, b {3, 9}: one
    samples = [[["1", "7"], ["2", None], ["4", "3"]], [["7", "1"], ["2", "2"], ["9", "9"]]]
    assert shared_alternatives(keys, samples) == pytest.approx(1 / 3)
    assert shared_alternatives([["1"]], [[["1", "1"]]]) is None
    assert confirmed_answers(keys, samples) == ["1", "3"]  # where both agents' greedy keys agree
    # one agent: its greedy key where at least half its samples repeat it
    assert confirmed_answers([["1", "2", None]], [[["1", "x"], ["3", "3"], [None, None]]]) == ["1"]
    # 4 x "a", 2 x "b", 1 x "c": pairs 4 x 3 + 2 x 1 = 14 of 7 x 6 = 42: 42 / 14 = 3 values
    assert repeat_variety(["a"] * 4 + ["b"] * 2 + ["c"], least=7) == pytest.approx(3.0)
    assert repeat_variety(["a"] * 4 + ["b"] * 2 + ["c"]) is None  # 7 answers: fewer than the 20 it reads
    assert repeat_variety([str(i) for i in range(30)]) is None  # no repeat seen


def test_the_fallbacks_on_hand_built_points():
    def pt(done, kept, collapsed=False, candidate=True, variety=(4.0, 4.0), agreement=0.5):
        return {
            "done": done,
            "candidate": candidate,
            "collapsed": collapsed,
            "variety_kept": kept,
            "variety": list(variety),
            "agreement": agreement,
            "chance_agreement": 0.0,
            "confirmed_variety": None,
        }

    # last_varied: the last point that kept 3/4 of the bar and did not collapse; with none varied, the last not collapsed
    points = [pt(0, 1.0, candidate=False), pt(10, 0.8), pt(20, 0.5), pt(30, 1.0, collapsed=True)]
    assert fallback_choice(points, "last_varied")["done"] == 10
    assert fallback_choice(points[:1] + points[2:], "last_varied")["done"] == 20
    assert fallback_choice(points[:1] + points[3:], "last_varied") is None
    # capped_bar: no confirmed variety on the first point, so the bar is the agents' own (4): equal scores, the later wins
    assert fallback_choice([pt(0, 1.0, candidate=False), pt(10, 1.0), pt(20, 1.0)], "capped_bar")["done"] == 20
    # a bar lowered to 2 values: the point with 2 answers keeps all of it (0.6 x 1) and beats 0.5 x 1 at 4 answers
    first = pt(0, 1.0, candidate=False) | {"confirmed_variety": 2.0}
    lowered = [first, pt(10, 1.0), pt(20, 0.5, variety=(2.0, 2.0), agreement=0.6)]
    assert capped_scores(lowered) == [pytest.approx(0.5), pytest.approx(0.5), pytest.approx(0.6)]
    assert fallback_choice(lowered, "capped_bar")["done"] == 20


def test_the_study_runs_simulated_histories_through_the_selector(tmp_path):
    """`python -m corl.studies.selection_trust`: a math-like answer file passes every check and the run's
    choice is the score's; 4-option answers fail the chance check on every repetition."""
    import json
    import subprocess
    import sys

    answers = tmp_path / "answers.jsonl"
    answers.write_text("".join(json.dumps({"answer": str(1000 + i)}) + "\n" for i in range(300)))
    command = [sys.executable, "-m", "corl.studies.selection_trust", str(answers), "--kinds", "choice4"]
    out = subprocess.run([*command, "--sizes", "100", "--repeats", "2"], capture_output=True, text=True, check=True).stdout
    rows = {tuple(cell.strip() for cell in line.split("|")[1:4]): line for line in out.splitlines() if line.startswith("| ")}
    learns = rows[(tmp_path.name, "100", "learns")].split("|")
    assert learns[4].strip() == "0/2" and learns[5] == learns[6] == learns[7]  # trusted; the score's choice is the best
    assert rows[("choice4", "100", "collapses")].split("|")[4].strip().startswith("2/2 (chance_agreement 2")
