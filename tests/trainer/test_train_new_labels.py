"""Every label source and reward of issue 27 trains a step with tiny models: the first through
`corl train` in a subprocess, as a user runs it, the others through the same `launch` in this
process (a subprocess each would add its start-up, not a check); a confidence reward the group
std would cancel is refused before any model loads (exit code 2, naming the option)."""

import os
import subprocess
import sys

import pytest
import yaml

from corl.tracking.metrics import read_metrics
from tests.helpers import tiny_config

CASES = {
    "random": (2, {"label_source": "random"}, {}),
    "random-self": (1, {"label_source": "random"}, {}),
    "pooled": (3, {"label_source": "pooled"}, {}),
    "star": (3, {"label_source": "star", "teacher": 1}, {}),
    "confidence": (2, {"reward": "confidence"}, {"scale_rewards": "none"}),
    "vote_share": (2, {"reward": "vote_share"}, {}),
}

SMALL = {"steps": 1, "prompts_per_step": 2, "samples_per_prompt": 3, "max_new_tokens": 8}


def corl_train(tmp_path, raw) -> subprocess.CompletedProcess:
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump(raw))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    return subprocess.run(
        [sys.executable, "-m", "corl", "train", str(path)], env=env, capture_output=True, text=True, timeout=600
    )


@pytest.mark.parametrize("case", list(CASES))
def test_corl_train_runs_each_new_option(tmp_path, tiny_models, tiny_data, case):
    agents, cohort, grpo = CASES[case]
    raw = tiny_config(tmp_path, tiny_models, tiny_data, agents=agents, cohort={**cohort, **SMALL}, grpo=grpo)
    raw["logging"]["tensorboard"] = False
    raw["data"]["val"] = None
    if case == "random":
        done = corl_train(tmp_path, raw)
        assert done.returncode == 0, done.stdout + done.stderr
    else:
        from corl.config import validate_config
        from corl.launch.run import launch

        launch(validate_config(raw), tmp_path / "run")
    records = read_metrics(tmp_path / "run", "train")
    assert [r["step"] for r in records] == [1]
    for agent in raw["agents"]:
        name = agent["name"]
        assert all(0.0 <= r[f"{name}/reward_mean"] <= 1.0 for r in records)
        assert all(0.0 <= r[f"{name}/labeled_fraction"] <= 1.0 for r in records)
    assert (tmp_path / "run" / "checkpoints" / "step_000001" / raw["agents"][0]["name"]).is_dir()


def test_confidence_with_the_group_std_is_refused(tmp_path, tiny_models, tiny_data):
    raw = tiny_config(tmp_path, tiny_models, tiny_data, cohort={"reward": "confidence"})
    done = corl_train(tmp_path, raw)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "set grpo.scale_rewards: none" in done.stdout + done.stderr


@pytest.mark.parametrize(
    ("method", "agents"), [("random-label", 2), ("co-rl-confidence", 2), ("co-rl-soft", 2), ("co-rl-pooled", 3)]
)
def test_quickstart_methods_make_valid_configs(tmp_path, method, agents):
    from pathlib import Path

    from corl.config import validate_config
    from corl.studies.quickstart import METHODS, QuickstartOptions, run_config

    spec = METHODS[method]
    group = [(f"a{i}", Path(f"/models/m{i}"), i) for i in range(agents)]
    cfg = validate_config(run_config(method, spec, group, QuickstartOptions(out=tmp_path), 0, tmp_path / method))
    assert (cfg.cohort.label_source, cfg.cohort.reward) == (spec.label_source, spec.reward)
    assert cfg.grpo.scale_rewards == ("none" if method == "co-rl-confidence" else "group")


def test_quickstart_refuses_pooled_with_two_agents(tmp_path):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    args = [sys.executable, "-m", "corl", "quickstart", "--methods", "base,co-rl-pooled", "--out", str(tmp_path)]
    done = subprocess.run(args, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "co-rl-pooled needs at least 3 agents: add --agents 3" in " ".join((done.stdout + done.stderr).split())
