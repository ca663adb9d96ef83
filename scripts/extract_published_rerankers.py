"""Regenerate r2med_plugin/reporting/r2med_reranker_results.json from a clone of GitHub R2MED/R2MED.

    git clone https://github.com/R2MED/R2MED && python scripts/extract_published_rerankers.py R2MED

Reads every results/reranker/<reranker>/<retriever>/top_<k>/<Task>.json at the clone's HEAD (git show,
so the work tree may be dirty) and writes their contents, unchanged, with the source commit.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPOSITORY = "https://github.com/R2MED/R2MED"
# From the official code: src/eval_reranker.py (model_path_dict) and src/eval_retrieval.py (nv).
MODELS = {
    "bge-reranker": "BAAI/bge-reranker-v2-m3",
    "monobert": "castorini/monobert-large-msmarco",
    "rankllama": "castorini/rankllama-v1-7b-lora-passage",
    "nv": "nvidia/NV-Embed-v2",
}
TARGET = Path(__file__).resolve().parents[1] / "r2med_plugin" / "reporting" / "r2med_reranker_results.json"


def git(clone: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(clone), *args], check=True, capture_output=True, text=True).stdout


def main(clone: Path) -> None:
    commit = git(clone, "rev-parse", "HEAD").strip()
    files = [line for line in git(clone, "ls-tree", "-r", "--name-only", "HEAD", "results/reranker").splitlines() if line.endswith(".json")]
    results = []
    for path in sorted(files):
        _, _, reranker, retriever, depth, name = path.split("/")
        payload = json.loads(git(clone, "show", f"HEAD:{path}"))
        if (payload.get("reranker_name"), payload.get("retriever_name"), f"top_{payload.get('topk')}") != (reranker, retriever, depth):
            raise SystemExit(f"{path}: its fields disagree with its path")
        results.append({"file": path, **payload})
    document = {
        "source": f"{REPOSITORY}/tree/{commit}/results/reranker",
        "repository": REPOSITORY,
        "commit": commit,
        "path_pattern": "results/reranker/<reranker>/<retriever>/top_<k>/<dataset_name>.json",
        "note": (
            "The official reranker results as published (test split, means rounded to 5 decimals by the official "
            "evaluator; key names of the published files). Only top_10 files are published: the first commit's "
            "top_100 files were removed by the authors. Models: the official short names and the checkpoints "
            "src/eval_reranker.py and src/eval_retrieval.py load."
        ),
        "models": MODELS,
        "results": results,
    }
    TARGET.write_text(json.dumps(document, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"wrote {TARGET} ({len(results)} files from {commit})")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
