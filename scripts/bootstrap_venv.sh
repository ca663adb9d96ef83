#!/usr/bin/env bash
# Installs the package with the given extras (e.g. "test" or "demo") into .venv. In CI (CI=true) or with
# R2MED_FRESH_VENV=1, .venv is made from scratch; otherwise an existing .venv (the one scripts/demo.sh made) is
# kept and the extras are added to it, so running .ci/run after the demo does not throw the demo's install away.
set -euo pipefail
cd "$(dirname "$0")/.."
extras="${1:-test}"
if [ "${CI:-}" = "true" ] || [ "${R2MED_FRESH_VENV:-}" = "1" ] || ! .venv/bin/python -c "" >/dev/null 2>&1; then
  rm -rf .venv
  python3 -m venv .venv
fi
.venv/bin/python -m pip install --quiet --upgrade pip
# The CPU build of PyTorch; an unpinned `torch` would pull a multi-GB CUDA build.
.venv/bin/python -m pip install --quiet "torch==2.13.0"
.venv/bin/python -m pip install --quiet -e ".[${extras}]"
