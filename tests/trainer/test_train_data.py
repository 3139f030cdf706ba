"""What a run trains on: several files mixed with weights (data.train as a list) and the prompt-length
limit (data.max_prompt_tokens), as `load_train_data` reads them from a config."""

from __future__ import annotations

import json

import pytest

from corl.config import ConfigError, validate_config
from corl.trainer.setup import load_train_data
from tests.helpers import tiny_config


def _write(path, problems, ids=True):
    rows = [{**({"id": f"{path.stem}{i}"} if ids else {}), "problem": p, "answer": "1"} for i, p in enumerate(problems)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


def _config(tmp_path, tiny_models, tiny_data, train, **data):
    raw = tiny_config(tmp_path, tiny_models, tiny_data)
    # both agents read with the per-character tokenizer: a prompt "<problem>\n" is len(problem) + 1 tokens
    raw["agents"][1]["model"] = str(tiny_models["llama-char"])
    raw["data"].update(train=train, **data)
    return validate_config(raw)


def test_a_mix_joins_the_files_and_draws_them_by_weight(tmp_path, tiny_models, tiny_data):
    a = _write(tmp_path / "a.jsonl", [f"{i}+1=?" for i in range(6)])
    b = _write(tmp_path / "b.jsonl", ["1+2=?", "2+2=?"], ids=False)
    cfg = _config(tmp_path, tiny_models, tiny_data, [{"path": a, "weight": 3}, {"path": b}], max_rows=5)
    data = load_train_data(cfg)
    assert [p.id for p in data.problems] == ["a0", "a1", "a2", "a3", "a4", "1/0", "1/1"]  # max_rows: of each file
    assert data.gold["1/1"] == "1"
    for step in range(4):  # weights 3 : 1 of 4 prompts a step (tests/data/test_data_mix.py works it out)
        files = [data.problems[i].id[0] for i in data.batch(step, 4, cfg.cohort.seed)]
        assert sorted(files) == ["1", "a", "a", "a"], step


def test_prompts_longer_than_the_limit_are_dropped_and_counted(tmp_path, tiny_models, tiny_data):
    train = _write(tmp_path / "t.jsonl", ["1+1=?", "12+34=?", "123+456=?"])  # 6, 8 and 10 tokens with "\n"
    with pytest.warns(UserWarning, match=r"data.max_prompt_tokens 8: dropped 1 of 3 training rows whose prompt is "
                      r"longer \(agent 'agent0': 1, up to 10 tokens; agent 'agent1': 1, up to 10 tokens\); 2 rows train"):  # fmt: skip
        data = load_train_data(_config(tmp_path, tiny_models, tiny_data, train, max_prompt_tokens=8))
    assert [p.id for p in data.problems] == ["t0", "t1"] and [r["id"] for r in data.rows] == ["t0", "t1"]
    assert set(data.gold) == {"t0", "t1"}
    assert len(load_train_data(_config(tmp_path, tiny_models, tiny_data, train, max_prompt_tokens=10)).problems) == 3


def test_a_limit_no_prompt_meets_is_refused(tmp_path, tiny_models, tiny_data):
    train = _write(tmp_path / "t.jsonl", ["1+1=?", "12+34=?"])
    with pytest.raises(ConfigError, match=r"every one of the 2 training prompts is longer for some agent \(the shortest "
                       r"prompts, in tokens: agent 'agent0''s 6, agent 'agent1''s 6\); raise data.max_prompt_tokens"):  # fmt: skip
        load_train_data(_config(tmp_path, tiny_models, tiny_data, train, max_prompt_tokens=5))
    long = _write(tmp_path / "long.jsonl", ["123+456=?"])
    with pytest.raises(ConfigError, match=r"no prompt of '.*long.jsonl' is short enough"), pytest.warns(UserWarning):
        load_train_data(_config(tmp_path, tiny_models, tiny_data, [{"path": train}, {"path": long}], max_prompt_tokens=8))
