"""Reranking a first-stage run with a cross-encoder, as the official ``eval_reranker`` does.

For each query of the first stage, the first ``depth`` documents (in the first stage's order) are
paired with the query, scored by the cross-encoder, and the query's reranked run holds exactly those
documents with the cross-encoder's scores. Documents below the depth are dropped, so only the
reranked top-k is evaluated. What a cross-encoder is, and how its scores are read (raw logits, as the
official code takes them): r2med_plugin.models.cross_encoder.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
from tqdm.auto import tqdm

from r2med_plugin.errors import UserError
from r2med_plugin.models import cross_encoder
from r2med_plugin.quiet import bar_disabled
from r2med_plugin.types import Run


def top_document_ids(run: Mapping[str, Mapping[str, float]], depth: int) -> dict[str, list[str]]:
    """Each query's first ``depth`` document ids, in the run's own (ranking) order."""
    check_depth(depth)
    return {query_id: list(ranked)[:depth] for query_id, ranked in run.items() if ranked}


def rerank_run(
    first_stage: Mapping[str, Mapping[str, float]],
    queries: Mapping[str, str],
    documents: Mapping[str, str],
    model: object,
    *,
    depth: int,
    batch_size: int = 32,
    show_progress: bool = True,
) -> Run:
    """Rerank each query's top ``depth`` documents of ``first_stage`` (dict order = ranking) with ``model``.

    The result holds, per query, exactly those documents, with the cross-encoder's scores.
    """
    check_depth(depth)
    if batch_size < 1:
        raise UserError(f"batch_size must be positive, got {batch_size}")
    scorer, query_prefix, document_prefix = cross_encoder.as_pair_scorer(model)
    lists = top_document_ids(first_stage, depth)
    missing = [query_id for query_id in lists if query_id not in queries]
    if missing:
        raise UserError(f"no text for query {missing[0]!r} ({len(missing)} such queries in the first stage)")
    pairs = [(query_id, doc_id) for query_id, doc_ids in lists.items() for doc_id in doc_ids]
    unknown = [doc_id for _, doc_id in pairs if doc_id not in documents]
    if unknown:
        raise UserError(f"no text for document {unknown[0]!r} ({len(unknown)} such documents in the first stage)")
    texts = [(query_prefix + queries[q], document_prefix + documents[d]) for q, d in pairs]
    # each distinct (query, passage) text is scored once: a passage repeated under another id (the real corpora
    # hold thousands) costs nothing more and scores exactly the same, whatever batch padding it would have met
    distinct = list(dict.fromkeys(texts))
    distinct_scores = _score_pairs(scorer, distinct, batch_size, show_progress).tolist()
    score_of = dict(zip(distinct, distinct_scores, strict=True))
    scores = [score_of[text] for text in texts]
    reranked: Run = {query_id: {} for query_id in lists}
    for (query_id, doc_id), score in zip(pairs, scores, strict=True):
        reranked[query_id][doc_id] = score
    return {query_id: dict(sorted(ranked.items(), key=lambda item: item[1], reverse=True)) for query_id, ranked in reranked.items()}


def _score_pairs(scorer: object, texts: list[tuple[str, str]], batch_size: int, show_progress: bool) -> np.ndarray:
    chunks = []
    with tqdm(total=len(texts), desc="Reranking", unit="pair", disable=bar_disabled(show_progress)) as bar:
        for start in range(0, len(texts), batch_size):
            chunk = texts[start : start + batch_size]
            chunks.append(cross_encoder.pair_scores(scorer, chunk, batch_size))
            bar.update(len(chunk))
    return np.concatenate(chunks) if chunks else np.zeros(0, dtype=np.float64)


def check_depth(depth: object) -> None:
    if isinstance(depth, bool) or not isinstance(depth, (int, np.integer)) or depth < 1:
        raise UserError(f"the rerank depth must be a positive integer (the official code uses 10 or 100), got {depth!r}")
