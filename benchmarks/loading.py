"""Loading the largest R2MED task (61,379 documents) from a local mirror: our loader vs what
mteb's built-in R2MED tasks do (datasets.load_dataset per config, then Python dicts).

    python benchmarks/loading.py
"""

from __future__ import annotations

import os
import tempfile
import time
from collections import defaultdict
from pathlib import Path

from common import LARGEST_TASK, r2med_mirror

from r2med_plugin import get_task_spec, load_task


def mteb_builtin_style(repo: Path) -> tuple[dict, dict, dict]:
    import datasets

    corpus = datasets.load_dataset(str(repo), name="corpus", split="corpus")
    queries = datasets.load_dataset(str(repo), name="query", split="query")
    qrels = datasets.load_dataset(str(repo), name="qrels", split="qrels")
    corpus_dict = {row["id"]: {"text": row["text"]} for row in corpus}
    queries_dict = {row["id"]: row["text"] for row in queries}
    relevant = defaultdict(dict)
    for row in qrels:
        relevant[row["q_id"]][row["p_id"]] = int(row["score"])
    return corpus_dict, queries_dict, relevant


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = r2med_mirror(Path(tmp) / "mirror")
        os.environ["HF_DATASETS_CACHE"] = str(Path(tmp) / "hf-datasets")
        os.environ["HF_DATASETS_OFFLINE"] = "1"
        repo = root / get_task_spec(LARGEST_TASK).hub_repo
        start = time.perf_counter()
        data = load_task(LARGEST_TASK, data_dir=root, accept_drift=True)
        ours = time.perf_counter() - start
        start = time.perf_counter()
        corpus, _, _ = mteb_builtin_style(repo)
        theirs_cold = time.perf_counter() - start
        start = time.perf_counter()
        mteb_builtin_style(repo)
        theirs_warm = time.perf_counter() - start
    assert data.corpus.height == len(corpus)
    print(f"documents: {data.corpus.height}, queries: {data.queries.height}")
    print(f"  r2med_plugin.load_task (read + validate everything)     {ours:7.2f} s")
    print(f"  datasets.load_dataset + dicts, first time (Arrow cache) {theirs_cold:7.2f} s   ratio {theirs_cold / ours:5.1f}x")
    print(f"  datasets.load_dataset + dicts, cache warm               {theirs_warm:7.2f} s   ratio {theirs_warm / ours:5.1f}x")


if __name__ == "__main__":
    main()
