"""Per-query scores of a result, for the sidecar beside its MTEB file (r2med_plugin.reporting.per_query).

What a sidecar holds, each value computed by pytrec_eval on the run the result's mean was computed on,
so that the mean of a metric's per-query values is the result's score:

- the model's own metrics (``ndcg_at_10``, ``recall_at_100``, ``mrr`` ...) over every qrels query, a query
  the run lacks scoring 0 (as evaluate_run); a ``--candidates-only`` result: its ``candidates_*`` metrics;
- the official R2MED layout's values, prefixed ``official_`` (``official_ndcg_at_10`` ...): pytrec_eval's
  per-query values over the queries it evaluates, as the official evaluators average them (BM25: the stable
  top 100, with ``official_mrr``; dense: identical ids dropped, top 100; reranker: the reranked top k);
- for a reranked result, the first stage's metrics too (``first_stage_ndcg_at_10`` ...).

``hybrid_*`` and the candidate-subset scores of a full-corpus run are not in the sidecar: they fuse or
restrict runs that the result does not keep. Compare candidate lists with ``--candidates-only`` results.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

import polars as pl

from r2med_plugin.errors import UserError
from r2med_plugin.metrics import evaluate_run_per_query, pytrec_eval_per_query
from r2med_plugin.reporting.official_files import BM25_K_VALUES, DENSE_K_VALUES
from r2med_plugin.reporting.per_query import per_query_frame, per_query_path, top_ranked, write_per_query
from r2med_plugin.retrieval.candidates import restrict_run
from r2med_plugin.types import Run, TaskData

if TYPE_CHECKING:
    from r2med_plugin.evaluation.result import TaskRunResult

OFFICIAL_PREFIX = "official_"
_PYTREC_FAMILIES = (("ndcg_cut", "ndcg_at"), ("map_cut", "map_at"), ("recall", "recall_at"), ("P", "precision_at"))
RERANKER_K_VALUES = (1, 10, 25, 50, 100)  # r2med_plugin.evaluation.official.OFFICIAL_RERANKER_K_VALUES


def official_per_query(qrels: Mapping[str, Mapping[str, int]], run: Run, layout: str) -> dict[str, dict[str, float]]:
    """query id -> official key (ndcg_at_10, ..., mrr) -> pytrec_eval's value, for layout "bm25", "dense" or
    "reranker"; the queries are those pytrec_eval evaluates (the run's queries that have qrels)."""
    k_values = {"bm25": BM25_K_VALUES, "dense": DENSE_K_VALUES, "reranker": RERANKER_K_VALUES}.get(layout)
    if k_values is None:
        raise UserError(f"layout must be 'bm25', 'dense' or 'reranker', got {layout!r}")
    with_mrr = layout != "dense"
    cut = ",".join(str(k) for k in k_values)
    measures = {f"{family}.{cut}" for family, _ in _PYTREC_FAMILIES} | ({"recip_rank"} if with_mrr else set())
    raw = pytrec_eval_per_query(qrels, run, measures)
    renamed: dict[str, dict[str, float]] = {}
    for query_id, values in raw.items():
        row = {f"{ours}_{k}": values[f"{theirs}_{k}"] for theirs, ours in _PYTREC_FAMILIES for k in k_values}
        if with_mrr:
            row["mrr"] = values["recip_rank"]
        renamed[query_id] = row
    return renamed


def candidates_per_query(data: TaskData, run: Run) -> dict[str, dict[str, float]]:
    """query id -> ``candidates_<list>_<metric>[_with/without_safeguard]`` -> value: ``run`` restricted to
    each stored candidate list, as r2med_plugin.evaluation.extras.candidate_scores computes the means."""
    combined: dict[str, dict[str, float]] = {query_id: {} for query_id in data.qrels}
    for key, lists in data.candidates.items():
        variants = [("", restrict_run(run, lists))]
        if key == "hybrid":
            limit = int(data.spec.candidate_profiles[key]["top_k"])
            variants = [("_with_safeguard", variants[0][1]), ("_without_safeguard", restrict_run(run, lists, limit=limit))]
        for suffix, restricted in variants:
            for query_id, values in evaluate_run_per_query(data.qrels, restricted).items():
                combined[query_id].update({f"candidates_{key}_{name}{suffix}": value for name, value in values.items()})
    return combined


def result_per_query(result: TaskRunResult) -> pl.DataFrame:
    """The per-query table of a result (see the module docstring): only metrics the result file reports."""
    data, keep = result.data, set(result.scores)
    frames = []
    if result.candidates_only:
        frames.append(per_query_frame(result.task, candidates_per_query(data, result.run), keep=keep))
    else:
        frames.append(per_query_frame(result.task, evaluate_run_per_query(data.qrels, result.run), keep=keep))
    if result.rerank is not None:
        from r2med_plugin.evaluation.scorers import FIRST_STAGE_PREFIX

        first = evaluate_run_per_query(data.qrels, result.rerank.first_stage_run)
        frames.append(per_query_frame(result.task, first, prefix=FIRST_STAGE_PREFIX, keep=keep))
        official = official_per_query(data.qrels, {q: r for q, r in result.run.items() if r}, "reranker")
        frames.append(per_query_frame(result.task, official, prefix=OFFICIAL_PREFIX))
    elif result.official_run is not None and result.official_layout is not None:
        official = official_per_query(data.qrels, result.official_run, result.official_layout)
        frames.append(per_query_frame(result.task, official, prefix=OFFICIAL_PREFIX))
    return pl.concat(frames, how="vertical")


def write_result_per_query(result: TaskRunResult, result_path: str | os.PathLike) -> Path:
    """Write the sidecar of ``result`` beside its MTEB result file ``result_path``; returns its path."""
    info = {
        "task": result.task,
        "model_name": _model_name(result),
        "model_revision": result.model_revision,
        "dataset_revision": result.data.result_revision,
        "paired_revision": result.data.paired_revision,
        # what a paired test pairs by: the revision and the files' fingerprint (an edited copy under the same label differs)
        "paired_data": result.data.paired_judged_data,
        "main_score": result.main_score,
        "official_layout": "reranker" if result.rerank is not None else result.official_layout,
        "writer": "r2med evaluate",
    }
    return write_per_query(per_query_path(result_path), result_per_query(result), info=info,
                           ranked=top_ranked(result.data.qrels, result.run))


def _model_name(result: TaskRunResult) -> str:
    if result.rerank is not None:
        return result.retriever
    from r2med_plugin.evaluation.naming import result_model_name

    return result_model_name(result)
