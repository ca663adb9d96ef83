"""The per-task JSON files the official R2MED code (GitHub R2MED/R2MED, ``src/``) writes, byte for byte.

- ``eval_BM25.py`` / ``eval_retrieval.py``: ``{"dataset_name", "evaluation_time": "<m> minutes",
  "model_name", "test"}``, the test scores in the BM25 or the dense layout, rounded to 5 decimals;
- ``eval_reranker.py``: the same plus ``topk``, ``model_name`` the reranker's short name; also the layout
  of the published ``results/reranker`` files (``reranker_name``, ``retriever_name``, ``NDCG@10`` ...).

All are written with ``json.dump(indent=2, sort_keys=True)`` and no trailing newline. How the scores
are computed is r2med_plugin.evaluation.official (and r2med_plugin.metrics.official_means).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Literal

from r2med_plugin.errors import UserError
from r2med_plugin.identifiers import OfficialLayoutName
from r2med_plugin.io import write_json_atomic
from r2med_plugin.metrics import OFFICIAL_DECIMALS
from r2med_plugin.models.official.naming import on_official_weights, profile_of_result

BM25_K_VALUES = (1, 10, 25, 50, 100)
DENSE_K_VALUES = (1, 3, 5, 10, 100)
LAYOUTS = ("bm25", "dense")
_FAMILIES = (("ndcg_cut", "ndcg_at"), ("map_cut", "map_at"), ("recall", "recall_at"), ("P", "precision_at"))
# The key names of the published results/reranker files (an earlier eval_reranker.py) for ours.
PUBLISHED_KEY_NAMES = {"ndcg_at": "NDCG@", "map_at": "MAP@", "recall_at": "Recall@", "precision_at": "P@"}
RerankerFileLayout = Literal["code", "published"]  # what src/eval_reranker.py writes, or the published files' keys

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
    """The official short name ("bm25", "bge", "nv", ...) where one exists (an official profile's results on its
    official weights: ``<weights>+official-<name>``), else ``retriever`` itself."""
    profile = profile_of_result(retriever)
    if profile is not None and on_official_weights(retriever, profile):
        return profile.name
    return OFFICIAL_MODEL_NAMES.get(retriever, retriever)


def official_minutes(seconds: float) -> str:
    """``evaluation_time`` as the official code writes it: minutes rounded to 2 decimals, as text."""
    return f"{round(float(seconds) / 60, 2)} minutes"


def official_scores(scores: Mapping[str, float], layout: OfficialLayoutName = "bm25") -> dict[str, float]:
    """The official keys of MTEB-style ``scores`` (from evaluate_run), rounded to 5 decimals.

    For result files made from MTEB results (``r2med export --submission``): the keys are the
    official ones, the values MTEB's (top-1000 MRR, zero-filled means), not a re-evaluation.
    """
    k_values = BM25_K_VALUES if layout == "bm25" else DENSE_K_VALUES
    wanted = [f"{prefix}_{k}" for _, prefix in _FAMILIES for k in k_values] + (["mrr"] if layout == "bm25" else [])
    missing = [key for key in wanted if key not in scores]
    if missing:
        raise UserError(f"scores lack {missing}; compute them with evaluate_run(..., k_values) including {k_values}")
    return {key: round(float(scores[key]), OFFICIAL_DECIMALS) for key in wanted}


def official_results(*, dataset_name: str, model_name: str, scores: Mapping[str, float], evaluation_time: float) -> dict:
    """The official payload; ``scores`` are the official test scores, ``evaluation_time`` in seconds."""
    if not dataset_name or not model_name:
        raise UserError("dataset_name and model_name must be non-empty strings")
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
    layout: OfficialLayoutName | None = None,
) -> Path:
    """Write the official R2MED result JSON atomically, byte for byte in the official format.

    ``scores`` are official scores (official_bm25_scores / official_dense_scores); with ``layout``
    ("bm25" or "dense") they are MTEB-style scores reduced to that layout's keys (official_scores).
    """
    if layout is not None:
        if layout not in LAYOUTS:
            raise UserError(f"layout must be one of {LAYOUTS}, got {layout!r}")
        scores = official_scores(scores, layout)
    payload = official_results(dataset_name=dataset_name, model_name=model_name, scores=scores, evaluation_time=evaluation_time)
    return write_json_atomic(Path(path), payload, sort_keys=True, trailing_newline=False, ensure_ascii=True)


def official_reranker_results(
    scores: Mapping[str, float],
    *,
    dataset_name: str,
    reranker: str,
    top_k: int,
    evaluation_time: float,
    retriever: str | None = None,
    layout: RerankerFileLayout = "code",
) -> dict:
    """The official reranker JSON as a dict (keys sorted, scores rounded to 5 decimals).

    ``layout="code"`` is what src/eval_reranker.py writes (model_name, ndcg_at_10 ...);
    ``layout="published"`` is the layout of the published results/reranker files (reranker_name,
    retriever_name, NDCG@10 ... MRR), for a side-by-side diff.
    """
    if not dataset_name or not reranker:
        raise UserError("dataset_name and reranker must be non-empty strings")
    minutes = round(float(evaluation_time) / 60, 2)
    test = {key: round(float(value), 5) for key, value in scores.items()}
    payload: dict = {"dataset_name": dataset_name, "evaluation_time": f"{minutes} minutes", "topk": int(top_k)}
    if layout == "code":
        payload |= {"model_name": reranker, "test": test}
    elif layout == "published":
        if not retriever:
            raise UserError("the published layout names the first stage: pass retriever=")
        payload |= {"reranker_name": reranker, "retriever_name": retriever, "test": {_published_key(k): v for k, v in test.items()}}
    else:
        raise UserError(f"layout must be 'code' or 'published', got {layout!r}")
    return _sorted_keys(payload)


def write_official_reranker_results(path: str | os.PathLike, payload: Mapping) -> Path:
    """Write the JSON as the official code does (indent 2, sorted keys, no final newline), atomically."""
    return write_json_atomic(path, payload, sort_keys=True, trailing_newline=False, ensure_ascii=True)


def published_to_ours(test: Mapping[str, float]) -> dict[str, float]:
    """Published result keys (NDCG@10, MRR, ...) renamed to ours (ndcg_at_10, mrr, ...)."""
    reverse = {theirs: ours for ours, theirs in PUBLISHED_KEY_NAMES.items()}
    renamed = {}
    for key, value in test.items():
        if key == "MRR":
            renamed["mrr"] = value
            continue
        prefix, _, k = key.partition("@")
        if f"{prefix}@" not in reverse or not k.isdigit():
            raise UserError(f"unknown published metric {key!r}")
        renamed[f"{reverse[prefix + '@']}_{k}"] = value
    return renamed


def _published_key(key: str) -> str:
    if key == "mrr":
        return "MRR"
    prefix, _, k = key.rpartition("_")
    return f"{PUBLISHED_KEY_NAMES[prefix]}{k}"


def _sorted_keys(payload: dict) -> dict:
    return {key: _sorted(payload[key]) for key in sorted(payload)}


def _sorted(value: object) -> object:
    return _sorted_keys(value) if isinstance(value, dict) else value
