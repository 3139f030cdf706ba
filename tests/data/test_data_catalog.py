"""`corl data`: the paper's datasets written from a hub-shaped copy (`--mirror`) into the files configs read.

No hub here: each test lays out a dataset repository as the hub holds it (split files, a README
whose YAML names the configs) and `datasets.load_dataset` reads it as it would read the hub's.
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import subprocess
import sys

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
    assert result.exit_code == 2 and "record 1 has no field 'unique_id' (fields: answer, question)" in " ".join(
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


# -- what "good" means offline: the copy's own record of the hub's digests ----------------------------

MATH500 = [{"problem": f"p{i}", "solution": "s", "answer": f"{i}", "subject": "Algebra", "level": 3, "unique_id": f"test/a/{i}.json"}
           for i in range(500)]  # fmt: skip


def _git(repo, *args):
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t",
           "PATH": os.environ["PATH"], "HOME": str(repo)}  # fmt: skip
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True, env=env).stdout.strip()


def _change_one_answer(path):
    text = path.read_text()
    path.write_text(text.replace('"answer": "7"', '"answer": "8"', 1))


def _said(result) -> str:
    return " ".join(result.output.split())


def test_a_git_clone_with_one_answer_changed_is_refused_and_nothing_is_written(tmp_path):
    mirror, out = tmp_path / "hub", tmp_path / "data"
    repo = _repo(mirror, "HuggingFaceH4/MATH-500", {"test.jsonl": MATH500})
    _git(repo, "init", "-q")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "published")
    _change_one_answer(repo / "test.jsonl")
    result = runner.invoke(app, ["data", "math500", "--mirror", str(mirror), "--out", str(out)])
    assert result.exit_code == 2 and "test.jsonl differs from the git clone's commit" in _said(result), result.output
    assert "(nothing was written)" in _said(result) and not out.exists()
    _git(repo, "checkout", "--", "test.jsonl")  # the file as published: written, recorded with its commit
    assert runner.invoke(app, ["data", "math500", "--mirror", str(mirror), "--out", str(out)]).exit_code == 0
    entry = json.loads((out / "MANIFEST.json").read_text())["math500/test.jsonl"]
    assert entry["verified"] is True and entry["copy"] == "git clone" and entry["revision"] == _git(repo, "rev-parse", "HEAD")


def test_a_git_lfs_file_is_checked_against_its_pointer(tmp_path):
    mirror, out = tmp_path / "hub", tmp_path / "data"
    repo = _repo(mirror, "HuggingFaceH4/MATH-500", {"test.jsonl": MATH500})
    data = (repo / "test.jsonl").read_bytes()
    pointer = f"version https://git-lfs.github.com/spec/v1\noid sha256:{hashlib.sha256(data).hexdigest()}\nsize {len(data)}\n"
    (repo / "test.jsonl").write_text(pointer)  # the commit holds the pointer, as the hub's repositories do
    _git(repo, "init", "-q")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "published")
    result = runner.invoke(app, ["data", "math500", "--mirror", str(mirror), "--out", str(out)])
    assert result.exit_code == 2 and "is a Git LFS pointer, not the data: run `git lfs pull`" in _said(result)
    (repo / "test.jsonl").write_bytes(data)  # what `git lfs pull` puts there
    assert runner.invoke(app, ["data", "math500", "--mirror", str(mirror), "--out", str(out)]).exit_code == 0
    _change_one_answer(repo / "test.jsonl")
    result = runner.invoke(app, ["data", "math500", "--mirror", str(mirror), "--out", str(out / "again")])
    assert result.exit_code == 2 and "differs from the git clone's commit" in _said(result) and not (out / "again").exists()


def test_an_hf_download_copy_is_checked_against_the_etags_it_recorded(tmp_path):
    from corl.data.mirror import git_blob_sha1

    mirror, out = tmp_path / "hub", tmp_path / "data"
    repo = _repo(mirror, "HuggingFaceH4/MATH-500", {"test.jsonl": MATH500})
    meta = repo / ".cache" / "huggingface" / "download"
    meta.mkdir(parents=True)
    # huggingface_hub's record of each file: the commit, its ETag (the git SHA-1 of a non-LFS file), a time
    (meta / "test.jsonl.metadata").write_text(f"abc123\n{git_blob_sha1((repo / 'test.jsonl').read_bytes())}\n1.0\n")
    assert runner.invoke(app, ["data", "math500", "--mirror", str(mirror), "--out", str(out)]).exit_code == 0
    assert json.loads((out / "MANIFEST.json").read_text())["math500/test.jsonl"]["revision"] == "abc123"
    (repo / "extra.jsonl").write_text("{}\n")
    result = runner.invoke(app, ["data", "math500", "--mirror", str(mirror), "--out", str(out)])
    assert result.exit_code == 2 and "extra.jsonl: not a file of the hf download's commit abc123" in _said(result)
    (repo / "extra.jsonl").unlink()
    _change_one_answer(repo / "test.jsonl")
    result = runner.invoke(app, ["data", "math500", "--mirror", str(mirror), "--out", str(out)])
    assert result.exit_code == 2 and "differs from the hf download's commit abc123" in _said(result)


def test_a_plain_folder_is_written_as_unverified_and_verify_says_so(tmp_path):
    mirror, out = tmp_path / "hub", tmp_path / "data"
    _repo(mirror, "HuggingFaceH4/MATH-500", {"test.jsonl": MATH500})
    result = runner.invoke(app, ["data", "math500", "--mirror", str(mirror), "--out", str(out)])
    assert result.exit_code == 0 and "is a plain folder, with no record of the hub's digests" in _said(result)
    assert json.loads((out / "MANIFEST.json").read_text())["math500/test.jsonl"]["verified"] is False
    result = runner.invoke(app, ["data", "--verify", "--out", str(out)])
    assert result.exit_code == 0 and "note: 1 of them came from a mirror with no record" in _said(result)


def test_a_damaged_manifest_is_one_error(tmp_path):
    (tmp_path / "MANIFEST.json").write_text('{"math500/test.jsonl": {"sha256": "ab", "rows"')
    result = runner.invoke(app, ["data", "--verify", "--out", str(tmp_path)])
    assert result.exit_code == 2
    assert f"error: {tmp_path / 'MANIFEST.json'} is damaged (not valid JSON: Expecting ':' delimiter at line 1): " in _said(
        result
    )
    assert "write the datasets again (corl data NAME ...), or restore the file" in _said(result)
    (tmp_path / "MANIFEST.json").write_text('["math500/test.jsonl"]')
    assert "is damaged (not a JSON object of files)" in _said(runner.invoke(app, ["data", "--verify", "--out", str(tmp_path)]))


def _closed_port() -> int:
    """A local port nothing listens on: every connection to it is refused at once, as offline."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _corl_data(tmp_path, **env):
    full = {**os.environ, "HF_HOME": str(tmp_path / "hf"), **env}
    full.pop("HF_DATASETS_OFFLINE", None)
    full.pop("HF_HUB_OFFLINE", None)
    full.update(env)
    return subprocess.run([sys.executable, "-m", "corl", "data", "gsm8k", "--out", str(tmp_path / "data")],
                          capture_output=True, text=True, env=full, timeout=300)  # fmt: skip


def test_an_unreachable_hub_fails_at_once_and_names_mirror(tmp_path):
    done = _corl_data(tmp_path, HF_ENDPOINT=f"http://127.0.0.1:{_closed_port()}")
    said = " ".join((done.stdout + done.stderr).split())
    assert done.returncode == 2 and "Traceback" not in said, said
    # one metadata request, refused: not the download's five retries ("Retrying in 1s [Retry 1/5]"), about 30 s
    assert "Retry" not in said
    assert "gsm8k: the Hugging Face hub cannot be reached to read openai/gsm8k (ConnectError" in said
    assert (
        "give a local copy with --mirror DIR: DIR/openai/gsm8k, a `git clone https://huggingface.co/datasets/openai/gsm8k`"
        in said
    )
    offline = _corl_data(tmp_path, HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1")
    said = " ".join((offline.stdout + offline.stderr).split())
    assert offline.returncode == 2 and "Traceback" not in said and "Retry" not in said, said
    assert "--mirror DIR: DIR/openai/gsm8k" in said
