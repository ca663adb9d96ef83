"""Run a sweep: skip finished jobs, dispatch the rest, retry failures, then summary and leaderboard."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from r2med_plugin.rules import SettingError
from r2med_plugin.sweep.engines import make_engine
from r2med_plugin.sweep.job_definition import Job
from r2med_plugin.sweep.jobs import applied_env, driver_env, finished_record, job_stamps
from r2med_plugin.sweep.spec import SweepSpec, expand_jobs

SUMMARY_FILE = "sweep-summary.json"


@dataclass
class JobStatus:
    job: Job
    stamps: dict[str, str]
    status: str = "pending"  # pending -> done | skipped | failed
    attempts: int = 0
    duration_s: float = 0.0
    errors: list[str] = field(default_factory=list)
    record: dict[str, Any] | None = None

    def as_dict(self) -> dict[str, Any]:
        record = self.record or {}
        return {
            "job_id": self.job.job_id, "label": self.job.label, "task": self.job.task, "retriever": self.job.retriever,
            "options": {k: v for k, v in self.job.options.items() if k not in ("data_dir",)},
            "status": self.status, "attempts": self.attempts, "duration_s": round(self.duration_s, 3),
            "error": self.errors[-1] if self.errors else None, "errors": self.errors,
            "paths": record.get("paths", {}), "dataset_revision": record.get("dataset_revision"),
            "model_revision": record.get("model_revision"), "main_score": record.get("main_score"),
        }


@dataclass
class SweepSummary:
    spec: SweepSpec
    engine: str
    jobs: list[JobStatus]
    wall_s: float
    leaderboards: dict[str, str] = field(default_factory=dict)

    def count(self, status: str) -> int:
        return sum(1 for job in self.jobs if job.status == status)

    @property
    def ok(self) -> bool:
        return self.count("failed") == 0 and self.count("pending") == 0

    def as_dict(self) -> dict[str, Any]:
        return {
            "spec": str(self.spec.path), "output": str(self.spec.output), "engine": self.engine, "wall_s": round(self.wall_s, 3),
            "counts": {status: self.count(status) for status in ("done", "skipped", "failed", "pending")},
            "jobs": [job.as_dict() for job in self.jobs],
            "failures": [job.as_dict() for job in self.jobs if job.status == "failed"],
            "leaderboards": sorted(self.leaderboards),
        }


def _error_text(error: BaseException) -> str:
    """The failure as the status file records it: the exception's class name (not its module path) and message."""
    text = str(error)
    return (f"{type(error).__name__}: {text}" if text else type(error).__name__)[:2000]


def plan(spec: SweepSpec, *, devices: Sequence[str] | None = None) -> list[JobStatus]:
    """Every job of the spec with its stamps; finished ones are marked "skipped" (their results are reused)."""
    jobs = expand_jobs(spec, driver_env())
    if devices:
        jobs = [replace(job, retriever=(job.retriever or {}) | {"devices": list(devices)}) if "model" in (job.retriever or {}) else job for job in jobs]
    stamp_cache: dict[str, dict[str, str]] = {}
    statuses = []
    for job in jobs:
        stamps = stamp_cache.setdefault(job.job_id, job_stamps(job))
        status = JobStatus(job, stamps)
        record = finished_record(job, stamps)
        if record is not None:
            status.status, status.record = "skipped", record
        statuses.append(status)
    return statuses


def check_job_inputs(statuses: Sequence[JobStatus]) -> None:
    """Every job still to run has its task's files, and its expansion or run file, read and checked before the first
    job runs (one task in memory at a time), so that bad input stops the sweep before any result is written."""
    from r2med_plugin.evaluation.runner import TaskInputs, check_inputs
    from r2med_plugin.sweep.job_definition import job_request

    by_env: dict[tuple, list[Job]] = {}
    for status in statuses:
        if status.status == "pending":
            by_env.setdefault(tuple(sorted(status.job.env.items())), []).append(status.job)
    models: dict[str, Any] = {}  # a model of many jobs is named once (job_request loads none)
    for env, jobs in by_env.items():
        with applied_env(dict(env)):  # a job reads its data where its env says (R2MED_DATA_DIR, R2MED_ACCEPT_DRIFT)
            check_inputs([TaskInputs.of_request(job_request(job, models)) for job in jobs])


def estimate_sweep_cost(spec: SweepSpec, *, devices: Sequence[str] | None = None, show_progress: bool = False) -> tuple[list, int]:
    """What the spec's LLM reranker jobs still to run would cost, without sending a request (one CostEstimate per job,
    r2med_plugin.evaluation.cost), and how many jobs to run send no LLM request."""
    from r2med_plugin.sweep.jobs import estimate_job_cost

    pending = [status.job for status in plan(spec, devices=devices) if status.status != "skipped"]
    estimates = [estimate_job_cost(job, show_progress) for job in pending]
    found = [estimate for estimate in estimates if estimate is not None]
    return found, len(pending) - len(found)


def _dispatch(statuses: list[JobStatus], engine: Any, retries: int, progress: Any,
              finished: Callable[[], None] = lambda: None) -> None:
    """Run the pending jobs; ``finished`` is called each time a job is done or has failed for good (the summary is
    rewritten then, so a sweep killed at any point leaves one that counts every job finished before)."""
    by_handle: dict[Any, JobStatus] = {}
    started: dict[Any, float] = {}

    def submit(status: JobStatus) -> None:
        status.attempts += 1
        handle = engine.submit(status.job, status.stamps)
        by_handle[handle] = status
        started[handle] = time.perf_counter()

    for status in statuses:
        if status.status == "pending":
            submit(status)
    last_done = time.perf_counter()
    while by_handle:
        handle, record, error = engine.next_done()
        status = by_handle.pop(handle)
        now = time.perf_counter()
        submitted = started.pop(handle)
        # A successful job measured itself. A failed one: from its submission, or from the previous job's end when
        # later (exact on the one-at-a-time engine, where a job waits in the queue until the previous one ends).
        status.duration_s += float(record["duration_s"]) if record else now - max(submitted, last_done)
        last_done = now
        if error is None:
            status.status, status.record = "done", record
            progress.update(1)
            finished()
        elif status.attempts <= retries:
            status.errors.append(_error_text(error))
            submit(status)
        else:
            status.errors.append(_error_text(error))
            status.status = "failed"
            progress.update(1)
            progress.write(f"failed after {status.attempts} attempt(s): {status.job.label}: {status.errors[-1].splitlines()[0]}", file=sys.stderr)
            finished()


def run_sweep(
    spec: SweepSpec,
    *,
    engine: str = "local",
    workers: int = 1,
    address: str | None = None,
    devices: Sequence[str] | None = None,
    retries: int | None = None,
    show_progress: bool = True,
    quiet: bool = False,
) -> SweepSummary:
    """Run every job of ``spec`` that has no complete result yet; write the summary JSON and leaderboard tables.

    ``quiet``: the jobs also silence the libraries' progress bars and non-error messages (``r2med sweep --quiet``)."""
    from tqdm.auto import tqdm

    if retries is not None and retries < 0:
        raise SettingError(f"{{retries}} must be 0 or more, got {retries}", field="retries")
    began = time.perf_counter()
    statuses = plan(spec, devices=devices)
    check_job_inputs(statuses)

    def checkpoint() -> None:
        write_summary(SweepSummary(spec, engine, statuses, time.perf_counter() - began))

    checkpoint()  # before any job runs: never the summary of an earlier run of this output folder
    todo = sum(1 for status in statuses if status.status == "pending")
    quiet = not show_progress or not sys.stderr.isatty()
    runner = make_engine(engine, workers=workers, address=address, resources=spec.resources, show_progress=show_progress and workers == 1,
                         quiet=quiet)
    try:
        with tqdm(total=todo, desc="sweep jobs", unit="job", disable=quiet) as progress:
            _dispatch(statuses, runner, spec.retries if retries is None else retries, progress, checkpoint)
    finally:
        runner.close()
        summary = SweepSummary(spec, engine, statuses, time.perf_counter() - began)
        write_summary(summary)
    summary.leaderboards = write_leaderboards(summary)
    write_summary(summary)
    return summary


def write_summary(summary: SweepSummary) -> Path:
    from r2med_plugin.io import write_json_atomic

    return write_json_atomic(summary.spec.output / SUMMARY_FILE, summary.as_dict())


def write_leaderboards(summary: SweepSummary) -> dict[str, str]:
    """The leaderboard table (Markdown) of each benchmark the sweep's results belong to, from its own result files."""
    from r2med_plugin.catalog import get_task_spec
    from r2med_plugin.reporting.leaderboard import leaderboard_of, user_rows
    from r2med_plugin.reporting.render import render
    from r2med_plugin.reporting.result_files import read_result_folders

    output = summary.spec.output
    produced = {
        (output / status.record["paths"]["mteb"]).resolve()
        for status in summary.jobs if status.record and "mteb" in status.record.get("paths", {})
    }
    if not produced:
        return {}
    records = [record for record in read_result_folders([output / "results"]) if record.path.resolve() in produced]
    tables: dict[str, str] = {}
    for benchmark in sorted({get_task_spec(status.job.task).kind for status in summary.jobs}):
        if user_rows(records, benchmark):
            table = render(leaderboard_of(records, benchmark), "md")  # labelled as `r2med leaderboard` labels them
            (output / f"leaderboard-{benchmark}.md").write_text(table, encoding="utf-8")
            tables[benchmark] = table
    return tables


def status_table(summary: SweepSummary) -> str:
    """A plain-text table of every job: status, attempts, seconds, and the last error of a failed job."""
    rows = [("status", "tries", "seconds", "job", "error")]
    for status in summary.jobs:
        error = status.errors[-1].splitlines()[0] if status.status == "failed" and status.errors else ""
        rows.append((status.status, str(status.attempts), f"{status.duration_s:.1f}", status.job.label, error[:100]))
    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    return "\n".join("  ".join(cell.ljust(width) for cell, width in zip(row[:4], widths, strict=True)) + ("  " + row[4] if row[4] else "") for row in rows)
