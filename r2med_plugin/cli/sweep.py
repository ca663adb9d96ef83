"""`r2med sweep`: a YAML spec of jobs, run locally or on Ray, resumably."""

from __future__ import annotations

import argparse
from typing import Any

from r2med_plugin.cli.options import positive_int, price, refuse_unreached


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
    devices = [device.strip() for device in args.device.split(",")] if args.device else None
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


def _add_sweep(commands: Any) -> None:
    sweep = commands.add_parser("sweep", help="run a YAML spec of tasks x retrievers x expansions, locally or on Ray, resumably")
    sweep.add_argument("spec", help="the sweep spec (YAML); its keys: docs/how-to/sweeps.md and docs/reference/file-formats.md")
    sweep.add_argument("--engine", choices=["local", "ray"], default="local", help="local: this machine (default); ray: Ray tasks (needs r2med-plugin[ray])")
    sweep.add_argument("--address", default=None, help="Ray cluster: auto, or ray://HEAD:10001 (default: start a local Ray)")
    sweep.add_argument("--workers", type=positive_int, default=1, help="local: jobs at once (processes); ray: CPUs of a local Ray")
    sweep.add_argument("--device", "--devices", dest="device", default=None,
                       help="encode each model on this device or these devices (one process each), as r2med evaluate "
                            "--device: cuda:1, cuda:0,cuda:1 or cpu,cpu (--devices: its earlier name); default: the spec's")
    sweep.add_argument("--retries", type=int, default=None, help="extra attempts for a failed job (default: the spec's, else 1)")
    sweep.add_argument("--dry-run", action="store_true", help="list the jobs and which are already done; run nothing")
    sweep.add_argument("--quiet", action="store_true", help="no progress bars and no library warnings, in every job (errors still print)")
    sweep.add_argument("--estimate-cost", action="store_true",
                       help="print what the LLM reranker jobs still to run would cost (requests, prompt tokens, completion "
                            "budget, dollars with --price-in/--price-out) and run nothing")
    sweep.add_argument("--price-in", type=price, default=None, metavar="USD", help="with --estimate-cost: US dollars per million prompt tokens")
    sweep.add_argument("--price-out", type=price, default=None, metavar="USD", help="with --estimate-cost: US dollars per million completion tokens")
    sweep.set_defaults(func=_sweep)


def add_commands(commands: Any) -> None:
    for add in (_add_sweep,):
        add(commands)
