"""logging.log_completions: a step's completions in RUN/completions/ and a W&B table, as TRL's
log_completions, from a real cohort run (offline W&B, read back from its transaction log), across an
interruption and a resume."""

from __future__ import annotations

import importlib.util
import json
import statistics
from collections import Counter

import pytest

from corl.config import validate_config
from corl.tracking.completions import STEP_KEY, CompletionsLog, step_file
from corl.tracking.metrics import read_metrics
from corl.trainer import CohortTrainer
from tests.helpers import tiny_config
from tests.tracking.test_tracking_wandb import history

B, K, AGENTS = 4, 4, ("agent0", "agent1")


def _rows(run, step: int) -> list[dict]:
    return [json.loads(line) for line in step_file(run, step).read_text().splitlines()]


@pytest.fixture(scope="module")
def interrupted_run(tmp_path_factory, tiny_models, tiny_data):
    """4 steps, checkpoints after step 2; stopped after step 3 (its completions written and sent),
    resumed from step 2: step 3 is done again."""
    if importlib.util.find_spec("wandb") is None:
        pytest.skip("needs wandb (pip install 'corl[wandb]')")
    root = tmp_path_factory.mktemp("completions")
    raw = tiny_config(root, tiny_models, tiny_data, cohort={"steps": 4}, logging={"tensorboard": False})
    raw["data"].pop("val")
    raw["logging"].update({"report_to": ["jsonl", "wandb"], "checkpoint_every": 2, "log_completions": True})
    cfg = validate_config(raw)

    class Crash(Exception):
        pass

    def crash_after_step_3(step, metrics):
        if step == 2:
            raise Crash

    with pytest.MonkeyPatch.context() as env:
        env.setenv("WANDB_MODE", "offline")
        env.setenv("WANDB_SILENT", "true")
        with pytest.raises(Crash):
            CohortTrainer(cfg).train(on_step=crash_after_step_3)
        first_step_3 = _rows(root / "run", 3)
        CohortTrainer(cfg, resume=True).train()
    return root / "run", first_step_3


def test_every_trained_completion_of_a_step_is_a_row(interrupted_run):
    run, _ = interrupted_run
    assert sorted(p.name for p in (run / "completions").iterdir()) == [f"step_00000{s}.jsonl" for s in (1, 2, 3, 4)]
    metrics = {r["step"]: r for r in read_metrics(run, "train")}
    for step in (1, 2, 3, 4):
        rows = _rows(run, step)
        assert len(rows) == len(AGENTS) * B * K and {r["step"] for r in rows} == {step}
        assert set(rows[0]) == {"step", "agent", "id", "sample", "prompt", "completion", "extracted_answer", "label",
                                "label_agreement", "reward", "advantage", "truncated", "gold"}  # fmt: skip
        for agent in AGENTS:
            mine = [r for r in rows if r["agent"] == agent]
            assert [r["sample"] for r in mine] == list(range(K)) * B
            # the step's rewards are the ones its metrics averaged
            assert statistics.fmean(r["reward"] for r in mine) == pytest.approx(metrics[step][f"{agent}/reward_mean"])
            for r in mine:  # agreement: 1 exactly when the completion's answer is its label
                assert r["reward"] == float(r["label"] is not None and r["extracted_answer"] == r["label"])
            for b in range(B):  # GRPO's advantage: (reward - the prompt's mean) / (its K rewards' sample std + 1e-4)
                group = [r["reward"] for r in mine[b * K : (b + 1) * K]]
                mean, std = statistics.fmean(group), statistics.stdev(group)
                want = [(x - mean) / (std + 1e-4) for x in group]
                assert [r["advantage"] for r in mine[b * K : (b + 1) * K]] == pytest.approx(want, abs=1e-6)
    assert any(r["reward"] > 0 for s in (1, 2, 3, 4) for r in _rows(run, s))  # not a run of zeros


def test_a_redone_step_writes_the_same_rows_and_w_and_b_gets_each_table_once(interrupted_run):
    run, first_step_3 = interrupted_run
    assert _rows(run, 3) == first_step_3  # the resume is exact: the same completions, rewards and labels
    tables = [row for row in history(run) if "completions/_type" in row]  # a table's fields, flattened
    assert Counter(row[STEP_KEY] for row in tables) == Counter({1: 1, 2: 1, 3: 1, 4: 1})
    assert all(row["completions/_type"] == "table-file" and row["completions/nrows"] == 32 for row in tables)
    files = sorted(run.glob("wandb/offline-run-*/files/media/table/completions_*.table.json"))
    table = json.loads(files[0].read_text())
    assert table["columns"][:6] == ["step", "agent", "id", "sample", "prompt", "completion"] and len(table["data"]) == 32


def test_a_resumed_run_removes_the_completions_of_the_steps_it_redoes(tmp_path):
    for step in (1, 2, 3, 4):
        step_file(tmp_path, step).parent.mkdir(exist_ok=True)
        step_file(tmp_path, step).write_text("{}\n")
    CompletionsLog(tmp_path, every=1, first_step=3, wandb=False)  # the checkpoint was after step 2
    assert sorted(p.name for p in (tmp_path / "completions").iterdir()) == ["step_000001.jsonl", "step_000002.jsonl"]


def test_corl_grade_reads_a_steps_file_agent_by_agent_without_flags(interrupted_run):
    """`corl grade RUN/completions/step_N.jsonl`: corl's own format told from its columns, one figure per agent,
    each problem's K rows one problem (never one problem of 2K samples), gold the rows' own."""
    from typer.testing import CliRunner

    from corl.answers import is_equivalent
    from corl.cli import app

    run, _ = interrupted_run
    rows = _rows(run, 1)
    result = CliRunner().invoke(app, ["grade", str(step_file(run, 1)), "--json"])
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert "read as --format corl" in " ".join(result.stderr.split())
    assert (out["n"], out["k"], sorted(out["models"])) == (B, K, list(AGENTS))
    for agent in AGENTS:  # avg@K by hand: the share of the agent's rows whose answer is the gold one
        mine = [r for r in rows if r["agent"] == agent]
        right = [r["extracted_answer"] is not None and is_equivalent(r["extracted_answer"], r["gold"]) for r in mine]
        assert out["models"][agent]["avg@4"] == pytest.approx(sum(right) / len(right)), agent
