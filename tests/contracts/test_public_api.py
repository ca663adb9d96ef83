"""The public API: what `import r2med_plugin` offers is pinned, every name resolves, and the package is typed."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import r2med_plugin

PUBLIC = [
    "Bm25Spec", "Candidates", "CrossEncoderSpec", "DatasetRevision", "Encoder", "Endpoint",
    "EvaluationRequest", "LlmRerankerSpec", "ModelSpec", "Outputs", "PrebuiltFirstStage", "Qrels", "RequestError",
    "Reranker", "ResultName", "Run", "RunFileSpec", "Scoring", "SentenceTransformerCrossEncoder",
    "SentenceTransformerEncoder", "TaskArguments", "TaskData", "TaskRunResult", "TaskSpec", "__version__", "analyze", "bm25_search",
    "build_reranking_hybrid", "candidate_profile", "dense_search", "evaluate_run",
    "evaluate_run_per_query", "evaluate_task", "execute", "generate_expansions", "get_task_spec", "list_benchmarks",
    "list_tasks", "load_encoder", "load_reranker", "load_task", "read_run_file", "register",
    "rerank_run", "resolve", "rrf", "score_candidate_lists", "score_fusion",
    "write_official_results", "write_outputs", "write_topk_docs",
]


def test_all_is_pinned_and_every_name_resolves():
    assert r2med_plugin.__all__ == PUBLIC
    for name in PUBLIC:
        assert getattr(r2med_plugin, name) is not None, name


def test_the_package_is_typed_and_imports_no_host_library():
    assert (Path(r2med_plugin.__file__).parent / "py.typed").is_file()
    code = "import sys, r2med_plugin; print(sorted(m for m in ('mteb', 'ir_datasets', 'torch') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env={"R2MED_PLUGIN_NO_AUTOLOAD": "1", "PATH": ""}).stdout
    assert out.strip() == "[]"

