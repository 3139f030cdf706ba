"""Error-decoupling metrics against numbers worked out by hand, and `corl diversity` end to end."""

from __future__ import annotations

import json
import math
from dataclasses import replace

import pytest
import yaml

from corl.studies.diversity import (
    Contingency,
    StudySettings,
    agents_yaml,
    cohens_kappa,
    complementarity,
    contingency,
    kappa_standard_error,
    oracle_accuracy,
    pair_stats,
    parse_filter,
    pearson,
    rank_partners,
    recommend_cohort,
    select_problems,
    wrong_agreement,
)


def same_string(a: str, b: str) -> bool:
    return a == b


T, F = True, False

# --------------------------------------------------------------------------------------
# The four-cell table and every metric on one ordinary table
# --------------------------------------------------------------------------------------


def test_ordinary_table_every_metric():
    a = [T, T, T, T, T, T, F, F, F, F]
    b = [T, T, T, T, F, F, T, F, F, F]
    t = contingency(a, b)
    # rows 0-3 both right, 4-5 only A, 6 only B, 7-9 both wrong
    assert t == Contingency(both=4, only_a=2, only_b=1, neither=3)
    assert t.n == 10
    assert t.accuracy_a == pytest.approx(0.6)  # (4 + 2) / 10
    assert t.accuracy_b == pytest.approx(0.5)  # (4 + 1) / 10
    assert t.observed_agreement == pytest.approx(0.7)  # (4 + 3) / 10
    assert t.chance_agreement == pytest.approx(0.5)  # 0.6*0.5 + 0.4*0.5 = 0.30 + 0.20
    assert cohens_kappa(t) == pytest.approx(0.4)  # (0.7 - 0.5) / (1 - 0.5)
    assert complementarity(t) == pytest.approx(0.3)  # (2 + 1) / 10
    assert oracle_accuracy(t) == pytest.approx(0.7)  # (4 + 2 + 1) / 10 = 1 - 3/10
    # kappa = 1 - c / (1 - p_e) = 1 - 0.3 / 0.5 = 0.4: kappa and c are one measurement
    assert cohens_kappa(t) == pytest.approx(1 - complementarity(t) / (1 - t.chance_agreement))
    # SE = sqrt(p_o (1 - p_o) / N) / (1 - p_e) = sqrt(0.7 * 0.3 / 10) / 0.5 = sqrt(0.021) / 0.5
    assert kappa_standard_error(t) == pytest.approx(math.sqrt(0.021) / 0.5)  # = 0.28983


def test_kappa_is_symmetric_in_the_two_models():
    a = [T, T, T, T, T, T, F, F, F, F]
    b = [T, T, T, T, F, F, T, F, F, F]
    assert cohens_kappa(contingency(a, b)) == pytest.approx(cohens_kappa(contingency(b, a)))


def test_opposite_errors_give_kappa_minus_one():
    # A right on 0-1, B right on 2-3: p_o = 0, acc 0.5 each, p_e = 0.25 + 0.25 = 0.5
    t = contingency([T, T, F, F], [F, F, T, T])
    assert cohens_kappa(t) == pytest.approx(-1.0)  # (0 - 0.5) / 0.5
    assert complementarity(t) == 1.0  # 4 / 4
    assert oracle_accuracy(t) == 1.0
    assert kappa_standard_error(t) == 0.0  # p_o (1 - p_o) = 0


def test_independent_errors_give_kappa_zero():
    # acc_a = acc_b = 0.5 and each cell 1/4: p_o = 0.5 = p_e
    t = contingency([T, T, F, F], [T, F, T, F])
    assert cohens_kappa(t) == pytest.approx(0.0)
    assert complementarity(t) == 0.5  # (1 + 1) / 4
    assert oracle_accuracy(t) == 0.75  # 3 / 4


# --------------------------------------------------------------------------------------
# Degenerate cases, each with its documented result
# --------------------------------------------------------------------------------------


def test_identical_varying_answers():
    # identical, acc 0.5: p_o = 1, p_e = 0.5 -> kappa = (1 - 0.5) / 0.5 = 1; ordinary, not degenerate
    v = [T, T, F, F]
    t = contingency(v, v)
    assert cohens_kappa(t) == 1.0
    assert complementarity(t) == 0.0
    assert oracle_accuracy(t) == 0.5  # 2 / 4: the oracle is no better than either
    assert kappa_standard_error(t) == 0.0


def test_one_model_always_right():
    # A always right, B right on 1 of 4: cells (1, 3, 0, 0)
    # acc_a = 1, acc_b = 0.25; p_o = 1/4; p_e = 1*0.25 + 0*0.75 = 0.25 -> kappa = 0 / 0.75 = 0
    t = contingency([T, T, T, T], [T, F, F, F])
    assert t == Contingency(1, 3, 0, 0)
    assert cohens_kappa(t) == 0.0
    assert complementarity(t) == 0.75  # 3 / 4
    assert oracle_accuracy(t) == 1.0
    # SE = sqrt(0.25 * 0.75 / 4) / 0.75 = sqrt(0.046875) / 0.75
    assert kappa_standard_error(t) == pytest.approx(math.sqrt(0.046875) / 0.75)


def test_one_always_right_other_always_wrong():
    # constant but different: p_o = 0, p_e = 1*0 + 0*1 = 0 -> kappa = 0 / 1 = 0 (defined)
    t = contingency([T, T, T], [F, F, F])
    assert cohens_kappa(t) == 0.0
    assert complementarity(t) == 1.0
    assert oracle_accuracy(t) == 1.0


def test_everyone_always_wrong_p_e_one():
    # p_o = 1 and p_e = 0*0 + 1*1 = 1: 0/0. Convention (cohens_kappa docstring): 1.0, the
    # value every other pair of identical correctness vectors gets; SE 0.0.
    t = contingency([F, F, F], [F, F, F])
    assert t.chance_agreement == 1.0
    assert cohens_kappa(t) == 1.0
    assert kappa_standard_error(t) == 0.0
    assert complementarity(t) == 0.0
    assert oracle_accuracy(t) == 0.0


def test_both_always_right_p_e_one():
    # p_e = 1*1 + 0*0 = 1: same convention, kappa 1.0; the oracle is perfect, c = 0
    t = contingency([T, T], [T, T])
    assert cohens_kappa(t) == 1.0
    assert complementarity(t) == 0.0
    assert oracle_accuracy(t) == 1.0


def test_empty_and_mismatched_inputs_are_errors():
    with pytest.raises(ValueError, match="at least one"):
        contingency([], [])
    with pytest.raises(ValueError, match="length"):
        contingency([T], [T, F])
    with pytest.raises(ValueError, match="at least one"):
        wrong_agreement([], [], [], [], same_string)


# --------------------------------------------------------------------------------------
# Wrong agreement
# --------------------------------------------------------------------------------------


def test_wrong_agreement_counts_shared_wrong_answers_over_all_problems():
    correct_a = [F, F, F, F, T, F]
    correct_b = [F, F, F, F, T, T]
    answers_a = ["1", "2", None, None, "7", "9"]
    answers_b = ["1", "3", None, "4", "7", "9"]
    # row 0: both wrong, same answer "1"         -> agree
    # row 1: both wrong, "2" vs "3"              -> no
    # row 2: both wrong, None vs None            -> no (None never agrees)
    # row 3: both wrong, None vs "4"             -> no
    # row 4: both right ("7")                    -> not an error
    # row 5: only A wrong (same "9" is B's gold) -> not a shared error
    # w = 1 / 6 (denominator N, not the 4 both-wrong rows)
    assert wrong_agreement(correct_a, correct_b, answers_a, answers_b, same_string) == pytest.approx(1 / 6)


def test_wrong_agreement_identical_answers_and_all_none():
    # everyone always wrong with identical answers: w = 3/3
    assert wrong_agreement([F] * 3, [F] * 3, ["5", "6", "7"], ["5", "6", "7"], same_string) == 1.0
    # everyone always wrong with no answers at all: w = 0/3 (no answer is not a shared belief)
    assert wrong_agreement([F] * 3, [F] * 3, [None] * 3, [None] * 3, same_string) == 0.0


def test_wrong_agreement_uses_equivalence_both_ways():
    # an asymmetric checker that only accepts (pred="1/2", gold="0.5"): counted either way round
    def one_way(pred: str, gold: str) -> bool:
        return (pred, gold) == ("1/2", "0.5") or pred == gold

    assert wrong_agreement([F], [F], ["0.5"], ["1/2"], one_way) == 1.0
    assert wrong_agreement([F], [F], ["1/2"], ["0.5"], one_way) == 1.0


def test_pair_stats_bundles_every_metric():
    a = [T, T, T, T, T, T, F, F, F, F]
    b = [T, T, T, T, F, F, T, F, F, F]
    ans_a = ["x"] * 6 + ["1", "2", "3", None]
    ans_b = ["x"] * 4 + ["8", "9", "x", "2", "3", None]
    # both wrong on rows 7-9: row 7 "2"="2" agree, row 8 "3"="3" agree, row 9 None/None no -> w = 2/10
    s = pair_stats("A", "B", a, b, ans_a, ans_b, equivalent=same_string)
    d = s.as_dict()
    assert (d["both_correct"], d["only_a"], d["only_b"], d["both_wrong"]) == (4, 2, 1, 3)
    assert d["kappa"] == pytest.approx(0.4)
    assert d["c"] == pytest.approx(0.3)
    assert d["u"] == pytest.approx(0.7)
    assert d["w"] == pytest.approx(0.2)
    assert (d["accuracy_a"], d["accuracy_b"]) == (pytest.approx(0.6), pytest.approx(0.5))


# --------------------------------------------------------------------------------------
# Pearson correlation and partner ranking
# --------------------------------------------------------------------------------------


def test_pearson_by_hand():
    assert pearson([1, 2, 3, 4], [2, 4, 6, 8]) == pytest.approx(1.0)
    assert pearson([1, 2, 3, 4], [8, 6, 4, 2]) == pytest.approx(-1.0)
    # means 2.5; dx = (-1.5, -.5, .5, 1.5), dy = (-1.5, .5, -.5, 1.5)
    # sum dx*dy = 2.25 - .25 - .25 + 2.25 = 4; sum dx^2 = sum dy^2 = 5 -> r = 4 / 5
    assert pearson([1, 2, 3, 4], [1, 3, 2, 4]) == pytest.approx(0.8)


def test_pearson_undefined_is_nan():
    assert math.isnan(pearson([1, 2, 3], [5, 5, 5]))  # zero variance
    assert math.isnan(pearson([1], [2]))  # one point
    with pytest.raises(ValueError):
        pearson([1, 2], [1])


def test_kappa_and_c_correlate_negatively_at_equal_accuracies():
    # Every pair at acc 0.5 over 4 problems has p_e = 0.5, so kappa = 1 - 2c exactly: r = -1
    pairs = [
        ([T, T, F, F], [T, T, F, F]),
        ([T, T, F, F], [T, F, T, F]),
        ([T, T, F, F], [F, F, T, T]),
        ([T, F, T, F], [F, T, F, T]),
    ]
    tables = [contingency(a, b) for a, b in pairs]
    assert pearson([cohens_kappa(t) for t in tables], [complementarity(t) for t in tables]) == pytest.approx(-1.0)


def _stats(a: str, b: str, kappa: float, c: float, kind: str = "models"):
    from corl.studies.diversity import PairStats

    return PairStats(a, b, kind, Contingency(1, 1, 1, 1), kappa, 0.0, c, 0.75, 0.0)


def test_rank_partners_lowest_kappa_then_highest_c():
    pairs = [
        _stats("A", "B", 0.30, 0.30),
        _stats("C", "A", 0.30, 0.40),  # ties B on kappa, higher c: ranks first; anchor second in the pair
        _stats("A", "D", 0.50, 0.60),
        _stats("B", "C", 0.00, 0.90),  # does not involve A
        _stats("A", "A (seed 1)", 0.70, 0.10, "seed"),
    ]
    ranked = rank_partners(pairs, "A")
    assert [p.partner_of("A") for p in ranked] == ["C", "B", "D", "A (seed 1)"]


def _sample(name: str, correct: list[bool], seed: int = 0):
    from corl.studies.diversity import Sample

    return Sample(name, name.split(" ")[0], seed, [""] * len(correct), ["0"] * len(correct), correct, False, "", None)


def test_recommendation_names_the_partner_and_its_caveats():
    from corl.studies.diversity import build_report, compare_samples, recommend

    samples = {
        "A": [_sample("A", [T, T, T, F, F, F]), _sample("A (seed 1)", [T, T, F, T, F, F], seed=1)],
        "B": [_sample("B", [T, T, F, F, T, F])],
        "W": [_sample("W", [F, F, F, F, F, T])],  # weak: 1/6 against A's 3/6
    }
    pairs = compare_samples(samples, equivalent=same_string)
    # A,B:  cells (2,1,1,2): p_o = 4/6, p_e = .5*.5 + .5*.5 = .5 -> kappa = (2/3 - 1/2)/(1/2) = 1/3, c = 2/6
    # A,W:  cells (0,3,1,2): p_o = 2/6, p_e = .5*(1/6) + .5*(5/6) = .5 -> kappa = (1/3 - 1/2)/(1/2) = -1/3, c = 4/6
    # A,A': cells (2,1,1,2): kappa = 1/3, c = 2/6 (ties B; stable order keeps B first)
    kappa = {frozenset((p.a, p.b)): p.kappa for p in pairs}
    assert kappa[frozenset(("A", "B"))] == pytest.approx(1 / 3)
    assert kappa[frozenset(("A", "W"))] == pytest.approx(-1 / 3)
    assert kappa[frozenset(("A", "A (seed 1)"))] == pytest.approx(1 / 3)
    text = recommend(pairs, samples, "A")
    assert text.startswith("best partner for A: W (kappa -0.33, c 66.7%); caution: accuracies 16.7% vs 50.0%")
    # with no other model, the best "partner" is the seed twin, and the advice says so
    only_seed = {"A": samples["A"]}
    assert "another model family" in recommend(compare_samples(only_seed, same_string), only_seed, "A")
    # 3 + 1 = 4 pairs: the correlation is reported; JSON has no NaN
    report = build_report(StudySettings(data="x"), [{"id": str(i)} for i in range(6)], 0, samples, pairs, "A")
    assert report["kappa_c_correlation"]["pairs"] == 4
    assert [r["partner"] for r in report["anchor"]["ranking"]] == ["W", "B", "A (seed 1)"]
    json.dumps(report, allow_nan=False)


def test_recommendation_flags_degenerate_and_constant_pairs():
    from corl.studies.diversity import build_report, compare_samples, recommend
    from corl.studies.diversity.study import StudySettings

    right = {"A": [_sample("A", [T, T, T])], "B": [_sample("B", [T, T, T])]}
    assert "no pair differs at all" in recommend(compare_samples(right, same_string), right, None)
    # nobody solves anything (SmolLM2 and Gemma-3 on GSM8K, 0/40 each): kappa is the degenerate 1.0 and
    # u is 0 everywhere; no "most decoupled pair" and no cohort is named, for the anchor neither
    wrong = {"A": [_sample("A", [F, F, F])], "B": [_sample("B", [F, F, F])]}
    pairs = compare_samples(wrong, same_string)
    for anchor in (None, "A"):
        text = recommend(pairs, wrong, anchor)
        assert text.startswith("no model solves any of these problems") and "partner" not in text, text
    report = build_report(StudySettings(data="x"), [{"id": str(i)} for i in range(3)], 0, wrong, pairs, None)
    assert report["cohort"] is None and report["recommendation"].startswith("no model solves")
    both_right = build_report(
        StudySettings(data="x"), [{"id": str(i)} for i in range(3)], 0, right, compare_samples(right, same_string), None
    )
    assert both_right["cohort"] is not None
    constant = {"A": [_sample("A", [T, T, T, T])], "B": [_sample("B", [T, F, T, F])]}
    assert "always right or always wrong" in recommend(compare_samples(constant, same_string), constant, "A")


# --------------------------------------------------------------------------------------
# Problem selection
# --------------------------------------------------------------------------------------


def _candidates(vectors: dict[str, list[int]]) -> list:
    names = list(vectors)
    return [
        pair_stats(a, b, vectors[a], vectors[b], [None] * len(vectors[a]), [None] * len(vectors[b]))
        for i, a in enumerate(names)
        for b in names[i + 1 :]
    ]


def test_recommended_cohort_by_hand():
    # A = C (kappa 1, u 2/4: score -0.5); A-B and B-C: one of each cell, p_o = p_e = 0.5, kappa 0, u 3/4: score 0.75
    three = {"A": [1, 1, 0, 0], "B": [1, 0, 1, 0], "C": [1, 1, 0, 0]}
    found = recommend_cohort(_candidates(three), list(three))
    assert found["pair"]["members"] == ["A", "B"]  # ties with B-C on score and kappa: the candidates' order
    assert found["pair"]["score"] == pytest.approx(0.75)
    ring = found["ring"]  # the one ring of three: edges C->A, A->B, B->C
    assert found["recommended"] is ring and ring["members"] == ["A", "B", "C"]
    assert [(e["teacher"], e["student"]) for e in ring["edges"]] == [("C", "A"), ("A", "B"), ("B", "C")]
    assert ring["kappa"] == pytest.approx(1 / 3) and ring["u"] == pytest.approx(2 / 3)  # (1+0+0)/3, (.5+.75+.75)/3
    assert ring["score"] == pytest.approx(1 / 3)


def test_recommended_ring_keeps_alike_candidates_apart():
    # D = [0,0,0,1] with A, B or C: cells 0/2/1/1, p_o 1/4, p_e 1/2, kappa -1/2, u 3/4: score 1.25 (the best pairs)
    four = {"A": [1, 1, 0, 0], "B": [1, 0, 1, 0], "C": [1, 1, 0, 0], "D": [0, 0, 0, 1]}
    found = recommend_cohort(_candidates(four), list(four))
    assert found["pair"]["members"] == ["A", "D"] and found["pair"]["score"] == pytest.approx(1.25)
    # rings: A-B-C-D (edges DA 1.25, AB .75, BC .75, CD 1.25: mean 1.0) beats A-B-D-C and A-C-B-D
    # (each with the A-C edge, -0.5: (-.5 + .75 + 1.25 + 1.25) / 4 = 0.6875)
    assert found["ring"]["members"] == ["A", "B", "C", "D"] and found["ring"]["score"] == pytest.approx(1.0)
    agents = yaml.safe_load(agents_yaml(found["recommended"]))["agents"]
    assert [a["model"] for a in agents] == ["A", "B", "C", "D"] and len({a["name"] for a in agents}) == 4
    assert recommend_cohort(_candidates({"A": [1, 0], "B": [0, 1]}), ["A", "B"])["ring"] is None  # a pair only


def test_the_cli_prints_the_recommended_cohort_as_a_config_block():
    from rich.console import Console

    from corl.cli.diversity import _print_cohort

    four = {"A": [1, 1, 0, 0], "B": [1, 0, 1, 0], "C": [1, 1, 0, 0], "D": [0, 0, 0, 1]}
    cohort = recommend_cohort(_candidates(four), list(four))
    cohort["agents_yaml"] = agents_yaml(cohort["recommended"])
    console = Console(record=True, width=200)
    _print_cohort(console, cohort)
    text = console.export_text()
    assert "recommended cohort (ring, mean u - kappa 1.000: " in text
    assert [a["model"] for a in yaml.safe_load(text[text.index("agents:") : text.index("best pair")])["agents"]] == list("ABCD")
    assert "best pair: A + D (u - kappa 1.250)" in text
    console = Console(record=True)
    _print_cohort(console, None)  # nobody solved anything: nothing printed
    assert console.export_text() == ""


def test_parse_filter():
    assert parse_filter("level=3,4,5") == ("level", ("3", "4", "5"))
    assert parse_filter(" subject = Algebra ") == ("subject", ("Algebra",))
    for bad in ("level", "=3", "level="):
        with pytest.raises(ValueError, match="FIELD=VALUE"):
            parse_filter(bad)


def test_select_problems_filters_drops_empty_answers_and_subsets_stably():
    rows = [{"id": f"p{i}", "problem": f"q{i}", "answer": str(i), "level": 1 + i % 5} for i in range(50)]
    rows[3]["answer"] = ""  # level 4, empty: dropped
    rows[7]["level"] = None  # MATH's "Level ?" rows: kept out by level=3,4,5
    settings = StudySettings(data="x.jsonl", filters=(parse_filter("level=3,4,5"),), n=None)
    problems, dropped = select_problems(rows, settings)
    # levels 3,4,5 are i % 5 in {2,3,4}: 30 rows, minus row 3 (empty) and row 7 (None) = 28
    assert (len(problems), dropped) == (28, 1)
    assert all(int(p["id"][1:]) % 5 in (2, 3, 4) for p in problems)
    subset, _ = select_problems(rows, StudySettings(data="x.jsonl", filters=settings.filters, n=10))
    again, _ = select_problems(rows, StudySettings(data="x.jsonl", filters=settings.filters, n=10, seed=7))
    assert len(subset) == 10 and subset == again  # the subset does not depend on the sampling seed
    ids = [int(p["id"][1:]) for p in subset]
    assert ids == sorted(ids)  # file order kept


def test_select_problems_errors_name_the_fix():
    from corl.data.rows import DataError

    rows = [{"id": "a", "question": "q", "answer": "1"}]
    with pytest.raises(DataError, match="--problem-field"):
        select_problems(rows, StudySettings(data="x.jsonl"))
    with pytest.raises(DataError, match="filter field 'level'"):
        select_problems(rows, StudySettings(data="x.jsonl", problem_field="question", filters=(("level", ("3",)),)))


def test_generate_texts_batches_and_reports_progress():
    from types import SimpleNamespace

    from corl.studies.diversity import generate_texts

    class EchoEngine:
        def __init__(self):
            self.batches = []

        def generate(self, prompts, num_samples, params):
            self.batches.append(list(prompts))
            return SimpleNamespace(texts=[p.upper() for p in prompts for _ in range(num_samples)])

    engine, done = EchoEngine(), []
    texts = generate_texts(engine, list("abcdefg"), params=None, seed=0, batch_size=3, on_batch=done.append)
    assert texts == list("ABCDEFG")  # one completion per prompt, in prompt order
    assert engine.batches == [list("abc"), list("def"), list("g")]
    assert done == [3, 6, 7]  # prompts done after each batch


# --------------------------------------------------------------------------------------
# `corl diversity` end to end on tiny random-init models (answers wrong, plumbing right)
# --------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def tiny_study(tmp_path_factory):
    """Three random-init tiny models of different architectures, saved as HF folders, and a data file."""
    from corl.studies.tiny.families import build_random_model
    from corl.studies.tiny.tokenizers import char_tokenizer

    root = tmp_path_factory.mktemp("diversity")
    tok = char_tokenizer()
    models = []
    for i, arch in enumerate(("llama", "qwen2", "gpt2")):
        path = root / f"tiny-{arch}"
        build_random_model(arch, tok, hidden=32, layers=1, heads=2, ffn=64, seed=i).save_pretrained(path)
        tok.save_pretrained(path)
        models.append(str(path))
    data = root / "problems.jsonl"
    with data.open("w") as f:
        for i in range(8):
            f.write(json.dumps({"id": f"p{i}", "problem": f"{i}+{i}=?", "answer": str(2 * i), "level": 1 + i % 3}) + "\n")
    return root, models, str(data)


def _invoke(args: list[str]):
    import typer
    from typer.testing import CliRunner

    from corl.cli.diversity import register

    app = typer.Typer()
    register(app)
    app.command("noop", hidden=True)(lambda: None)  # two commands: typer keeps "diversity" a subcommand
    result = CliRunner().invoke(app, ["diversity", *args])
    assert result.exit_code == 0, (result.output, result.exception)
    return result


def test_cli_end_to_end_with_cache(tiny_study, monkeypatch):
    import corl.studies.diversity.study as div

    root, (m_llama, m_qwen, m_gpt2), data = tiny_study
    out = root / "out"
    calls: list[int] = []
    real_generate = div.generate_texts

    def counting_generate(engine, prompts, params, seed, batch_size, on_batch=None):
        calls.append(seed)
        return real_generate(engine, prompts, params, seed, batch_size, on_batch)

    monkeypatch.setattr(div, "generate_texts", counting_generate)
    common = ["--data", data, "--filter", "level=1,2", "--n", "4", "--temperature", "1.0", "--max-new-tokens", "6",
              "--batch-size", "4", "--device", "cpu", "--out", str(out)]  # fmt: skip

    # 1) two models: two samples drawn; stdout is one JSON object and nothing else
    first = _invoke(["--models", m_llama, m_qwen, *common, "--json"])
    report = json.loads(first.stdout)
    assert calls == [0, 0]
    assert report["problems"]["n"] == 4  # levels 1,2 keep 6 of 8 rows (i % 3 in {0, 1}); n picks 4
    assert [p["kind"] for p in report["pairs"]] == ["models"]
    pair = report["pairs"][0]
    assert pair["both_correct"] + pair["only_a"] + pair["only_b"] + pair["both_wrong"] == 4
    assert pair["c"] == pytest.approx((pair["only_a"] + pair["only_b"]) / 4)
    assert report["kappa_c_correlation"] is None  # fewer than 4 pairs

    # 2) add a model and seed pairs: only the new model and the seed twins are sampled
    calls.clear()
    second = _invoke(["--models", m_llama, m_qwen, m_gpt2, *common, "--seed-pairs", "--anchor", m_llama, "--json"])
    report = json.loads(second.stdout)
    assert sorted(calls) == [0, 1, 1, 1]  # gpt2 at seed 0; every model at seed 1
    hits = {s["name"]: s["cache_hit"] for s in report["samples"]}
    assert hits[m_llama] and hits[m_qwen] and not hits[m_gpt2]
    assert len(report["pairs"]) == 6  # 3 model pairs + 3 seed pairs
    assert sorted(p["kind"] for p in report["pairs"]) == ["models"] * 3 + ["seed"] * 3
    kappas = [p["kappa"] for p in report["pairs"]]
    assert kappas == sorted(kappas)
    assert report["kappa_c_correlation"]["pairs"] == 6  # reported (None when kappa or c has no variance)
    assert [r["partner"] for r in report["anchor"]["ranking"]].count(f"{m_llama} (seed 1)") == 1
    assert len(report["anchor"]["ranking"]) == 3
    assert report["recommendation"]
    # three candidates: the recommended cohort is their ring (seed twins are no candidates), as a config block;
    # random models may solve nothing at all, and then no cohort is named (the unit tests hold both cases fixed)
    cohort = report["cohort"]
    solved = any(s["accuracy"] for s in report["samples"])
    if solved:
        assert cohort["recommended"]["kind"] == "ring" and sorted(cohort["recommended"]["members"]) == sorted(
            [m_llama, m_qwen, m_gpt2]
        )
        assert [a["model"] for a in yaml.safe_load(cohort["agents_yaml"])["agents"]] == cohort["recommended"]["members"]
    else:
        assert cohort is None and report["recommendation"].startswith("no model solves any of these problems")
    assert (out / "kappa_heatmap.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert json.loads((out / "diversity.json").read_text()) == report
    assert len(list((out / "cache").glob("*.json"))) == 6

    # 3) the same study again, human-readable: no sampling, not even a model load
    calls.clear()

    def no_loading(*args, **kwargs):
        raise AssertionError("a cached study must not load a model")

    monkeypatch.setattr("corl.models.load_policy", no_loading)
    third = _invoke(["--models", m_llama, m_qwen, m_gpt2, *common, "--seed-pairs", "--anchor", m_llama])
    assert calls == []
    assert "recommendation" in third.stdout and "kappa" in third.stdout
    assert ("recommended cohort (ring" in third.stdout and "agents:" in third.stdout) == solved
    assert ("no model solves any" in third.stdout) == (not solved)
    assert json.loads((out / "diversity.json").read_text())["pairs"] == report["pairs"]


def test_cli_rejects_unknown_anchor(tiny_study, tmp_path):
    import typer
    from typer.testing import CliRunner

    from corl.cli.diversity import register

    _, (m_llama, m_qwen, _), data = tiny_study
    app = typer.Typer()
    register(app)
    app.command("noop", hidden=True)(lambda: None)
    result = CliRunner().invoke(app, ["diversity", m_llama, m_qwen, "--data", data, "--anchor", "other", "--out", str(tmp_path)])
    assert result.exit_code == 2
    assert "--anchor 'other' is not one of the models" in result.output


def test_corl_app_has_the_command():
    from corl.cli import app

    assert "diversity" in [c.name for c in app.registered_commands]


def test_resampled_kappas_follow_cohens_kappa_draw_by_draw():
    from corl.studies.diversity.metrics import kappas_of

    a = [True, True, False, False, True, False]
    b = [True, False, False, True, True, False]
    rows = [[0, 1, 2, 3, 4, 5], [0, 0, 2, 2, 4, 5], [0, 0, 0, 0, 0, 0], [2, 3, 2, 3, 2, 3]]
    by_hand = [cohens_kappa(contingency([a[i] for i in r], [b[i] for i in r])) for r in rows]
    # the whole table: p_o 4/6, both accuracies 1/2, p_e 1/2: kappa (2/3 - 1/2) / (1/2) = 1/3;
    # draw 3 is (T, T) six times: both always right, p_e = 1, kappa 1 (cohens_kappa's rule)
    assert by_hand[0] == pytest.approx(1 / 3) and by_hand[2] == 1.0
    assert kappas_of(a, b, rows) == pytest.approx(by_hand)


def test_kappa_interval_holds_the_kappa_and_is_a_point_for_identical_answers():
    from corl.studies.diversity.metrics import kappa_interval

    a = [i % 3 == 0 for i in range(60)]
    b = [i % 3 == 0 or i % 7 == 0 for i in range(60)]
    low, high = kappa_interval(a, b)
    assert low < cohens_kappa(contingency(a, b)) < high and high - low > 0.1
    assert kappa_interval(a, a) == (1.0, 1.0)  # every resample agrees on every problem
    assert kappa_interval(a, b) == (low, high)  # a fixed resampling seed: the report is reproducible


def test_kappa_gap_is_seed_only_minus_cross_family_with_its_interval():
    from corl.studies.diversity.metrics import kappa_gap, pair_stats

    a = [i % 2 == 0 for i in range(40)]
    opposite = [not x for x in a]
    none = [None] * 40
    seed = pair_stats("m", "m (seed 1)", a, a, none, none, kind="seed")  # kappa 1
    cross = pair_stats("m", "n", a, opposite, none, none, kind="models")  # kappa -1
    gap = kappa_gap([seed, cross])
    assert gap["seed_only_minus_cross_family"] == 2.0 and gap["seed_pairs"] == gap["cross_family_pairs"] == 1
    assert gap["ci95"][1] == 2.0 and 1.0 <= gap["ci95"][0] <= 2.0
    assert kappa_gap([cross]) is None  # no seed-only pair: nothing to compare against
    assert seed.as_dict()["kappa_ci95"] == [1.0, 1.0]


def test_a_model_without_a_chat_template_is_prompted_with_the_plain_text(tiny_models):
    """--chat pairs an instruct model (its chat template) with a base model (none, as Gemma-3-270M): the
    base model gets the plain prompt instead of an error; a stop string ends its completions."""
    from corl.studies.diversity.study import StudySettings, _sample_model

    problems = [{"id": "0", "problem": "3+4=?", "answer": "7"}, {"id": "1", "problem": "9-2=?", "answer": "7"}]
    settings = StudySettings(data="x", template="{problem}\n", instruction="", chat=True, temperature=0.0, max_new_tokens=8)
    texts, _ = _sample_model(str(tiny_models["llama-char"]), [0], problems, settings, None)
    stopped, _ = _sample_model(str(tiny_models["llama-char"]), [0], problems, replace(settings, stop=("{",)), None)
    assert len(texts[0]) == 2 and all("{" in t for t in texts[0])  # the fixture models answer \boxed{d}
    assert stopped[0] == [t[: t.index("{")] for t in texts[0]]
