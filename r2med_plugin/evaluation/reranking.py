"""The official ``eval_reranker`` mode: first stage -> cross-encoder rerank of its top k -> scores -> files.

What the official code (R2MED/R2MED ``src/eval_reranker.py``) does, and what the stages repeat:

- the first stage is a ``topk_docs`` file (the top 100 of a retriever, best first); its own scores
  (the "Before Reranker" print) are computed on the whole file;
- each query's first k documents (k = 10 or 100) are scored by the cross-encoder and only those k
  form the reranked run: nothing below rank k is evaluated;
- pytrec_eval at 1, 10, 25, 50, 100 (ndcg_cut, map_cut, recall, P) plus recip_rank, each mean taken
  over the queries pytrec_eval returns (run queries that have qrels), rounded to 5 decimals;
- the result JSON: dataset_name, model_name (the reranker's short name), topk, evaluation_time
  ("0.26 minutes") and the scores under "test", keys sorted, indented by 2.

Here the first stage is also any retriever this package runs (its top 1000, as its own result: the
reranker takes its top k, ``first_stage_*`` equals the own result's scores), a TREC run or an in-memory run. The mode is a plan like any other:
a first stage (r2med_plugin.evaluation.first_stages), a reranker (.reranker_stage), the ``Reranked`` scorer
(.scorers) and the writers (.writers). This module keeps the functions earlier releases exported.
"""

from __future__ import annotations

import os
from pathlib import Path

from r2med_plugin.evaluation.first_stages import OFFICIAL_TOPK_DOCS_DEPTH, RankedRun, as_first_stage, task_run_file
from r2med_plugin.evaluation.plan import build_plan
from r2med_plugin.evaluation.result import TaskRunResult
from r2med_plugin.evaluation.runner import execute
from r2med_plugin.evaluation.writers import write_outputs
from r2med_plugin.types import TaskData

__all__ = [
    "OFFICIAL_TOPK_DOCS_DEPTH", "evaluate_reranked", "resolve_first_stage", "run_file_for", "task_run_file",
    "write_reranked_outputs",
]


def resolve_first_stage(
    data: TaskData,
    first_stage: object,
    *,
    depth: int,
    query_prompt: str | None = None,
    name: str | None = None,
    show_progress: bool = True,
) -> RankedRun:
    """The first stage's ranked run for ``data``: a BM25 name, an encoder, a run file or folder, or a run dict."""
    stage = as_first_stage(first_stage, query_prompt=query_prompt, name=name)
    return stage.ranked(data, max(depth, OFFICIAL_TOPK_DOCS_DEPTH), show_progress=show_progress)


def run_file_for(data: TaskData, path: Path) -> Path:
    """``path`` itself, or in a folder the run file named after the task (R2MEDBiology.trec, Biology.jsonl, ...)."""
    return task_run_file(path, data.name, data.spec.hub_name)


def evaluate_reranked(
    data: TaskData,
    reranker: object,
    first_stage: object,
    *,
    depth: int = 10,
    batch_size: int = 32,
    query_prompt: str | None = None,
    first_stage_name: str | None = None,
    show_progress: bool = True,
    started: float | None = None,
) -> TaskRunResult:
    """Rerank the top ``depth`` of ``first_stage`` on ``data`` with ``reranker`` (a plan run on loaded data)."""
    plan = build_plan(data.name, rerank=reranker, first_stage=first_stage, rerank_depth=depth, rerank_batch_size=batch_size,
                      query_prompt=query_prompt, first_stage_name=first_stage_name, show_progress=show_progress)
    return execute(plan, data=data)


def write_reranked_outputs(result: TaskRunResult, output_dir: str | os.PathLike, *, trec: bool = False) -> dict[str, Path]:
    """MTEB-format result (reranked and first_stage_* scores), the official reranker JSON, optionally TREC runs."""
    return write_outputs(result, output_dir, trec=trec)
