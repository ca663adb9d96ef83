"""What one evaluation produces: scores, the run, and where they came from (before any file is written)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from r2med_plugin.types import Run, TaskData


@dataclass(frozen=True)
class RerankInfo:
    reranker: str
    first_stage: str
    depth: int
    official_scores: dict[str, float]  # unrounded official means (see official_reranker_scores)
    first_stage_run: Run
    reranker_revision: str = ""
    first_stage_revision: str = ""
    usage: Mapping[str, Any] | None = None  # an LLM reranker's rerank_usage (requests, tokens, wall time)
    traces: list[dict[str, object]] | None = None  # an LLM reranker's traces (written beside the result)
    traces_name: str = "reasoning"  # their file: <Task>.<traces_name>.jsonl


@dataclass(frozen=True)
class TaskRunResult:
    task: str
    retriever: str
    expansion: str | None
    model_revision: str
    dataset_revision: str
    scores: dict[str, float]
    main_score: str
    run: Run
    evaluation_time: float
    data: TaskData
    rerank: RerankInfo | None = None  # set in the reranker mode (evaluate_task(..., rerank=...))
    official: dict[str, float] | None = None  # the official R2MED scores (layout official_layout)
    official_layout: str | None = None  # "bm25" or "dense"
    query_prompt: str | None = None  # the prompt the encoder got for queries (None: none; BM25: always None)
    dataset_revision_verified: bool = True  # False: a local mirror that does not prove its commit
    candidates_only: bool = False
    hybrid_with: str | None = None  # the BM25 fused with the model's run for hybrid_* (None: no hybrid)
    official_run: Run | None = None  # the run the official scores were computed on (for the per-query sidecar)
    hakari: dict | None = None  # NanoR2MED: what HAKARI-Bench's result file needs (evaluation/hakari_record.py)
    request: dict | None = None  # the request that produced it (EvaluationRequest.recorded); None: given as Python objects
    instructions: dict[str, str | None] | None = None  # what an encoder applying its own instructions used (official profiles)
    device: str | None = None  # where a model the package loaded ran ("cpu", "cuda:0", "cpu,cpu"); None: no such model
