"""Our HAKARI metric conventions (r2med_plugin.evaluation.hakari_metrics) against HAKARI-Bench's own
``compute_ir_metrics``, run unchanged from a fetched source folder, on random rankings and qrels.

    HAKARI_SRC=DIR python benchmarks/hakari_parity_metrics.py [--trials 200] [--seed 0]
        [--record results/<model>/<revision>/<Task>.hakari.json.xz run_hakari_out.json]

Each trial draws a task (queries with and without qrels, rankings with ties broken by either side, rankings
shorter than the deepest cutoff, empty rankings) and compares every metric of HAKARI's families at cutoffs
1, 3, 5, 10, 25, 100; prints the largest absolute difference (0.0: equal to the last digit). ``compare_metrics``
is the function ``benchmarks/hakari_parity.py`` calls for its metric half. ``DIR``: a folder, outside the project tree,
holding HAKARI-Bench's source (how to get it: ../shared/tools/hakari-bench/README.md).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
from pathlib import Path

from r2med_plugin.evaluation.hakari_metrics import hakari_metrics, metric_prefix
from r2med_plugin.reporting.hakari_files import read_xz_json

METRICS = [f"{family}@{k}" for family in ("ndcg", "hit", "precision", "recall", "mrr", "map") for k in (1, 3, 5, 10, 25, 100)]


def hakari_compute_ir_metrics():
    """HAKARI-Bench's ``compute_ir_metrics`` from $HAKARI_SRC (its source, unchanged)."""
    source = os.environ.get("HAKARI_SRC")
    if not source:
        raise SystemExit("set HAKARI_SRC to a folder holding hakari-bench's source (../shared/tools/hakari-bench/README.md)")
    sys.path.insert(0, source)
    from hakari_bench.metrics import compute_ir_metrics

    return compute_ir_metrics


def random_task(rng: random.Random, n_queries: int = 40, n_docs: int = 300) -> tuple[dict[str, list[str]], dict[str, set[str]]]:
    docs = [f"d{index:04d}" for index in range(n_docs)]
    rankings, qrels = {}, {}
    for index in range(n_queries):
        query_id = f"q{index:03d}"
        rankings[query_id] = rng.sample(docs, rng.choice([0, 5, 30, 120, n_docs]))
        if rng.random() < 0.85:  # some queries have no qrels: both count them, scoring 0
            qrels[query_id] = set(rng.sample(docs, rng.randint(1, 25)))
    return rankings, qrels


def compare_metrics(compute_ir_metrics, trials: int = 200, seed: int = 0) -> float:
    """The largest |ours - HAKARI's| over every metric of ``trials`` random tasks."""
    rng = random.Random(seed)
    largest = 0.0
    for _ in range(trials):
        rankings, qrels = random_task(rng)
        theirs = compute_ir_metrics(rankings=rankings, qrels=qrels, evaluator_name="NanoR2MED_NanoR2MEDBiology",
                                    score_name="cosine", metric_names=METRICS)
        ours = hakari_metrics(rankings, qrels, metric_names=METRICS, prefix=metric_prefix("NanoR2MEDBiology", "cosine"))
        if set(ours) != set(theirs):
            raise SystemExit(f"keys differ: ours only {sorted(set(ours) - set(theirs))}, theirs only {sorted(set(theirs) - set(ours))}")
        largest = max(largest, max(abs(ours[key] - theirs[key]) for key in ours))
    return largest


def compare_record(record_path: str, hakari_json: str) -> tuple[int, float]:
    """(metrics compared, largest |ours - HAKARI's|) between a ``<Task>.hakari.json.xz`` that ``r2med evaluate`` wrote
    and the OUT_JSON of ../shared/tools/hakari-bench/run_hakari.py on the same task and model (its dense_full and
    dense_on_<list> groups): the keys both hold."""
    ours = read_xz_json(Path(record_path))
    theirs = json.loads(Path(hakari_json).read_text(encoding="utf-8"))
    mine = dict(ours["metrics"])
    for entry in ours["candidate_rankings"].values():
        mine |= entry["metrics"]
    held = {key: value for group in theirs.values() if isinstance(group, dict) for key, value in group.items()}
    shared = sorted(set(mine) & set(held))
    if not shared:
        raise SystemExit("no metric key in common: run both on the same task and model")
    return len(shared), max(abs(mine[key] - held[key]) for key in shared)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--record", nargs=2, metavar=("TASK_HAKARI_JSON", "RUN_HAKARI_OUT_JSON"),
                        help="also compare an evaluate record with run_hakari.py's output on the same task and model")
    args = parser.parse_args()
    largest = compare_metrics(hakari_compute_ir_metrics(), args.trials, args.seed)
    print(f"HAKARI metrics, {args.trials} random tasks x {len(METRICS)} metrics: max |ours - HAKARI| = {largest!r}")
    if args.record:
        count, largest = compare_record(*args.record)
        print(f"evaluate's HAKARI record vs HAKARI's evaluate_dense_task: {count} metrics, max |ours - HAKARI| = {largest!r}")


if __name__ == "__main__":
    main()
