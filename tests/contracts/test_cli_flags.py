"""Every option of every `r2med` command either reaches the code that uses it, or is refused.

Each option is written once on top of a base command line; the calls the command makes (to
execute, the encoder, write_outputs, generate_expansions, ...) are recorded by stand-ins. An
option "reaches" when the recorded calls differ from the base command's; a refused option exits 2 and
names itself. What the command prints counts as an output too. A last test checks that the table covers every option the parser has.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from types import SimpleNamespace

import pytest

from r2med_plugin.cli import build_parser, main
from r2med_plugin.data.expansions import list_expansions


class _Stop(Exception):
    """Raised by a stand-in once the call that matters is recorded (main() does not catch it)."""


def _fake_result(task: str) -> SimpleNamespace:
    """A TaskRunResult's printed fields (the CLI reads them as fields, not by probing)."""
    data = SimpleNamespace(report=SimpleNamespace(synthetic_sample=False, count_drift={}))
    return SimpleNamespace(task=task, retriever="r", expansion=None, dataset_revision="rev", scores={"ndcg_at_10": 0.5},
                           main_score="ndcg_at_10", data=data, query_prompt=None, hybrid_with=None,
                           dataset_revision_verified=True, rerank=None)


@pytest.fixture()
def recorded(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    calls: list[str] = []

    def recorder(name: str, returns=None, stop: bool = False):
        def record(*args, **kwargs):
            import os

            workers = os.environ.get("R2MED_BM25_WORKERS")
            calls.append(f"{name}{args!r}{sorted(kwargs.items())!r} workers={workers}")
            if stop:
                raise _Stop
            return returns(*args, **kwargs) if callable(returns) else returns
        return record

    encoder = SimpleNamespace(name="org/model", revision="r1")
    # mteb is imported (asking its registry for model names) before catalog.list_tasks is stood in for below: the
    # plugin's tasks register into mteb on its first import, and must register from the real catalog
    import mteb  # noqa: F401

    import r2med_plugin.evaluation.runner  # noqa: F401 - imported now, it binds the real plan functions, not the stand-ins below

    # imported now, they bind the real catalog.list_tasks (a module first imported while it is stood in for would keep
    # the stand-in, and list no task for the rest of the session: compare then found "no results" in later tests)
    import r2med_plugin.reporting.compare  # noqa: F401
    import r2med_plugin.reporting.grouping  # noqa: F401
    import r2med_plugin.reporting.inspect  # noqa: F401

    monkeypatch.setattr("r2med_plugin.evaluation.runner.execute", recorder("execute", lambda request, *a: _fake_result(request.task)))
    monkeypatch.setattr("r2med_plugin.evaluation.runner.validate_inputs", lambda requests: [None] * len(requests))
    monkeypatch.setattr("r2med_plugin.evaluation.writers.write_outputs", recorder("write_outputs", {}))
    monkeypatch.setattr("r2med_plugin.models.sentence_transformer.SentenceTransformerEncoder", recorder("encoder", encoder))
    monkeypatch.setattr("r2med_plugin.models.cross_encoder.SentenceTransformerCrossEncoder", recorder("cross_encoder", encoder))
    # models of mteb's registry and embedding endpoints load through their loaders
    monkeypatch.setattr("r2med_plugin.integrations.mteb_models._load", recorder("mteb_load", encoder))
    monkeypatch.setattr("r2med_plugin.integrations.mteb_models.MtebEncoder", recorder("mteb_encoder", encoder))
    monkeypatch.setattr("r2med_plugin.models.embedding_endpoint.EndpointEncoder", recorder("endpoint_encoder", encoder))
    monkeypatch.setattr("r2med_plugin.reporting.leaderboard.build_leaderboards", recorder("build_leaderboards", {"r2med": []}))
    monkeypatch.setattr("r2med_plugin.reporting.render.render_many", recorder("render_many", "table\n"))
    monkeypatch.setattr("r2med_plugin.reporting.plots.plot_leaderboard", recorder("plot", lambda rows, path, **k: (path, [])))
    monkeypatch.setattr("r2med_plugin.reporting.leaderboard_page.write_leaderboard_page",
                        recorder("leaderboard_page", lambda tables, folder, **k: Path(folder) / "index.html"))
    monkeypatch.setattr("r2med_plugin.reporting.submission.export_submission", recorder("export_submission", []))
    monkeypatch.setattr("r2med_plugin.reporting.submission.export_trec_runs", recorder("export_trec_runs", []))
    monkeypatch.setattr("r2med_plugin.reporting.venues.export_mteb", recorder("export_mteb", []))
    monkeypatch.setattr("r2med_plugin.reporting.venues.export_hakari", recorder("export_hakari", []))
    monkeypatch.setattr("r2med_plugin.generation.generate_expansions", recorder("generate", stop=True))
    # cost estimates (the data and the first stage are not loaded here)
    from r2med_plugin.llm.cost import CostEstimate

    estimate = CostEstimate("task  reranker", 10, 0, 1000, 50, 10, 1000, 50, True, True, "4 characters per token", "budget")
    monkeypatch.setattr("r2med_plugin.evaluation.cost.estimate_request_cost", recorder("estimate_request_cost", estimate))
    monkeypatch.setattr("r2med_plugin.generation.estimate_generation_cost", recorder("estimate_generation_cost", estimate))
    monkeypatch.setattr("r2med_plugin.sweep.estimate_sweep_cost", recorder("estimate_sweep_cost", ([estimate], 1)))
    monkeypatch.setattr("r2med_plugin.evaluation.reproduce.reproduce", recorder("reproduce", stop=True))
    from r2med_plugin.evaluation.matrix import MatrixReport

    monkeypatch.setattr("r2med_plugin.evaluation.matrix.run_matrix", recorder("run_matrix", lambda *a, **k: MatrixReport(0.1, [])))
    monkeypatch.setattr("r2med_plugin.integrations.demo.run_demo", recorder("demo", stop=True))
    monkeypatch.setattr("r2med_plugin.models.identity.cache_packaged_model",
                        recorder("cache_packaged_model", ("org/name", "rev", tmp_path / "snapshot")))
    monkeypatch.setattr("r2med_plugin.data.loader.load_task", recorder("load_task", stop=True))
    monkeypatch.setattr("r2med_plugin.catalog.list_tasks", recorder("list_tasks", []))
    monkeypatch.setattr("r2med_plugin.sweep.load_spec", recorder("load_spec", SimpleNamespace(output=tmp_path / "sweep")))
    monkeypatch.setattr("r2med_plugin.sweep.plan", recorder("plan", stop=True))
    monkeypatch.setattr("r2med_plugin.sweep.run_sweep", recorder("run_sweep", stop=True))
    # compare, inspect, leaderboard --significance
    monkeypatch.setattr("r2med_plugin.reporting.compare.compare_results", recorder("compare_results", "report"))
    monkeypatch.setattr("r2med_plugin.reporting.compare.render_report", recorder("render_report", "table\n"))
    monkeypatch.setattr("r2med_plugin.reporting.compare.plot_report", recorder("plot_report", lambda report, path: path))
    monkeypatch.setattr("r2med_plugin.reporting.inspect.inspect_query", recorder("inspect_query", []))
    monkeypatch.setattr("r2med_plugin.reporting.inspect.render_query", recorder("render_query", "query\n"))
    monkeypatch.setattr("r2med_plugin.reporting.inspect.worst_queries", recorder("worst_queries", {}))
    monkeypatch.setattr("r2med_plugin.reporting.inspect.render_losses", recorder("render_losses", "losses\n"))
    monkeypatch.setattr("r2med_plugin.reporting.leaderboard_significance.significance_for_tables",
                        recorder("significance", lambda tables, **k: tables))
    # r2med audit, leaderboard --audit
    monkeypatch.setattr("r2med_plugin.audit.run.run_audit", recorder("run_audit", {"hits": 0}))
    monkeypatch.setattr("r2med_plugin.audit.report.render_report", recorder("render_report", "report\n"))
    monkeypatch.setattr("r2med_plugin.audit.report.render_declared", recorder("render_declared", "declared\n"))
    monkeypatch.setattr("r2med_plugin.integrations.mteb_training.declared_training_data", recorder("declared", {}))
    monkeypatch.setattr("r2med_plugin.reporting.leaderboard_audit.attach_audits", recorder("attach_audits", lambda tables, v: tables))
    return calls


def _calls(recorded: list[str], argv: list[str], capsys: pytest.CaptureFixture) -> tuple[int | str, list[str]]:
    recorded.clear()
    try:
        code: int | str = main(argv)
    except _Stop:
        code = "stopped"
    printed = capsys.readouterr()  # stdout is the table; what was written is said on stderr
    return code, [*recorded, f"stdout: {printed.out}", f"stderr: {printed.err}"]


TASK, R2MED_TASK = "NanoR2MEDBiology", "R2MEDBiology"
EXPANSION = list_expansions(R2MED_TASK)[0]
BM25 = ["evaluate", "--task", TASK, "--retriever", "bm25-lucene"]
MODEL = ["evaluate", "--task", TASK, "--retriever", "org/model"]
RERANK = ["evaluate", "--task", TASK, "--rerank", "org/ce", "--first-stage", "bm25-lucene"]
LLM = ["evaluate", "--task", TASK, "--rerank", "llm-listwise:m", "--first-stage", "bm25-lucene", "--base-url", "http://127.0.0.1:9/v1"]
LLM_POINTWISE = [*LLM[:4], "llm-pointwise:m", *LLM[5:]]
LLM_SETWISE = [*LLM[:4], "llm-setwise:m", *LLM[5:]]
LLM_GROUPWISE = [*LLM[:4], "llm-groupwise:m", *LLM[5:]]
GENERATE = ["generate", "--task", R2MED_TASK, "--method", "lamer", "--llm", "m", "--base-url", "http://127.0.0.1:9/v1"]
SWEEP = ["sweep", "spec.yaml"]
MTEB_MODEL = ["evaluate", "--task", TASK, "--retriever", "sentence-transformers/all-MiniLM-L6-v2"]  # mteb has its ModelMeta
ENDPOINT = ["evaluate", "--task", TASK, "--retriever", "openai:emb", "--base-url", "http://127.0.0.1:9/v1"]
COMPARE = ["compare", "a"]
INSPECT_QUERY = ["inspect", "a", "--task", TASK, "--query", "q"]
INSPECT_WORST = ["inspect", "a", "--worst", "3", "--baseline", "m"]
AUDIT = ["audit", "train.jsonl"]

# (command, dest): (base argv, argv with the option) -- the option must change the recorded calls
REACHES: dict[tuple[str, str], tuple[list[str], list[str]]] = {
    ("evaluate", "task"): (BM25, ["evaluate", "--task", "NanoR2MEDMedQADiag", "--retriever", "bm25-lucene"]),
    ("evaluate", "retriever"): (BM25, ["evaluate", "--task", TASK, "--retriever", "bm25-robertson"]),
    ("evaluate", "hybrid"): (BM25, BM25 + ["--hybrid"]),
    ("evaluate", "candidates"): (BM25, BM25 + ["--candidates", "bm25"]),
    ("evaluate", "candidates_only"): (BM25 + ["--candidates", "bm25"], BM25 + ["--candidates", "bm25", "--candidates-only"]),
    ("evaluate", "instruction"): (MODEL, MODEL + ["--instruction"]),
    ("evaluate", "expansion"): (["evaluate", "--task", R2MED_TASK, "--retriever", "bm25-lucene"],
                                ["evaluate", "--task", R2MED_TASK, "--retriever", "bm25-lucene", "--expansion", EXPANSION]),
    ("evaluate", "output"): (BM25, BM25 + ["--output", "{tmp}/out"]),
    ("evaluate", "trec"): (BM25 + ["--output", "{tmp}/out"], BM25 + ["--output", "{tmp}/out", "--trec"]),
    ("evaluate", "depth"): (BM25 + ["--output", "{tmp}/out", "--trec"], BM25 + ["--output", "{tmp}/out", "--trec", "--depth", "50"]),
    ("evaluate", "top_k"): (BM25, BM25 + ["--top-k", "100"]),
    ("evaluate", "model_revision"): (MODEL, MODEL + ["--model-revision", "v1"]),
    ("evaluate", "model_name"): (MODEL, MODEL + ["--model-name", "my-org/m"]),
    ("evaluate", "device"): (MODEL, MODEL + ["--device", "cpu:0"]),
    ("evaluate", "dtype"): (MODEL, MODEL + ["--dtype", "bfloat16"]),
    ("evaluate", "batch_size"): (MODEL, MODEL + ["--batch-size", "8"]),
    ("evaluate", "data_dir"): (BM25, BM25 + ["--data-dir", "{tmp}"]),
    ("evaluate", "accept_drift"): (BM25, BM25 + ["--accept-drift"]),
    ("evaluate", "quiet"): (BM25, BM25 + ["--quiet"]),
    ("evaluate", "rerank"): (["evaluate", "--task", TASK, "--retriever", "bm25-lucene"],
                             ["evaluate", "--task", TASK, "--retriever", "bm25-lucene", "--rerank", "org/ce"]),
    ("evaluate", "first_stage"): (RERANK, ["evaluate", "--task", TASK, "--rerank", "org/ce", "--first-stage", "bm25-robertson"]),
    ("evaluate", "rerank_depth"): (RERANK, RERANK + ["--rerank-depth", "100"]),
    ("evaluate", "rerank_revision"): (RERANK, RERANK + ["--rerank-revision", "v2"]),
    ("evaluate", "first_stage_name"): (RERANK, RERANK + ["--first-stage-name", "my-bm25"]),
    ("evaluate", "workers"): (BM25, BM25 + ["--workers", "1"]),
    ("evaluate", "loader"): (MTEB_MODEL, MTEB_MODEL + ["--loader", "sentence-transformers"]),
    ("evaluate", "base_url"): (ENDPOINT, [*ENDPOINT[:-1], "http://127.0.0.1:10/v1"]),
    ("evaluate", "api_key_env"): (ENDPOINT, ENDPOINT + ["--api-key-env", "HOME"]),
    ("evaluate", "dimensions"): (ENDPOINT, ENDPOINT + ["--dimensions", "8"]),
    ("evaluate", "concurrency"): (ENDPOINT, ENDPOINT + ["--concurrency", "16"]),
    ("evaluate", "max_retries"): (ENDPOINT, ENDPOINT + ["--max-retries", "2"]),
    ("evaluate", "extra_body"): (ENDPOINT, ENDPOINT + ["--extra-body", '{"truncate_prompt_tokens": 256}']),
    ("evaluate", "timeout"): (LLM, LLM + ["--timeout", "30"]),
    ("evaluate", "window"): (LLM, LLM + ["--window", "30"]),
    ("evaluate", "step"): (LLM, LLM + ["--step", "5"]),
    ("evaluate", "max_tokens"): (LLM, LLM + ["--max-tokens", "64"]),
    ("evaluate", "set_size"): (LLM_SETWISE, LLM_SETWISE + ["--set-size", "4"]),  # setwise
    ("evaluate", "setwise_method"): (LLM_SETWISE, LLM_SETWISE + ["--setwise-method", "bubblesort"]),
    ("evaluate", "setwise_k"): (LLM_SETWISE, LLM_SETWISE + ["--setwise-k", "5"]),
    ("evaluate", "estimate_cost"): (LLM, LLM + ["--estimate-cost"]),  # cost before and after
    ("evaluate", "price_in"): (LLM + ["--estimate-cost", "--price-in", "1", "--price-out", "2"],
                               LLM + ["--estimate-cost", "--price-in", "3", "--price-out", "2"]),
    ("evaluate", "price_out"): (LLM + ["--estimate-cost", "--price-in", "1", "--price-out", "2"],
                                LLM + ["--estimate-cost", "--price-in", "1", "--price-out", "5"]),
    ("generate", "estimate_cost"): (GENERATE, GENERATE + ["--estimate-cost"]),
    ("generate", "price_in"): (GENERATE + ["--estimate-cost", "--price-in", "1", "--price-out", "2"],
                               GENERATE + ["--estimate-cost", "--price-in", "3", "--price-out", "2"]),
    ("generate", "price_out"): (GENERATE + ["--estimate-cost", "--price-in", "1", "--price-out", "2"],
                                GENERATE + ["--estimate-cost", "--price-in", "1", "--price-out", "5"]),
    ("evaluate", "group_size"): (LLM_GROUPWISE, LLM_GROUPWISE + ["--group-size", "10"]),  # groupwise
    ("evaluate", "grouping"): (LLM_GROUPWISE, LLM_GROUPWISE + ["--grouping", "first-stage"]),
    ("evaluate", "group_seed"): (LLM_GROUPWISE, LLM_GROUPWISE + ["--group-seed", "3"]),
    ("evaluate", "regroup"): (LLM_GROUPWISE, LLM_GROUPWISE + ["--regroup", "3"]),
    ("evaluate", "show_scores"): (LLM, LLM + ["--show-scores"]),  # InsertRank
    ("evaluate", "reasoning_effort"): (LLM, LLM + ["--reasoning-effort", "high"]),  # listwise reasoning models
    ("sweep", "estimate_cost"): (SWEEP, SWEEP + ["--estimate-cost"]),
    ("sweep", "price_in"): (SWEEP + ["--estimate-cost", "--price-in", "1", "--price-out", "2"],
                            SWEEP + ["--estimate-cost", "--price-in", "3", "--price-out", "2"]),
    ("sweep", "price_out"): (SWEEP + ["--estimate-cost", "--price-in", "1", "--price-out", "2"],
                             SWEEP + ["--estimate-cost", "--price-in", "1", "--price-out", "5"]),
    ("generate", "task"): (GENERATE, [*GENERATE[:2], "R2MEDMedQADiag", *GENERATE[3:]]),
    ("generate", "method"): (GENERATE, [*GENERATE[:4], "hyde", *GENERATE[5:]]),
    ("generate", "llm"): (GENERATE, [*GENERATE[:6], "other", *GENERATE[7:]]),
    ("generate", "name"): (GENERATE, GENERATE + ["--name", "n"]),
    ("generate", "base_url"): (GENERATE, [*GENERATE[:8], "http://127.0.0.1:10/v1"]),
    ("generate", "api_key_env"): (GENERATE, GENERATE + ["--api-key-env", "MY_KEY"]),
    ("generate", "concurrency"): (GENERATE, GENERATE + ["--concurrency", "2"]),
    ("generate", "preset"): (GENERATE, GENERATE + ["--preset", "vllm"]),
    ("generate", "temperature"): (GENERATE, GENERATE + ["--temperature", "0.1"]),
    ("generate", "top_p"): (GENERATE, GENERATE + ["--top-p", "0.5"]),
    ("generate", "max_tokens"): (GENERATE, GENERATE + ["--max-tokens", "5"]),
    ("generate", "seed"): (GENERATE, GENERATE + ["--seed", "3"]),
    ("generate", "first_stage"): (GENERATE, GENERATE + ["--first-stage", "{tmp}/run.trec"]),
    ("generate", "extra_body"): (GENERATE, GENERATE + ["--extra-body", '{"a": 1}']),
    ("generate", "max_retries"): (GENERATE, GENERATE + ["--max-retries", "1"]),
    ("generate", "timeout"): (GENERATE, GENERATE + ["--timeout", "5"]),
    ("generate", "max_failures"): (GENERATE, GENERATE + ["--max-failures", "2"]),
    ("generate", "out"): (GENERATE, GENERATE + ["--out", "{tmp}/exp"]),
    ("generate", "overwrite"): (GENERATE, GENERATE + ["--overwrite"]),
    ("generate", "data_dir"): (GENERATE, GENERATE + ["--data-dir", "{tmp}"]),
    ("generate", "accept_drift"): (GENERATE, GENERATE + ["--accept-drift"]),
    ("generate", "quiet"): (GENERATE, GENERATE + ["--quiet"]),
    ("leaderboard", "results"): (["leaderboard", "a"], ["leaderboard", "b"]),
    ("leaderboard", "benchmark"): (["leaderboard", "a"], ["leaderboard", "a", "--benchmark", "nano"]),
    ("leaderboard", "format"): (["leaderboard", "a"], ["leaderboard", "a", "--format", "csv"]),
    ("leaderboard", "out"): (["leaderboard", "a"], ["leaderboard", "a", "--out", "{tmp}/t.md"]),
    ("leaderboard", "plot"): (["leaderboard", "a"], ["leaderboard", "a", "--plot", "{tmp}/c.png"]),
    ("leaderboard", "plot_rows"): (["leaderboard", "a", "--plot", "{tmp}/c.png"], ["leaderboard", "a", "--plot", "{tmp}/c.png", "--plot-rows", "all"]),
    ("leaderboard", "compare_published"): (["leaderboard", "a"], ["leaderboard", "a", "--compare-published"]),
    ("leaderboard", "html"): (["leaderboard", "a"], ["leaderboard", "a", "--html", "{tmp}/site"]),
    ("leaderboard", "matrix"): (["leaderboard", "a", "--html", "{tmp}/site"], ["leaderboard", "a", "--html", "{tmp}/site", "--matrix", "m.json"]),
    ("export", "submission"): (["export", "--trec", "a", "--out", "o"], ["export", "--submission", "a", "--model", "m", "--out", "o"]),
    ("export", "trec"): (["export", "--trec", "a", "--out", "o"], ["export", "--trec", "b", "--out", "o"]),
    ("export", "model"): (["export", "--submission", "a", "--model", "m", "--out", "o"], ["export", "--submission", "a", "--model", "n", "--out", "o"]),
    ("export", "out"): (["export", "--trec", "a", "--out", "o"], ["export", "--trec", "a", "--out", "p"]),
    ("export", "model_size"): (["export", "--submission", "a", "--model", "m", "--out", "o"],
                               ["export", "--submission", "a", "--model", "m", "--out", "o", "--model-size", "7B"]),
    ("export", "uses_llm"): (["export", "--submission", "a", "--model", "m", "--out", "o"],
                             ["export", "--submission", "a", "--model", "m", "--out", "o", "--uses-llm"]),
    ("export", "description"): (["export", "--submission", "a", "--model", "m", "--out", "o"],
                                ["export", "--submission", "a", "--model", "m", "--out", "o", "--description", "d"]),
    ("export", "allow_incomplete"): (["export", "--submission", "a", "--model", "m", "--out", "o"],
                                     ["export", "--submission", "a", "--model", "m", "--out", "o", "--allow-incomplete"]),
    ("export", "force"): (["export", "--submission", "a", "--model", "m", "--out", "o"],
                          ["export", "--submission", "a", "--model", "m", "--out", "o", "--force"]),
    ("export", "depth"): (["export", "--trec", "a", "--out", "o"], ["export", "--trec", "a", "--out", "o", "--depth", "10"]),
    ("export", "venue"): (["export", "--submission", "a", "--model", "m", "--out", "o"],
                          ["export", "--submission", "a", "--model", "m", "--out", "o", "--venue", "hakari"]),
    ("reproduce", "expected"): (["reproduce"], ["reproduce", "--expected", "e.json"]),
    ("reproduce", "tolerance"): (["reproduce"], ["reproduce", "--tolerance", "0.5"]),
    ("reproduce", "skip_nano"): (["reproduce"], ["reproduce", "--skip-nano"]),
    ("reproduce", "output"): (["reproduce"], ["reproduce", "--output", "o"]),
    ("reproduce", "data_dir"): (["reproduce"], ["reproduce", "--data-dir", "d"]),
    ("reproduce", "accept_drift"): (["reproduce"], ["reproduce", "--accept-drift"]),
    ("reproduce", "quiet"): (["reproduce"], ["reproduce", "--quiet"]),
    ("reproduce", "matrix"): (["reproduce"], ["reproduce", "--matrix"]),
    ("reproduce", "rows"): (["reproduce", "--matrix"], ["reproduce", "--matrix", "--rows", "*bm25"]),
    ("reproduce", "list"): (["reproduce"], ["reproduce", "--list"]),
    ("reproduce", "json"): (["reproduce", "--matrix"], ["reproduce", "--matrix", "--json", "{tmp}/m.json"]),
    ("reproduce", "device"): (["reproduce", "--matrix"], ["reproduce", "--matrix", "--device", "cuda"]),
    ("demo", "out"): (["demo"], ["demo", "--out", "d"]),
    ("demo", "quiet"): (["demo"], ["demo", "--quiet"]),
    ("demo", "sample_dir"): (["demo"], ["demo", "--sample-dir"]),
    ("cache-packaged-model", "alias"): (["cache-packaged-model"], ["cache-packaged-model", "other-packaged"]),
    ("cache-packaged-model", "hf_home"): (["cache-packaged-model"], ["cache-packaged-model", "--hf-home", "h"]),
    ("check", "task"): (["check", TASK], ["check", R2MED_TASK]),
    ("check", "data_dir"): (["check", TASK], ["check", TASK, "--data-dir", "d"]),
    ("check", "accept_drift"): (["check", TASK], ["check", TASK, "--accept-drift"]),
    ("tasks", "kind"): (["tasks"], ["tasks", "--kind", "nano"]),
    ("sweep", "spec"): (SWEEP, ["sweep", "other.yaml"]),
    ("sweep", "engine"): (SWEEP, SWEEP + ["--engine", "ray"]),
    ("sweep", "address"): (SWEEP + ["--engine", "ray"], SWEEP + ["--engine", "ray", "--address", "auto"]),
    ("sweep", "workers"): (SWEEP, SWEEP + ["--workers", "2"]),
    ("sweep", "device"): (SWEEP, SWEEP + ["--device", "cpu,cpu"]),
    ("sweep", "retries"): (SWEEP, SWEEP + ["--retries", "3"]),
    ("sweep", "dry_run"): (SWEEP, SWEEP + ["--dry-run"]),
    ("sweep", "quiet"): (SWEEP, SWEEP + ["--quiet"]),
    ("leaderboard", "significance"): (["leaderboard", "a"], ["leaderboard", "a", "--significance"]),
    ("compare", "results"): (COMPARE, ["compare", "b"]),
    ("compare", "baseline"): (COMPARE, COMPARE + ["--baseline", "m"]),
    ("compare", "metric"): (COMPARE, COMPARE + ["--metric", "recall_at_10"]),
    ("compare", "test"): (COMPARE, COMPARE + ["--test", "t-test"]),
    ("compare", "correction"): (COMPARE, COMPARE + ["--correction", "none"]),
    ("compare", "alpha"): (COMPARE, COMPARE + ["--alpha", "0.01"]),
    ("compare", "format"): (COMPARE, COMPARE + ["--format", "csv"]),
    ("compare", "out"): (COMPARE, COMPARE + ["--out", "{tmp}/c.md"]),
    ("compare", "plot"): (COMPARE, COMPARE + ["--plot", "{tmp}/c.png"]),
    ("compare", "seed"): (COMPARE, COMPARE + ["--seed", "5"]),
    ("compare", "permutations"): (COMPARE, COMPARE + ["--permutations", "1000"]),
    ("inspect", "results"): (INSPECT_QUERY, ["inspect", "b", *INSPECT_QUERY[2:]]),
    ("inspect", "task"): (INSPECT_QUERY, ["inspect", "a", "--task", R2MED_TASK, "--query", "q"]),
    ("inspect", "query"): (INSPECT_QUERY, ["inspect", "a", "--task", TASK, "--query", "r"]),
    ("inspect", "worst"): (INSPECT_WORST, ["inspect", "a", "--worst", "4", "--baseline", "m"]),
    ("inspect", "baseline"): (INSPECT_WORST, ["inspect", "a", "--worst", "3", "--baseline", "n"]),
    ("inspect", "metric"): (INSPECT_QUERY, INSPECT_QUERY + ["--metric", "recall_at_10"]),
    ("audit", "train"): (AUDIT, ["audit", "other.jsonl"]),
    ("audit", "task"): (AUDIT, AUDIT + ["--task", "nano"]),
    ("audit", "out"): (AUDIT, AUDIT + ["--out", "{tmp}/audit"]),
    ("audit", "threshold"): (AUDIT, AUDIT + ["--threshold", "0.7"]),
    ("audit", "ngram"): (AUDIT, AUDIT + ["--ngram", "2"]),
    ("audit", "corpus"): (AUDIT, AUDIT + ["--corpus"]),
    ("audit", "write_clean"): (AUDIT, AUDIT + ["--write-clean"]),
    ("audit", "query_column"): (AUDIT, AUDIT + ["--query-column", "q"]),
    ("audit", "positive_column"): (AUDIT, AUDIT + ["--positive-column", "p"]),
    ("audit", "negative_column"): (AUDIT, AUDIT + ["--negative-column", "n1", "n2"]),
    ("audit", "text_column"): (AUDIT, AUDIT + ["--text-column", "t"]),
    ("audit", "model"): (AUDIT, AUDIT + ["--model", "org/m"]),
    ("audit", "data_dir"): (AUDIT, AUDIT + ["--data-dir", "d"]),
    ("audit", "accept_drift"): (AUDIT, AUDIT + ["--accept-drift"]),
    ("audit", "quiet"): (AUDIT, AUDIT + ["--quiet"]),
    ("leaderboard", "audit"): (["leaderboard", "a"], ["leaderboard", "a", "--audit", "d"]),
}

# argv -> the option that must be refused (it would reach no code there)
REFUSED: list[tuple[list[str], str]] = [
    (BM25 + ["--model-revision", "v1"], "--model-revision"),
    (BM25 + ["--batch-size", "8"], "--batch-size"),
    (BM25 + ["--device", "cpu"], "--device"),  # refused even when it equals the default: it was written
    (BM25 + ["--dtype", "bfloat16"], "--dtype"),  # BM25 loads no model
    (BM25 + ["--rerank-depth", "100"], "--rerank-depth"),
    (BM25 + ["--rerank-revision", "v2"], "--rerank-revision"),
    (MODEL + ["--rerank-depth", "100"], "--rerank-depth"),
    (["evaluate", "--task", TASK, "--retriever", "bm25-robertson", "--workers", "2"], "--workers"),
    (BM25 + ["--base-url", "http://127.0.0.1:9/v1"], "--base-url"),  # endpoint options need openai:<model>
    (MODEL + ["--dimensions", "8"], "--dimensions"),
    (RERANK + ["--concurrency", "4"], "--concurrency"),
    (MODEL + ["--api-key-env", "HOME"], "--api-key-env"),
    (BM25 + ["--loader", "mteb"], "--loader"),
    (ENDPOINT + ["--loader", "mteb"], "--loader"),
    (ENDPOINT + ["--device", "cpu"], "--device"),
    (ENDPOINT + ["--dtype", "float16"], "--dtype"),  # the endpoint's server holds the weights
    (MTEB_MODEL + ["--instruction"], "--instruction"),  # mteb applies the model's prompts and the task's instruction
    (MODEL + ["--workers", "2"], "--workers"),
    (MODEL + ["--candidates", "bm25", "--candidates-only", "--top-k", "100"], "--top-k"),
    (RERANK + ["--top-k", "100"], "--top-k"),
    (RERANK + ["--output", "{tmp}/o", "--trec", "--depth", "5"], "--depth"),
    (RERANK + ["--batch-size", "8", "--model-revision", "v"], "--model-revision"),  # a BM25 first stage loads no encoder
    (["evaluate", "--task", TASK, "--rerank", "org/ce", "--first-stage", "{tmp}/run.trec", "--instruction"], "--instruction"),
    (RERANK + ["--window", "30"], "--window"),  # a cross-encoder has no window
    (RERANK + ["--base-url", "http://127.0.0.1:9/v1"], "--base-url"),
    (BM25 + ["--concurrency", "4"], "--concurrency"),
    (BM25 + ["--timeout", "30"], "--timeout"),
    (RERANK + ["--max-retries", "2"], "--max-retries"),
    (MODEL + ["--timeout", "30"], "--timeout"),
    (BM25 + ["--extra-body", '{"a": 1}'], "--extra-body"),  # an endpoint's requests only
    (RERANK + ["--extra-body", '{"a": 1}'], "--extra-body"),  # a cross-encoder sends no request
    (["evaluate", "--task", TASK, "--retriever", "official:openai", "--extra-body", '{"a": 1}'], "--extra-body"),
    (LLM_POINTWISE + ["--step", "5"], "--step"),
    (LLM_POINTWISE + ["--max-tokens", "5"], "--max-tokens"),
    (LLM + ["--set-size", "4"], "--set-size"),  # setwise settings for setwise only, and listwise's not for it
    (LLM_POINTWISE + ["--setwise-method", "heapsort"], "--setwise-method"),
    (RERANK + ["--setwise-k", "5"], "--setwise-k"),
    (LLM_SETWISE + ["--window", "30"], "--window"),
    (LLM_SETWISE + ["--step", "5"], "--step"),
    (LLM + ["--group-size", "10"], "--group-size"),  # groupwise settings for groupwise only
    (LLM_SETWISE + ["--grouping", "random"], "--grouping"),
    (LLM_POINTWISE + ["--regroup", "2"], "--regroup"),
    (RERANK + ["--group-seed", "1"], "--group-seed"),
    (LLM_GROUPWISE + ["--window", "30"], "--window"),
    (LLM_GROUPWISE + ["--grouping", "first-stage", "--group-seed", "1"], "--group-seed"),  # first-stage draws nothing
    (LLM_GROUPWISE + ["--grouping", "first-stage", "--regroup", "2"], "--regroup"),
    (LLM_GROUPWISE + ["--show-scores"], "--show-scores"),  # InsertRank: listwise only
    (LLM_SETWISE + ["--show-scores"], "--show-scores"),
    (LLM_POINTWISE + ["--reasoning-effort", "high"], "--reasoning-effort"),  # pointwise reads the first token
    (BM25 + ["--reasoning-effort", "low"], "--reasoning-effort"),
    (LLM + ["--batch-size", "8"], "--batch-size"),  # an LLM behind a BM25 first stage batches nothing
    (LLM + ["--rerank-revision", "v2"], "--rerank-revision"),
    ([*GENERATE[:4], "hyde", *GENERATE[5:], "--first-stage", "bm25-lucene"], "--first-stage"),
    (BM25 + ["--price-in", "1", "--price-out", "2"], "--price-in"),  # prices and estimates of LLM requests only
    (RERANK + ["--estimate-cost"], "--estimate-cost"),
    (ENDPOINT + ["--price-out", "2"], "--price-out"),
    (LLM + ["--estimate-cost", "--output", "{tmp}/o"], "--output"),
    (LLM + ["--estimate-cost", "--concurrency", "4"], "--concurrency"),
    (GENERATE + ["--estimate-cost", "--max-failures", "3"], "--max-failures"),
    (SWEEP + ["--price-in", "1", "--price-out", "2"], "--price-in"),
    (SWEEP + ["--estimate-cost", "--workers", "2"], "--workers"),
    (SWEEP + ["--dry-run", "--estimate-cost"], "--estimate-cost"),
    (["leaderboard", "a", "--plot-rows", "all"], "--plot-rows"),
    (["export", "--trec", "a", "--out", "o", "--model", "m"], "--model"),
    (["export", "--trec", "a", "--out", "o", "--allow-incomplete"], "--allow-incomplete"),
    (["export", "--submission", "a", "--model", "m", "--out", "o", "--depth", "5"], "--depth"),
    (["export", "--trec", "a", "--out", "o", "--force"], "--force"),
    (["export", "--trec", "a", "--out", "o", "--venue", "mteb"], "--venue"),
    (["export", "--submission", "a", "--model", "m", "--out", "o", "--venue", "hakari", "--model-size", "7B"], "--model-size"),
    (SWEEP + ["--dry-run", "--workers", "2"], "--workers"),
    (SWEEP + ["--address", "auto"], "--address"),
    (INSPECT_QUERY + ["--worst", "3"], "--worst"),
    (INSPECT_QUERY + ["--baseline", "m"], "--baseline"),
    (["audit", "--model", "org/m", "--threshold", "0.7"], "--threshold"),  # no training set: only mteb's declared data
    (["audit", "--model", "org/m", "--write-clean"], "--write-clean"),
    (["reproduce", "--rows", "*bm25"], "--rows"),
    (["reproduce", "--matrix", "--list", "--json", "m.json"], "--json"),
    (["leaderboard", "a", "--matrix", "m.json"], "--matrix"),
]


def _fill(argv: list[str], tmp_path: Path) -> list[str]:
    return [word.replace("{tmp}", str(tmp_path)) for word in argv]


@pytest.mark.parametrize("command, dest", sorted(REACHES), ids=lambda value: str(value))
def test_each_option_reaches_code(command: str, dest: str, recorded: list[str], tmp_path: Path, capsys):
    (tmp_path / "run.trec").write_text("q 0 d 1 1.0 x\n")
    base, given = (_fill(argv, tmp_path) for argv in REACHES[(command, dest)])
    base_code, base_calls = _calls(recorded, base, capsys)
    code, calls = _calls(recorded, given, capsys)
    assert base_code in (0, "stopped") and code in (0, "stopped"), (base_code, code)
    assert len(base_calls) > 1 and calls != base_calls, f"{command} {dest}: the option changed no call nor output"


@pytest.mark.parametrize("argv, option", REFUSED, ids=lambda value: " ".join(value) if isinstance(value, list) else value)
def test_options_that_reach_no_code_are_refused(argv: list[str], option: str, recorded: list[str], tmp_path: Path, capsys):
    (tmp_path / "run.trec").write_text("q 0 d 1 1.0 x\n")
    recorded.clear()
    assert main(_fill(argv, tmp_path)) == 2
    error = capsys.readouterr().err
    assert option in error and "reaches no code" in error
    assert not any(call.startswith(("execute", "encoder", "cross_encoder", "generate", "run_sweep", "plan", "export"))
                   for call in recorded), recorded  # refused before any work


def test_the_table_covers_every_option_of_every_command():
    parser = build_parser()
    commands = next(action for action in parser._actions if isinstance(action, argparse._SubParsersAction))
    every = {
        (name, action.dest)
        for name, subparser in commands.choices.items()
        for action in subparser._actions
        if not isinstance(action, argparse._HelpAction)
    }
    assert every == set(REACHES)
    refused_commands = {argv[0] for argv, _ in REFUSED}
    assert {"evaluate", "generate", "leaderboard", "export", "sweep"} <= refused_commands
