"""`r2med compare` over 20 models x the 8 R2MED tasks (their real query counts, 876 queries in all) with
10,000 permutations: the whole command, from a fresh process, must finish in under 10 s on 2 cores.

Each model's results are written as `r2med evaluate --output` writes them: an MTEB result JSON and a
per-query sidecar holding the 55 full-corpus metrics a result reports per query, with synthetic values
(nDCG-like: many zeros, the rest spread over (0, 1]). Then `r2med compare DIR --permutations 10000`
runs 3 times in a subprocess (wall time, Python start-up and imports included); the in-process time
of `compare_results` is printed too, with the table's size.

    python benchmarks/compare.py [--models 20] [--permutations 10000]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from r2med_plugin.catalog import list_tasks
from r2med_plugin.metrics import metric_names
from r2med_plugin.reporting.per_query import per_query_frame, write_per_query

METRICS = [*metric_names((1, 3, 5, 10, 20, 25, 50, 100, 1000))]


def write_results(root: Path, models: int, seed: int = 0) -> int:
    """``models`` models x 8 R2MED tasks; returns the number of evaluated queries per model."""
    rng = np.random.default_rng(seed)
    total = 0
    for spec in list_tasks("r2med"):
        n = int(spec.expected_counts["queries"])
        total += n
        difficulty = rng.random(n)  # shared by every model: paired scores are correlated, as real ones are
        for index in range(models):
            skill = 0.25 + 0.02 * index
            base = np.clip(skill + 0.5 * (difficulty - 0.5) + rng.normal(0, 0.2, n), 0, 1)
            base[rng.random(n) < 0.3] = 0.0
            values = {f"q{q:04d}": {metric: float(base[q]) for metric in METRICS} for q in range(n)}
            folder = root / "results" / f"model-{index:02d}" / "rev1"
            folder.mkdir(parents=True, exist_ok=True)
            (folder / "model_meta.json").write_text(json.dumps({"name": f"model-{index:02d}", "revision": "rev1"}))
            mean = float(base.mean())
            (folder / f"{spec.name}.json").write_text(json.dumps({
                "dataset_revision": spec.revision, "task_name": spec.name, "date": 1.0, "evaluation_time": 1.0,
                "scores": {"test": [{"ndcg_at_10": mean, "main_score": mean, "hf_subset": "default"}]},
            }))
            write_per_query(folder / f"{spec.name}.per_query.parquet", per_query_frame(spec.name, values))
    return total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", type=int, default=20)
    parser.add_argument("--permutations", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        started = time.perf_counter()
        queries = write_results(root, args.models)
        print(f"wrote {args.models} models x 8 tasks ({queries} queries each, {len(METRICS)} metrics per query) "
              f"in {time.perf_counter() - started:.1f} s")
        command = [sys.executable, "-m", "r2med_plugin.cli", "compare", str(root), "--baseline", "model-00",
                   "--permutations", str(args.permutations), "--out", str(root / "compare.md")]
        walls = []
        for _ in range(args.runs):
            started = time.perf_counter()
            subprocess.run(command, check=True, capture_output=True, env=os.environ.copy())
            walls.append(time.perf_counter() - started)
        from r2med_plugin.reporting.compare import compare_results

        started = time.perf_counter()
        report = compare_results([root], baseline="model-00", permutations=args.permutations)
        inside = time.perf_counter() - started
        rows = len(report.comparisons)
        print(f"r2med compare, {args.models} models x 8 tasks, {args.permutations} permutations (+ as many bootstrap "
              f"resamples), {rows} comparisons: whole command median {statistics.median(walls):.2f} s "
              f"(runs: {', '.join(f'{w:.2f}' for w in walls)}); compare_results in-process {inside:.2f} s; cores: {os.cpu_count()}")


if __name__ == "__main__":
    main()
