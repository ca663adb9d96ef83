"""R2MED and NanoR2MED for MTEB and ir_datasets.

Re-exports only. Attributes are imported on first use so that ``import r2med_plugin`` stays fast
and never imports torch, mteb or ir_datasets.
"""

from __future__ import annotations

from importlib import import_module

from r2med_plugin.version import __version__  # noqa: F401 - re-exported

_EXPORTS = {
    "list_tasks": "r2med_plugin.catalog",
    "get_task_spec": "r2med_plugin.catalog",
    "list_benchmarks": "r2med_plugin.catalog",
    "load_task": "r2med_plugin.data.loader",
    "evaluate_run": "r2med_plugin.metrics",
    "evaluate_run_per_query": "r2med_plugin.metrics",
    "write_official_results": "r2med_plugin.reporting.official_files",
    "evaluate_task": "r2med_plugin.evaluation.runner",
    "execute": "r2med_plugin.evaluation.runner",
    "write_outputs": "r2med_plugin.evaluation.writers",
    "TaskRunResult": "r2med_plugin.evaluation.result",
    "EvaluationRequest": "r2med_plugin.evaluation.request",
    "Scoring": "r2med_plugin.evaluation.request",
    "Outputs": "r2med_plugin.evaluation.request",
    "TaskArguments": "r2med_plugin.evaluation.request",
    "RequestError": "r2med_plugin.rules",
    "Bm25Spec": "r2med_plugin.evaluation.specs",
    "ModelSpec": "r2med_plugin.evaluation.specs",
    "RunFileSpec": "r2med_plugin.evaluation.specs",
    "CrossEncoderSpec": "r2med_plugin.evaluation.specs",
    "LlmRerankerSpec": "r2med_plugin.evaluation.specs",
    "PrebuiltFirstStage": "r2med_plugin.evaluation.specs",
    "Endpoint": "r2med_plugin.llm.config",
    "Reranker": "r2med_plugin.models.protocols",
    "generate_expansions": "r2med_plugin.generation",
    "score_candidate_lists": "r2med_plugin.evaluation.runner",
    "read_run_file": "r2med_plugin.data.runs",
    "write_topk_docs": "r2med_plugin.data.runs",
    "rerank_run": "r2med_plugin.retrieval.rerank",
    "SentenceTransformerCrossEncoder": "r2med_plugin.models.cross_encoder",
    "analyze": "r2med_plugin.retrieval.analyzer",
    "bm25_search": "r2med_plugin.retrieval.bm25",
    "dense_search": "r2med_plugin.retrieval.dense",
    "Encoder": "r2med_plugin.models.protocols",
    "SentenceTransformerEncoder": "r2med_plugin.models.sentence_transformer",
    "load_encoder": "r2med_plugin.models.registry",
    "load_reranker": "r2med_plugin.models.registry",
    "resolve": "r2med_plugin.models.registry",
    "rrf": "r2med_plugin.retrieval.fusion",
    "score_fusion": "r2med_plugin.retrieval.fusion",
    "build_reranking_hybrid": "r2med_plugin.retrieval.candidates",
    "candidate_profile": "r2med_plugin.retrieval.candidates",
    "register": "r2med_plugin.integrations",
    "ResultName": "r2med_plugin.identifiers",
    "DatasetRevision": "r2med_plugin.identifiers",
    "TaskSpec": "r2med_plugin.types",
    "TaskData": "r2med_plugin.types",
    "Qrels": "r2med_plugin.types",
    "Run": "r2med_plugin.types",
    "Candidates": "r2med_plugin.types",
}

__all__ = sorted([*_EXPORTS, "__version__"])


def __getattr__(name: str) -> object:
    if name in _EXPORTS:
        value = getattr(import_module(_EXPORTS[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'r2med_plugin' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(list(globals()) + __all__)
