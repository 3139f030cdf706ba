"""Run configs: YAML in, typed values out, and one clear error per bad value."""

import pytest
import yaml

from corl.config import ConfigError, apply_overrides, load_config

BASE = {
    "agents": [{"name": "a", "model": "m1"}, {"name": "b", "model": "m2", "lr": 1e-5}],
    "data": {"train": "x.jsonl"},
}


def write(tmp_path, raw):
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


def test_defaults_and_types(tmp_path):
    cfg = load_config(write(tmp_path, BASE))
    assert cfg.cohort.label_source == "peer" and cfg.cohort.samples_per_prompt == 8
    assert cfg.grpo.beta == 0.0 and cfg.grpo.loss_aggregation == "grpo"
    assert cfg.agents[1].lr == 1e-5
    assert cfg.data.instruction == "Please reason step by step, and put your final answer within \\boxed{}."
    assert cfg.prompt_field(cfg.agents[0]) == "problem"


def test_overrides_set_nested_and_list_values(tmp_path):
    cfg = load_config(
        write(tmp_path, BASE),
        ["grpo.beta=0.01", "agents.1.lr=3e-4", "cohort.label_source=self", "agents.0.prompt_field=problem_rephrased"],
    )
    assert cfg.grpo.beta == 0.01 and cfg.agents[1].lr == 3e-4 and cfg.cohort.label_source == "self"
    assert cfg.prompt_field(cfg.agents[0]) == "problem_rephrased"


@pytest.mark.parametrize(
    "override, message",
    [
        ("cohort.samples_per_prompt=0", "cohort.samples_per_prompt: Input should be greater than or equal to 1 (got 0)"),
        (
            "cohort.label_source=oracle",
            "cohort.label_source: label source 'oracle' is not registered; choose one of: ",  # the registry's names (a test's plugin may add one)
        ),
        ("grpo.loss_aggregation=mean", "grpo.loss_aggregation"),
        ("grpo.betta=0.1", "grpo.betta: unknown key"),
        ("agents.0.lr=-1", "agents.0.lr: must be a number with 0 < lr <= 1"),
        # AdamW's float32 step size overflows above ~3e37 (a traceback deep in torch before this check)
        ("agents.0.lr=1.0e+38", "agents.0.lr: must be a number with 0 < lr <= 1: AdamW moves every weight by about lr"),
        ("agents.1.lr=1000", "agents.1.lr: must be a number with 0 < lr <= 1"),
        ("agents.0.lr=.nan", "agents.0.lr: must be a number with 0 < lr <= 1"),
        ("agents.0.lr=.inf", "agents.0.lr: must be a number with 0 < lr <= 1"),
        ("agents.0.lr=0", "agents.0.lr: must be a number with 0 < lr <= 1"),
        ("rollout.dtype=fp8", "rollout.dtype: Input should be 'auto', 'float32', 'bfloat16' or 'float16'"),
        ("cohort.top_p=1.5", "cohort.top_p"),
    ],
)
def test_bad_values_name_the_key(tmp_path, override, message):
    with pytest.raises(ConfigError) as err:
        load_config(write(tmp_path, BASE), [override])
    assert message in str(err.value)
    assert str(tmp_path / "run.yaml") in str(err.value)


def test_cross_field_rules(tmp_path):
    single = {**BASE, "agents": [{"name": "a", "model": "m"}]}
    with pytest.raises(ConfigError, match="'peer' needs at least 2 agents"):
        load_config(write(tmp_path, single))
    load_config(write(tmp_path, single), ["cohort.label_source=self"])  # TTRL with one agent is fine
    dup = {**BASE, "agents": [{"name": "a", "model": "m"}, {"name": "a", "model": "n"}]}
    with pytest.raises(ConfigError, match="unique; repeated: a"):
        load_config(write(tmp_path, dup))
    with pytest.raises(ConfigError, match="needs data.answer_field"):
        load_config(write(tmp_path, BASE), ["cohort.label_source=truth", "data.answer_field=null"])
    with pytest.raises(ConfigError, match="GT-Reward for code is cohort.reward: tests"):
        load_config(write(tmp_path, BASE), ["cohort.label_source=truth", "data.task=code"])
    with pytest.raises(ConfigError, match=r"\{problem\}"):
        load_config(write(tmp_path, BASE), ["data.template=hello"])


def test_missing_file_and_bad_override_syntax(tmp_path):
    with pytest.raises(ConfigError, match="not found"):
        load_config(tmp_path / "nope.yaml")
    with pytest.raises(ConfigError, match="key.path=value"):
        apply_overrides({}, ["grpo.beta"])
    with pytest.raises(ConfigError, match="not an index"):
        apply_overrides({"agents": [{}]}, ["agents.3.lr=1"])


def test_shipped_configs_validate():
    from pathlib import Path

    configs = sorted((Path(__file__).parents[2] / "configs").glob("*.yaml"))
    assert configs
    for path in configs:
        load_config(path)


@pytest.mark.parametrize(
    "override, message",
    [
        ("cohort.step=3", "run.yaml: cohort.step: unknown key; did you mean cohort.steps or cohort.stop?"),
        ("cohort.stop.rul=none", "run.yaml: cohort.stop.rul: unknown key; did you mean cohort.stop.rule?"),
        ("agents.0.lrr=1e-5", "run.yaml: agents.0.lrr: unknown key; did you mean agents.0.lr?"),
        ("grpo.lr=1e-5", "run.yaml: grpo.lr: unknown key: the learning rate is per agent: agents[].lr"),
        ("lr=1e-5", "run.yaml: lr: unknown key: the learning rate is per agent: agents[].lr"),
        ("qqq=1", "run.yaml: qqq: unknown key; the top level has: plugins, output_dir,"),
    ],
)
def test_an_unknown_key_is_one_line_that_names_what_was_meant(tmp_path, override, message):
    with pytest.raises(ConfigError) as err:
        load_config(write(tmp_path, BASE), [override])
    assert str(err.value).startswith(f"{tmp_path / message}") and "\n" not in str(err.value)


def test_several_errors_are_a_line_each(tmp_path):
    with pytest.raises(ConfigError) as err:
        load_config(write(tmp_path, BASE), ["cohort.step=3", "grpo.betta=1"])
    lines = str(err.value).splitlines()
    assert lines[0].endswith("invalid configuration") and len(lines) == 3
