"""Bad configurations and bad inputs fail before any model is loaded, with a message that
names the option, file, row or agent and says what to do."""

from __future__ import annotations

import pytest

from corl.config import ConfigError, validate_config

BASE = {"agents": [{"name": "a", "model": "m"}, {"name": "b", "model": "m"}], "data": {"train": "x.jsonl"}}


@pytest.mark.parametrize("label_source", ["peer", "self"])
def test_one_sample_per_prompt_is_refused(label_source):
    with pytest.raises(ConfigError, match=r"cohort.samples_per_prompt: must be at least 2.*every advantage is 0.*\(got 1\)"):
        validate_config({**BASE, "cohort": {"samples_per_prompt": 1, "label_source": label_source}})
    assert validate_config({**BASE, "cohort": {"samples_per_prompt": 2}}).cohort.samples_per_prompt == 2
