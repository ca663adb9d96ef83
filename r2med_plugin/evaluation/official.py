"""The per-task JSON file the official R2MED evaluator writes."""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Mapping
from pathlib import Path

OFFICIAL_K_VALUES = (1, 10, 25, 50, 100)
OFFICIAL_FAMILIES = ("ndcg_at", "map_at", "recall_at", "precision_at")
OFFICIAL_DECIMALS = 5


def official_scores(scores: Mapping[str, float]) -> dict[str, float]:
    """The official subset of ``scores`` (from evaluate_run), rounded to 5 decimals."""
    wanted = [f"{family}_{k}" for family in OFFICIAL_FAMILIES for k in OFFICIAL_K_VALUES] + ["mrr"]
    missing = [key for key in wanted if key not in scores]
    if missing:
        raise ValueError(
            f"scores lack {missing}; compute them with evaluate_run(..., k_values) including {OFFICIAL_K_VALUES}"
        )
    return {key: round(float(scores[key]), OFFICIAL_DECIMALS) for key in wanted}


def official_results(
    *, dataset_name: str, model_name: str, scores: Mapping[str, float], evaluation_time: float
) -> dict:
    if not dataset_name or not model_name:
        raise ValueError("dataset_name and model_name must be non-empty strings")
    return {
        "dataset_name": dataset_name,
        "model_name": model_name,
        "evaluation_time": round(float(evaluation_time), 2),
        "test": official_scores(scores),
    }


def write_official_results(
    path: str | os.PathLike,
    *,
    dataset_name: str,
    model_name: str,
    scores: Mapping[str, float],
    evaluation_time: float,
) -> Path:
    """Write the official R2MED result JSON atomically (a reader never sees half a file)."""
    payload = official_results(
        dataset_name=dataset_name, model_name=model_name, scores=scores, evaluation_time=evaluation_time
    )
    return write_json_atomic(Path(path), payload)


def write_json_atomic(target: Path, payload: object) -> Path:
    target.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as stream:
            json.dump(payload, stream, indent=2, ensure_ascii=False)
            stream.write("\n")
        os.replace(temporary, target)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    return target
