"""The embedded default, reduced to a few steps of every stage (the CI smoke test)."""

import json

from typer.testing import CliRunner

from corl.cli import app


def test_quickstart_smoke_prints_json_and_writes_the_report(tmp_path, monkeypatch):
    monkeypatch.setenv("CORL_CACHE", str(tmp_path / "cache"))
    result = CliRunner().invoke(app, ["quickstart", "--smoke", "--out", str(tmp_path / "qs"), "--json"])
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)  # stdout is the JSON object alone
    assert set(out["methods"]) == {"base", "ttrl", "co-rl", "gt"}
    for method in out["methods"].values():
        assert set(method) == {"llama-char", "qwen2-bpe"}
        for entry in method.values():
            assert 0.0 <= entry["greedy"]["mean"] <= 1.0
            assert set(entry["greedy_by_type"]) <= {"arith", "linear", "mod", "digitsum"}
    kinds = sorted(p["kind"] for p in out["diversity"])
    assert kinds == ["models", "seed", "seed"]
    assert all(-1.0 <= p["kappa"] <= 1.0 for p in out["diversity"])
    assert out["wall_time_s"] > 0 and out["claims"]
    report = (tmp_path / "qs" / "report.md").read_text()
    assert "Table 1" in report and "kappa" in report
    assert (tmp_path / "qs" / "dynamics.png").stat().st_size > 0
    assert (tmp_path / "qs" / "peer_signal.png").stat().st_size > 0
    # the pretrained bases are cached: a second build is a cache hit
    from corl.quickstart import QuickstartOptions, build_cohort

    opts = QuickstartOptions.smoke(tmp_path / "qs2")
    first = build_cohort(opts)
    assert all((path / "config.json").is_file() for path in first.values())
