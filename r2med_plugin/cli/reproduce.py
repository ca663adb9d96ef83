"""`r2med reproduce`: the official BM25 and candidate profiles against the published figures, and the matrix."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from r2med_plugin.cli.options import refuse_unreached


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


def add_commands(commands: Any) -> None:
    for add in (_add_reproduce,):
        add(commands)
