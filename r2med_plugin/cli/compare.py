"""`r2med compare` and `r2med inspect`: argument parsing and printing only.

Kept apart from cli.py so that the commands can be added with one line there (``add_commands``).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from r2med_plugin.cli.options import bounded
from r2med_plugin.errors import UserError


def _int_at_least(minimum: int, what: str):
    return bounded(int, low=minimum, message=f"{what} must be at least {minimum}, got {{value}}")


_alpha = bounded(float, low=0.0, strict=True, high=1.0, message="must lie strictly between 0 and 1 (e.g. 0.05), got {value}")


# r2med_plugin.significance's choices, repeated so that building the parser imports no numpy (tested equal)
TESTS = ("randomization", "t-test", "wilcoxon")
CORRECTIONS = ("holm", "bonferroni", "none")
DEFAULT_SEED = 0
DEFAULT_PERMUTATIONS = 10_000


def add_commands(commands: Any) -> None:
    """The compare and inspect subcommands."""
    compare = commands.add_parser(
        "compare", help="paired significance tests of models against a baseline, per task and pooled, from per-query scores",
        description="Reads the per-query files (<Task>.per_query.parquet) beside the results in the folders.",
    )
    compare.add_argument("results", nargs="+", help="result folders (MTEB layout) with per-query files")
    compare.add_argument("--baseline", default=None, metavar="MODEL",
                         help="the model every other is compared with (default: the one with the best mean over the most tasks)")
    compare.add_argument("--metric", default="ndcg_at_10", help="per-query metric (default ndcg_at_10), e.g. recall_at_100, official_ndcg_at_10")
    compare.add_argument("--test", choices=TESTS, default="randomization", help="paired test (default: randomization)")
    compare.add_argument("--correction", choices=CORRECTIONS, default="holm",
                         help="multiple-comparison correction over the models in each task and pooled row (default: holm)")
    compare.add_argument("--alpha", type=_alpha, default=0.05, help="significance level (default 0.05)")
    compare.add_argument("--format", choices=["md", "csv", "html"], default="md")
    compare.add_argument("--out", default=None, help="write the table here instead of printing it")
    compare.add_argument("--plot", default=None, help="also draw the per-task differences with their intervals (.png or .svg)")
    compare.add_argument("--seed", type=_int_at_least(0, "--seed"), default=DEFAULT_SEED,
                         help=f"seed of the randomization test and the bootstrap (default {DEFAULT_SEED}); the report states it")
    compare.add_argument("--permutations", type=_int_at_least(100, "--permutations"), default=DEFAULT_PERMUTATIONS,
                         help=f"permutations of the randomization test and bootstrap resamples (default {DEFAULT_PERMUTATIONS})")
    compare.set_defaults(func=_compare)
    inspect = commands.add_parser(
        "inspect", help="one query (each model's top 10, ranks of positives) or the queries a model loses most on",
        description="--task T --query Q: one query; --worst N --baseline B: each model's N largest losses to B.",
    )
    inspect.add_argument("results", nargs="+", help="result folders (MTEB layout) with per-query files")
    inspect.add_argument("--task", default=None, help="the task (needed with --query; with --worst, only this task)")
    inspect.add_argument("--query", default=None, help="the query id to show")
    inspect.add_argument("--worst", type=_int_at_least(1, "--worst"), default=None, metavar="N", help="each model's N largest losses")
    inspect.add_argument("--baseline", default=None, metavar="MODEL", help="what --worst losses are measured against")
    inspect.add_argument("--metric", default="ndcg_at_10", help="per-query metric (default ndcg_at_10)")
    inspect.set_defaults(func=_inspect)


def _write_or_print(text: str, out: str | None) -> None:
    if out:
        Path(out).parent.mkdir(parents=True, exist_ok=True)
        Path(out).write_text(text, encoding="utf-8")
        print(f"wrote {out}")
    else:
        print(text, end="" if text.endswith("\n") else "\n")


def _compare(args: argparse.Namespace) -> int:
    from r2med_plugin.reporting.compare import compare_results, plot_report, render_report
    from r2med_plugin.reporting.plots import PLOT_SUFFIXES

    if args.plot and Path(args.plot).suffix.lower() not in PLOT_SUFFIXES:
        raise UserError(f"--plot {args.plot}: the chart is written as {' or '.join(PLOT_SUFFIXES)}; name the file e.g. compare.png")
    if args.plot:
        from r2med_plugin.reporting.plots import require_matplotlib

        require_matplotlib()
    if args.out and Path(args.out).is_dir():
        raise UserError(f"--out {args.out} is a folder; give a file name, e.g. {Path(args.out) / 'compare.md'}")
    report = compare_results(args.results, metric=args.metric, baseline=args.baseline, test=args.test, correction=args.correction,
                             alpha=args.alpha, seed=args.seed, permutations=args.permutations)
    _write_or_print(render_report(report, args.format), args.out)
    if args.plot:
        print(f"wrote {plot_report(report, args.plot)}")
    return 0


def _inspect(args: argparse.Namespace) -> int:
    from r2med_plugin.cli.options import refuse_unreached

    if args.query is not None:
        refuse_unreached(args, {"worst": "--query shows one query; --worst lists losses (use one of the two)",
                                 "baseline": "--query shows every model's ranking of one query, compared with none"})
        if not args.task:
            raise UserError("--query needs --task: the task the query belongs to")
        from r2med_plugin.reporting.inspect import inspect_query, render_query

        print(render_query(inspect_query(args.results, args.task, args.query, metric=args.metric)), end="")
        return 0
    if args.worst is not None:
        if not args.baseline:
            raise UserError("--worst N needs --baseline MODEL: the model whose scores the losses are measured against")
        from r2med_plugin.reporting.inspect import render_losses, worst_queries

        losses = worst_queries(args.results, args.baseline, args.worst, metric=args.metric, task=args.task)
        print(render_losses(losses, args.metric, args.worst, args.baseline), end="")
        return 0
    raise UserError("say what to inspect: --task T --query Q (one query), or --worst N --baseline MODEL (largest losses)")
