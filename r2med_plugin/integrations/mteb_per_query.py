"""The per-query sidecar of an ``mteb run`` / ``mteb.evaluate`` result of one of our tasks (issue 24).

An mteb task computes its scores without knowing where mteb will save them: ``task_specific_scores``
gets the qrels and the run, not the ResultCache. The result folder is known only to mteb's
``_evaluate_task`` (its ``cache`` and ``model_meta``), which calls the task; so the task looks up that
caller's frame and asks the cache itself where the result goes (``cache.get_task_result_path``: the
same ``results/<model>/<revision>/`` folder, by mteb's own rule). The sidecar is written there before
mteb writes ``<Task>.json``.

When no such caller exists (``task.evaluate(...)`` called directly, ``mteb.evaluate(cache=None)``) or
mteb changes that function, nothing is written, and the per-query table stays on the task object as
``task.per_query_scores`` (a polars DataFrame) for the caller to save.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import polars as pl

from r2med_plugin.metrics import evaluate_run_per_query
from r2med_plugin.reporting.per_query import per_query_frame, per_query_path, top_ranked, write_per_query

logger = logging.getLogger(__name__)
CALLER_MODULE, CALLER_FUNCTION = "mteb.evaluate", "_evaluate_task"


def _running_evaluation() -> tuple[Any, Any] | None:
    """(cache, model_meta) of the ``mteb.evaluate`` call that runs this task, or None."""
    frame = inspect.currentframe()
    try:
        while frame is not None:
            if frame.f_code.co_name == CALLER_FUNCTION and frame.f_globals.get("__name__") == CALLER_MODULE:
                cache, meta = frame.f_locals.get("cache"), frame.f_locals.get("model_meta")
                if cache is None or meta is None or not hasattr(cache, "get_task_result_path"):
                    return None
                return cache, meta
            frame = frame.f_back
        return None
    finally:
        del frame


def mteb_result_path(task_name: str) -> Path | None:
    """Where the running ``mteb.evaluate`` will save ``task_name``'s result, or None when it saves none."""
    running = _running_evaluation()
    if running is None:
        return None
    cache, meta = running
    return Path(cache.get_task_result_path(task_name=task_name, model_name=meta))


def task_per_query(
    task_name: str, qrels: Mapping[str, Mapping[str, int]], runs: Mapping[str, Mapping[str, Mapping[str, float]]]
) -> pl.DataFrame:
    """The long per-query table of an mteb task: ``runs`` maps a metric suffix ("" for the model's own
    metrics, "_with_safeguard" ...) to the run those metrics are computed on."""
    frames = [per_query_frame(task_name, evaluate_run_per_query(qrels, run), suffix=suffix) for suffix, run in runs.items()]
    return pl.concat(frames, how="vertical")


def save_task_per_query(
    task: Any, qrels: Mapping[str, Mapping[str, int]], runs: Mapping[str, Mapping[str, Mapping[str, float]]],
    ranked_run: Mapping[str, Mapping[str, float]],
) -> pl.DataFrame:
    """Compute the per-query table, keep it on ``task.per_query_scores`` and write it beside the result that
    the running ``mteb.evaluate`` is about to save (if it saves one). Returns the table."""
    name = task.metadata.name
    frame = task_per_query(name, qrels, runs)
    task.per_query_scores = frame
    running = _running_evaluation()
    if running is None:
        logger.info("%s: no mteb result folder in this call; the per-query scores are on task.per_query_scores", name)
        return frame
    cache, meta = running
    result_path = Path(cache.get_task_result_path(task_name=name, model_name=meta))
    info = {
        "task": name,
        "model_name": str(getattr(meta, "name", "") or result_path.parent.parent.name),
        "model_revision": result_path.parent.name,
        "dataset_revision": task.metadata.dataset.get("revision"),
        "main_score": task.metadata.main_score,
        "writer": "mteb",
    }
    write_per_query(per_query_path(result_path), frame, info=info, ranked=top_ranked(qrels, ranked_run))
    return frame
