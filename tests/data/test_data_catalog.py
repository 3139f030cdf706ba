"""`corl data`: the paper's datasets written from a hub-shaped copy (`--mirror`) into the files configs read.

No hub here: each test lays out a dataset repository as the hub holds it (split files, a README
whose YAML names the configs) and `datasets.load_dataset` reads it as it would read the hub's.
"""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from corl.cli import app

runner = CliRunner()


@pytest.fixture(autouse=True)
def _private_hf_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_DATASETS_CACHE", str(tmp_path / "hf-cache"))
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")


def _repo(root, hub_id, files, configs=None):
    repo = root / hub_id
    for rel, rows in files.items():
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text("".join(json.dumps(r) + "\n" for r in rows))
    if configs:
        yaml = ["---", "configs:"]
        for name, splits in configs.items():
            yaml += [f"- config_name: {name}", "  data_files:"]
            yaml += [f"  - split: {split}\n    path: {path}" for split, path in splits.items()]
        (repo / "README.md").write_text("\n".join([*yaml, "---", ""]))
    return repo


def _read(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_math500_and_gsm8k_written_in_corl_schema_with_a_manifest(tmp_path):
    mirror, out = tmp_path / "hub", tmp_path / "data"
    math500 = [{"problem": f"p{i}", "solution": "s", "answer": f"{i}", "subject": "Algebra", "level": 3, "unique_id": f"test/a/{i}.json"}
               for i in range(500)]  # fmt: skip
    _repo(mirror, "HuggingFaceH4/MATH-500", {"test.jsonl": math500})
    gsm = {
        s: [{"question": f"q{i}", "answer": f"6 * 7 = <<6*7=42>>42\n#### {i}"} for i in range(n)]
        for s, n in (("train", 7473), ("test", 1319))
    }
    _repo(
        mirror,
        "openai/gsm8k",
        {f"main/{s}.jsonl": rows for s, rows in gsm.items()},
        {"main": {s: f"main/{s}.jsonl" for s in gsm}},
    )
    result = runner.invoke(app, ["data", "math500", "gsm8k", "--mirror", str(mirror), "--out", str(out)])
    assert result.exit_code == 0, result.output
    rows = _read(out / "math500" / "test.jsonl")
    assert len(rows) == 500 and rows[7] | {"solution": None} == {"id": "test/a/7.json", "problem": "p7", "answer": "7", "source": "math500",
                                                                "solution": None, "subject": "Algebra", "level": 3}  # fmt: skip
    test = _read(out / "gsm8k" / "test.jsonl")
    assert len(test) == 1319 and test[5]["answer"] == "5" and test[5]["problem"] == "q5" and test[5]["id"] == "gsm8k/test/5"
    manifest = json.loads((out / "MANIFEST.json").read_text())
    assert set(manifest) == {"math500/test.jsonl", "gsm8k/train.jsonl", "gsm8k/test.jsonl"}
    assert manifest["gsm8k/train.jsonl"]["rows"] == 7473 and len(manifest["math500/test.jsonl"]["sha256"]) == 64
    assert runner.invoke(app, ["data", "--verify", "--out", str(out)]).exit_code == 0
    with (out / "gsm8k" / "test.jsonl").open("a") as f:
        f.write('{"id": "extra"}\n')
    result = runner.invoke(app, ["data", "--verify", "--out", str(out)])
    assert result.exit_code == 1 and "gsm8k/test.jsonl: sha256 differs" in " ".join(result.output.split())


def test_a_short_split_or_a_changed_schema_is_refused_and_nothing_is_written(tmp_path):
    mirror, out = tmp_path / "hub", tmp_path / "data"
    rows = [{"task_id": f"HumanEval/{i}", "prompt": "def f():\n", "canonical_solution": "  return 1\n", "test": "", "entry_point": "f"}
            for i in range(3)]  # fmt: skip
    _repo(mirror, "openai/openai_humaneval", {"test.jsonl": rows})
    result = runner.invoke(app, ["data", "humaneval", "--mirror", str(mirror), "--out", str(out)])
    assert result.exit_code == 2 and "humaneval: test has 3 rows, the published split 164: not written" in " ".join(
        result.output.split()
    )
    assert not (out / "humaneval" / "test.jsonl").exists()
    _repo(mirror, "HuggingFaceH4/MATH-500", {"test.jsonl": [{"question": "q", "answer": "1"}] * 500})
    result = runner.invoke(app, ["data", "math500", "--mirror", str(mirror), "--out", str(out)])
    assert result.exit_code == 2 and "record 0 has no field 'unique_id' (fields: answer, question)" in " ".join(
        result.output.split()
    )
    result = runner.invoke(app, ["data", "math-500", "--out", str(out)])
    assert result.exit_code == 2 and "unknown dataset 'math-500'; did you mean 'math500'?" in " ".join(result.output.split())


def test_the_suite_reads_what_corl_data_wrote(tmp_path, monkeypatch):
    """`corl data` writes the suite's layout (math500/test.jsonl, ...): a ./data with its manifest is the default root."""
    from corl.evaluation.suite import default_data_root

    monkeypatch.delenv("CORL_BENCHMARK_DATA", raising=False)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "data").mkdir()
    assert default_data_root() != tmp_path / "data"  # a folder named data is not enough
    (tmp_path / "data" / "MANIFEST.json").write_text("{}")
    assert default_data_root() == tmp_path / "data"
