"""Scorers: what turns a run into reported numbers. Each reads the run (and the task) and returns scores;
the runner merges them in the plan's order (the order of the keys in the result file).

- :class:`FullCorpus`: MTEB-style metrics of the top ``top_k`` (metrics deeper than the run left out);
- :class:`Hybrid`: ``hybrid_*``, RRF of the run with a BM25 partner;
- :class:`CandidateSubsets`: ``candidates_<subset>_*``, the run restricted to each stored candidate list;
- :class:`OfficialLayout`: the official R2MED file's scores (BM25 or dense layout);
- :class:`Reranked`: a reranked run's metrics, its first stage's (``first_stage_*``) and the official reranker scores.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol

from r2med_plugin.evaluation.extras import candidate_scores, hybrid_scores
from r2med_plugin.evaluation.first_stages import BM25_RETRIEVERS, Bm25
from r2med_plugin.evaluation.official import (
    BM25_DEPTH,
    DENSE_K_VALUES,
    official_bm25_run,
    official_bm25_scores,
    official_dense_run,
    official_dense_scores,
    official_reranker_scores,
)
from r2med_plugin.metrics import Metric, evaluate_run
from r2med_plugin.retrieval.bm25_cache import bm25_run
from r2med_plugin.retrieval.ranking import truncate_run
from r2med_plugin.types import Run, TaskData

logger = logging.getLogger(__name__)
FIRST_STAGE_PREFIX = "first_stage_"


@dataclass(frozen=True)
class Scores:
    metrics: dict[str, float] = field(default_factory=dict)
    official: dict[str, float] | None = None  # the official file's scores, when the scorer makes them
    layout: str | None = None  # their layout: "bm25", "dense" or "reranker"
    official_run: Run | None = None  # the run the official scores were computed on


@dataclass(frozen=True)
class Retrieved:
    """What scorers read: the task, the first stage's run (deep enough for every scorer), and the run's depth
    (the reranker mode: the first stage's run and depth as ``first_stage_*`` scores them)."""

    data: TaskData
    run: Run
    top_k: int
    show_progress: bool = True
    reranked: Run | None = None  # the reranker mode: the reranked top k (``run`` is then the first stage's)
    rerank_depth: int = 0


class Scorer(Protocol):
    def score(self, retrieved: Retrieved) -> Scores: ...


def within_depth(scores: Mapping[str, float], top_k: int) -> dict[str, float]:
    """Drop metrics at cutoffs deeper than the run (with top_k=100, "recall_at_1000" would equal recall_at_100),
    by each metric's own cutoff (``Metric.parse``: ``*_at_1000_with_safeguard`` too)."""
    kept = {}
    for key, value in scores.items():
        metric = Metric.parse(key)
        if metric is None or metric.cutoff is None or metric.cutoff <= top_k:
            kept[key] = value
    return kept


@dataclass(frozen=True)
class FullCorpus:
    top_k: int

    def score(self, retrieved: Retrieved) -> Scores:
        data = retrieved.data
        return Scores(within_depth(evaluate_run(data.qrels, truncate_run(retrieved.run, self.top_k)), self.top_k))


@dataclass(frozen=True)
class Hybrid:
    partner: str  # the BM25 fused with the run: the task's own (request.hybrid_partner)
    top_k: int
    workers: int | None = None  # the partner's corpus analysis processes (never changes a score)

    def score(self, retrieved: Retrieved) -> Scores:
        data = retrieved.data
        bm25 = bm25_run(data, BM25_RETRIEVERS[self.partner], show_progress=retrieved.show_progress, workers=self.workers)
        return Scores(hybrid_scores(data, truncate_run(retrieved.run, self.top_k), bm25))


@dataclass(frozen=True)
class CandidateSubsets:
    subsets: tuple[str, ...]

    def score(self, retrieved: Retrieved) -> Scores:
        return Scores(candidate_scores(retrieved.data, retrieved.run, list(self.subsets)))


@dataclass(frozen=True)
class OfficialLayout:
    """The official R2MED scores of the full-corpus run: BM25 layout for BM25, dense layout for encoders."""

    bm25: Bm25 | None = None  # the BM25 first stage (it ranks again when a tie at rank 100 reaches past the run)

    def score(self, retrieved: Retrieved) -> Scores:
        data, run = retrieved.data, retrieved.run
        if self.bm25 is None:
            depth = min(max(DENSE_K_VALUES), data.corpus.height - 1)
            if any(len(ranked) < depth for ranked in run.values()):
                logger.warning("%s: the run is shallower than %d documents: no official R2MED file (raise --top-k)", data.name, depth)
                return Scores()
            return Scores(official=official_dense_scores(data.qrels, run), layout="dense", official_run=official_dense_run(run))
        official_run = official_bm25_run(run, data.corpus["id"].to_list(), BM25_DEPTH)
        if official_run is None:  # a tie at rank 100 reaches past the run's depth: rank again with corpus-order ties
            official_run = self.bm25.search(data, BM25_DEPTH, show_progress=retrieved.show_progress, ties="corpus")
        return Scores(official=official_bm25_scores(data.qrels, official_run), layout="bm25", official_run=official_run)


@dataclass(frozen=True)
class Reranked:
    """The reranker mode's numbers: nothing deeper than what was ranked (recall_at_1000 of a top-10 rerank
    would repeat recall_at_10), the first stage's own, and the official reranker means."""

    def score(self, retrieved: Retrieved) -> Scores:
        data, first, reranked = retrieved.data, retrieved.run, retrieved.reranked
        if reranked is None:
            raise ValueError("Reranked scores a reranked run: give Retrieved(..., reranked=run)")
        scores = within_depth(evaluate_run(data.qrels, reranked), max(retrieved.rerank_depth, 1))
        first_scores = within_depth(evaluate_run(data.qrels, first), retrieved.top_k)
        scores |= {FIRST_STAGE_PREFIX + key: value for key, value in first_scores.items()}
        return Scores(scores, official=official_reranker_scores(data.qrels, reranked), layout="reranker")


def merged(scorers: tuple[Scorer, ...], retrieved: Retrieved) -> Scores:
    """Every scorer's metrics, in order; the official scores of the one scorer that makes them."""
    metrics: dict[str, float] = {}
    official = Scores()
    for scorer in scorers:
        scores = scorer.score(retrieved)
        metrics |= scores.metrics
        if scores.official is not None:
            official = scores
    return Scores(metrics, official.official, official.layout, official.official_run)


__all__ = ["CandidateSubsets", "FullCorpus", "Hybrid", "OfficialLayout", "Reranked", "Retrieved", "Scorer", "Scores",
           "merged", "within_depth"]
