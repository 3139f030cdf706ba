#!/usr/bin/env bash
# Wheels of corl's pure-Python needs that an offline GPU image may lack (pydantic and its
# helpers, math-verify), for scripts/gpu_check.sh. Run it where pip reaches PyPI:
#
#   bash scripts/gpu_wheels.sh [PYTHON_VERSION]      # default 3.12 (the GPU machine's python3)
#
# They land in ./.whl (WHEEL_DIR overrides; keep it out of git: echo /.whl/ >> .git/info/exclude)
# and must travel with the repository to the GPU machine.
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PYV="${1:-3.12}"
DEST="${WHEEL_DIR:-$REPO/.whl}"
mkdir -p "$DEST"
get() {
  pip download -q --no-deps --only-binary=:all: --python-version "$PYV" --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 -d "$DEST" "$@"
}
get "pydantic>=2.7" annotated-types typing-inspection "math-verify>=0.8" latex2sympy2_extended "antlr4-python3-runtime==4.13.2"
# pydantic pins pydantic-core exactly
core=$(unzip -p "$(ls "$DEST"/pydantic-2*.whl | sort | tail -1)" '*/METADATA' | sed -n 's/^Requires-Dist: pydantic-core==\([0-9.]*\).*/\1/p')
get "pydantic-core==$core"
ls -1 "$DEST"
