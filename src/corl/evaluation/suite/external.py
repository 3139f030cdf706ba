"""LiveCodeBench through its own harness (`lcb_runner`), or a stated reason why not.

LiveCodeBench's problems, prompts and judge live in its repository, so corl does not
re-implement them: when ``lcb_runner`` is importable the suite runs
``python -m lcb_runner.runner.main --scenario codegeneration --evaluate`` with the
protocol's sampling, in the cell's own folder, and reads the per-problem ``pass@1`` of
the ``*_eval_all.json`` it writes. LiveCodeBench routes models by name through its
``lm_styles.py``: set ``CORL_LCB_MODEL`` to the registered name whose prompt style fits
the checkpoint (the checkpoint folder is passed as ``--local_model_path``).
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

from corl.evaluation.suite.protocol import Benchmark

LCB_MODEL_ENV = "CORL_LCB_MODEL"


class NotRun(Exception):
    """A benchmark that could not run; str(err) is the reason shown in the table."""


def lcb_unavailable() -> str | None:
    """Why LiveCodeBench cannot run here, or None when it can."""
    if importlib.util.find_spec("lcb_runner") is None:
        return (
            "lcb_runner is not installed (clone LiveCodeBench/LiveCodeBench and `pip install -e .` it into this "
            "environment; corl does not re-implement its judge)"
        )
    return None


def _per_problem(raw) -> list[dict]:
    """Rows {id, score} from LiveCodeBench's eval_all JSON (a list of per-problem dicts)."""
    if not isinstance(raw, list):
        raise NotRun("LiveCodeBench wrote an eval_all JSON of an unexpected shape (not a list of problems)")
    rows = []
    for i, d in enumerate(raw):
        if not isinstance(d, dict) or "pass@1" not in d:
            raise NotRun(f"LiveCodeBench eval_all entry {i} has no 'pass@1'")
        rows.append({"id": str(d.get("question_id", i)), "score": float(d["pass@1"]), "record": d})
    return rows


def run_lcb(bench: Benchmark, checkpoint: str, workdir: Path) -> list[dict]:
    """Per-problem pass@1 of `checkpoint` on LiveCodeBench (raises NotRun with the reason)."""
    reason = lcb_unavailable()
    if reason:
        raise NotRun(reason)
    workdir.mkdir(parents=True, exist_ok=True)
    cmd = [
        sys.executable,
        "-m",
        "lcb_runner.runner.main",
        "--model",
        os.environ.get(LCB_MODEL_ENV, checkpoint),
        "--local_model_path",
        checkpoint,
        "--scenario",
        "codegeneration",
        "--release_version",
        bench.data,
        "--n",
        str(bench.samples),
        "--temperature",
        str(bench.temperature),
        "--top_p",
        str(bench.top_p),
        "--max_tokens",
        str(bench.max_tokens),
        "--evaluate",
    ]
    log = workdir / "lcb.log"
    with log.open("w") as f:
        rc = subprocess.call(cmd, cwd=workdir, stdout=f, stderr=subprocess.STDOUT)
    if rc != 0:
        tail = log.read_text(errors="replace").strip().splitlines()[-1:] or [""]
        raise NotRun(f"lcb_runner exited {rc} ({tail[0][:160]}); see {log}; is {LCB_MODEL_ENV} a name in its lm_styles.py?")
    found = sorted(workdir.rglob("*_eval_all.json"), key=lambda p: p.stat().st_mtime)
    if not found:
        raise NotRun(f"lcb_runner finished but wrote no *_eval_all.json under {workdir}")
    rows = _per_problem(json.loads(found[-1].read_text()))
    return rows[: bench.limit] if bench.limit is not None else rows
