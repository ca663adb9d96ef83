"""Turning score matrices into runs, with pytrec_eval's tie order (score desc, then doc id desc)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import polars as pl

from r2med_plugin.errors import UserError
from r2med_plugin.types import Run


def descending_id_rank(doc_ids: Sequence[str]) -> np.ndarray:
    """For each document, its position when ids are sorted descending (0 = largest id)."""
    return pl.Series(doc_ids, dtype=pl.Utf8).rank("ordinal", descending=True).to_numpy().astype(np.int64) - 1


def top_k_indices(scores: np.ndarray, tie_rank: np.ndarray, k: int) -> np.ndarray:
    """Indices of the k best entries of one score row, best first, ties by ``tie_rank`` ascending."""
    n = scores.shape[0]
    if k < n:
        threshold = np.partition(scores, n - k)[n - k]
        candidates = np.flatnonzero(scores >= threshold)
    else:
        candidates = np.arange(n)
    order = np.lexsort((tie_rank[candidates], -scores[candidates]))[:k]
    return candidates[order]


TIE_ORDERS = ("doc_id", "corpus")


def top_k_run(query_ids: Sequence[str], doc_ids: Sequence[str], scores: np.ndarray, top_k: int, ties: str = "doc_id") -> Run:
    """Run of the top_k documents per query from a queries x documents score matrix.

    ``ties="doc_id"``: pytrec_eval's order (larger id first); ``ties="corpus"``: corpus order, as the
    official R2MED BM25 code's stable sort keeps them.
    """
    if scores.shape != (len(query_ids), len(doc_ids)):
        raise ValueError(f"scores has shape {scores.shape}, expected ({len(query_ids)}, {len(doc_ids)})")
    if np.isnan(scores).any():
        raise ValueError("the score matrix contains NaN; the retriever that produced it is broken")
    if ties not in TIE_ORDERS:
        raise UserError(f"ties must be one of {TIE_ORDERS}, got {ties!r}")
    tie_rank = descending_id_rank(doc_ids) if ties == "doc_id" else np.arange(len(doc_ids), dtype=np.int64)
    ids = np.asarray(doc_ids, dtype=object)
    k = min(top_k, len(doc_ids))
    run: Run = {}
    for row, query_id in enumerate(query_ids):
        chosen = top_k_indices(scores[row], tie_rank, k)
        run[query_id] = dict(zip(ids[chosen].tolist(), scores[row, chosen].astype(np.float64).tolist(), strict=True))
    return run


def truncate_run(run: Run, top_k: int) -> Run:
    """Each query's top_k documents in pytrec_eval order (score desc, doc id desc); shorter lists kept whole."""
    truncated: Run = {}
    for query_id, ranked in run.items():
        if len(ranked) <= top_k:
            truncated[query_id] = dict(ranked)
            continue
        ids = list(ranked)
        scores = np.fromiter(ranked.values(), dtype=np.float64, count=len(ids))
        threshold = np.partition(scores, len(ids) - top_k)[len(ids) - top_k]
        above = np.flatnonzero(scores > threshold)
        tied = sorted((ids[i] for i in np.flatnonzero(scores == threshold)), reverse=True)[: top_k - len(above)]
        kept = [ids[i] for i in above] + tied
        truncated[query_id] = {doc_id: ranked[doc_id] for doc_id in kept}
    return truncated


def head_of_run(run: Run, top_k: int) -> Run:
    """Each query's first top_k documents in the run's own order (a bm25-hakari run: bm25s's ranking, ties included)."""
    return {query_id: dict(list(ranked.items())[:top_k]) for query_id, ranked in run.items()}
