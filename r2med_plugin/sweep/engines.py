"""Where jobs run: in this process, in a local process pool, or as Ray tasks.

Every engine has the same two calls: ``submit(job, stamps)`` returns a handle, and ``next_done()``
waits for one submitted job and returns ``(handle, record, error)``. Retrying is the driver's business.
"""

from __future__ import annotations

import concurrent.futures as futures
import multiprocessing
import os
import sys
from collections.abc import Mapping
from typing import Any

from r2med_plugin.rules import SettingError
from r2med_plugin.sweep.job_definition import Job
from r2med_plugin.sweep.jobs import execute_job, release_models

ENGINES = ("local", "ray")
RAY_HINT = 'pip install "r2med-plugin[ray]"'


class SequentialEngine:
    """Jobs one after another in this process (a loaded model is reused by the next job of the same model)."""

    def __init__(self, show_progress: bool = True, quiet: bool = False) -> None:
        self.queue: list[tuple[int, Job, Mapping[str, str]]] = []
        self.show_progress = show_progress
        self.quiet = quiet
        self.counter = 0

    def submit(self, job: Job, stamps: Mapping[str, str]) -> int:
        self.counter += 1
        self.queue.append((self.counter, job, stamps))
        return self.counter

    def next_done(self) -> tuple[Any, dict | None, BaseException | None]:
        handle, job, stamps = self.queue.pop(0)
        try:
            return handle, execute_job(job.to_dict(), stamps, self.show_progress, self.quiet), None
        except Exception as error:  # noqa: BLE001 - a failed job is reported, the others go on
            return handle, None, error

    def close(self) -> None:
        self.queue.clear()
        release_models()


def _share_cores(threads: int) -> None:
    """Runs first in each worker process: its share of the cores for torch and BLAS (as Ray gives its workers)."""
    for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ.setdefault(name, str(threads))
    if "torch" in sys.modules:
        sys.modules["torch"].set_num_threads(threads)


class ProcessEngine:
    """Up to ``workers`` jobs at once in fresh (spawned) processes on this machine, each with its share of the cores."""

    def __init__(self, workers: int, quiet: bool = False) -> None:
        self.workers = workers
        self.quiet = quiet
        self.pool = self._new_pool()
        self.pending: set[futures.Future] = set()

    def _new_pool(self) -> futures.ProcessPoolExecutor:
        threads = max(1, (os.cpu_count() or 1) // self.workers)
        return futures.ProcessPoolExecutor(
            max_workers=self.workers, mp_context=multiprocessing.get_context("spawn"), initializer=_share_cores, initargs=(threads,)
        )

    def submit(self, job: Job, stamps: Mapping[str, str]) -> futures.Future:
        try:
            future = self.pool.submit(execute_job, job.to_dict(), dict(stamps), False, self.quiet)
        except futures.BrokenExecutor:  # a worker died (killed, out of memory): start a new pool
            self.pool = self._new_pool()
            future = self.pool.submit(execute_job, job.to_dict(), dict(stamps), False, self.quiet)
        self.pending.add(future)
        return future

    def next_done(self) -> tuple[Any, dict | None, BaseException | None]:
        done, _ = futures.wait(self.pending, return_when=futures.FIRST_COMPLETED)
        future = next(iter(done))
        self.pending.discard(future)
        error = future.exception()
        return future, None if error else future.result(), error

    def close(self) -> None:
        for future in self.pending:
            future.cancel()
        self.pool.shutdown(wait=True, cancel_futures=True)


class RayEngine:
    """Jobs as Ray tasks: model jobs ask for a GPU when the cluster has GPUs, BM25 jobs for CPUs only.

    Connects to ``address`` ("auto", "ray://head:10001"), else starts a local Ray (``num_cpus=workers``);
    a Ray session the caller already started is used as it is and left running.
    """

    def __init__(self, address: str | None, workers: int | None, resources: Mapping[str, float], quiet: bool = False) -> None:
        try:
            import ray
        except ImportError:
            raise SettingError(f"{{engine}} ray needs Ray: {RAY_HINT}", field="engine") from None
        self.ray = ray
        self.started_here = not ray.is_initialized()
        if self.started_here:
            if address:
                ray.init(address=address, log_to_driver=False)
            else:
                ray.init(num_cpus=workers or None, include_dashboard=False, log_to_driver=False)
        self.has_gpus = ray.cluster_resources().get("GPU", 0) > 0
        self.resources = dict(resources)
        self.quiet = quiet
        self.remote = ray.remote(execute_job)
        self.pending: list[Any] = []

    def job_resources(self, job: Job) -> dict[str, float]:
        devices = (job.retriever or {}).get("devices") or []
        if not job.is_model_job:
            return {"num_cpus": self.resources["bm25_cpus"], "num_gpus": 0}
        if self.has_gpus:
            gpus = sum(1 for device in devices if device.startswith("cuda")) or self.resources["model_gpus"]
            return {"num_cpus": self.resources["model_cpus"], "num_gpus": gpus}
        return {"num_cpus": max(self.resources["model_cpus"], float(len(devices))), "num_gpus": 0}

    def submit(self, job: Job, stamps: Mapping[str, str]) -> Any:
        reference = self.remote.options(max_retries=0, **self.job_resources(job)).remote(job.to_dict(), dict(stamps), False, self.quiet)
        self.pending.append(reference)
        return reference

    def next_done(self) -> tuple[Any, dict | None, BaseException | None]:
        (reference,), _ = self.ray.wait(self.pending, num_returns=1)
        self.pending.remove(reference)
        try:
            return reference, self.ray.get(reference), None
        except Exception as error:  # noqa: BLE001 - RayTaskError wraps the job's own exception
            return reference, None, getattr(error, "cause", None) or error

    def close(self) -> None:
        for reference in self.pending:
            self.ray.cancel(reference, force=True)
        self.pending.clear()
        if self.started_here:
            self.ray.shutdown()


def make_engine(
    engine: str, *, workers: int = 1, address: str | None = None, resources: Mapping[str, float], show_progress: bool = True,
    quiet: bool = False,
) -> SequentialEngine | ProcessEngine | RayEngine:
    if engine not in ENGINES:
        raise SettingError(f"{{engine}} must be one of {list(ENGINES)}, got {engine!r}", field="engine")
    if workers < 1:
        raise SettingError(f"{{workers}} must be a positive integer, got {workers}", field="workers")
    if engine == "ray":
        return RayEngine(address, workers if workers > 1 else None, resources, quiet)
    if address:
        raise SettingError("{address} names a Ray cluster: use it with {engine} ray", field="address")
    return ProcessEngine(workers, quiet) if workers > 1 else SequentialEngine(show_progress, quiet)
