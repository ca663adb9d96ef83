"""The per-task JSON files the official R2MED code (GitHub R2MED/R2MED, ``src/``) writes.

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

import os
from collections.abc import Mapping, Sequence
from pathlib import Path

from r2med_plugin.io import write_json_atomic
from r2med_plugin.metrics import OFFICIAL_DECIMALS, official_means
from r2med_plugin.retrieval.ranking import truncate_run
from r2med_plugin.types import Run

BM25_K_VALUES = (1, 10, 25, 50, 100)
BM25_DEPTH = 100
DENSE_K_VALUES = (1, 3, 5, 10, 100)
OFFICIAL_K_VALUES = BM25_K_VALUES  # kept for callers of the first release
LAYOUTS = ("bm25", "dense")
_FAMILIES = (("ndcg_cut", "ndcg_at"), ("map_cut", "map_at"), ("recall", "recall_at"), ("P", "precision_at"))

# The official code's short retriever names (src/run.py --retriever_name), by the model each one loads
# (src/eval_retrieval.py model_path_dict). Results are filed under these names.
OFFICIAL_MODEL_NAMES = {
    "bm25-lucene": "bm25",
    "facebook/contriever-msmarco": "contriever",
    "ncbi/MedCPT-Query-Encoder": "medcpt",
    "hkunlp/instructor-large": "inst-l",
    "hkunlp/instructor-xl": "inst-xl",
    "BMRetriever/BMRetriever-410M": "bmr-410m",
    "BMRetriever/BMRetriever-2B": "bmr-2b",
    "BMRetriever/BMRetriever-7B": "bmr-7b",
    "BAAI/bge-large-en-v1.5": "bge",
    "intfloat/e5-mistral-7b-instruct": "e5",
    "GritLM/GritLM-7B": "grit",
    "Salesforce/SFR-Embedding-Mistral": "sfr",
    "nvidia/NV-Embed-v2": "nv",
    "text-embedding-3-large": "openai",
    "voyage-3": "voyage",
}


def official_model_name(retriever: str) -> str:
    """The official short name ("bm25", "bge", "nv", ...) where one exists, else ``retriever`` itself."""
    return OFFICIAL_MODEL_NAMES.get(retriever, retriever)


def official_minutes(seconds: float) -> str:
    """``evaluation_time`` as the official code writes it: minutes rounded to 2 decimals, as text."""
    return f"{round(float(seconds) / 60, 2)} minutes"


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
            raise ValueError(f"run[{query_id!r}] names document {unknown!r}, which is not in the corpus; was the run made on another corpus?")
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
        raise ValueError(f"the official BM25 run keeps {BM25_DEPTH} documents per query; query {too_deep[0]!r} has more: cut it with official_bm25_run")
    return official_means(qrels, official_run, BM25_K_VALUES, with_mrr=True)


def official_dense_scores(
    qrels: Mapping[str, Mapping[str, int]], run: Run, k_values: Sequence[int] = DENSE_K_VALUES
) -> dict[str, float]:
    """What ``eval_retrieval.py`` (BEIR exact search + evaluator) reports for a dense run."""
    kept = truncate_run(drop_identical_ids(run), max(k_values))
    return official_means(qrels, kept, sorted(set(k_values)), with_mrr=False)


def official_scores(scores: Mapping[str, float], layout: str = "bm25") -> dict[str, float]:
    """The official keys of MTEB-style ``scores`` (from evaluate_run), rounded to 5 decimals.

    For result files made from MTEB results (``r2med export --submission``): the keys are the
    official ones, the values MTEB's (top-1000 MRR, zero-filled means), not a re-evaluation.
    """
    k_values = BM25_K_VALUES if layout == "bm25" else DENSE_K_VALUES
    wanted = [f"{prefix}_{k}" for _, prefix in _FAMILIES for k in k_values] + (["mrr"] if layout == "bm25" else [])
    missing = [key for key in wanted if key not in scores]
    if missing:
        raise ValueError(f"scores lack {missing}; compute them with evaluate_run(..., k_values) including {k_values}")
    return {key: round(float(scores[key]), OFFICIAL_DECIMALS) for key in wanted}


# --- files -----------------------------------------------------------------------------------------


def official_results(*, dataset_name: str, model_name: str, scores: Mapping[str, float], evaluation_time: float) -> dict:
    """The official payload; ``scores`` are the official test scores, ``evaluation_time`` in seconds."""
    if not dataset_name or not model_name:
        raise ValueError("dataset_name and model_name must be non-empty strings")
    return {
        "dataset_name": dataset_name,
        "evaluation_time": official_minutes(evaluation_time),
        "model_name": model_name,
        "test": dict(scores),
    }


def write_official_results(
    path: str | os.PathLike,
    *,
    dataset_name: str,
    model_name: str,
    scores: Mapping[str, float],
    evaluation_time: float,
    layout: str | None = None,
) -> Path:
    """Write the official R2MED result JSON atomically, byte for byte in the official format.

    ``scores`` are official scores (official_bm25_scores / official_dense_scores); with ``layout``
    ("bm25" or "dense") they are MTEB-style scores reduced to that layout's keys (official_scores).
    """
    if layout is not None:
        if layout not in LAYOUTS:
            raise ValueError(f"layout must be one of {LAYOUTS}, got {layout!r}")
        scores = official_scores(scores, layout)
    payload = official_results(dataset_name=dataset_name, model_name=model_name, scores=scores, evaluation_time=evaluation_time)
    return write_json_atomic(Path(path), payload, sort_keys=True, trailing_newline=False, ensure_ascii=True)
