"""A results folder for the leaderboard page's tests: R2MED and NanoR2MED rows of every kind the page filters on.

Written as `r2med evaluate --output` files look (ResultCache layout, model_meta.json, per-query sidecars), from
seeded per-query nDCG@10 values, so that no model or data is needed: each result's mean is its per-query mean.

- R2MED: bm25-lucene; a copy of it under another name (ties with it); org/dense-a and org/dense-b (lower); a hyde
  expansion row; a cross-encoder over bm25-lucene (reranked); an incomplete row; all but the incomplete one with
  per-query files.
- NanoR2MED: bm25-robertson and org/dense-a, with the hybrid and candidate columns.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from r2med_plugin.catalog import list_tasks
from r2med_plugin.reporting.per_query import per_query_frame, per_query_path, write_per_query
from tests.support.builders import write_result

QUERIES = 12
R2MED_MODELS = {  # name -> skill: the mean level of its per-query scores
    "bm25-lucene": 0.55,
    "bm25-twin": 0.55,  # the same per-query scores as bm25-lucene
    "org/dense-a": 0.35,
    "org/dense-b": 0.15,
    "hyde/o3-mini+bm25-lucene": 0.62,
    "cross/encoder|bm25-lucene|top_100": 0.45,
}
INCOMPLETE = "org/incomplete"
NANO_MODELS = {"bm25-robertson": 0.5, "org/dense-a": 0.3}
NANO_EXTRAS = ("hybrid_ndcg_at_10", "candidates_bm25_ndcg_at_10", "candidates_dense_ndcg_at_10",
               "candidates_hybrid_ndcg_at_10_with_safeguard")


def _values(model: str, task: str, skill: float) -> dict[str, float]:
    seed_name = "bm25-lucene" if model == "bm25-twin" else model
    rng = np.random.default_rng(_seed(seed_name, task))
    return {f"{task.lower()}-q{i:02d}": float(np.clip(skill + rng.normal(0, 0.2), 0.0, 1.0)) for i in range(QUERIES)}


def _seed(model: str, task: str) -> int:
    return sum((index + 1) * ord(char) for index, char in enumerate(f"{model}/{task}"))


def _write(root: Path, model: str, task: str, scores: dict[str, float], dataset_revision: str,
           per_query: dict[str, float] | None = None) -> Path:
    row = {**scores, "main_score": scores["ndcg_at_10"], "hf_subset": "default", "languages": ["eng-Latn"]}
    path = write_result(root, model, task, row, dataset_revision, r2med_provenance={"dataset_revision": dataset_revision})
    if per_query is not None:
        frame = per_query_frame(task, {query: {"ndcg_at_10": value} for query, value in per_query.items()})
        write_per_query(per_query_path(path), frame)
    return path


def build_results(root: Path) -> Path:
    """``root/results`` with the rows above; returns that folder."""
    for spec in list_tasks("r2med"):
        for model, skill in R2MED_MODELS.items():
            values = _values(model, spec.name, skill)
            _write(root, model, spec.name, {"ndcg_at_10": float(np.mean(list(values.values())))}, spec.revision, values)
    for spec in list_tasks("r2med")[:5]:
        _write(root, INCOMPLETE, spec.name, {"ndcg_at_10": 0.9}, spec.revision)
    for number, spec in enumerate(list_tasks("nano")):
        for model, skill in NANO_MODELS.items():
            values = _values(model, spec.name, skill)
            mean = float(np.mean(list(values.values())))
            extras = {key: round(mean + 0.01 * (offset + 1) + 0.001 * number, 6) for offset, key in enumerate(NANO_EXTRAS)}
            _write(root, model, spec.name, {"ndcg_at_10": mean, **extras}, "nano-commit", values)
    return root / "results"
