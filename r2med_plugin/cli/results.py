"""`r2med leaderboard` and `r2med export`: result folders into tables, pages, charts, submissions and runs."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from r2med_plugin.cli.options import refuse_unreached
from r2med_plugin.errors import UserError


def _leaderboard(args: argparse.Namespace) -> int:
    from r2med_plugin.reporting.leaderboard import build_leaderboards
    from r2med_plugin.reporting.plots import PLOT_SUFFIXES
    from r2med_plugin.reporting.render import render_many
    from r2med_plugin.reporting.rows import BENCHMARK_TITLES

    if not args.plot:
        refuse_unreached(args, {"plot_rows": "it chooses the rows of the --plot chart, which is not asked for"})
    elif Path(args.plot).suffix.lower() not in PLOT_SUFFIXES:
        raise UserError(f"--plot {args.plot}: the chart is written as {' or '.join(PLOT_SUFFIXES)}; name the file e.g. chart.png")
    else:
        from r2med_plugin.reporting.plots import require_matplotlib

        require_matplotlib()
    if not args.html:
        refuse_unreached(args, {"matrix": "it adds a section to the --html page, which is not asked for"})
    if args.html:  # refused before any result is read
        from r2med_plugin.reporting.leaderboard_page import check_page_folder

        check_page_folder(args.html)
    tables = build_leaderboards(args.results, benchmark=args.benchmark, compare_published=args.compare_published)
    if args.significance:  # intervals on the averages, rows tied with the best (per-query files)
        from r2med_plugin.reporting.leaderboard_significance import significance_for_tables

        tables = significance_for_tables(tables)
    if args.audit:  # mark the tasks where an audited model's training data overlapped the evaluation data
        from r2med_plugin.reporting.leaderboard_audit import attach_audits

        tables = attach_audits(tables, args.audit)
    text = render_many(tables, args.format)
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(text, encoding="utf-8")
        print(f"wrote {args.out}", file=sys.stderr)
    else:
        print(text, end="")
    if args.html:  # the same tables as the text above, as a page
        from r2med_plugin.reporting.leaderboard_page import write_leaderboard_page

        print(f"wrote {write_leaderboard_page(tables, args.html, matrix=args.matrix)}", file=sys.stderr)
    if args.plot:
        from r2med_plugin.reporting.plots import plot_leaderboard

        for benchmark, rows in tables.items():
            path = Path(args.plot)
            if len(tables) > 1 and benchmark == "nano":
                path = path.with_name(f"{path.stem}-nano{path.suffix}")
            written, dropped = plot_leaderboard(rows, path, benchmark=benchmark, selection=args.plot_rows)
            print(f"wrote {written}" + (f" ({BENCHMARK_TITLES[benchmark]})" if len(tables) > 1 else ""), file=sys.stderr)
            if dropped:
                print(f"  not plotted ({len(dropped)} rows; choose with --plot-rows, or --plot-rows all): {'; '.join(dropped)}",
                      file=sys.stderr)
    return 0


def _export(args: argparse.Namespace) -> int:
    from r2med_plugin.reporting.submission import export_submission, export_trec_runs

    if args.submission:
        refuse_unreached(args, {"depth": "it is the depth of --trec run files; a submission holds scores"})
        if not args.model:
            raise UserError("--submission needs --model NAME (the model name in the result folders)")
        if args.venue != "r2med":
            paths = _export_venue(args)
            for path in paths:
                print(f"wrote {path}")
            return 0
        paths = export_submission(args.submission, args.model, args.out, model_size=args.model_size,
                                  uses_llm=args.uses_llm, description=args.description, allow_incomplete=args.allow_incomplete,
                                  force=args.force)
    else:
        why = "it describes a --submission; --trec exports runs as they are"
        refuse_unreached(args, {dest: why for dest in ("model", "model_size", "uses_llm", "description", "allow_incomplete", "force",
                                                       "venue")})
        paths = export_trec_runs(args.trec, args.out, depth=args.depth)
    for path in paths:
        print(f"wrote {path}")
    return 0


def _export_venue(args: argparse.Namespace) -> list:
    """--venue mteb or hakari: the results in that venue's layout (reporting/venues.py)."""
    from r2med_plugin.reporting.venues import export_hakari, export_mteb

    why = f"it describes an R2MED leaderboard submission (--venue r2med), not one for {args.venue}"
    refuse_unreached(args, {dest: why for dest in ("model_size", "uses_llm", "description")})
    if args.venue == "mteb":
        return export_mteb(args.submission, args.model, args.out, allow_incomplete=args.allow_incomplete, force=args.force)
    return export_hakari(args.submission, args.model, args.out, allow_incomplete=args.allow_incomplete, force=args.force)


def _add_leaderboard(commands: Any) -> None:
    board = commands.add_parser("leaderboard", help="the R2MED leaderboard table from MTEB result folders")
    board.add_argument("results", nargs="+", help="MTEB result folders (ResultCache layout)")
    board.add_argument("--benchmark", choices=["r2med", "nano"], default=None,
                       help="one benchmark's table (default: every benchmark the folders hold)")
    board.add_argument("--format", choices=["md", "csv", "html"], default="md")
    board.add_argument("--out", default=None, help="write the table here instead of printing it")
    board.add_argument("--plot", default=None, help="also draw a chart (.png or .svg)")
    board.add_argument("--html", default=None, metavar="DIR",
                       help="also write the table as a sortable, filterable page, DIR/index.html (opens from file://)")
    board.add_argument("--matrix", default=None, metavar="FILE",
                       help="with --html: add a section showing a reproduction matrix (`r2med reproduce --matrix --json FILE`)")
    board.add_argument("--plot-rows", nargs="+", default=None, metavar="ROW",
                       help="rows to plot: 'all', row numbers as printed (1 = first row) or labels ('o3-mini | bm25-lucene (hyde)')")
    board.add_argument("--compare-published", action="store_true", help="place the rows among the published leaderboard")
    board.add_argument("--significance", action="store_true",
                       help="95%% intervals on your rows' averages and which rows tie with the best (needs per-query files)")
    board.add_argument("--audit", nargs="+", default=None, metavar="[MODEL=]DIR",
                       help="mark the tasks where a model's training data overlapped (folders of `r2med audit --out DIR`; "
                            "MODEL= when the audit was run without --model)")
    board.set_defaults(func=_leaderboard)


def _add_export(commands: Any) -> None:
    export = commands.add_parser("export", help="a submission for the R2MED leaderboard, mteb's results or HAKARI-Bench, "
                                                "or TREC runs from MTEB predictions")
    source = export.add_mutually_exclusive_group(required=True)
    source.add_argument("--submission", nargs="+", metavar="RESULTS_DIR", help="MTEB result folders")
    source.add_argument("--trec", nargs="+", metavar="PREDICTIONS_DIR", help="folders with MTEB <Task>_predictions.json files")
    export.add_argument("--model", default=None, help="the model name as it appears in the results")
    export.add_argument("--venue", choices=("r2med", "mteb", "hakari"), default="r2med",
                        help="with --submission, where it goes: r2med (default: the R2MED leaderboard's folder), mteb "
                             "(mteb's results repository layout), hakari (HAKARI-Bench's hakari-results/ .json.xz files "
                             "and a PR body; NanoR2MED only)")
    export.add_argument("--out", required=True)
    export.add_argument("--model-size", default=None, help="e.g. 22.7M or 7B")
    export.add_argument("--uses-llm", action=argparse.BooleanOptionalAction, default=None)
    export.add_argument("--description", default="")
    export.add_argument("--depth", type=int, default=1000, help="documents per query in TREC run files (default 1000)")
    export.add_argument("--allow-incomplete", action="store_true",
                        help="write a submission although tasks are missing (--venue r2med) or ran on mirror files that prove "
                             "no hub commit, marked as such: in the README (r2med), dataset_revision_verified false (mteb), "
                             "no resolved dataset revision (hakari); synthetic-sample and count-drift results are refused "
                             "on every venue")
    export.add_argument("--force", action="store_true",
                        help="replace a submission folder of another model (or with other files in it) whole; never mixed "
                             "(--venue mteb/hakari: overwrite a file there that holds another result)")
    export.set_defaults(func=_export)


def add_commands(commands: Any) -> None:
    for add in (_add_leaderboard, _add_export):
        add(commands)
