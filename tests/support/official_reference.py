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
import os
from pathlib import Path

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
        in_corpus_order = {doc_id: score for doc_id, score in zip(doc_ids, row, strict=True)}
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
        for doc_id, score in zip(doc_ids, row, strict=True):
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


def corpus_file_rows(data) -> tuple[list[str], list[str]]:
    """(ids, texts) of every row of an R2MED task's corpus.jsonl, read line by line as load_retrieval_data in
    eval_BM25.py reads it (repeated ids included), from the mirror in R2MED_DATA_DIR; NanoR2MED: the loaded corpus."""
    if data.spec.kind != "r2med":
        return data.corpus["id"].to_list(), data.corpus["text"].to_list()
    path = Path(os.environ["R2MED_DATA_DIR"]) / data.spec.hub_repo / "corpus.jsonl"
    ids, texts = [], []
    with path.open(encoding="utf-8") as stream:
        for line in stream:
            row = json.loads(line)
            ids.append(row["id"])
            texts.append(row["text"])
    return ids, texts


def row_ids(data) -> list[str]:
    return corpus_file_rows(data)[0]


def full_bm25(data) -> dict[str, list[float]]:
    """Every row's official BM25 score for every query, in file order: an index over every row, as eval_BM25.py
    builds it (a repeated id counts in N, the document frequencies and the average length)."""
    ids, texts = corpus_file_rows(data)
    index = build_lucene_index(ids, texts, show_progress=False)
    matrix = lucene_scores(index, data.queries["text"].to_list())
    return {q: [float(x) for x in row] for q, row in zip(data.queries["id"].to_list(), matrix, strict=True)}
