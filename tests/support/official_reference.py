"""The official R2MED evaluators re-implemented from their sources, for tests.

``reference_bm25_file`` and ``reference_dense_file`` are written from the official sources
(R2MED/R2MED src/eval_BM25.py: retrieval_bm25 + calculate_retrieval_metrics; src/eval_retrieval.py:
BEIR's DenseRetrievalExactSearch.search + EvaluateRetrieval.evaluate) in their own arithmetic: full
score lists in corpus order, Python's stable sort, BEIR's (score, id) heap, sums over pytrec_eval's
per-query dict divided by its length, round(., 5), json.dump(indent=2, sort_keys=True).
"""

from __future__ import annotations

import heapq
import json

import pytrec_eval

from r2med_plugin.retrieval.bm25 import build_lucene_index, lucene_scores


def _official_means(qrels: dict, results: dict, k_values: list[int], with_mrr: bool) -> dict:
    measures = {f"{name}." + ",".join(map(str, k_values)) for name in ("map_cut", "ndcg_cut", "recall", "P")}
    if with_mrr:
        measures.add("recip_rank")
    scores = pytrec_eval.RelevanceEvaluator(qrels, measures).evaluate(results)
    out = {}
    for k in k_values:
        for ours, theirs in (("ndcg_at", "ndcg_cut"), ("map_at", "map_cut"), ("recall_at", "recall"), ("precision_at", "P")):
            total = 0.0
            for query_id in scores.keys():
                total += scores[query_id][f"{theirs}_{k}"]
            out[f"{ours}_{k}"] = round(total / len(scores), 5)
    if with_mrr:
        total = 0.0
        for query_id in scores.keys():
            total += scores[query_id]["recip_rank"]
        out["mrr"] = round(total / len(scores), 5)
    return out


def _official_file(task: str, model: str, seconds: float, test: dict) -> str:
    payload = {"dataset_name": task, "model_name": model, "evaluation_time": str(round(seconds / 60, 2)) + " minutes", "test": test}
    return json.dumps(payload, indent=2, sort_keys=True)


def reference_bm25_file(doc_ids: list[str], full_scores: dict[str, list[float]], qrels: dict, seconds: float, task: str) -> str:
    """eval_BM25.py: every document scored, stable sort by score (reverse), first 100, then pytrec_eval."""
    results = {}
    for query_id, row in full_scores.items():
        in_corpus_order = {doc_id: score for doc_id, score in zip(doc_ids, row)}
        top = sorted(in_corpus_order.items(), key=lambda pair: pair[1], reverse=True)[:100]
        results[query_id] = dict(top)
    return _official_file(task, "bm25", seconds, _official_means(qrels, results, [1, 10, 25, 50, 100], with_mrr=True))


def reference_dense_file(doc_ids: list[str], full_scores: dict[str, list[float]], qrels: dict, seconds: float, task: str, model: str) -> str:
    """eval_retrieval.py: BEIR exact search (top 100 by a (score, id) heap, the query's own id skipped),
    then EvaluateRetrieval.evaluate at 1, 3, 5, 10, 100 with ignore_identical_ids=True."""
    top_k = 100
    results = {}
    for query_id, row in full_scores.items():
        heap: list[tuple[float, str]] = []
        for doc_id, score in zip(doc_ids, row):
            if doc_id == query_id:
                continue
            if len(heap) < top_k:
                heapq.heappush(heap, (score, doc_id))
            else:
                heapq.heappushpop(heap, (score, doc_id))
        results[query_id] = {doc_id: score for score, doc_id in heap}
    for query_id in results:
        results[query_id].pop(query_id, None)
    return _official_file(task, model, seconds, _official_means(qrels, results, [1, 3, 5, 10, 100], with_mrr=False))


def full_bm25(data) -> dict[str, list[float]]:
    """Every document's official BM25 score for every query, in corpus order."""
    index = build_lucene_index(data.corpus["id"].to_list(), data.corpus["text"].to_list(), show_progress=False)
    matrix = lucene_scores(index, data.queries["text"].to_list())
    return {q: [float(x) for x in row] for q, row in zip(data.queries["id"].to_list(), matrix)}
