"""docs/own-experiment.md, "A reward of your own": the page's module and config, run as its reader
would (`corl train` in the folder holding my_rewards.py), reward every completion as the page says."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import yaml

from tests.helpers import ROOT, tiny_config

PAGE = ROOT / "docs" / "own-experiment.md"


def titled_block(title: str) -> str:
    """The fenced code block of the page whose title is `title`."""
    match = re.search(rf'^```\w+ title="{re.escape(title)}"\n(.*?)^```', PAGE.read_text(encoding="utf-8"), re.M | re.S)
    assert match, f"{PAGE.name} has no code block titled {title!r}"
    return match.group(1)


def test_the_pages_reward_module_and_config_train_as_the_page_says(tmp_path, tiny_models, tiny_data):
    (tmp_path / "my_rewards.py").write_text(titled_block("my_rewards.py"))
    raw = tiny_config(tmp_path, tiny_models, tiny_data, cohort={"steps": 1}, logging={"tensorboard": False})
    raw["data"].pop("val")
    raw["logging"]["log_completions"] = True
    page = yaml.safe_load(titled_block("in my-run.yaml"))
    raw["plugins"] = page["plugins"]
    raw["cohort"]["rewards"] = page["cohort"]["rewards"]
    (tmp_path / "my-run.yaml").write_text(yaml.safe_dump(raw))
    corl = shutil.which("corl", path=str(Path(sys.executable).parent)) or "corl"  # the installed command
    done = subprocess.run([corl, "train", "my-run.yaml"], cwd=tmp_path, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout + done.stderr
    rows = [json.loads(line) for line in (tmp_path / "run" / "completions" / "step_000001.jsonl").read_text().splitlines()]
    boxed_at_end = re.compile(r"\\boxed\{[^{}]*\}\s*$")
    for row in rows:  # agreement with the label + 0.1 x the format bonus, completion by completion
        agreement = float(row["label"] is not None and row["extracted_answer"] == row["label"])
        bonus = float(bool(boxed_at_end.search(row["completion"])))
        assert abs(row["reward"] - (agreement + 0.1 * bonus)) < 1e-6, row
    assert {round(r["reward"] - int(r["reward"]), 6) for r in rows} >= {0.1}  # the bonus was paid somewhere
