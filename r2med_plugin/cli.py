"""The `r2med` command: argument parsing and printing only."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence


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
