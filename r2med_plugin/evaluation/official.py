"""The scores of the official R2MED code (GitHub R2MED/R2MED, ``src/``); the files are written by
r2med_plugin.reporting.official_files.

Two layouts, one per retriever kind, each with its own metric semantics:

- **BM25** (``eval_BM25.py``): each query's documents are sorted by score with a *stable* sort (tied
  documents stay in corpus order) and the first 100 are kept; pytrec_eval then scores that run at
  1, 10, 25, 50, 100 plus ``recip_rank`` (reported as ``mrr``, so MRR is over the top 100 only).
- **Dense** (``eval_retrieval.py``, BEIR's exact search and ``EvaluateRetrieval.evaluate``): a document
  whose id equals the query id is dropped (``ignore_identical_ids=True``), the top 100 are kept (ties:
  larger document id first), and pytrec_eval scores them at 1, 3, 5, 10, 100; no MRR.

Both divide each sum by the number of queries pytrec_eval evaluated (queries of the run that have
qrels), round to 5 decimals, and write ``{"dataset_name", "evaluation_time": "<m> minutes",
"model_name", "test"}`` with ``json.dump(indent=2, sort_keys=True)`` (no trailing newline).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from r2med_plugin.errors import UserError
from r2med_plugin.metrics import official_means
from r2med_plugin.reporting.official_files import BM25_K_VALUES, DENSE_K_VALUES
from r2med_plugin.retrieval.ranking import truncate_run
from r2med_plugin.types import Run

BM25_DEPTH = 100
OFFICIAL_RERANKER_K_VALUES = (1, 10, 25, 50, 100)

# --- runs ------------------------------------------------------------------------------------------


def stable_top_k(scores: Mapping[str, float], k: int, positions: Mapping[str, int]) -> dict[str, float]:
    """The k best documents of one query, ties in corpus order (``positions``: doc id -> corpus index)."""
    ordered = sorted(scores.items(), key=lambda item: (-item[1], positions[item[0]]))
    return dict(ordered[:k])


def official_bm25_run(run: Run, corpus_ids: Sequence[str], depth: int = BM25_DEPTH) -> Run | None:
    """The official BM25 top-``depth`` run, derived from a deeper run cut in pytrec_eval order.

    Exact when, for every query, the run holds every document tied with the one at rank ``depth``
    (the whole corpus, or a last score strictly below it). Returns None otherwise: the caller then
    needs a run computed with corpus-order ties (``bm25_search(..., ties="corpus")``).
    """
    positions = {doc_id: index for index, doc_id in enumerate(corpus_ids)}
    official: Run = {}
    for query_id, ranked in run.items():
        unknown = next((doc_id for doc_id in ranked if doc_id not in positions), None)
        if unknown is not None:
            raise UserError(f"run[{query_id!r}] names document {unknown!r}, which is not in the corpus; was the run made on another corpus?")
        if len(ranked) < min(depth, len(positions)):
            return None
        kept = stable_top_k(ranked, depth, positions)
        # Documents outside a partial run score at most its last score: if that equals the score at
        # rank ``depth``, some tied documents may be missing and the corpus order cannot be replayed.
        if len(ranked) < len(positions) and min(ranked.values()) >= min(kept.values()):
            return None
        official[query_id] = kept
    return official


def drop_identical_ids(run: Run) -> Run:
    """The run without documents whose id equals the query id (BEIR's ``ignore_identical_ids``)."""
    return {query_id: {d: s for d, s in ranked.items() if d != query_id} for query_id, ranked in run.items()}


# --- metrics ---------------------------------------------------------------------------------------


def official_bm25_scores(qrels: Mapping[str, Mapping[str, int]], official_run: Run) -> dict[str, float]:
    """What ``eval_BM25.py`` reports for a run already cut to the official top 100 (see official_bm25_run)."""
    too_deep = [query_id for query_id, ranked in official_run.items() if len(ranked) > BM25_DEPTH]
    if too_deep:
        raise UserError(f"the official BM25 run keeps {BM25_DEPTH} documents per query; query {too_deep[0]!r} has more: cut it with official_bm25_run")
    return official_means(qrels, official_run, BM25_K_VALUES, with_mrr=True)


def official_dense_scores(
    qrels: Mapping[str, Mapping[str, int]], run: Run, k_values: Sequence[int] = DENSE_K_VALUES
) -> dict[str, float]:
    """What ``eval_retrieval.py`` (BEIR exact search + evaluator) reports for a dense run."""
    return official_means(qrels, official_dense_run(run, k_values), sorted(set(k_values)), with_mrr=False)


def official_dense_run(run: Run, k_values: Sequence[int] = DENSE_K_VALUES) -> Run:
    """The run ``eval_retrieval.py`` scores: identical ids dropped, each query's top ``max(k_values)`` kept."""
    return truncate_run(drop_identical_ids(run), max(k_values))


def official_reranker_scores(
    qrels: Mapping[str, Mapping[str, int]], run: Mapping[str, Mapping[str, float]], k_values=OFFICIAL_RERANKER_K_VALUES
) -> dict[str, float]:
    """What ``eval_reranker.py`` reports (unrounded; the file rounds): means over the run's queries that have
    qrels. Keys: ndcg_at_k, map_at_k, recall_at_k, precision_at_k for each k, and mrr. Unlike evaluate_run,
    a query of the qrels that is missing from the run is not counted at all."""
    ranked = {q: docs for q, docs in run.items() if docs}  # a query the first stage left empty is not evaluated
    return official_means(qrels, ranked, k_values, with_mrr=True, decimals=None)
