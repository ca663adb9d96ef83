"""Retrieval metrics: pytrec_eval behind one adapter, MTEB-style keys.

Ties are ordered as pytrec_eval orders them (score descending, then document id descending).
A query of the qrels that is missing from the run scores 0 on every metric.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import numpy as np

from r2med_plugin.errors import UserError
from r2med_plugin.types import Qrels, Run

MIN_TOP_K = 10  # the main score is ndcg_at_10: a shallower run cannot report it


def rerank_depth_problem(depth: object) -> str | None:
    """What is wrong with ``depth`` as a rerank depth (a whole number of at least MIN_TOP_K: the main score, ndcg_at_10,
    needs each query's reranked top 10); None if nothing."""
    if isinstance(depth, bool) or not isinstance(depth, (int, np.integer)) or depth < MIN_TOP_K:
        return (f"must be at least {MIN_TOP_K} documents per query: the main score is ndcg_at_10, which a shallower rerank "
                f"cannot report (the official depths are 10 and 100); got {depth!r}")
    return None

# mteb's retrieval cutoffs (1, 3, 5, 10, 20, 100, 1000) plus the official R2MED BM25 ones (25, 50).
DEFAULT_K_VALUES: tuple[int, ...] = (1, 3, 5, 10, 20, 25, 50, 100, 1000)
_FAMILIES = {"ndcg_cut": "ndcg_at", "map_cut": "map_at", "recall": "recall_at", "P": "precision_at", "success": "hit_at"}


_METRIC_KEY = re.compile(
    r"^(?P<prefix>(?:hybrid_|first_stage_|candidates_[a-z]+_)?)(?P<family>ndcg_at|map_at|recall_at|precision_at|hit_at|mrr_at|mrr)"
    r"(?:_(?P<cutoff>\d+))?(?:_(?P<variant>with_safeguard|without_safeguard))?$"
)


@dataclass(frozen=True)
class Metric:
    """A reported score's key as parts, as ir_measures names measures: family, cutoff and variant give the key
    (``candidates_hybrid_`` + ``ndcg_at`` + ``_10`` + ``_with_safeguard``)."""

    family: str  # ndcg_at, map_at, recall_at, precision_at, hit_at, mrr_at, mrr
    cutoff: int | None = None
    variant: str = ""  # with_safeguard, without_safeguard
    prefix: str = ""  # hybrid_, first_stage_, candidates_<list>_

    @property
    def key(self) -> str:
        cutoff = f"_{self.cutoff}" if self.cutoff is not None else ""
        return f"{self.prefix}{self.family}{cutoff}" + (f"_{self.variant}" if self.variant else "")

    @classmethod
    def parse(cls, key: str) -> Metric | None:
        """The parts of a score key, or None for a key that is not a metric (main_score, hf_subset, ...)."""
        match = _METRIC_KEY.match(key)
        if match is None:
            return None
        cutoff = int(match["cutoff"]) if match["cutoff"] else None
        return cls(match["family"], cutoff, match["variant"] or "", match["prefix"])


def metric_names(k_values: Iterable[int] = DEFAULT_K_VALUES) -> list[str]:
    names = [f"{prefix}_{k}" for prefix in _FAMILIES.values() for k in k_values]
    return names + [f"mrr_at_{k}" for k in k_values] + ["mrr"]


def evaluate_run_per_query(
    qrels: Mapping[str, Mapping[str, int]],
    run: Mapping[str, Mapping[str, float]],
    k_values: Iterable[int] = DEFAULT_K_VALUES,
) -> dict[str, dict[str, float]]:
    """query id -> metric -> value, for every query of ``qrels``; the inputs are not modified."""
    k_values = _check_k_values(k_values)
    measures = {f"{family}.{','.join(map(str, k_values))}" for family in _FAMILIES} | {"recip_rank"}
    raw = pytrec_eval_per_query(qrels, run, measures)
    zeros = dict.fromkeys(metric_names(k_values), 0.0)
    return {query_id: _rename(raw[query_id], k_values) if query_id in raw else dict(zeros) for query_id in _clean_qrels(qrels)}


def pytrec_eval_per_query(
    qrels: Mapping[str, Mapping[str, int]],
    run: Mapping[str, Mapping[str, float]],
    measures: Iterable[str],
    *,
    keep_empty: bool = False,
) -> dict[str, dict[str, float]]:
    """pytrec_eval's own per-query values, unchanged: query id -> pytrec_eval measure ("ndcg_cut_10",
    "recip_rank", ...) -> value, for the queries pytrec_eval evaluates (run queries that have qrels; with
    ``keep_empty``, also those the run lists without documents, as pytrec_eval scores them: 0). The one
    place this package calls pytrec_eval.

    No zero-filling and no renaming: these are the values the official R2MED evaluators average
    (official_means). Use evaluate_run_per_query for MTEB-style keys over every qrels query.
    """
    import pytrec_eval

    clean_qrels = _clean_qrels(qrels)
    clean_run = _clean_run(run, clean_qrels, keep_empty=keep_empty)
    measures = set(measures)
    if not measures:
        raise UserError("measures is empty: name pytrec_eval measures, e.g. {'ndcg_cut.10', 'recip_rank'}")
    raw = pytrec_eval.RelevanceEvaluator(clean_qrels, measures).evaluate(clean_run) if clean_run else {}
    return {query_id: {name: float(value) for name, value in values.items()} for query_id, values in raw.items()}


def evaluate_run(
    qrels: Mapping[str, Mapping[str, int]],
    run: Mapping[str, Mapping[str, float]],
    k_values: Iterable[int] = DEFAULT_K_VALUES,
) -> dict[str, float]:
    """Mean of each metric over the queries of ``qrels`` (MTEB-style keys: ndcg_at_10, hit_at_10, mrr, ...)."""
    per_query = evaluate_run_per_query(qrels, run, k_values)
    if not per_query:
        raise UserError("qrels is empty: there is nothing to evaluate against")
    names = list(next(iter(per_query.values())))
    table = np.array([[scores[name] for name in names] for scores in per_query.values()], dtype=np.float64)
    return dict(zip(names, (float(value) for value in table.mean(axis=0)), strict=True))


def _rename(scores: Mapping[str, float], k_values: tuple[int, ...]) -> dict[str, float]:
    renamed = {
        f"{prefix}_{k}": float(scores[f"{family}_{k}"]) for family, prefix in _FAMILIES.items() for k in k_values
    }
    reciprocal = float(scores["recip_rank"])
    first_hit = round(1.0 / reciprocal) if reciprocal > 0 else None
    for k in k_values:
        renamed[f"mrr_at_{k}"] = reciprocal if first_hit is not None and first_hit <= k else 0.0
    renamed["mrr"] = reciprocal
    return renamed


def _check_k_values(k_values: Iterable[int]) -> tuple[int, ...]:
    values = tuple(k_values)
    if not values or any(not isinstance(k, (int, np.integer)) or isinstance(k, bool) or k < 1 for k in values):
        raise UserError(f"k_values must be positive integers, got {values!r}")
    return tuple(sorted(set(int(k) for k in values)))


def _clean_qrels(qrels: Mapping[str, Mapping[str, int]]) -> Qrels:
    if not isinstance(qrels, Mapping):
        raise TypeError(f"qrels must be a dict of dicts (query id -> doc id -> relevance), got {type(qrels).__name__}")
    clean: Qrels = {}
    for query_id, judged in qrels.items():
        if not isinstance(judged, Mapping):
            raise TypeError(f"qrels[{query_id!r}] must be a dict doc id -> relevance, got {type(judged).__name__}")
        try:
            clean[str(query_id)] = {str(doc_id): int(rel) for doc_id, rel in judged.items()}
        except (TypeError, ValueError) as error:
            raise TypeError(f"qrels[{query_id!r}] has a relevance that is not an integer ({error})") from error
    return clean


def _clean_run(run: Mapping[str, Mapping[str, float]], qrels: Qrels, *, keep_empty: bool = False) -> Run:
    if not isinstance(run, Mapping):
        raise TypeError(f"run must be a dict of dicts (query id -> doc id -> score), got {type(run).__name__}")
    clean: Run = {}
    for query_id, ranked in run.items():
        if str(query_id) not in qrels:
            continue
        if not isinstance(ranked, Mapping):
            raise TypeError(f"run[{query_id!r}] must be a dict doc id -> score, got {type(ranked).__name__}")
        if not ranked:
            if keep_empty:
                clean[str(query_id)] = {}
            continue
        try:
            values = np.fromiter(ranked.values(), dtype=np.float64, count=len(ranked))
        except (TypeError, ValueError) as error:
            raise TypeError(f"run[{query_id!r}] has a score that is not a number ({error})") from error
        if np.isnan(values).any():
            raise UserError(f"run[{query_id!r}] contains NaN scores; fix the retriever that produced it")
        clean[str(query_id)] = dict(zip(map(str, ranked), values.tolist(), strict=True))
    return clean


# --- the official evaluators' arithmetic ----------------------------------------------------------

OFFICIAL_DECIMALS = 5
_OFFICIAL_FAMILIES = (("ndcg_cut", "ndcg_at"), ("map_cut", "map_at"), ("recall", "recall_at"), ("P", "precision_at"))


def official_means(
    qrels: Mapping[str, Mapping[str, int]],
    run: Mapping[str, Mapping[str, float]],
    k_values: Iterable[int],
    *,
    with_mrr: bool,
    decimals: int | None = OFFICIAL_DECIMALS,
) -> dict[str, float]:
    """The means the official R2MED evaluators report: each metric summed query by query in pytrec_eval's
    order over the queries pytrec_eval evaluated (the run's queries that have qrels; a qrels query missing
    from the run is not counted), divided, then rounded to ``decimals`` (None: unrounded).

    Keys: ndcg_at_k, map_at_k, recall_at_k, precision_at_k for each k, then mrr (``recip_rank``) when asked.
    This is the other aggregation policy next to ``evaluate_run`` (MTEB's mean over every qrels query).
    """
    k_values = tuple(k_values)
    measures = {f"{family}.{','.join(map(str, k_values))}" for family, _ in _OFFICIAL_FAMILIES} | ({"recip_rank"} if with_mrr else set())
    per_query = pytrec_eval_per_query(qrels, run, measures, keep_empty=True)
    if not per_query:
        raise UserError("no query of the run has qrels: the official evaluator would divide by zero; the run is for "
                        "another task, or empty")
    names = [(f"{family}_{k}", f"{prefix}_{k}") for family, prefix in _OFFICIAL_FAMILIES for k in k_values]
    names += [("recip_rank", "mrr")] if with_mrr else []
    means: dict[str, float] = {}
    for theirs, ours in names:
        total = 0.0
        for values in per_query.values():  # summed in pytrec_eval's order, as the official loops do
            total += values[theirs]
        mean = total / len(per_query)
        means[ours] = mean if decimals is None else round(mean, decimals)
    return means
