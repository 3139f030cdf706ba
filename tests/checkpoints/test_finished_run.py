"""A finished tiny run as a user meets it: its checkpoints' model cards, and `corl eval RUN`."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import yaml

from corl.checkpoints.checkpoint import verify_checkpoint
from corl.evaluation.run_targets import TargetError, distinct_tails, resolve_targets
from corl.tracking.metrics import read_metrics
from tests.helpers import tiny_config


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory, tiny_models, tiny_data):
    """Three agents (a ring: agent0 <- agent2 <- agent1 <- agent0), 2 steps, a checkpoint after each."""
    from corl.config import validate_config
    from corl.trainer import CohortTrainer

    root = tmp_path_factory.mktemp("finished")
    logging = {"tensorboard": False, "checkpoint_every": 1}
    raw = tiny_config(root, tiny_models, tiny_data, agents=3, cohort={"steps": 2}, logging=logging)
    CohortTrainer(validate_config(raw)).train()
    return root / "run"


def corl(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "corl", *args], capture_output=True, text=True)


def header(text: str) -> dict:
    _, head, _ = text.split("---\n", 2)
    return yaml.safe_load(head)


@pytest.mark.slow
def test_every_agent_of_every_checkpoint_has_a_model_card(finished_run):
    teachers = {"agent0": "agent2", "agent1": "agent0", "agent2": "agent1"}
    final = read_metrics(finished_run, "val")[-1]  # the validation after the last step
    for step in (1, 2):
        checkpoint = finished_run / "checkpoints" / f"step_{step:06d}"
        listed = json.loads((checkpoint / "manifest.json").read_text())
        verify_checkpoint(checkpoint)  # the cards were written before the manifest: it holds them
        for name, teacher in teachers.items():
            text = (checkpoint / name / "README.md").read_text()
            assert f"{name}/README.md" in listed
            meta = header(text)
            assert meta["library_name"] == "transformers" and {"corl", "corl-label-peer", "label-free"} <= set(meta["tags"])
            assert f"**Taught by** `{teacher}`: its majority answer is this agent's label." in text
            assert "**Label source** `peer`: Co-RL ring" in text and f"| steps | {step} of 2 |" in text
            if step == 1:  # validation runs only at the end of this run
                assert "No validation has run yet" in text and "model-index" not in meta
            else:
                value = meta["model-index"][0]["results"][0]["metrics"][0]["value"]
                assert value == pytest.approx(final[f"{name}/val_accuracy"])
                assert f"| **{name}** | {final[f'{name}/val_accuracy']:.3f} |" in text


@pytest.mark.slow
def test_corl_eval_run_evaluates_each_agent_by_name_on_the_runs_validation_set(finished_run, tiny_data):
    done = corl("eval", str(finished_run), "--k", "2", "--json")
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert list(out["models"]) == ["agent0", "agent1", "agent2"]
    assert out["data"] == str(tiny_data["test"]) and out["n"] == 6  # data.val, its first val_size rows
    assert all(out["sources"][a].endswith(f"step_000002/{a}") for a in out["models"])  # the latest checkpoint
    # a checkpoint folder: the same agents; the table shows their names whole
    done = corl("eval", str(finished_run / "checkpoints" / "step_000001"), "--k", "1", "--n", "2")
    assert done.returncode == 0, done.stderr
    rows = [line for line in done.stdout.splitlines() if line.startswith("│")]
    assert [row.split("│")[1].strip() for row in rows] == ["agent0", "agent1", "agent2"]
    stated = " ".join(done.stderr.split())  # rich wraps the note at the terminal's width
    assert "the run's validation set" in stated and "(--n rows)" in stated  # it says where the data came from ...
    assert "(2 problems" in " ".join(done.stdout.split())  # ... and --n, given, wins over the run's val_size
    # --data given: the run's prompt is still taken, and the note names the data evaluated, not the run's
    done = corl("eval", str(finished_run), "--data", str(tiny_data["train"]), "--n", "2", "--k", "1")
    note = " ".join(done.stderr.split())
    assert done.returncode == 0, done.stderr
    assert "the run's validation set" not in note and "--data; the run's prompt: template '{problem}\\n'" in note
    assert "(2 problems" in " ".join(done.stdout.split())


@pytest.mark.slow
def test_what_is_not_a_model_is_a_one_line_error(finished_run, tmp_path):
    checkpoint = finished_run / "checkpoints" / "step_000002"
    everything = sorted(str(p) for p in checkpoint.iterdir())  # what the shell's step_000002/* gives
    done = corl("eval", *everything)
    assert done.returncode == 2
    assert done.stderr.strip().count("\n") == 0 and "Traceback" not in done.stderr
    assert "manifest.json' is a file, not a model: expected a run folder (with checkpoints/ or best/)" in done.stderr
    done = corl("eval", str(finished_run), "--step", "7")
    assert done.returncode == 2 and "has no checkpoint after step 7 (it has: 1, 2)" in done.stderr
    done = corl("eval", str(finished_run / "agent0"))
    assert done.returncode == 2 and "not found (its folder" in done.stderr

    # a study's folder (corl quickstart --out: seed0/<method>): the runs it holds, not "not a model"
    study = tmp_path / "study"
    (study / "seed0").mkdir(parents=True)
    (study / "plots").mkdir()
    for method in ("ttrl-agent0", "co-rl"):
        (study / "seed0" / method).symlink_to(finished_run, target_is_directory=True)
    done = corl("eval", str(study))
    assert done.returncode == 2 and "Traceback" not in done.stderr
    stated = " ".join(done.stderr.split())
    assert "is not a run but holds runs: seed0/co-rl, seed0/ttrl-agent0; give one or several of them" in stated


def _fake_checkpoint(run, step, agents=("agent0", "agent1")):
    folder = run / "checkpoints" / f"step_{step:06d}"
    for agent in agents:
        (folder / agent).mkdir(parents=True)
        (folder / agent / "config.json").write_text("{}")
    (folder / "state.json").write_text(json.dumps({"step": step, "agents": list(agents)}))
    (run / "checkpoints" / "latest").write_text(folder.name)


def test_the_note_says_what_was_taken_from_the_run_and_from_a_tiny_source(finished_run, tiny_data):
    from corl.evaluation.run_targets import Target, run_defaults

    agents = resolve_targets([str(finished_run)])
    taken, note = run_defaults(agents)
    assert taken["data"] == str(tiny_data["test"]) and taken["template"] == "{problem}\n" and taken["instruction"] == ""
    assert note.startswith(f"data: the run's validation set '{tiny_data['test']}' (first 6 rows); its prompt: template")
    taken, note = run_defaults(agents, frozenset({"data", "template"}))
    assert "data" not in taken and "n" not in taken and "template" not in taken and taken["instruction"] == ""
    assert note.startswith("--data; the run's prompt: instruction ''")
    # a tiny family is pretrained on the bare problem: the default instruction would score it 0
    tiny = [Target("tiny:llama-char", "tiny:llama-char"), Target("tiny:qwen2-bpe", "tiny:qwen2-bpe")]
    taken, note = run_defaults(tiny)
    assert taken == {"template": "{problem}\n", "instruction": "", "chat": False}
    assert note == "prompt: the one these models were pretrained with (template '{problem}\\n', instruction '', chat False)"
    assert run_defaults(tiny, frozenset({"template", "instruction", "chat"})) == ({}, None)
    assert run_defaults([*tiny, Target("gpt2", "gpt2")]) == ({}, None)  # a model without a declared prompt: nothing taken
    from corl.studies.quickstart import TEMPLATE, VISION_TEMPLATE
    from corl.studies.tiny.task import prompt_text

    assert taken["template"].format(problem="3+4=?") == prompt_text("3+4=?") == TEMPLATE.format(problem="3+4=?")
    vision = [Target("v", "tiny-vl:qwen2vl-bpe")]  # the image first, in the processor's own template
    assert run_defaults(vision)[0] == {"template": VISION_TEMPLATE, "instruction": ""}
    assert run_defaults([*tiny, *vision]) == ({}, None)  # models that disagree: nothing taken


def test_a_run_whose_checkpoints_were_removed_is_evaluated_by_what_it_selected(finished_run, tmp_path):
    """A finished run keeps best/ and drops checkpoints/ to free the disk (the real-model study does:
    two checkpoints of its pair are 9 GiB): `corl eval RUN --step best` still evaluates it as a run."""
    import shutil

    run = tmp_path / "run"
    shutil.copytree(finished_run, run)
    shutil.copytree(run / "checkpoints" / "step_000002", run / "best")
    shutil.rmtree(run / "checkpoints")
    agents = resolve_targets([str(run)], step="best")
    assert [t.label for t in agents] == ["agent0", "agent1", "agent2"]  # the run's agent order, from its config
    assert all(t.run == run and t.checkpoint == run / "best" for t in agents)
    with pytest.raises(TargetError, match="has no checkpoints/ any more; evaluate best \\(--step best\\)"):
        resolve_targets([str(run)])
    with pytest.raises(TargetError, match="is not a run but holds runs: run;"):
        resolve_targets([str(tmp_path)])
    shutil.rmtree(run / "best")  # config.yaml alone is no run
    with pytest.raises(TargetError, match="is not a model"):
        resolve_targets([str(run)])


def test_labels_tell_rows_apart(tmp_path):
    for run in ("runA", "runB"):
        _fake_checkpoint(tmp_path / run, 2)
    _fake_checkpoint(tmp_path / "runA", 4)
    labels = [t.label for t in resolve_targets([str(tmp_path / "runA")])]
    assert labels == ["agent0", "agent1"]
    labels = [t.label for t in resolve_targets([str(tmp_path / "runA"), str(tmp_path / "runB")])]
    assert labels == ["runA/agent0", "runA/agent1", "runB/agent0", "runB/agent1"]
    one_run_twice = [str(tmp_path / "runA" / "checkpoints" / s) for s in ("step_000002", "step_000004")]
    labels = [t.label for t in resolve_targets(one_run_twice)]
    assert labels == ["step_000002/agent0", "step_000002/agent1", "step_000004/agent0", "step_000004/agent1"]
    assert [t.source for t in resolve_targets([str(tmp_path / "runA")], step="2")][0].endswith("step_000002/agent0")
    with pytest.raises(TargetError, match="has no best/"):
        resolve_targets([str(tmp_path / "runA")], step="best")
    assert distinct_tails([("x", "a", "m"), ("y", "a", "m"), ("z", "b")]) == ["x/a/m", "y/a/m", "b"]
    assert distinct_tails([("tiny:llama-char",), ("tiny:llama-char",)]) == ["tiny:llama-char (1)", "tiny:llama-char (2)"]


@pytest.mark.slow
def test_a_suite_run_adds_its_figures_to_the_checkpoints_card(finished_run, tiny_data, tmp_path):
    checkpoint = finished_run / "checkpoints" / "step_000002"
    agent = checkpoint / "agent1"
    args = ["suite", str(agent), "--suite", "amc23", "--data", f"amc23={tiny_data['test']}", "--out", str(tmp_path / "out")]
    done = corl(*args, "--limit", "2", "--max-tokens", "8", "--engine", "hf", "--bootstrap", "0", "--seeds", "0", "--json")
    assert done.returncode == 0, done.stderr
    value = json.loads(done.stdout)["models"][str(agent)]["amc23"]["value"]
    text = (agent / "README.md").read_text()
    assert f"model card updated: {agent / 'README.md'}" in " ".join(done.stderr.split())
    assert "Suite `amc23`" in text and f"| {value:.3f} | — |" in text
    verify_checkpoint(checkpoint)  # the manifest follows the edited card: the checkpoint still resumes


@pytest.mark.slow
def test_a_run_with_a_suite_evaluates_every_agent_of_its_final_checkpoint(tmp_path, tiny_models, tiny_data):
    """suite.name: `corl train` ends with `corl suite` on the final checkpoint's agents; a suite
    that fails leaves the run intact and says how to finish it (exit 1); an unknown suite
    stops the run before training."""
    raw = tiny_config(tmp_path, tiny_models, tiny_data, agents=2, cohort={"steps": 1}, logging={"tensorboard": False})
    smoke = {"engine": "hf", "limit": 2, "max_tokens": 8, "bootstrap": 0}
    raw["suite"] = {"name": "amc23", "data": {"amc23": str(tiny_data["test"])}, **smoke}
    config = tmp_path / "run.yaml"
    config.write_text(yaml.safe_dump(raw))
    done = corl("train", str(config), "-o", str(tmp_path / "run"))
    assert done.returncode == 0, done.stderr
    final = tmp_path / "run" / "checkpoints" / "step_000001"
    results = json.loads((tmp_path / "run" / "suite" / "results.json").read_text())
    assert set(results["models"]) == {str(final / "agent0"), str(final / "agent1")}
    assert all("Suite `amc23`" in (final / name / "README.md").read_text() for name in ("agent0", "agent1"))

    raw["suite"]["data"] = {"amc23": str(tmp_path / "missing.jsonl")}
    config.write_text(yaml.safe_dump(raw))
    done = corl("train", str(config), "-o", str(tmp_path / "run2"))
    assert done.returncode == 1
    said = " ".join(done.stderr.split())
    assert "the suite failed; the run is intact. Finish it with: corl suite" in said
    assert (tmp_path / "run2" / "checkpoints" / "step_000001" / "agent1").is_dir()

    raw["suite"]["name"] = "amc24"
    config.write_text(yaml.safe_dump(raw))
    done = corl("train", str(config), "-o", str(tmp_path / "run3"))
    assert done.returncode == 2 and "suite.name" in done.stderr and "unknown benchmark(s) amc24" in done.stderr
    assert not (tmp_path / "run3").exists()
