#!/usr/bin/env bash
# corl's GPU paths (bf16, gradient checkpointing, FSDP2, LoRA) on one GPU, offline, in ~3-6 min.
#
#   bash scripts/gpu_check.sh                # from anywhere; prints PASS/FAIL lines, exits non-zero on a FAIL
#
# What it does:
#   1. a venv in $VENV (default /tmp/corl-gpu-venv) that sees the machine's own packages
#      (--system-site-packages: its CUDA torch, transformers, peft, ...);
#   2. installs any wheels found in ./.whl (packages the machine lacks: pydantic and its
#      needs; make them here with scripts/gpu_wheels.sh and carry .whl along), then corl
#      itself without dependencies (editable; falls back to PYTHONPATH=src);
#   3. checks that torch sees CUDA and that corl's imports resolve;
#   4. runs scripts/gpu_check.py: tiny models built locally (corl.studies.tiny, nothing from a hub),
#      Co-RL steps with bf16 + gradient checkpointing, FSDP2 on NCCL under torchrun (world
#      size 1: one GPU) with sharded (DCP) checkpoints and resumes, an FSDP2-vs-plain update
#      parity check, LoRA + bf16 + gradient checkpointing under FSDP2 (skipped with a note if
#      peft is missing), and the vLLM rollout engine (colocated, sleep mode, weight sync under
#      FSDP2 and LoRA, corl train on it with FSDP2 + LoRA + bf16 and a resume; skipped with a
#      note where vLLM's CUDA build is not installed). Several ranks per agent need several
#      GPUs (NCCL puts one rank on one GPU); CI runs those on CPU over gloo.
#      Last, the sharded paths (scripts/gpu_check_sharded.py): chunked head under FSDP2, vLLM sampling
#      without unsharding (gathers counted), vLLM sleep mode during the update (memory freed),
#      sharded KL reference (KL 0 at step 0), token-budget packing == padded update.
# Output of every run goes to $OUT_DIR (default $OUT/corl-gpu-check if $OUT is set, else
# /tmp/corl-gpu-check); the summary is also written to $OUT_DIR/summary.txt.
set -uo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${VENV:-/tmp/corl-gpu-venv}"
OUT_DIR="${OUT_DIR:-${OUT:-/tmp}/corl-gpu-check}"
PY="${PYTHON:-python3}"
mkdir -p "$OUT_DIR"
start=$(date +%s)
fail() { echo "FAIL  $1"; exit 1; }

echo "== corl GPU check: repo $REPO, venv $VENV, output $OUT_DIR"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null || echo "(no nvidia-smi)"

if [ ! -x "$VENV/bin/python" ]; then
  "$PY" -m venv --system-site-packages "$VENV" || fail "venv: $PY -m venv --system-site-packages $VENV"
fi
# shellcheck disable=SC1091
. "$VENV/bin/activate"
if compgen -G "$REPO/.whl/*.whl" >/dev/null; then
  pip install -q --no-index --no-deps "$REPO"/.whl/*.whl || fail "installing the wheels in .whl"
fi
if ! pip install -q --no-deps --no-build-isolation -e "$REPO" >"$OUT_DIR/pip-install.log" 2>&1; then
  echo "note: editable install failed (see $OUT_DIR/pip-install.log); using PYTHONPATH=$REPO/src"
  export PYTHONPATH="$REPO/src${PYTHONPATH:+:$PYTHONPATH}"
fi

python - <<'PY' || fail "environment (see above)"
import importlib, sys
import torch
print(f"torch {torch.__version__}, CUDA {torch.version.cuda}, GPU visible: {torch.cuda.is_available()}")
if not torch.cuda.is_available():
    sys.exit("torch sees no GPU: install a CUDA build of torch into the venv (pip install torch) or use the machine's python")
missing = []
for name in ("transformers", "tokenizers", "safetensors", "pydantic", "yaml", "typer", "rich", "numpy"):
    try:
        importlib.import_module(name)
    except ModuleNotFoundError:
        missing.append(name)
for name in ("peft", "math_verify", "tensorboard", "vllm"):  # vllm: section E (its CUDA build: pip install 'corl[vllm]')
    try:
        importlib.import_module(name)
    except Exception:  # noqa: BLE001 - a broken vllm (mismatched torchvision) raises RuntimeError: report it, go on
        print(f"optional package missing: {name}")
if missing:
    sys.exit(f"missing packages: {', '.join(missing)}: make wheels with scripts/gpu_wheels.sh and carry .whl")
import corl.launch.run  # noqa: F401  (the project itself imports)
print("PASS  environment")
PY

cd "$OUT_DIR" || fail "cd $OUT_DIR"
python "$REPO/scripts/gpu_check.py" --out "$OUT_DIR" 2>&1 | tee "$OUT_DIR/summary.txt"
status=${PIPESTATUS[0]}
echo "== done in $(( $(date +%s) - start )) s; exit status $status (number of failed checks)"
exit "$status"
