"""The per-query sidecar of an ``mteb run`` / ``mteb.evaluate`` result of one of our tasks.

An mteb task computes its scores without knowing where mteb will save them: ``task_specific_scores``
gets the qrels and the run, not the ResultCache. The result folder is known only to the running
``mteb.evaluate`` call (its ResultCache and ModelMeta, found by r2med_plugin.integrations.compat behind its
mteb version gate); the task asks that cache where the result goes (``cache.get_task_result_path``: the
same ``results/<model>/<revision>/`` folder, by mteb's own rule). The sidecar is written there before
mteb writes ``<Task>.json``.

When no such call exists (``task.evaluate(...)`` called directly, ``mteb.evaluate(cache=None)``) or the
installed mteb is not a supported one, nothing is written, and the per-query table stays on the task
object as ``task.per_query_scores`` (a polars DataFrame) for the caller to save.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import polars as pl

from r2med_plugin.integrations.compat import mteb_running_evaluation
from r2med_plugin.metrics import evaluate_run_per_query
from r2med_plugin.reporting.per_query import per_query_frame, per_query_path, top_ranked, write_per_query

logger = logging.getLogger(__name__)


def _running_result(task_name: str) -> tuple[Path, Any] | None:
    """(result path, ModelMeta) of the running ``mteb.evaluate`` call for ``task_name``, or None."""
    running = mteb_running_evaluation()
    if running is None:
        return None
    cache, meta = running
    return Path(cache.get_task_result_path(task_name=task_name, model_name=meta)), meta


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
    running = _running_result(name)
    if running is None:
        logger.info("%s: no mteb result folder in this call; the per-query scores are on task.per_query_scores", name)
        return frame
    result_path, meta = running
    info = {
        "task": name,
        "model_name": str(getattr(meta, "name", "") or result_path.parent.parent.name),
        "model_revision": result_path.parent.name,
        "dataset_revision": task.metadata.dataset.get("revision"),
        **({"paired_data": task.task_data.judged_data} if getattr(task, "task_data", None) is not None else {}),
        "main_score": task.metadata.main_score,
        "writer": "mteb",
    }
    write_per_query(per_query_path(result_path), frame, info=info, ranked=top_ranked(qrels, ranked_run))
    return frame
