#!/usr/bin/env bash
# Creates .venv from scratch and installs the package with the given extras (e.g. "test" or "demo").
set -euo pipefail
cd "$(dirname "$0")/.."
extras="${1:-test}"
rm -rf .venv
python3 -m venv .venv
.venv/bin/python -m pip install --quiet --upgrade pip
# The CPU build of PyTorch; an unpinned `torch` would pull a multi-GB CUDA build.
.venv/bin/python -m pip install --quiet "torch==2.13.0"
.venv/bin/python -m pip install --quiet -e ".[${extras}]"
