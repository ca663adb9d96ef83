"""`r2med tasks`, `r2med check`, `r2med demo` and `r2med cache-packaged-model`: the data and the packaged sample."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any


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


def add_commands(commands: Any) -> None:
    for add in (_add_tasks, _add_check, _add_demo, _add_cache_packaged_model):
        add(commands)
