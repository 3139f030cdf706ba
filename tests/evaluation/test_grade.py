"""`corl grade FILE`: completions from any generator, scored as `corl eval` scores its own."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from corl.cli import app
from tests.helpers import SHARED_DATA

runner = CliRunner()
needs_data = pytest.mark.skipif(not (SHARED_DATA / "humaneval").is_dir(), reason="needs ../shared/data beside the checkout")

# Two problems, three samples each. Row 1 (gold 4): 4, 4, 5 -> right, right, wrong: avg 2/3, majority 4 right, pass.
# Row 2 (gold 2): 1, 1, 2 -> wrong, wrong, right: avg 1/3, majority 1 wrong, pass.
# Overall: avg@3 = (2 + 1) / 6 = 0.5, maj@3 = 1 / 2 = 0.5, pass@3 = 2 / 2 = 1.0.
# Standard errors over the two problems, sqrt(sum((x - mean)^2) / (n - 1) / n):
#   avg@3: x = 2/3, 1/3: sqrt((1/36 + 1/36) / 1 / 2) = 1/6; 95%: 0.5 -/+ 1.95996 / 6 = [0.17334, 0.82666]
#   maj@3: x = 1, 0: sqrt((1/4 + 1/4) / 2) = 1/2; 0.5 -/+ 0.98 clipped to [0, 1]
#   pass@3: x = 1, 1: 0; [1, 1]
SE = {"avg@3": 1 / 6, "maj@3": 0.5, "pass@3": 0.0}
CI95 = {"avg@3": [0.5 - 1.959964 / 6, 0.5 + 1.959964 / 6], "maj@3": [0.0, 1.0], "pass@3": [1.0, 1.0]}
ROWS = [
    {"id": "p1", "completions": ["so \\boxed{4}", "\\boxed{4}.", "it is \\boxed{5}"], "answer": "4"},
    {"id": "p2", "completions": ["\\boxed{1}", "\\boxed{1}", "\\boxed{2}"], "answer": 2},
]


def corl(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "corl", *args], capture_output=True, text=True)


def said(result) -> str:
    return " ".join(result.output.split())


def _jsonl(path, rows, blank_after: int | None = None):
    lines = [json.dumps(r) for r in rows]
    if blank_after is not None:
        lines.insert(blank_after, "")
    path.write_text("\n".join(lines) + "\n")
    return path


def test_math_verdicts_and_figures_by_hand_from_jsonl_csv_and_parquet(tmp_path):
    import pandas as pd

    files = [_jsonl(tmp_path / "s.jsonl", ROWS)]
    frame = pd.DataFrame([{**r, "completions": json.dumps(r["completions"])} for r in ROWS])  # a CSV cell: JSON list
    frame.to_csv(tmp_path / "s.csv", index=False)
    pd.DataFrame(ROWS).astype({"answer": str}).to_parquet(tmp_path / "s.parquet")
    files += [tmp_path / "s.csv", tmp_path / "s.parquet"]
    for path in files:
        records = tmp_path / f"{path.suffix[1:]}-records.jsonl"
        result = runner.invoke(app, ["grade", str(path), "--json", "--records", str(records)])
        assert result.exit_code == 0, result.output
        out = json.loads(result.stdout)
        assert (out["task"], out["n"], out["k"], out["extract"]) == ("math", 2, 3, "strict")
        entry = out["models"]["s"]
        assert {m: entry[m] for m in ("avg@3", "maj@3", "pass@3", "n")} == {"avg@3": 0.5, "maj@3": 0.5, "pass@3": 1.0, "n": 2}
        assert entry["se"] == pytest.approx(SE) and entry["ci95"] == {m: pytest.approx(v) for m, v in CI95.items()}
        assert "lm-eval's stderr" in out["intervals"]
        rows = [json.loads(line) for line in records.read_text().splitlines()]
        assert [[s["answer"] for s in r["samples"]] for r in rows] == [["4", "4", "5"], ["1", "1", "2"]]
        assert [[s["correct"] for s in r["samples"]] for r in rows] == [[True, True, False], [False, False, True]]
        assert [(r["avg@3"], r["maj@3"], r["pass@3"]) for r in rows] == [(2 / 3, True, True), (1 / 3, False, True)]
    table = runner.invoke(app, ["grade", str(files[0])])
    assert table.exit_code == 0 and "avg@3" in table.stdout
    shown = " ".join(table.stdout.split())
    assert "0.500 ± 0.167 [0.173, 0.827]" in shown and "0.500 ± 0.500 [0.000, 1.000]" in shown  # avg@3, maj@3
    assert "1.000 ± 0.000 [1.000, 1.000]" in shown and "standard error [95% interval]" in shown  # pass@3


def test_bad_rows_are_named_by_file_and_line(tmp_path):
    rows = [ROWS[0], {"id": "p2", "completions": ["\\boxed{1}"] * 3}]
    path = _jsonl(tmp_path / "s.jsonl", rows, blank_after=1)  # line 2 is blank: the bad row is on line 3
    result = runner.invoke(app, ["grade", str(path)])
    assert result.exit_code == 2
    assert f"{path} line 3: field 'answer' is missing (columns: completions, id); set --answer-field" in said(result)
    path = _jsonl(tmp_path / "k.jsonl", [ROWS[0], {**ROWS[1], "completions": ["\\boxed{2}"]}])
    result = runner.invoke(app, ["grade", str(path)])
    assert result.exit_code == 2 and f"{path} line 2: 1 completion(s), but the rows before have 3" in said(result)
    (tmp_path / "q.csv").write_text('id,text,answer\np1,"two\nlines",4\np2,x,\n')  # row 2 starts on line 4
    result = runner.invoke(app, ["grade", str(tmp_path / "q.csv"), "--completion-field", "text"])
    assert result.exit_code == 2
    assert f"{tmp_path / 'q.csv'} line 4: field 'answer' is empty (columns: answer, id, text); set --answer-field" in said(result)
    result = runner.invoke(app, ["grade", str(tmp_path / "q.csv")])
    assert result.exit_code == 2 and "line 2: no completion field (completions, completion, samples" in said(result)
    assert "set --completion-field" in said(result)
    path = _jsonl(tmp_path / "n.jsonl", [{"completion": 3, "answer": "3"}])
    result = runner.invoke(app, ["grade", str(path)])
    assert result.exit_code == 2 and "line 1: 'completion' holds a value of type int, not a completion" in said(result)


def test_a_corrupt_parquet_and_an_unclosed_csv_quote_are_one_line_naming_the_file(tmp_path):
    import pandas as pd

    pd.DataFrame(ROWS).astype({"answer": str, "completions": str}).to_parquet(tmp_path / "s.parquet")
    whole = (tmp_path / "s.parquet").read_bytes()
    (tmp_path / "cut.parquet").write_bytes(whole[: len(whole) // 2])  # a copy that stopped half way
    (tmp_path / "q.csv").write_text('id,completion,answer\np1,\\boxed{4},4\np2,"so \\boxed{2},2\np3,x,3\n')
    for name, expected in (
        ("cut.parquet", f"dataset '{tmp_path / 'cut.parquet'}': not a readable Parquet file ("),
        ("q.csv", f"dataset '{tmp_path / 'q.csv'}' line 3: malformed CSV quoting (unexpected end of data); close the quote"),
    ):
        result = runner.invoke(app, ["grade", str(tmp_path / name)])
        assert result.exit_code == 2, result.output  # an uncaught pyarrow error would be exit 1 and a traceback
        assert expected in said(result) and "field 'answer' is missing" not in said(result)


@pytest.mark.slow
def test_math_grade_of_corl_eval_records_equals_corl_eval(tmp_path, tiny_models, tiny_data):
    """Completions from `corl eval --records` (two models), graded again: the same verdicts and figures."""
    records = tmp_path / "eval.jsonl"
    models = [str(tiny_models["llama-char"]), str(tiny_models["qwen2-bpe"])]
    opts = ["--data", str(tiny_data["test"]), "--k", "4", "--max-new-tokens", "12", "--template", "{problem}\n"]
    done = corl("eval", *models, *opts, "--instruction", "", "--records", str(records), "--json")
    assert done.returncode == 0, done.stderr
    evaluated = json.loads(done.stdout)
    done = corl(
        "grade",
        str(records),
        "--completion-field",
        "samples",
        "--answer-field",
        "gold",
        "--json",
        "--records",
        str(tmp_path / "g.jsonl"),
    )
    assert done.returncode == 0, done.stderr
    graded = json.loads(done.stdout)
    for name in ("llama-char", "qwen2-bpe"):
        assert {m: graded["models"][name][m] for m in ("avg@4", "maj@4", "pass@4")} == {
            m: evaluated["models"][name][m] for m in ("avg@4", "maj@4", "pass@4")
        }
    assert graded["pooled_maj@8"] == evaluated["pooled_maj@8"]
    ours = [json.loads(line) for line in (tmp_path / "g.jsonl").read_text().splitlines()]
    theirs = [json.loads(line) for line in records.read_text().splitlines()]
    verdicts = [[(s["answer"], s["correct"]) for s in r["samples"]] for r in theirs]
    assert [[(s["answer"], s["correct"]) for s in r["samples"]] for r in ours] == verdicts
    flat = [c for row in verdicts for _, c in row]
    assert any(flat) and not all(flat)  # some right, some wrong: the comparison can tell graders apart
    # the greedy completions: avg@1 is corl eval's greedy accuracy
    done = corl("grade", str(records), "--completion-field", "greedy", "--answer-field", "gold", "--json")
    assert done.returncode == 0, done.stderr
    assert {n: e["avg@1"] for n, e in json.loads(done.stdout)["models"].items()} == {
        n: e["greedy"] for n, e in evaluated["models"].items()
    }


def _he_rows(n: int) -> list[dict]:
    return [json.loads(line) for line in (SHARED_DATA / "humaneval" / "test.jsonl").read_text().splitlines()[:n]]


@needs_data
@pytest.mark.slow
def test_code_grade_of_corl_eval_records_equals_corl_eval(tmp_path, tiny_models):
    data = tmp_path / "he3.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in _he_rows(3)))
    records = tmp_path / "eval.jsonl"
    opts = ["--data", str(data), "--task", "code", "--k", "2", "--max-new-tokens", "8", "--records", str(records)]
    done = corl("eval", str(tiny_models["qwen2-bpe"]), *opts, "--json")
    assert done.returncode == 0, done.stderr
    evaluated = json.loads(done.stdout)["models"]["qwen2-bpe"]
    graded_records = tmp_path / "g.jsonl"
    done = corl("grade", str(records), "--task", "code", "--tests", str(data), "--json", "--records", str(graded_records))
    assert done.returncode == 0, done.stderr
    graded = json.loads(done.stdout)
    assert (graded["style"], graded["k"]) == ("humaneval", 2)
    assert {m: graded["models"]["qwen2-bpe"][m] for m in ("pass@1", "pass@2")} == {"pass@1": evaluated["pass@1"], "pass@2": 0.0}
    theirs = [
        [(s["passed"], s["status"], s["error"]) for s in json.loads(x)["samples"]] for x in records.read_text().splitlines()
    ]
    ours = [
        [(s["passed"], s["status"], s["error"]) for s in json.loads(x)["samples"]]
        for x in graded_records.read_text().splitlines()
    ]
    assert ours == theirs


@needs_data
def test_whole_programs_with_their_tests_in_the_row(tmp_path):
    """The reference solutions pass; a wrong one fails with the sandbox's reason; pass@k by hand."""
    rows = _he_rows(2)
    right = [r["prompt"] + r["canonical_solution"] for r in rows]
    rows[0]["programs"] = [right[0], right[0]]  # 2 of 2 pass: pass@1 = 1
    wrong = right[1] + f"\n\ndef {rows[1]['entry_point']}(*args):\n    return None\n"  # redefined: returns None
    rows[1]["programs"] = [right[1], wrong]  # 1 of 2: pass@1 = 1/2
    path = _jsonl(tmp_path / "programs.jsonl", rows)
    records = tmp_path / "r.jsonl"
    result = runner.invoke(
        app, ["grade", str(path), "--task", "code", "--program-field", "programs", "--json", "--records", str(records)]
    )
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    entry = out["models"]["programs"]
    assert {m: entry[m] for m in ("pass@1", "pass@2", "n")} == {"pass@1": 0.75, "pass@2": 1.0, "n": 2}  # (1 + 1/2) / 2
    # per problem pass@1 = 1, 1/2: se = sqrt((1/16 + 1/16) / 1 / 2) = 1/4; 0.75 -/+ 1.96 / 4 = [0.26, 1.24 -> 1]
    assert entry["se"] == {"pass@1": 0.25, "pass@2": 0.0}
    assert entry["ci95"] == {"pass@1": [pytest.approx(0.75 - 1.959964 / 4), 1.0], "pass@2": [1.0, 1.0]}
    lines = [json.loads(line) for line in records.read_text().splitlines()]
    assert [[s["passed"] for s in r["samples"]] for r in lines] == [[True, True], [True, False]]
    assert lines[1]["samples"][1]["status"] != "ok" and lines[1]["samples"][1]["error"]
    del rows[1]["test"]
    path = _jsonl(tmp_path / "bad.jsonl", rows)
    result = runner.invoke(app, ["grade", str(path), "--task", "code", "--program-field", "programs"])
    assert result.exit_code == 2 and f"{path} line 2: has no tests" in said(result) and "give --tests FILE" in said(result)


@needs_data
def test_a_host_without_sandbox_walls_is_one_line_and_exit_2(tmp_path):
    """A backend that cannot run here is found when the first program runs, deep inside
    grading: the command says why in one line (no traceback) and exits 2."""
    rows = _he_rows(1)
    rows[0]["programs"] = [rows[0]["prompt"] + rows[0]["canonical_solution"]]
    path = _jsonl(tmp_path / "programs.jsonl", rows)
    # bwrap forced, on a PATH that cannot hold it: the interpreter's folder only
    env = {**os.environ, "CORL_SANDBOX": "bwrap", "PATH": str(Path(sys.executable).parent)}
    done = subprocess.run(
        [sys.executable, "-m", "corl", "grade", str(path), "--task", "code", "--program-field", "programs"],
        capture_output=True,
        text=True,
        env=env,
    )
    assert done.returncode == 2, done.stderr
    assert "sandbox backend 'bwrap' does not work on this host: not installed" in done.stderr
    assert "Traceback" not in done.stderr


FORGED_RECORD = """
import os
for fd in range(5, 20):  # the sandbox's record pipe is an fd of the program's own process (3, 4: the stub's)
    try:
        os.write(fd, b'{"kind": "MemoryError", "message": "\\\\ud800 forged", "errno": null}\\n')
    except OSError:
        pass
os._exit(1)
"""


@needs_data
def test_a_forged_record_with_a_lone_surrogate_cannot_crash_grade_records(tmp_path):
    """It made `corl grade --records` die in its JSONL write (UnicodeEncodeError), the whole evaluation lost."""
    rows = _he_rows(1)
    rows[0]["programs"] = [FORGED_RECORD]
    records = tmp_path / "r.jsonl"
    done = corl("grade", str(_jsonl(tmp_path / "p.jsonl", rows)), "--task", "code", "--program-field", "programs",
                "--records", str(records))  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    (sample,) = json.loads(records.read_text(encoding="utf-8"))["samples"]
    assert sample["passed"] is False and sample["status"] == "exit"  # not the "memory" the program wrote
    assert sample["error"].isprintable()


def test_mbpp_pass_at_1_plus_beside_pass_at_1(tmp_path):
    """MBPP's prompt shows its asserts: a lookup table of them passes lm-eval's pass@1, not pass@1+ (tests the prompt
    does not show, answered by the row's reference code: corl.tasks.code.plus)."""
    row = {
        "task_id": 1,
        "text": "Write a function to add two numbers.",
        "code": "def add(a, b):\n    return a + b",
        "test_list": ["assert add(1, 2) == 3", "assert add(2, 5) == 7", "assert add(-1, 1) == 0"],
    }
    table = "def add(a, b):\n    return {(1, 2): 3, (2, 5): 7, (-1, 1): 0}.get((a, b))\n"
    path = _jsonl(tmp_path / "programs.jsonl", [{**row, "programs": [row["code"], table]}])
    records = tmp_path / "r.jsonl"
    result = runner.invoke(
        app, ["grade", str(path), "--task", "code", "--program-field", "programs", "--json", "--records", str(records)]
    )
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)["models"]["programs"]
    assert (out["pass@1"], out["pass@1+"], out["pass@2"], out["pass@2+"]) == (1.0, 0.5, 1.0, 1.0)
    (line,) = [json.loads(x) for x in records.read_text().splitlines()]
    assert (line["c"], line["pass@1+"]) == (2, 0.5)


def test_records_on_a_full_disk_are_one_line_and_the_old_file_stays(tmp_path, small_disk):
    """--records onto a disk with no room: one line naming the file (exit 1), the previous records as they were,
    nothing beside them; with room, the whole new file."""
    samples = tmp_path / "samples.jsonl"
    samples.write_text(
        "".join(json.dumps({**r, "completions": [c + " x" * 20000 for c in r["completions"]]}) + "\n" for r in ROWS)
    )
    disk = small_disk(1)
    records = disk / "records.jsonl"
    records.write_text('{"old": 1}\n')
    (disk / "fill").write_bytes(b"0" * (1024 * 1024 - 64 * 1024))  # a 1 MiB disk with less room than the records take
    proc = corl("grade", str(samples), "--records", str(records))
    assert proc.returncode == 1, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if "error" in line]
    assert len(lines) == 1 and f"could not write {records}: the disk is full" in lines[0], proc.stderr
    assert "what it held before is intact" in lines[0] and "Traceback" not in proc.stderr
    assert records.read_text() == '{"old": 1}\n' and sorted(p.name for p in disk.iterdir()) == ["fill", "records.jsonl"]
    (disk / "fill").unlink()
    assert corl("grade", str(samples), "--records", str(records)).returncode == 0
    assert [json.loads(line)["id"] for line in records.read_text().splitlines()] == ["p1", "p2"]
