"""Metrics for 150 queries x 1,000 results: evaluate_run against MTEB's retrieval scorer.

    python benchmarks/metrics.py
"""

from __future__ import annotations

import random
import time

from r2med_plugin import evaluate_run


def main() -> None:
    from mteb._evaluators.retrieval_metrics import calculate_retrieval_scores

    rng = random.Random(0)
    run = {f"q{q}": {f"d{d}": rng.random() for d in rng.sample(range(61_379), 1000)} for q in range(150)}
    qrels = {q: {d: 1 for d in rng.sample(list(docs), 3)} | {f"d{rng.randrange(61_379)}": 1} for q, docs in run.items()}
    k_values = (1, 3, 5, 10, 25, 50, 100, 1000)
    start = time.perf_counter()
    ours = evaluate_run(qrels, run, k_values)
    ours_time = time.perf_counter() - start
    start = time.perf_counter()
    theirs = calculate_retrieval_scores(run, qrels, k_values)
    theirs_time = time.perf_counter() - start
    assert round(ours["ndcg_at_10"], 5) == theirs.ndcg["NDCG@10"]
    print("150 queries x 1,000 results, k = 1..1000 (nDCG, MAP, recall, P, hit, MRR)")
    print(f"  r2med_plugin.evaluate_run        {ours_time * 1000:7.0f} ms")
    print(f"  mteb calculate_retrieval_scores  {theirs_time * 1000:7.0f} ms   ratio {theirs_time / ours_time:4.1f}x (same nDCG@10)")


if __name__ == "__main__":
    main()
