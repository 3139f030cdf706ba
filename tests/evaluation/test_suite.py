"""`corl suite`: the protocol table, the bootstrap as documented, MCQ grading, and a reduced
suite end to end on tiny checkpoints (math, code through the sandbox, a local GPQA file,
LiveCodeBench reported as not run), resumed after a SIGKILL."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import zlib
from pathlib import Path

import numpy as np
import pytest

from corl.evaluation.suite import BENCHMARKS, SUITES, ProtocolError, graders, parse_data_overrides, resolve_suite, stats
from corl.evaluation.suite.external import lcb_unavailable
from corl.evaluation.suite.runner import cell_paths
from tests.helpers import SHARED_DATA

needs_data = pytest.mark.skipif(not SHARED_DATA.is_dir(), reason=f"benchmark data folder {SHARED_DATA} is absent")
ROOT = Path(__file__).resolve().parents[2]


# -- the protocol table ---------------------------------------------------------------------------


def test_paper_text_is_the_papers_table_1_protocol():
    benches = resolve_suite("paper-text")
    assert [b.title for b in benches] == ["GSM8K", "MATH-500", "AMC", "HumanEval", "MBPP", "LiveCodeBench", "GPQA-D"]
    for b in benches:
        assert (b.temperature, b.top_p, b.max_tokens) == (0.6, 0.95, 3072), b.name
    amc = BENCHMARKS["amc23"]
    assert (amc.samples, amc.seeds, amc.metric) == (8, (0, 1, 2), "avg@8")
    assert BENCHMARKS["humaneval"].metric == "pass@1" and BENCHMARKS["gpqa"].grader == "mcq"
    assert set(SUITES["math"]) == {"aime24", "aime25", "amc23", "math500", "minerva_math", "olympiadbench"}
    assert SUITES["code"] == ("humaneval", "mbpp")


def test_the_docs_carry_the_protocol_table_of_the_code():
    from corl.evaluation.suite.protocol import protocol_markdown

    assert protocol_markdown() in (ROOT / "docs" / "evaluation.md").read_text()


def test_suite_and_data_errors_name_the_option():
    with pytest.raises(ProtocolError, match="unknown benchmark.*nope"):
        resolve_suite("amc23,nope")
    benches = resolve_suite("code")
    with pytest.raises(ProtocolError, match="--data 'gpqa=x.jsonl'.*not a benchmark of this suite"):
        parse_data_overrides(["gpqa=x.jsonl"], benches)
    with pytest.raises(ProtocolError, match="expected NAME=PATH"):
        parse_data_overrides(["humaneval"], benches)
    assert parse_data_overrides(["mbpp=/d/m.jsonl"], benches) == {"mbpp": "/d/m.jsonl"}


def test_cli_refuses_bad_options_before_loading_anything(tmp_path):
    from typer.testing import CliRunner

    from corl.cli import app

    def run(*args):
        result = CliRunner().invoke(app, ["suite", *args, "--out", str(tmp_path / "o")])
        return result.exit_code, " ".join(result.output.split())  # unwrapped

    code, text = run(str(tmp_path / "no-such-ckpt"), "--suite", "code")
    assert code == 2 and "no-such-ckpt' not found" in text
    code, text = run("tiny:llama-char", "--suite", "code", "--data", f"mbpp={tmp_path / 'missing.jsonl'}")
    assert code == 2 and "--data mbpp=" in text and "missing.jsonl not found" in text
    code, text = run("tiny:llama-char", "--suite", "code", "--seeds", "0,x")
    assert code == 2 and "--seeds '0,x'" in text
    assert not (tmp_path / "o").exists()  # refused before any cell


def test_missing_default_data_is_a_stated_not_run(tmp_path):
    from corl.evaluation.suite import effective
    from corl.evaluation.suite.runner import preflight

    (gpqa,) = effective(resolve_suite("gpqa"), tmp_path)  # no gpqa/diamond.jsonl under this root
    assert preflight(gpqa) == f"data file {tmp_path / 'gpqa/diamond.jsonl'} not found" + (
        " (GPQA is gated and not shipped: pass --data gpqa=FILE, see docs/evaluation.md)"
    )


def test_fingerprint_changes_with_what_changes_numbers_only(tmp_path):
    import dataclasses

    from corl.evaluation.suite import effective

    f = tmp_path / "m.jsonl"
    f.write_text('{"problem": "1+1", "answer": "2"}\n')
    (before,) = effective(resolve_suite("amc23"), tmp_path, {"amc23": str(f)})
    f.write_text('{"problem": "1+1", "answer": "3"}\n')
    (after,) = effective(resolve_suite("amc23"), tmp_path, {"amc23": str(f)})
    assert before.data == after.data == str(f) and before.fingerprint() != after.fingerprint()  # an edited file

    b = BENCHMARKS["amc23"]
    assert dataclasses.replace(b, note="other words").fingerprint() == b.fingerprint()
    assert dataclasses.replace(b, limit=2).fingerprint() != b.fingerprint()
    assert dataclasses.replace(b, temperature=1.0).fingerprint() != b.fingerprint()
    assert dataclasses.replace(b, data_sha="0" * 16).fingerprint() != b.fingerprint()  # an edited data file


# -- the bootstrap ---------------------------------------------------------------------------------


def test_percentile_rule_is_numpys_linear_percentile():
    assert stats.interval(np.arange(101.0)) == (2.5, 97.5)
    reps = np.array([0.1, 0.4, 0.2, 0.9, 0.5])
    # linear rule by hand: position 0.025 * 4 = 0.1 between 0.1 and 0.2; 0.975 * 4 = 3.9 between 0.5 and 0.9
    lo, hi = stats.interval(reps)
    assert lo == pytest.approx(0.1 + 0.1 * 0.1) and hi == pytest.approx(0.5 + 0.9 * 0.4)


def test_replicates_follow_the_documented_draws():
    x = np.array([[1.0, 0.0, 0.5, 1.0], [0.0, 0.0, 1.0, 1.0], [1.0, 1.0, 1.0, 0.0]])  # 3 seeds x 4 problems
    reps = stats.replicates(x, 7, stats.generator("amc23", 5))
    rng = np.random.default_rng([5, zlib.crc32(b"amc23")])
    problems = rng.integers(0, 4, size=(7, 4))
    seeds = rng.integers(0, 3, size=(7, 3))
    by_hand = [np.mean([x[s, i] for s in seeds[b] for i in problems[b]]) for b in range(7)]
    np.testing.assert_allclose(reps, by_hand)
    one = stats.replicates(x[:1], 7, stats.generator("amc23", 5))  # one seed: only problems are drawn
    np.testing.assert_allclose(one, [x[0, problems[b]].mean() for b in range(7)])


def test_intervals_on_known_data():
    # two problems, one right: a replicate is 0, 1/2 or 1 with probability 1/4, 1/2, 1/4 -> [0, 1]
    fig, _ = stats.summarize([[0.0, 1.0]], "b", 4000, 0)
    assert fig["value"] == 0.5 and fig["ci95"] == [0.0, 1.0]
    fig, _ = stats.summarize([[0.5] * 6, [0.5] * 6], "b", 500, 0)  # no spread anywhere: a point
    assert fig["ci95"] == [0.5, 0.5] and fig["per_seed"] == [0.5, 0.5]
    fig, _ = stats.summarize([[1.0] * 5, [0.0] * 5], "b", 4000, 0)  # all spread between the seeds
    assert fig["ci95"] == [0.0, 1.0]
    # a Bernoulli mean at p = 0.3, n = 400: the normal interval is +-1.96 * sqrt(.21 / 400) = +-0.0449
    x = [[1.0] * 120 + [0.0] * 280]
    fig, _ = stats.summarize(x, "b", 2000, 0)
    assert fig["ci95"][0] == pytest.approx(0.3 - 0.0449, abs=0.006) and fig["ci95"][1] == pytest.approx(0.3 + 0.0449, abs=0.006)


# -- multiple choice -------------------------------------------------------------------------------


def test_last_boxed_letter():
    assert graders.last_boxed_letter("maybe \\boxed{A} ... no, \\boxed{c}") == "C"
    assert graders.last_boxed_letter("\\boxed{(B)}") == "B"
    assert graders.last_boxed_letter("\\boxed{\\text{D}}") == "D"
    assert graders.last_boxed_letter("boxed{A}") == "A"  # a dropped backslash still counts (Co-RL)
    assert graders.last_boxed_letter("\\boxed{E}") is None and graders.last_boxed_letter("(A)") is None


def test_mcq_shuffle_is_fixed_per_seed_and_gold_follows_the_right_choice():
    row = {"question": "Q?", "choices": ["w1", "right", "w2", "w3"], "answer": "B"}
    raw = {
        "Question": "Q?",
        "Correct Answer": "right",
        "Incorrect Answer 1": "w1",
        "Incorrect Answer 2": "w2",
        "Incorrect Answer 3": "w3",
    }

    def shown(item):  # letter -> choice text, as the prompt lists them
        return dict(line[1:].split(") ", 1) for line in item.problem.split("Choices:\n")[1].splitlines())

    orders = set()
    for seed in range(6):
        item = graders.mcq_item(row, "p1", seed, "here")
        assert item == graders.mcq_item(row, "p1", seed, "here")  # deterministic
        assert shown(item)[item.gold] == "right"
        orders.add(item.problem)
        assert graders.mcq_item({**row, "answer": 1}, "p1", seed, "x").gold == item.gold  # index form
        assert graders.mcq_item({**row, "answer": "right"}, "p1", seed, "x").gold == item.gold  # text form
        from_raw = graders.mcq_item(raw, "p1", seed, "x")  # the release lists the right answer first
        assert shown(from_raw)[from_raw.gold] == "right" and sorted(shown(from_raw).values()) == sorted(row["choices"])
    assert len(orders) > 1  # another seed, another order
    with pytest.raises(ValueError, match="gpqa.jsonl row 3: 'answer' 'E'"):
        graders.mcq_item({**row, "answer": "E"}, "p1", 0, "gpqa.jsonl row 3")


@needs_data
def test_code_grader_passes_the_canonical_solution_in_the_sandbox():
    from corl.sandbox import SandboxPool

    bench = BENCHMARKS["humaneval"]
    row = json.loads((SHARED_DATA / "humaneval/test.jsonl").read_text().splitlines()[0])
    item = graders.Item(row["task_id"], "", "", row)
    with SandboxPool(workers=2) as pool:
        (v,) = graders.grade(bench, [item], [[row["canonical_solution"], "    return None\n"]], pool)
    assert v.correct == [True, False] and v.details[0] == "ok" and v.details[1].startswith("error: AssertionError")


# -- a reduced suite end to end --------------------------------------------------------------------

SUITE = "amc23,humaneval,gpqa" + (",lcb" if lcb_unavailable() else "")  # lcb only where it must report "not run"
GPQA_ROWS = [
    {"id": "g1", "question": "Which is 2+2?", "choices": ["3", "4", "5", "22"], "answer": "B"},
    {"id": "g2", "question": "Which is a prime?", "choices": ["4", "6", "7", "9"], "answer": 2},
    {
        "Record ID": "g3",
        "Question": "Pick x.",
        "Correct Answer": "x",
        "Incorrect Answer 1": "y",
        "Incorrect Answer 2": "z",
        "Incorrect Answer 3": "w",
    },
]


def _args(models, out: Path, files: dict) -> list[str]:
    ckpts = [str(models["llama-char"]), str(models["qwen2-bpe"])]
    opts = ["--suite", SUITE, "--out", str(out), "--data-root", str(SHARED_DATA)]
    opts += ["--data", f"gpqa={files['gpqa']}", "--data", f"amc23={files['math']}"]
    return ckpts + opts + ["--limit", "3", "--max-tokens", "16", "--engine", "hf", "--bootstrap", "200"]


def _run_inprocess(models, out: Path, files: dict):
    """The command as a Python call (as `corl eval --suite` will make it): returns the SuiteOutcome."""
    from corl.cli.suite import suite_command

    return suite_command(
        checkpoints=[str(models["llama-char"]), str(models["qwen2-bpe"])],
        suite=SUITE,
        out=out,
        data=[f"gpqa={files['gpqa']}", f"amc23={files['math']}"],
        data_root=SHARED_DATA,
        limit=3,
        max_tokens=16,
        engine="hf",
        bootstrap=200,
    )


@pytest.fixture(scope="module")
def local_files(tmp_path_factory) -> dict[str, Path]:
    """A GPQA file in both accepted forms, and a math file in the AMC slot: the tiny task's problems
    whose answers are digits 0-3, which the format-trained tiny models get right by chance (AMC
    itself they never solve, and an all-zero table could not tell a resumed run from another)."""
    from corl.studies.tiny.task import make_split

    root = tmp_path_factory.mktemp("local")
    (root / "gpqa.jsonl").write_text("".join(json.dumps(r) + "\n" for r in GPQA_ROWS))
    rows = [r for r in make_split("test", 12, seed=0) if r["answer"] in ("0", "1", "2", "3")][:3]
    (root / "math.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return {"gpqa": root / "gpqa.jsonl", "math": root / "math.jsonl"}


@pytest.fixture(scope="module")
def full_run(tiny_models, local_files, tmp_path_factory):
    out = tmp_path_factory.mktemp("suite") / "full"
    return out, _run_inprocess(tiny_models, out, local_files)


def _figures(results: dict) -> dict:
    """Every number of a results JSON except timings."""
    return {"models": results["models"], "pooled": results["pooled"]}


@needs_data
def test_reduced_suite_end_to_end(full_run, tiny_models):
    from corl.answers import extract_answer, is_equivalent

    out, outcome = full_run
    res = json.loads((out / "results.json").read_text())
    ckpts = [str(tiny_models["llama-char"]), str(tiny_models["qwen2-bpe"])]
    assert res["checkpoints"] == ckpts and len(outcome.computed) == 6
    for ckpt in ckpts:
        row = res["models"][ckpt]
        for name, k in (("amc23", 8), ("humaneval", 1), ("gpqa", 1)):
            fig = row[name]
            lo, hi = fig["ci95"]
            assert fig["status"] == "ok" and fig["n"] == 3 and lo <= fig["value"] <= hi and fig["k"] == k
            cell = json.loads(cell_paths(out, ckpt, name)[0].read_text())
            records = [json.loads(line) for line in cell_paths(out, ckpt, name)[1].read_text().splitlines()]
            assert len(records) == fig["n"] * 3  # one line per (problem, seed): 3 seeds each
            assert fig["value"] == pytest.approx(np.mean([r["score"] for r in records]))
            assert fig["per_seed"] == pytest.approx([np.mean([r["score"] for r in records if r["seed"] == s]) for s in (0, 1, 2)])
            for r in records:
                assert len(r["samples"]) == len(r["verdicts"]) == k and r["score"] == pytest.approx(np.mean(r["verdicts"]))
                if name == "amc23":  # the verdicts are the grader's: re-grade by hand
                    assert r["answers"] == [extract_answer(t) for t in r["samples"]]
                    assert r["verdicts"] == [a is not None and is_equivalent(a, r["gold"]) for a in r["answers"]]
                if name == "humaneval":  # tested in the sandbox: every sample has a sandbox status
                    assert r["answers"][0].startswith(r["prompt"]) and all(d.split(":")[0] for d in r["details"])
                if name == "gpqa":
                    assert r["gold"] in "ABCD" and r["verdicts"] == [
                        graders.last_boxed_letter(t) == r["gold"] for t in r["samples"]
                    ]
            assert cell["generate_calls"] == 3  # one batch per seed
        if "lcb" in SUITE:
            assert row["lcb"]["status"] == "not run" and "lcb_runner is not installed" in row["lcb"]["reason"]
            assert row["average"]["over"] == 3 and row["average"]["of"] == 4
    amc = [res["models"][c]["amc23"] for c in ckpts]
    assert any(a["value"] > 0 for a in amc) and any(a["ci95"][1] > a["ci95"][0] for a in amc)  # not a trivial table
    # the pooled vote: maj@16 over the 8 + 8 AMC samples, recomputed from the records
    pooled = res["pooled"]["amc23"]
    assert pooled["metric"] == "maj@16" and res["pooled"]["humaneval"]["status"] == "n/a"
    recs = [[json.loads(line) for line in cell_paths(out, c, "amc23")[1].read_text().splitlines()] for c in ckpts]
    hand = []
    for a, b in zip(*recs):
        vote = graders.vote_correct(BENCHMARKS["amc23"], a["answers"] + b["answers"], a["keys"] + b["keys"], a["gold"])
        hand.append(float(vote))
    assert pooled["value"] == pytest.approx(np.mean(hand))
    table = (out / "results.md").read_text()
    assert (
        table.splitlines()[0]
        == "| Model | AMC | HumanEval | GPQA-D |" + (" LiveCodeBench |" if "lcb" in SUITE else "") + " Average |"
    )
    assert f"| `{ckpts[0]}` |" in table and "| pooled maj@(k x 2) |" in table and "bootstrap seed 0" in table
    if "lcb" in SUITE:
        assert "not run (1)" in table and "- (1) lcb_runner is not installed" in table


@needs_data
def test_a_finished_suite_is_not_recomputed(full_run, tiny_models, local_files):
    out, first = full_run
    stamps = {p: p.stat().st_mtime_ns for p in (out / "cells").rglob("*.json*")}
    again = _run_inprocess(tiny_models, out, local_files)
    assert again.computed == [] and again.generate_calls == 0 and len(again.reused) == 6
    assert {p: p.stat().st_mtime_ns for p in (out / "cells").rglob("*.json*")} == stamps
    assert _figures(again.results) == _figures(first.results)


@needs_data
def test_kill_and_resume_equals_the_uninterrupted_run(full_run, tiny_models, local_files, tmp_path):
    out = tmp_path / "killed"
    cmd = [sys.executable, "-m", "corl", "suite", *_args(tiny_models, out, local_files)]
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env={**os.environ, "NO_COLOR": "1"})
    first = cell_paths(out, str(tiny_models["llama-char"]), "amc23")[0]
    deadline = time.time() + 120
    while not first.exists() and proc.poll() is None and time.time() < deadline:
        time.sleep(0.01)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert first.exists(), proc.stderr.read().decode()[-2000:]
    done = {p: p.stat().st_mtime_ns for p in (out / "cells").rglob("*.json")}
    assert 1 <= len(done) < 6, "the kill came after the whole suite: nothing left to resume"
    resumed = _run_inprocess(tiny_models, out, local_files)
    assert len(resumed.reused) == len(done) and len(resumed.computed) == 6 - len(done)
    assert all(p.stat().st_mtime_ns == t for p, t in done.items())  # finished cells were not rewritten
    assert _figures(resumed.results) == _figures(full_run[1].results)
    for p in (full_run[0] / "cells").rglob("*.jsonl"):  # the same samples, verdicts and records
        assert (out / p.relative_to(full_run[0])).read_text() == p.read_text()
    assert not list(out.rglob(".*.tmp*"))  # no torn temporary file left to confuse a reader
