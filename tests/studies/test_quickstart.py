"""The embedded default, reduced to a few steps of every stage (the CI smoke test)."""

import json
import re

import yaml
from typer.testing import CliRunner

from corl.cli import app
from corl.tracking.metrics import read_metrics

DEFAULTS = {"base", "ttrl", "co-rl", "gt"}
# issue 27's controls: one trains here (a frozen agent must come out as its base); every control's
# `corl train` config is checked without training (test_every_control_makes_its_config), and what
# each option does in training is tested on its own (test_votes_per_prompt.py, test_frozen_peer.py)
CONTROLS = ("co-rl-frozen-a",)


def test_quickstart_smoke_prints_json_and_writes_the_report(tmp_path, monkeypatch):
    import resource

    monkeypatch.setenv("CORL_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("CORL_JOBS", "2")  # the work in worker processes, also on a 1-core machine
    own_cpu = resource.getrusage(resource.RUSAGE_SELF)
    result = CliRunner().invoke(
        app,
        # every method runs however slow the machine: skipping by budget is a wall-time rule,
        # tested by its arithmetic (test_optional_methods_are_predicted...), not by this machine's speed
        ["quickstart", "--smoke", "--out", str(tmp_path / "qs"), "--json", "--min-agreement", "0.25", "--lr", "3e-5"]
        + ["--budget-minutes", "100000", "--methods", ",".join([*sorted(DEFAULTS), *CONTROLS])],
    )
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)  # stdout is the JSON object alone
    assert set(out["methods"]) == DEFAULTS | set(CONTROLS)
    for method in out["methods"].values():
        assert set(method) == {"llama-char", "qwen2-bpe"}
        for entry in method.values():
            assert 0.0 <= entry["greedy"]["mean"] <= 1.0
            assert set(entry["greedy_by_type"]) <= {"arith", "linear", "mod", "digitsum"}
    # label-free runs: the last, the label-free-selected and the truth-selected checkpoint, side by side
    for method in ("ttrl", "co-rl"):
        for entry in out["methods"][method].values():
            sel = entry["selection"]
            assert set(sel) == {"last", "label_free", "truth"}
            assert sel["last"]["steps"] == [2] and all(s in (1, 2) for rule in sel.values() for s in rule["steps"])
            assert sel["last"]["mean"] == entry["greedy"]["mean"]
    assert all("selection" not in entry for entry in out["methods"]["gt"].values())
    kinds = sorted(p["kind"] for p in out["diversity"])
    assert kinds == ["models", "seed", "seed"]
    assert all(-1.0 <= p["kappa"] <= 1.0 for p in out["diversity"])
    assert out["wall_time_s"] > 0 and out["claims"]
    # the CPU time counts the workers' (their pretraining, evaluations and runs), not this process's alone
    after = resource.getrusage(resource.RUSAGE_SELF)
    this_process = after.ru_utime + after.ru_stime - own_cpu.ru_utime - own_cpu.ru_stime
    assert out["cpu_seconds"] > this_process + 1.0
    # every method's two agents vote together: 4 T=1 samples each (the paper's Table 10)
    assert set(out["ensembles"]) == DEFAULTS | set(CONTROLS) and {e["k"] for e in out["ensembles"].values()} == {8}
    # one vote per test problem, kept per RL seed (the claims' noise is paired per problem)
    assert all([len(r) for r in e["correct"]] == [16] for e in out["ensembles"].values())
    assert all([len(r) for r in v] == [16] for agents in out["vectors"].values() for v in agents.values())
    texts = [c["claim"] for c in out["claims"]]
    assert (
        "GT-Reward gains >= 8 points for every agent" in texts
        and "co-rl ensemble beats the ttrl ensemble (pooled maj@8)" in texts
    )
    # Theorem 1's regime of the bases, on the validation split: sampled accuracy per type and the pair's sums
    sums = out["regime"]["pair_sums"]["llama-char+qwen2-bpe"]
    by = out["regime"]["sampled_by_type"]
    assert all(abs(sums[t] - by["llama-char"][t] - by["qwen2-bpe"][t]) < 1e-12 for t in sums)
    # Theorem 1 where it predicts: Co-RL's gain over TTRL on each side of p_A + p_B = 1, per type (per
    # problem only from 16 T=1 samples per problem; the study draws 4)
    assert texts[0].startswith("Theorem 1: Co-RL gains over TTRL where per-type p_A + p_B > 1")
    assert not any("per-problem" in t for t in texts)
    for c in out["claims"][1:]:  # a tie holds only where the claim says ">="
        assert c["holds"] == (c["margin"] >= 0 if c["claim"].startswith("Co-RL >= TTRL") else c["margin"] > 0), c
    # the options reach every run's `corl train` config, and the curves start at the base model
    run = tmp_path / "qs" / "seed0" / "co-rl"
    cfg = yaml.safe_load((run / "config.yaml").read_text())
    assert cfg["cohort"]["min_agreement"] == 0.25 and {a["lr"] for a in cfg["agents"]} == {3e-5}
    assert read_metrics(run, "val")[0]["step"] == 0
    report = (tmp_path / "qs" / "report.md").read_text()
    assert "Table 1" in report and "kappa" in report and "Table 10" in report and "margin" in report
    assert "| sum llama-char+qwen2-bpe |" in report
    assert "## Checkpoint selection without labels" in report and "| co-rl | llama-char |" in report
    assert (run / "best" / "selection.json").is_file() and (run / "best-truth" / "state.json").is_file()
    assert f"Wall time: {out['wall_time_s']} s" in report and "at least 25% of" in report
    assert f"CPU time {out['cpu_seconds']} s)" in report
    assert (tmp_path / "qs" / "dynamics.png").stat().st_size > 0
    assert (tmp_path / "qs" / "peer_signal.png").stat().st_size > 0
    # the pretrained bases are cached: a second build is a cache hit
    from corl.studies.quickstart import QuickstartOptions, build_cohort

    opts = QuickstartOptions.smoke(tmp_path / "qs2")
    first = build_cohort(opts)
    assert all((path / "config.json").is_file() for path in first.values())
    check_controls(out, tmp_path / "qs" / "seed0")


def check_controls(out: dict, seed0):
    """A frozen agent's run: its config says so, its metrics say so, and it is its base model."""
    run, frozen = "co-rl-frozen-a", "llama-char"
    cfg = yaml.safe_load((seed0 / run / "config.yaml").read_text())
    assert {a["name"]: a["train"] for a in cfg["agents"]} == {"llama-char": False, "qwen2-bpe": True}
    # the frozen agent is its base model: the same greedy answers on the test split
    assert out["methods"][run][frozen]["greedy"] == out["methods"]["base"][frozen]["greedy"]
    assert all(r[f"{frozen}/frozen"] == 1.0 for r in read_metrics(seed0 / run, "train"))


def test_every_control_makes_its_config(tmp_path):
    """The controls' `corl train` configs, K = 4 and 2 families, as `train_method` builds them."""
    from corl.config import validate_config
    from corl.studies.quickstart import METHODS, QuickstartOptions, run_config

    opts = QuickstartOptions.smoke(tmp_path)
    pair = [("llama-char", tmp_path / "a", 0), ("qwen2-bpe", tmp_path / "b", 1)]

    def config(method, group):
        return validate_config(run_config(method, METHODS[method], group, opts, 0, tmp_path / method, cohort_size=2))

    for one in pair:  # alone, voting over the cohort's 2 x 4 samples, training on 4
        cfg = config("ttrl-matched", [one])
        assert [a.name for a in cfg.agents] == [one[0]] and cfg.cohort.label_source == "self"
        assert (cfg.cohort.votes_per_prompt, cfg.cohort.samples_per_prompt) == (8, 4)
    cfg = config("co-rl-votes", pair)
    assert (cfg.cohort.votes_per_prompt, cfg.cohort.samples_per_prompt) == (8, 4)
    assert config("co-rl", pair).cohort.votes_per_prompt is None
    for method, frozen in (("co-rl-frozen-a", "llama-char"), ("co-rl-frozen-b", "qwen2-bpe")):
        assert {a.name: a.train for a in config(method, pair).agents} == {n: n != frozen for n, _, _ in pair}


def test_optional_methods_are_predicted_from_the_essential_run_of_their_shape():
    from corl.studies.quickstart import predicted_cost

    spent = {"ttrl": 70.0, "co-rl": 55.0}
    assert predicted_cost("gt", spent) == 70.0  # each agent alone, like TTRL
    assert predicted_cost("rent", spent) == 70.0
    assert predicted_cost("co-rl-same-family", spent) == 55.0  # the cohort together, like Co-RL
    assert predicted_cost("gt", {}) == 0.0  # nothing measured: run it
    from corl.studies.quickstart import within_budget

    # two workers, 100 s gone, 200 s allowed: rent ends at 100 + 70/2 = 135, intuitor at 100 + 140/2 = 170,
    # co-rl-same-family would end at 100 + 195/2 = 197.5, co-rewarding-ii (another 70) at 232.5: left out
    wanted = ["rent", "intuitor", "co-rl-same-family", "co-rewarding-ii"]
    taken, late = within_budget(wanted, spent, 100.0, 200.0, workers=2)
    assert taken == wanted[:3] and late == {"co-rewarding-ii": 232.5}
    taken, late = within_budget(["rent", "intuitor"], spent, 100.0, 200.0, workers=1)  # one after the other
    assert taken == ["rent"] and late == {"intuitor": 240.0}


def test_the_claims_methods_always_run_whatever_the_budget():
    from corl.studies.quickstart import ESSENTIAL
    from corl.studies.quickstart_methods import DEFAULT_METHODS

    assert set(DEFAULT_METHODS) <= set(ESSENTIAL)  # a slow machine once dropped GT-Reward, and its claim


def test_seeds_are_reported_as_mean_and_population_std(tmp_path):
    from corl.studies.quickstart import QuickstartOptions, summarize
    from corl.studies.report import results_table

    def entry(acc, arith):
        return {"greedy": acc, "avg@4": acc / 2, "greedy_by_type": {"arith": arith}, "mean_length": 10.0}

    base = {"a": entry(0.3, 0.2)}
    per_seed = [{"base": base, "gt": {"a": entry(0.4, 0.1)}}, {"base": base, "gt": {"a": entry(0.6, 0.5)}}]
    out = summarize(QuickstartOptions(out=tmp_path, seeds=2), {"a": tmp_path}, [], per_seed, [], 1.0, 2.0)
    gt = out["methods"]["gt"]["a"]
    assert gt["greedy"]["mean"] == 0.5 and abs(gt["greedy"]["std"] - 0.1) < 1e-12  # pstdev of 0.4, 0.6
    assert gt["greedy_by_type"]["arith"]["mean"] == 0.3 and abs(gt["greedy_by_type"]["arith"]["std"] - 0.2) < 1e-12
    assert out["methods"]["base"]["a"]["greedy"] == {"mean": 0.3, "std": 0.0}
    assert "| gt | a | 30.0 ± 20.0 | **50.0 ± 10.0** | 25.0 ± 5.0 |" in results_table(out)


def test_help_states_the_library_defaults():
    # The CLI does not import corl.studies.quickstart (torch) to build its help, so it repeats the defaults.
    from corl.studies.quickstart import QuickstartOptions

    text = " ".join(CliRunner().invoke(app, ["quickstart", "--help"]).output.replace("│", " ").split())  # unwrap rich's box
    stated = dict(re.findall(r"--(steps|lr|min-agreement) .*? Default: ([0-9.e-]+?)\.? ", text))
    o = QuickstartOptions()
    assert {k: float(v) for k, v in stated.items()} == {"steps": o.steps, "lr": o.lr, "min-agreement": o.min_agreement}


def test_quickstart_vision_smoke_runs_every_method_with_vision_language_agents(tmp_path, monkeypatch):
    monkeypatch.setenv("CORL_CACHE", str(tmp_path / "cache"))
    result = CliRunner().invoke(app, ["quickstart", "--vision", "--smoke", "--out", str(tmp_path / "qsv"), "--json"])
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert set(out["methods"]) == {"base", "ttrl", "co-rl", "gt"}
    for method in out["methods"].values():
        assert set(method) == {"qwen2vl-bpe", "llava-siglip-char"}  # two vision encoders: a native-resolution ViT, SigLIP
        for entry in method.values():
            assert set(entry["greedy_by_type"]) <= {"read", "plus", "minus"} and 0.0 <= entry["greedy"]["mean"] <= 1.0
    assert out["options"]["vision"] is True and out["claims"] and out["regime"]["pair_sums"]
    run = tmp_path / "qsv" / "seed0" / "co-rl"
    cfg = yaml.safe_load((run / "config.yaml").read_text())
    assert cfg["data"]["train"].startswith("vtiny:train:") and cfg["data"]["template"] == "{problem}"
    assert all("vision" in a["model"] for a in cfg["agents"])  # the cached VL bases
    final = sorted((run / "checkpoints").glob("step_*"))[-1]
    for agent in ("qwen2vl-bpe", "llava-siglip-char"):  # every agent's checkpoint carries its processor
        assert (final / agent / "preprocessor_config.json").is_file() or (final / agent / "processor_config.json").is_file()
    assert len(read_metrics(run, "train")) == 2
    assert "Table 1" in (tmp_path / "qsv" / "report.md").read_text()


def test_more_missing_families_than_workers_are_built_together(tmp_path, monkeypatch):
    """Three families on two workers (the three-agent ring on 2 cores): a worker each, started
    together rather than in two rounds with a core idle through the second."""
    import dataclasses

    from corl.studies.jobs import Jobs
    from corl.studies.quickstart import QuickstartOptions
    from corl.studies.quickstart_cohort import build_cohort, builder_pool

    two = Jobs(2)
    with builder_pool(two, 2) as pool:
        assert pool is two
    with builder_pool(two, 3) as pool:
        assert pool is not two and pool.workers == 3
    with builder_pool(two, 9) as pool:
        assert pool.workers == 4  # at most twice the workers
    with builder_pool(Jobs(1), 3) as pool:
        assert pool.workers == 1  # CORL_JOBS=1: everything in this process

    monkeypatch.setenv("CORL_CACHE", str(tmp_path / "cache"))
    families = ("llama-char", "qwen2-bpe", "gemma-bpe")
    opts = dataclasses.replace(QuickstartOptions.smoke(tmp_path / "qs"), families=families)
    with Jobs(2) as jobs:
        cohort = build_cohort(opts, jobs)
        assert jobs._pool is None  # the study's own workers never started: the builders' pool built all three
    assert list(cohort) == list(families)
    assert all((cohort[name] / "config.json").is_file() and str(tmp_path) in str(cohort[name]) for name in families)

    # and the ring runs as a user starts it, on these builds (a cache hit): every method, three agents
    result = CliRunner().invoke(
        app, ["quickstart", "--agents", "3", "--smoke", "--out", str(tmp_path / "ring"), "--json", "--budget-minutes", "100000"]
    )
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert out["families"] == {name: str(cohort[name]) for name in families}
    assert all(set(agents) == set(families) for agents in out["methods"].values())
    assert {e["k"] for e in out["ensembles"].values()} == {12}  # three agents' 4 samples vote together
    cfg = yaml.safe_load((tmp_path / "ring" / "seed0" / "co-rl" / "config.yaml").read_text())
    assert [a["name"] for a in cfg["agents"]] == list(families) and cfg["cohort"]["label_source"] == "peer"  # n by n-1
    assert json.loads((cohort["gemma-bpe"] / "config.json").read_text())["model_type"] == "gemma"
