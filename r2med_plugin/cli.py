"""The `r2med` command: argument parsing and printing only."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path


def _tasks(args: argparse.Namespace) -> int:
    from r2med_plugin.catalog import list_tasks

    for spec in list_tasks(args.kind):
        counts = spec.expected_counts
        print(f"{spec.name:<28} {spec.hub_repo:<26} {counts['queries']:>4} queries {counts['documents']:>6} docs  {spec.revision or 'resolved at load'}")
    return 0


def _check(args: argparse.Namespace) -> int:
    from r2med_plugin.data.loader import load_task

    data = load_task(args.task, data_dir=args.data_dir, accept_drift=args.accept_drift)
    summary = {
        "task": data.name,
        "source": data.source,
        "revision": data.revision,
        "documents": data.corpus.height,
        "queries": data.queries.height,
        "qrels_queries": len(data.qrels),
        "candidate_lists": {key: len(lists) for key, lists in data.candidates.items()},
        "report": data.report,
    }
    print(json.dumps(summary, indent=2, default=str))
    return 0


def _print_scores(result, keys: Sequence[str]) -> None:
    shown = [key for key in keys if key in result.scores]
    expansion = f" + {result.expansion}" if result.expansion else ""
    print(f"{result.task}  {result.retriever}{expansion}  (dataset revision {result.dataset_revision})")
    for key in shown:
        print(f"  {key:<48} {result.scores[key]:.5f}")


def _task_expansions(tasks: Sequence[str], expansion: str | None) -> list[tuple[str, str | None]]:
    """(task, expansion) pairs: "all" sweeps every released expansion of each task."""
    if expansion != "all":
        return [(task, expansion) for task in tasks]
    from r2med_plugin.data.expansions import list_expansions

    return [(task, name) for task in tasks for name in list_expansions(task)]


def _evaluate(args: argparse.Namespace) -> int:
    from r2med_plugin.evaluation.runner import BM25_RETRIEVERS, evaluate_task, write_outputs

    if args.workers is not None:
        from r2med_plugin.retrieval.analyzed import WORKERS_ENV, resolve_workers

        os.environ[WORKERS_ENV] = str(resolve_workers(args.workers))  # read by every bm25-lucene analysis
    if args.retriever in BM25_RETRIEVERS:
        retriever = args.retriever
    else:
        from r2med_plugin.retrieval.dense import SentenceTransformerEncoder

        retriever = SentenceTransformerEncoder(
            args.retriever, revision=args.model_revision, device=args.device, batch_size=args.batch_size,
            show_progress=not args.quiet,
        )
    for task, expansion in _task_expansions(args.task, args.expansion):
        prompt = None
        if args.instruction:
            from r2med_plugin.catalog import get_task_spec
            from r2med_plugin.retrieval.dense import E5_TEMPLATE

            prompt = E5_TEMPLATE.format(instruction=get_task_spec(task).instruction)
        result = evaluate_task(
            task, retriever, hybrid=args.hybrid, candidates=args.candidates or (), candidates_only=args.candidates_only,
            data_dir=args.data_dir, accept_drift=args.accept_drift, top_k=args.top_k, query_prompt=prompt,
            expansion=expansion, show_progress=not args.quiet,
        )
        keys = [result.main_score, "ndcg_at_10", "recall_at_100", "hit_at_10", "mrr", "hybrid_ndcg_at_10"] + [
            key for key in result.scores if key.startswith("candidates_") and "ndcg_at_10" in key
        ]
        _print_scores(result, list(dict.fromkeys(keys)))
        if args.output:
            for kind, path in write_outputs(result, args.output, trec=args.trec).items():
                print(f"  wrote {kind}: {path}")
    return 0


def _leaderboard(args: argparse.Namespace) -> int:
    from r2med_plugin.reporting.leaderboard import build_leaderboard, render

    rows = build_leaderboard(args.results, benchmark=args.benchmark, compare_published=args.compare_published)
    text = render(rows, args.format)
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(text, encoding="utf-8")
        print(f"wrote {args.out}")
    else:
        print(text, end="")
    if args.plot:
        from r2med_plugin.reporting.plots import default_selection, plot_nano, plot_tasks

        if args.benchmark == "nano":
            mine = [row for row in rows if row.source == "yours"]
            path = plot_nano(mine[0], args.plot)
        else:
            path = plot_tasks(default_selection(rows), args.plot)
        print(f"wrote {path}")
    return 0


def _export(args: argparse.Namespace) -> int:
    from r2med_plugin.reporting.submission import export_submission, export_trec_runs

    if args.submission:
        if not args.model:
            raise ValueError("--submission needs --model NAME (the model name in the result folders)")
        paths = export_submission(args.submission, args.model, args.out, model_size=args.model_size,
                                  uses_llm=args.uses_llm, description=args.description)
    else:
        paths = export_trec_runs(args.trec, args.out)
    for path in paths:
        print(f"wrote {path}")
    return 0


def _demo(args: argparse.Namespace) -> int:
    from r2med_plugin.integrations.demo import run_demo

    run_demo(args.out, show_progress=not args.quiet)
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="r2med", description="R2MED and NanoR2MED retrieval evaluation.")
    commands = parser.add_subparsers(dest="command", required=True)
    tasks = commands.add_parser("tasks", help="list the tasks with their hub source and revision")
    tasks.add_argument("--kind", choices=["r2med", "nano"], default=None)
    tasks.set_defaults(func=_tasks)
    check = commands.add_parser("check", help="load one task, validate it and print what was found")
    check.add_argument("task")
    check.add_argument("--data-dir", default=None, help="local mirror (default: $R2MED_DATA_DIR, else the hub)")
    check.add_argument("--accept-drift", action="store_true", default=None, help="accept counts/revision that differ from task_metadata")
    check.set_defaults(func=_check)
    evaluate = commands.add_parser("evaluate", help="evaluate BM25 or a sentence-transformers model on tasks")
    evaluate.add_argument("--task", nargs="+", required=True, help="task name(s), e.g. NanoR2MEDBiology")
    evaluate.add_argument("--retriever", required=True, help="bm25-lucene, bm25-robertson, or a model name or folder")
    evaluate.add_argument("--hybrid", action="store_true", help="also report hybrid_* (RRF with the task's BM25)")
    evaluate.add_argument("--candidates", nargs="+", choices=["bm25", "dense", "hybrid"], help="rank the stored candidate lists (NanoR2MED)")
    evaluate.add_argument("--candidates-only", action="store_true", help="skip the full corpus; encode only candidate documents")
    evaluate.add_argument("--instruction", action="store_true", help="prepend the official 'Instruct: ...\\nQuery: ' prompt to queries")
    evaluate.add_argument("--expansion", default=None, help="a released LLM expansion, e.g. hyde/o3-mini, or 'all' (R2MED tasks)")
    evaluate.add_argument("--output", default=None, help="folder for MTEB-format results and the official R2MED JSON")
    evaluate.add_argument("--trec", action="store_true", help="also write TREC run files")
    evaluate.add_argument("--top-k", type=int, default=1000)
    evaluate.add_argument("--model-revision", default=None)
    evaluate.add_argument("--device", default="cpu")
    evaluate.add_argument("--batch-size", type=int, default=32)
    evaluate.add_argument("--data-dir", default=None)
    evaluate.add_argument("--accept-drift", action="store_true", default=None)
    evaluate.add_argument("--quiet", action="store_true", help="no progress bars")
    evaluate.add_argument("--workers", type=int, default=None, help="processes for bm25-lucene corpus analysis (default: all cores)")
    evaluate.set_defaults(func=_evaluate)
    board = commands.add_parser("leaderboard", help="the R2MED leaderboard table from MTEB result folders")
    board.add_argument("results", nargs="+", help="MTEB result folders (ResultCache layout)")
    board.add_argument("--benchmark", choices=["r2med", "nano"], default="r2med")
    board.add_argument("--format", choices=["md", "csv", "html"], default="md")
    board.add_argument("--out", default=None, help="write the table here instead of printing it")
    board.add_argument("--plot", default=None, help="also draw a chart (.png or .svg)")
    board.add_argument("--compare-published", action="store_true", help="place the rows among the published leaderboard")
    board.set_defaults(func=_leaderboard)
    export = commands.add_parser("export", help="a leaderboard submission folder, or TREC runs from MTEB predictions")
    source = export.add_mutually_exclusive_group(required=True)
    source.add_argument("--submission", nargs="+", metavar="RESULTS_DIR", help="MTEB result folders")
    source.add_argument("--trec", nargs="+", metavar="PREDICTIONS_DIR", help="folders with MTEB <Task>_predictions.json files")
    export.add_argument("--model", default=None, help="the model name as it appears in the results")
    export.add_argument("--out", required=True)
    export.add_argument("--model-size", default=None, help="e.g. 22.7M or 7B")
    export.add_argument("--uses-llm", action=argparse.BooleanOptionalAction, default=None)
    export.add_argument("--description", default="")
    export.set_defaults(func=_export)
    demo = commands.add_parser("demo", help="BM25, MiniLM, hybrid and candidate subsets on the shipped synthetic sample, offline")
    demo.add_argument("--out", default="r2med-demo", help="folder for the results, table and chart (default: ./r2med-demo)")
    demo.add_argument("--quiet", action="store_true")
    demo.set_defaults(func=_demo)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except (KeyError, ValueError, FileNotFoundError, ConnectionError) as error:
        message = error.args[0] if isinstance(error, KeyError) and error.args else error
        print(f"r2med: error: {message}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
