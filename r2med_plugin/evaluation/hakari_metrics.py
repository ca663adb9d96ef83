"""HAKARI-Bench's metric conventions, for what goes to HAKARI-Bench (read in hakari_bench/metrics.py and
evaluation.py at commit 217c872; no code of it is used here).

They differ from pytrec_eval's (``r2med_plugin.metrics``), which MTEB result files keep:

- a ranking is an ordered list of document ids per query; a scored run becomes one by score descending, ties
  by document id ASCENDING (HAKARI's dense ranking; pytrec_eval breaks ties by id descending), except a run whose
  order is its own (a ``bm25-hakari`` run keeps bm25s's order: ``keep_order=True``);
- MAP@k divides by min(R, k) positives (trec_eval divides by R);
- every query with text is counted: a query without qrels, or without a ranking, scores 0 (MTEB drops it);
- documents with empty text are not in HAKARI's corpus (its loader drops them), so they are never ranked;
  queries with empty text are dropped;
- ``hit@k`` is written ``acc@k``; a metric key is ``<evaluator>_<score name>_<family>@<k>``, the evaluator being
  ``<dataset name>_<task>`` (``NanoR2MED_NanoR2MEDBiology``).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence

from r2med_plugin.errors import UserError
from r2med_plugin.reporting.hakari_files import HAKARI_DATASET_NAME

Rankings = dict[str, list[str]]

HAKARI_FAMILIES = ("acc", "precision", "recall", "mrr", "ndcg", "map")
_ALIASES = {"hit": "acc", "accuracy": "acc"}
HAKARI_DEFAULT_METRICS = ("ndcg@10", "acc@100")  # what HAKARI computes by default, and what its result summary keeps
HAKARI_SIDECAR_METRICS = ("ndcg@10", "acc@10", "acc@100", "recall@100", "map@10", "mrr@10", "precision@10")


def canonical_metric(name: str) -> tuple[str, int]:
    """("ndcg", 10) from "nDCG@10"; hit@k and accuracy@k are HAKARI's acc@k. A ValueError names the fix."""
    text = name.strip().lower()
    family, at, cutoff = text.partition("@")
    family = _ALIASES.get(family, family)
    if not at or family not in HAKARI_FAMILIES or not cutoff.isdigit() or int(cutoff) <= 0:
        raise UserError(f"HAKARI metric {name!r} is not <family>@<k> with family one of {', '.join(HAKARI_FAMILIES)} "
                        "(or hit, accuracy) and a positive whole k, e.g. 'ndcg@10'")
    return family, int(cutoff)


def ranking_from_run(scores: Mapping[str, float], *, keep_order: bool = False) -> list[str]:
    """One query's run as HAKARI ranks it: score descending, ties by id ascending; ``keep_order``: as given."""
    if keep_order:
        return list(scores)
    return sorted(scores, key=lambda doc_id: (-float(scores[doc_id]), doc_id))


def rankings_from_run(run: Mapping[str, Mapping[str, float]], *, keep_order: bool = False,
                      dropped_documents: Iterable[str] = ()) -> Rankings:
    """Every query's ranking (see ranking_from_run), without the ``dropped_documents`` (empty texts)."""
    dropped = set(dropped_documents)
    rankings = {}
    for query_id, scores in run.items():
        ranked = ranking_from_run(scores, keep_order=keep_order)
        rankings[query_id] = [doc_id for doc_id in ranked if doc_id not in dropped] if dropped else ranked
    return rankings


def query_values(ranking: Sequence[str], positives: set[str], metrics: Sequence[tuple[str, int]]) -> dict[str, float]:
    """One query's value of each (family, k), HAKARI's way; a query without positives scores 0 on all."""
    return {f"{family}@{k}": _value(family, k, ranking, positives) for family, k in metrics}


def _value(family: str, k: int, ranking: Sequence[str], positives: set[str]) -> float:
    if not positives:
        return 0.0
    hit_ranks = [rank for rank, doc_id in enumerate(ranking[:k], start=1) if doc_id in positives]
    if family == "acc":
        return 1.0 if hit_ranks else 0.0
    if family == "precision":
        return len(hit_ranks) / k
    if family == "recall":
        return len(hit_ranks) / len(positives)
    if family == "mrr":
        return 1.0 / hit_ranks[0] if hit_ranks else 0.0
    if family == "ndcg":
        ideal = sum(1.0 / math.log2(rank + 1) for rank in range(1, min(len(positives), k) + 1))
        return sum(1.0 / math.log2(rank + 1) for rank in hit_ranks) / ideal
    # map: the precision at each positive's rank within the top k, over min(R, k) (trec_eval: over R)
    return sum(found / rank for found, rank in enumerate(hit_ranks, start=1)) / min(len(positives), k)


def hakari_metrics(rankings: Mapping[str, Sequence[str]], qrels: Mapping[str, Iterable[str]], *,
                   metric_names: Sequence[str] = HAKARI_DEFAULT_METRICS, query_ids: Iterable[str] | None = None,
                   prefix: str = "") -> dict[str, float]:
    """The mean of each metric over ``query_ids`` (default: the queries ranked), HAKARI's way.

    ``qrels``: query id -> its positive document ids (a graded dict counts ids with a grade above 0). A query in
    ``query_ids`` without a ranking or without positives scores 0. Keys: ``prefix`` + "ndcg@10" (HAKARI's
    ``<evaluator>_<score name>_``, see metric_prefix). Inputs are not changed."""
    metrics = [canonical_metric(name) for name in metric_names]
    ids = list(rankings) if query_ids is None else list(dict.fromkeys(query_ids))
    for query_id, ranking in rankings.items():
        if len(set(ranking)) != len(ranking):
            raise UserError(f"the ranking of query {query_id!r} repeats a document id; a ranking lists each document once")
    if not ids:
        return {}
    sums = {f"{family}@{k}": 0.0 for family, k in metrics}
    for query_id in ids:
        values = query_values(rankings.get(query_id, []), positive_ids(qrels.get(query_id, ())), metrics)
        for key, value in values.items():
            sums[key] += value
    return {f"{prefix}{key}": total / len(ids) for key, total in sums.items()}


def positive_ids(judged: Iterable[str] | Mapping[str, int]) -> set[str]:
    """The positives of one query's qrels: a set of ids, or the ids graded above 0 of a graded dict."""
    if isinstance(judged, Mapping):
        return {doc_id for doc_id, grade in judged.items() if grade > 0}
    return set(judged)


def metric_prefix(task: str, score_name: str, dataset_name: str = HAKARI_DATASET_NAME) -> str:
    """"NanoR2MED_NanoR2MEDBiology_cosine_": what HAKARI puts before "ndcg@10" in a metric key."""
    return f"{dataset_name}_{task}_{score_name}_"


def candidate_rankings(run: Mapping[str, Mapping[str, float]], candidates: Mapping[str, Sequence[str]],
                       query_ids: Iterable[str], *, keep_order: bool = False,
                       dropped_documents: Iterable[str] = ()) -> Rankings:
    """Each query's candidates ranked by the run's scores (HAKARI's candidate re-ranking): the list deduplicated,
    documents not in the corpus (empty texts) left out, a query without candidates ranks none; a candidate the run
    lacks cannot be ranked and is left out (the run must score every candidate)."""
    dropped = set(dropped_documents)
    rankings: Rankings = {}
    for query_id in query_ids:
        scores = run.get(query_id, {})
        listed = {doc_id for doc_id in candidates.get(query_id, ()) if doc_id not in dropped}
        rankings[query_id] = ranking_from_run({doc_id: score for doc_id, score in scores.items() if doc_id in listed},
                                              keep_order=keep_order)
    return rankings


def candidate_top_k(candidates: Mapping[str, Sequence[str]]) -> int:
    """HAKARI's rerank top-k when none is requested: the longest deduplicated list (101 with a safeguard row)."""
    return max((len(dict.fromkeys(ids)) for ids in candidates.values()), default=0)


__all__ = ["HAKARI_DEFAULT_METRICS", "HAKARI_SIDECAR_METRICS", "Rankings", "canonical_metric", "candidate_rankings",
           "candidate_top_k", "hakari_metrics", "metric_prefix", "positive_ids", "query_values", "ranking_from_run",
           "rankings_from_run"]
