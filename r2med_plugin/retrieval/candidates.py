"""Candidate lists: the NanoR2MED hybrid construction, list profiles, restricting a run to a list."""

from __future__ import annotations

import random
from collections.abc import Collection, Mapping, Sequence

import numpy as np

from r2med_plugin.errors import UserError
from r2med_plugin.metrics import evaluate_run_per_query
from r2med_plugin.types import Candidates, Qrels, Run

NANO_SEED = 20260524


def safeguard_pick(positives: Collection[str], *, seed: int, split: str, query_id: str) -> str:
    """The positive appended as candidate 101, exactly as NanoR2MED chose it."""
    return random.Random(f"{seed}\0{split}\0{query_id}\0positive_safeguard").choice(sorted(positives))


def build_reranking_hybrid(
    bm25: Mapping[str, Sequence[str]],
    dense: Mapping[str, Sequence[str]],
    qrels: Mapping[str, Mapping[str, int]],
    corpus_ids: Collection[str],
    *,
    split: str,
    top_k: int = 100,
    rrf_k: int = 100,
    seed: int = NANO_SEED,
) -> Candidates:
    """Rebuild NanoR2MED's reranking_hybrid lists from its bm25 and dense lists.

    score(d) = sum over the lists holding d of 1/(rrf_k + rank) (rank 1-based in the stored list; ids
    not in the corpus skipped); order by (-score, best rank in either list, doc id); keep top_k; when
    no positive made the cut, append one positive (seeded pick) as candidate top_k + 1.
    """
    corpus = corpus_ids if isinstance(corpus_ids, (set, frozenset)) else set(corpus_ids)
    hybrid: Candidates = {}
    for query_id in dict.fromkeys([*bm25, *dense]):
        score: dict[str, float] = {}
        best_rank: dict[str, int] = {}
        for ranked in (bm25.get(query_id, ()), dense.get(query_id, ())):
            for rank, doc_id in enumerate(ranked, start=1):
                if doc_id not in corpus:
                    continue
                score[doc_id] = score.get(doc_id, 0.0) + 1.0 / (rrf_k + rank)
                best_rank[doc_id] = min(best_rank.get(doc_id, rank), rank)
        ordered = sorted(score, key=lambda doc_id: (-score[doc_id], best_rank[doc_id], doc_id))[:top_k]
        positives = {doc_id for doc_id, rel in qrels.get(query_id, {}).items() if rel > 0 and doc_id in corpus}
        if positives and not positives & set(ordered):
            ordered.append(safeguard_pick(positives, seed=seed, split=split, query_id=query_id))
        hybrid[query_id] = ordered
    return hybrid


def candidates_as_run(candidates: Mapping[str, Sequence[str]], limit: int | None = None) -> Run:
    """The stored order as a run: earlier candidates score higher."""
    run: Run = {}
    for query_id, ids in candidates.items():
        kept = list(ids)[:limit] if limit is not None else list(ids)
        run[query_id] = {doc_id: float(len(kept) - position) for position, doc_id in enumerate(kept)}
    return run


def restrict_run(run: Mapping[str, Mapping[str, float]], candidates: Mapping[str, Sequence[str]], limit: int | None = None) -> Run:
    """Keep, for each query, only the run's scores of its candidates (the first ``limit`` of them)."""
    restricted: Run = {}
    for query_id, ids in candidates.items():
        ranked = run.get(query_id, {})
        allowed = list(ids)[:limit] if limit is not None else ids
        restricted[query_id] = {doc_id: ranked[doc_id] for doc_id in allowed if doc_id in ranked}
    return restricted


def safeguard_split(run: Mapping[str, Mapping[str, float]], candidates: Mapping[str, Sequence[str]], top_k: int) -> tuple[Run, Run]:
    """(with, without) the safeguard row: the run restricted to each query's whole list (candidate ``top_k + 1``,
    a positive added to the hybrid lists, included), and to its first ``top_k`` candidates."""
    return restrict_run(run, candidates), restrict_run(run, candidates, limit=top_k)


def candidate_profile(candidates: Mapping[str, Sequence[str]], qrels: Qrels, *, top_k: int | None = None) -> dict:
    """nDCG@10, hit@10 and the pooled recall@100 of the stored order, counts, coverage and safeguard rows.

    ``pooled_recall_at_100`` and ``relevant_coverage_at_100`` count positives found in the first 100 ids over
    all positives of the qrels (pooled, a micro average), ignoring any safeguard row beyond ``top_k``. It is not
    ``recall_at_100``, which everywhere else is the mean of the per-query recalls (pytrec_eval's, mteb's and
    HAKARI's evaluator's).
    """
    if not qrels:
        raise UserError("qrels is empty: a candidate profile needs positives")
    limit = top_k if top_k is not None else max((len(ids) for ids in candidates.values()), default=0)
    per_query = evaluate_run_per_query(qrels, candidates_as_run(candidates, limit), k_values=(10, 100))
    positives = {query_id: {d for d, rel in judged.items() if rel > 0} for query_id, judged in qrels.items()}
    found_at_100 = sum(len(positives[q] & set(list(ids)[: min(100, limit)])) for q, ids in candidates.items() if q in positives)
    total_positives = sum(len(p) for p in positives.values())
    counts = np.array([len(candidates[q]) for q in qrels if q in candidates], dtype=np.float64)
    beyond = {q: list(ids)[limit:] for q, ids in candidates.items() if len(ids) > limit}
    return {
        "ndcg_at_10": float(np.mean([scores["ndcg_at_10"] for scores in per_query.values()])),
        "hit_at_10": float(np.mean([scores["hit_at_10"] for scores in per_query.values()])),
        "pooled_recall_at_100": found_at_100 / total_positives,
        "candidate_count_min": int(counts.min()) if counts.size else 0,
        "candidate_count_max": int(counts.max()) if counts.size else 0,
        "candidate_count_mean": float(counts.mean()) if counts.size else 0.0,
        "query_count": int(sum(1 for q in qrels if q in candidates)),
        "query_coverage": sum(1 for q in qrels if q in candidates) / len(qrels),
        "relevant_coverage_at_100": found_at_100 / total_positives,
        "safeguard_positive_rows": sum(1 for q, extra in beyond.items() if set(extra) & positives.get(q, set())),
        "rows_with_101_candidates": sum(1 for ids in candidates.values() if len(ids) == 101),
    }
