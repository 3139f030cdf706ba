"""scripts/gpu_check.sh and its Python parts are for a GPU machine; here they must at least parse,
and their CPU-runnable parts import (no vLLM, no CUDA needed to import them)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"


def _load(name: str):
    spec = importlib.util.spec_from_file_location(name, SCRIPTS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(SCRIPTS))
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(SCRIPTS))
    return module


def test_gpu_check_scripts_parse_and_import():
    assert subprocess.run(["bash", "-n", str(SCRIPTS / "gpu_check.sh")]).returncode == 0
    check = _load("gpu_check")
    assert callable(check.check_sharded)  # section F: the sharded paths
    sharded = _load("gpu_check_sharded")
    names = [c.__name__ for c in sharded.CHECKS]
    assert names == ["check_chunked_head", "check_vllm", "check_reference", "check_packing"]
    _load("gpu_check_vllm")
