"""Run fusion: reciprocal rank fusion and weighted min-max score fusion. Pure functions."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import polars as pl

from r2med_plugin.errors import UserError
from r2med_plugin.types import Run

_SCHEMA = {"query_id": pl.Utf8, "doc_id": pl.Utf8, "score": pl.Float64}


def run_to_frame(run: Mapping[str, Mapping[str, float]]) -> pl.DataFrame:
    """Long form (query_id, doc_id, score) of a run."""
    if not isinstance(run, Mapping):
        raise TypeError(f"a run must be a dict query id -> {{doc id: score}}, got {type(run).__name__}")
    query_ids = [query_id for query_id, ranked in run.items() for _ in range(len(ranked))]
    doc_ids = [doc_id for ranked in run.values() for doc_id in ranked]
    scores = [float(score) for ranked in run.values() for score in ranked.values()]
    return pl.DataFrame({"query_id": query_ids, "doc_id": doc_ids, "score": scores}, schema=_SCHEMA)


def frame_to_run(frame: pl.DataFrame, top_k: int | None = None) -> Run:
    """A run from (query_id, doc_id, score), each query's documents in pytrec_eval order, cut at top_k."""
    ordered = frame.sort(["query_id", "score", "doc_id"], descending=[False, True, True])
    if top_k is not None:
        ordered = ordered.filter(pl.int_range(pl.len()).over("query_id") < top_k)
    run: Run = {}
    for query_id, doc_ids, scores in ordered.group_by("query_id", maintain_order=True).agg("doc_id", "score").iter_rows():
        run[query_id] = dict(zip(doc_ids, scores, strict=True))
    return run


def with_ranks(frame: pl.DataFrame) -> pl.DataFrame:
    """Adds the 1-based rank of each document in its query, in pytrec_eval order (score desc, id desc)."""
    return frame.sort(["query_id", "score", "doc_id"], descending=[False, True, True]).with_columns(
        rank=pl.int_range(1, pl.len() + 1).over("query_id")
    )


def rrf(runs: Sequence[Mapping[str, Mapping[str, float]]], k: int = 60, top_k: int | None = None) -> Run:
    """Reciprocal rank fusion: score(d) = sum over the runs ranking d of 1 / (k + rank), rank 1-based."""
    _check_runs(runs)
    if k < 0:
        raise UserError(f"k must be >= 0, got {k}")
    parts = [with_ranks(run_to_frame(run)).select("query_id", "doc_id", (1.0 / (k + pl.col("rank"))).alias("score")) for run in runs]
    fused = pl.concat(parts).group_by(["query_id", "doc_id"]).agg(pl.col("score").sort().sum())  # sorted: the sum is the same in any run order
    return frame_to_run(fused, top_k)


def score_fusion(
    runs: Sequence[Mapping[str, Mapping[str, float]]], weights: Sequence[float] | None = None, top_k: int | None = None
) -> Run:
    """Weighted sum of per-query min-max normalised scores; a document absent from a run adds 0 for it.

    A query whose scores in a run are all equal gets 1.0 for each of its documents in that run.
    """
    _check_runs(runs)
    weights = [1.0] * len(runs) if weights is None else list(weights)
    if len(weights) != len(runs):
        raise ValueError(f"got {len(weights)} weights for {len(runs)} runs")
    parts = []
    for run, weight in zip(runs, weights, strict=True):
        frame = run_to_frame(run)
        low, high = pl.col("score").min().over("query_id"), pl.col("score").max().over("query_id")
        normalised = pl.when(high > low).then((pl.col("score") - low) / (high - low)).otherwise(1.0)
        parts.append(frame.select("query_id", "doc_id", (normalised * weight).alias("score")))
    fused = pl.concat(parts).group_by(["query_id", "doc_id"]).agg(pl.col("score").sort().sum())  # sorted: the sum is the same in any run order
    return frame_to_run(fused, top_k)


def _check_runs(runs: Sequence[Mapping[str, Mapping[str, float]]]) -> None:
    if isinstance(runs, Mapping) or not isinstance(runs, Sequence) or len(runs) == 0:
        raise TypeError("runs must be a non-empty list of runs (dicts query id -> {doc id: score})")
