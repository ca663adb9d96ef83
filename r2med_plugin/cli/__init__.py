"""The `r2med` command: argument parsing and printing only."""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from r2med_plugin.cli.options import CommandParser, positive_int, price, refuse_unreached
from r2med_plugin.errors import UserError


def _tasks(args: argparse.Namespace) -> int:
    from r2med_plugin.catalog import list_tasks

    specs = list_tasks(args.kind)
    rows = [(spec.name, spec, "docs", spec.expected_counts["documents"]) for spec in specs]
    rows += [(spec.name + "Reranking", spec, "cands", 101) for spec in specs if spec.kind == "nano"]  # the MTEB
    # reranking task over the same data (reranking_hybrid lists: 100 candidates and at most one safeguard row)
    width = max((len(name) for name, *_ in rows), default=0)
    for name, spec, unit, count in rows:
        print(f"{name:<{width}}  {spec.hub_repo:<24} {spec.expected_counts['queries']:>4} queries {count:>6} {unit:<5} "
              f"{spec.revision or 'resolved at load'}")
    return 0


def _check(args: argparse.Namespace) -> int:
    from r2med_plugin.data.loader import load_task

    data = load_task(args.task, data_dir=args.data_dir, accept_drift=args.accept_drift)
    summary = {
        "task": data.name,
        "source": data.source,
        "revision": data.revision,
        "documents": data.corpus.height,  # unique ids; the file's rows are report.corpus_rows
        "corpus_rows": data.report.corpus_rows,
        "queries": data.queries.height,
        "qrels_queries": len(data.qrels),
        "candidate_lists": {key: len(lists) for key, lists in data.candidates.items()},
        "report": dict(data.report),
    }
    print(json.dumps(summary, indent=2, default=str))
    return 0


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


def _cache_packaged_model(args: argparse.Namespace) -> int:
    from r2med_plugin.models.identity import cache_packaged_model, default_hf_home

    name, revision, snapshot = cache_packaged_model(args.alias, args.hf_home)
    home = Path(args.hf_home) if args.hf_home is not None else default_hf_home()
    print(f"{name} at revision {revision}: {snapshot} (links to the packaged files)")
    print(f"  HF_HOME={home} HF_HUB_OFFLINE=1 mteb run -t NanoR2MEDBioinformatics -m {name}")
    return 0


def _demo(args: argparse.Namespace) -> int:
    from r2med_plugin.integrations.demo import run_demo, sample_dir
    from r2med_plugin.reporting.plots import require_matplotlib

    if args.sample_dir:  # for --data-dir / R2MED_DATA_DIR: needs no extra
        print(sample_dir())
        return 0
    require_matplotlib("demo")  # the demo ends with a chart: refused before it evaluates anything
    if args.quiet:
        from r2med_plugin.quiet import silence_libraries

        silence_libraries()
    run_demo(args.out, show_progress=not args.quiet)
    return 0


def _reproduce(args: argparse.Namespace) -> int:
    from r2med_plugin.evaluation.reproduce import render_report, reproduce

    if args.matrix or args.list:
        return _reproduce_matrix(args)
    matrix_only = "a matrix option: add --matrix"
    refuse_unreached(args, {"rows": matrix_only, "json": matrix_only, "device": matrix_only})
    report = reproduce(
        expected=args.expected, data_dir=args.data_dir, accept_drift=args.accept_drift, tolerance=args.tolerance,
        nano=not args.skip_nano, output=args.output, show_progress=not args.quiet,
    )
    print(render_report(report), end="")
    return 0 if report.passed else 1


def _reproduce_matrix(args: argparse.Namespace) -> int:
    from r2med_plugin.evaluation.matrix import matrix_json, matrix_rows, render_list, render_matrix, run_matrix, select_rows

    refuse_unreached(args, {"expected": "the matrix checks the published rows", "skip_nano": "the matrix runs the R2MED tasks only"})
    rows = matrix_rows()
    if args.list:
        refuse_unreached(args, {dest: "--list runs nothing" for dest in ("json", "output", "device")})
        print(render_list(select_rows(rows, args.rows) if args.rows else rows), end="")
        return 0
    report = run_matrix(rows, pattern=args.rows, data_dir=args.data_dir, accept_drift=args.accept_drift,
                        tolerance=args.tolerance, output=args.output, device=args.device, show_progress=not args.quiet)
    print(render_matrix(report), end="")
    if args.json:
        from r2med_plugin.io import write_text_atomic

        write_text_atomic(args.json, json.dumps(matrix_json(report), indent=2) + "\n")
        print(f"wrote {args.json}", file=sys.stderr)
    return 0 if report.passed else 1


def _sweep(args: argparse.Namespace) -> int:
    from r2med_plugin.sweep import load_spec, plan, run_sweep, status_table
    from r2med_plugin.sweep.driver import SUMMARY_FILE

    if args.dry_run:
        refuse_unreached(args, {dest: "--dry-run runs nothing" for dest in ("engine", "address", "workers", "retries",
                                                                           "estimate_cost")})
    if args.estimate_cost:
        refuse_unreached(args, {dest: "--estimate-cost runs no job" for dest in ("engine", "address", "workers", "retries")})
    else:
        refuse_unreached(args, {dest: "it prices the LLM requests --estimate-cost estimates (a sweep's cost lines are its "
                                      "jobs' result files)" for dest in ("price_in", "price_out")})
    if args.engine != "ray":
        refuse_unreached(args, {"address": "it names a Ray cluster, used with --engine ray only"})
    if args.quiet:  # before any library is imported: jobs in worker processes inherit the switches too
        from r2med_plugin.quiet import silence_libraries

        silence_libraries()
    spec = load_spec(args.spec)
    devices = [device.strip() for device in args.devices.split(",")] if args.devices else None
    if args.estimate_cost:  # what the LLM reranker jobs still to run would cost; nothing is sent
        return _estimate_sweep(args, spec, devices)
    if args.dry_run:
        statuses = plan(spec, devices=devices)
        for status in statuses:
            print(f"{'skip' if status.status == 'skipped' else 'run '}  {status.job.job_id}  {status.job.label}")
        print(f"{len(statuses)} jobs: {sum(s.status == 'skipped' for s in statuses)} already done")
        return 0
    summary = run_sweep(spec, engine=args.engine, workers=args.workers, address=args.address, devices=devices,
                        retries=args.retries, show_progress=not args.quiet, quiet=args.quiet)
    print(status_table(summary))
    for benchmark, table in summary.leaderboards.items():
        print(f"\n{benchmark} leaderboard (this sweep's results)\n\n{table}", end="")
    counts = ", ".join(f"{summary.count(status)} {status}" for status in ("done", "skipped", "failed"))
    print(f"\n{len(summary.jobs)} jobs: {counts}; {summary.wall_s:.1f} s\nwrote {spec.output / SUMMARY_FILE}")
    return 0 if summary.ok else 1


def _estimate_sweep(args: argparse.Namespace, spec, devices: list[str] | None) -> int:
    from r2med_plugin.llm.cost import check_prices, render_estimates
    from r2med_plugin.sweep import estimate_sweep_cost

    check_prices(args.price_in, args.price_out)
    estimates, others = estimate_sweep_cost(spec, devices=devices, show_progress=not args.quiet)
    print(render_estimates(estimates, args.price_in, args.price_out) if estimates else "no LLM reranker job to run\n", end="")
    if others:
        print(f"{others} other jobs to run send no LLM request")
    return 0


def _add_tasks(commands: Any) -> None:
    tasks = commands.add_parser("tasks", help="list the tasks with their hub source and revision")
    tasks.add_argument("--kind", choices=["r2med", "nano"], default=None)
    tasks.set_defaults(func=_tasks)

def _add_check(commands: Any) -> None:
    check = commands.add_parser("check", help="load one task, validate it and print what was found")
    check.add_argument("task")
    check.add_argument("--data-dir", default=None, help="local mirror (default: $R2MED_DATA_DIR, else the hub)")
    check.add_argument("--accept-drift", action="store_true", default=None, help="accept counts/revision that differ from task_metadata")
    check.set_defaults(func=_check)

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

def _add_reproduce(commands: Any) -> None:
    repro = commands.add_parser(
        "reproduce", help="official BM25 on the 8 R2MED tasks vs the published row, NanoR2MED candidate profiles vs task_metadata",
        description="Exit status 0 when every check passes, 1 on any mismatch, 2 on an error (e.g. data not reachable).",
    )
    repro.add_argument("--expected", default=None, metavar="FILE",
                       help='JSON {"bm25_ndcg_at_10": {task: nDCG@10 x 100}, "candidate_profiles": {NanoTask: {list: {metric: value}}}}; '
                            "default: the published BM25 row and task_metadata (a list's pooled recall is "
                            "pooled_recall_at_100; recall_at_100 in older files is read as the pooled one)")
    repro.add_argument("--tolerance", type=float, default=0.1, help="largest |ours - published| in nDCG@10 points (default 0.1)")
    repro.add_argument("--skip-nano", action="store_true", help="skip the NanoR2MED candidate-profile check")
    repro.add_argument("--output", default=None, help="also write the result files (MTEB and official JSON) here")
    repro.add_argument("--data-dir", default=None)
    repro.add_argument("--accept-drift", action="store_true", default=None)
    repro.add_argument("--quiet", action="store_true", help="no progress bars")
    matrix = repro.add_argument_group("the reproduction matrix: every published leaderboard row")
    matrix.add_argument("--matrix", action="store_true",
                        help="recompute the published rows this machine can (default: the 14 BM25 rows, one corpus index "
                             "per task), resumable: the state lives under --output, else the cache folder")
    matrix.add_argument("--rows", default=None, metavar="PATTERN",
                        help="case-insensitive glob over '<LLM> + <Retriever>' as the leaderboard names them, or over "
                             "'<method>/<llm> + <Retriever>' (the expansion file) (e.g. '*BM25', 'o3-mini + *', 'hyde/*', "
                             "'hyde/gpt4 + *'); default: the CPU rows")
    matrix.add_argument("--list", action="store_true", help="list every published row with its command and what it needs; runs nothing")
    matrix.add_argument("--device", default="auto",
                        help="device for the selected rows that load a model: auto (default: CUDA when there is one), cpu, "
                             "cuda, cuda:1, mps, or a list (cuda:0,cuda:1)")
    matrix.add_argument("--json", default=None, metavar="FILE",
                        help='write {"data": {...}, "rows": [...]} (per task the data the verdicts stand on: dataset_revision, '
                             "verified, files_fingerprint, count_drift; per row llm, retriever, published, ours, delta, "
                             "status, data_label, command)")
    repro.set_defaults(func=_reproduce)

def _add_demo(commands: Any) -> None:
    demo = commands.add_parser("demo", help="BM25, MiniLM, hybrid and candidate subsets on the shipped synthetic sample, offline")
    demo.add_argument("--out", default="r2med-demo", help="folder for the results, table and chart (default: ./r2med-demo)")
    demo.add_argument("--quiet", action="store_true")
    demo.add_argument("--sample-dir", action="store_true",
                      help="print the folder of the packaged synthetic sample (a mirror for --data-dir) and exit")
    demo.set_defaults(func=_demo)

def _add_cache_packaged_model(commands: Any) -> None:
    packaged = commands.add_parser("cache-packaged-model", help="lay the packaged MiniLM out as a Hugging Face cache, so "
                                   "`mteb run -m sentence-transformers/all-MiniLM-L6-v2` works offline")
    packaged.add_argument("alias", nargs="?", default="minilm-packaged", help="the packaged model (default: minilm-packaged)")
    packaged.add_argument("--hf-home", default=None, help="the Hugging Face home to write into (default: $HF_HOME or ~/.cache/huggingface)")
    packaged.set_defaults(func=_cache_packaged_model)

def _add_sweep(commands: Any) -> None:
    sweep = commands.add_parser("sweep", help="run a YAML spec of tasks x retrievers x expansions, locally or on Ray, resumably")
    sweep.add_argument("spec", help="the sweep spec (YAML); see README, 'Sweeps and clusters'")
    sweep.add_argument("--engine", choices=["local", "ray"], default="local", help="local: this machine (default); ray: Ray tasks (needs r2med-plugin[ray])")
    sweep.add_argument("--address", default=None, help="Ray cluster: auto, or ray://HEAD:10001 (default: start a local Ray)")
    sweep.add_argument("--workers", type=positive_int, default=1, help="local: jobs at once (processes); ray: CPUs of a local Ray")
    sweep.add_argument("--devices", default=None, help="encode each model on these devices, e.g. cuda:0,cuda:1 or cpu,cpu")
    sweep.add_argument("--retries", type=int, default=None, help="extra attempts for a failed job (default: the spec's, else 1)")
    sweep.add_argument("--dry-run", action="store_true", help="list the jobs and which are already done; run nothing")
    sweep.add_argument("--quiet", action="store_true", help="no progress bars and no library warnings, in every job (errors still print)")
    sweep.add_argument("--estimate-cost", action="store_true",
                       help="print what the LLM reranker jobs still to run would cost (requests, prompt tokens, completion "
                            "budget, dollars with --price-in/--price-out) and run nothing")
    sweep.add_argument("--price-in", type=price, default=None, metavar="USD", help="with --estimate-cost: US dollars per million prompt tokens")
    sweep.add_argument("--price-out", type=price, default=None, metavar="USD", help="with --estimate-cost: US dollars per million completion tokens")
    sweep.set_defaults(func=_sweep)


def build_parser() -> argparse.ArgumentParser:
    from r2med_plugin.cli.audit import add_commands as add_audit  # r2med audit
    from r2med_plugin.cli.compare import add_commands as add_compare  # r2med compare, r2med inspect
    from r2med_plugin.cli.evaluate import add_evaluate_command
    from r2med_plugin.cli.generate import add_generate_command
    from r2med_plugin.version import __version__

    parser = argparse.ArgumentParser(prog="r2med", description="R2MED and NanoR2MED retrieval evaluation.")
    parser.add_argument("--version", action="version", version=f"r2med-plugin {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, parser_class=CommandParser)
    for add in (_add_tasks, _add_check, add_evaluate_command, add_generate_command, _add_leaderboard, _add_export, _add_reproduce,
                _add_demo, _add_cache_packaged_model, _add_sweep, add_compare, add_audit):
        add(commands)
    return parser


class _OncePerMessage(logging.Filter):
    """Within one command, a warning whose text was already shown is not shown again (the unverified-mirror
    warning is the same for every task of a mirror, and would repeat per task and per expansion)."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: set[str] = set()

    def filter(self, record: logging.LogRecord) -> bool:
        text = record.getMessage()
        if text in self.seen:
            return False
        self.seen.add(text)
        return True


def _package_messages() -> logging.Handler:
    """The package's warnings on stderr, each text once per command."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setLevel(logging.WARNING)
    handler.setFormatter(logging.Formatter("%(message)s"))
    handler.addFilter(_OncePerMessage())
    return handler


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    args = parser.parse_args(argv)  # args.given: the options the command line wrote (CommandParser)
    package_logger = logging.getLogger("r2med_plugin")
    handler = _package_messages()
    package_logger.addHandler(handler)
    try:
        return args.func(args)
    except KeyboardInterrupt:
        # Result files are written atomically: an interrupted run leaves no partial file behind.
        print("r2med: interrupted (Ctrl-C); files already written are complete, none is partial", file=sys.stderr)
        return 130
    except UserError as error:  # the user's mistake, worded with the CLI's flags; anything else is a bug: its traceback
        print(f"r2med: error: {error.flag_message}", file=sys.stderr)
        return 2
    finally:
        package_logger.removeHandler(handler)
        from r2med_plugin.quiet import restore_libraries

        restore_libraries()
