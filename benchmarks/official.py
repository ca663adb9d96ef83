"""What the official R2MED BM25 file costs on top of an evaluation, at real scale.

61,379 synthetic documents, 150 queries: the evaluation's bm25-lucene run (top 1000, pytrec_eval
ties); the official file derived from it (stable top 100 replayed from the run + pytrec_eval at
1, 10, 25, 50, 100); and, for comparison, the fallback when a tie at rank 100 reaches past the run:
a second BM25 pass with corpus-order ties.

    python benchmarks/official.py
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from synthetic import synthetic_task  # noqa: E402

from r2med_plugin.evaluation.official import official_bm25_run, official_bm25_scores  # noqa: E402
from r2med_plugin.retrieval.bm25 import bm25_search  # noqa: E402


def main() -> None:
    corpus, queries, qrels = synthetic_task()
    start = time.perf_counter()
    run = bm25_search(corpus, queries, variant="lucene", top_k=1000, show_progress=False)
    evaluation = time.perf_counter() - start
    start = time.perf_counter()
    derived = official_bm25_run(run, corpus["id"].to_list())
    assert derived is not None, "a tie at rank 100 reaches rank 1000 on this data"
    scores = official_bm25_scores(qrels, derived)
    official = time.perf_counter() - start
    start = time.perf_counter()
    again = bm25_search(corpus, queries, variant="lucene", top_k=100, show_progress=False, ties="corpus")
    fallback_scores = official_bm25_scores(qrels, again)
    fallback = time.perf_counter() - start
    assert fallback_scores == scores, "the derived and the recomputed official runs disagree"
    print(f"{corpus.height} documents, {queries.height} queries")
    print(f"  bm25-lucene evaluation run (top 1000)             {evaluation:7.2f} s")
    print(f"  official BM25 file derived from it                {official * 1000:7.0f} ms  ({official / evaluation:.1%} of the run)")
    print(f"  fallback: second pass with corpus-order ties      {fallback:7.2f} s   ratio {fallback / official:,.0f}x the derivation")
    print(f"  official nDCG@10 {scores['ndcg_at_10']}, mrr {scores['mrr']} (identical both ways)")


if __name__ == "__main__":
    main()
