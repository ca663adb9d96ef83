"""Running one job, and knowing whether it already ran.

A finished job leaves a record, ``<output>/.sweep/jobs/<job id>.json``, written atomically after its
result files. The record holds the stamps of its inputs: the dataset (mirror revision and a fingerprint
of its files' content, or the hub commit) and the model (pinned revision, folder files' content, or the
cached hub commit). A job is skipped only when its record, every file it lists and both stamps are
as they would be now.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from r2med_plugin.data.expansions import expansion_name
from r2med_plugin.models.protocols import as_encoder
from r2med_plugin.models.registry import cached_hub_commit, files_stamp
from r2med_plugin.sweep.job_definition import Job

RECORDS = Path(".sweep") / "jobs"
# What a job needs from the driver's environment to find the same data, cache and model files.
PASSED_ENV = (
    "R2MED_DATA_DIR", "R2MED_CACHE_DIR", "R2MED_ACCEPT_DRIFT", "R2MED_NO_CACHE", "HF_HOME", "HF_HUB_CACHE",
    "HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE", "TOKENIZERS_PARALLELISM",
)
_LOADED: dict[tuple, Any] = {}  # one loaded model per process, reused by consecutive jobs of the same model


def driver_env() -> dict[str, str | None]:
    """The driver's values of PASSED_ENV (None: unset), for jobs that run in other processes or machines."""
    return {name: os.environ.get(name) for name in PASSED_ENV}


@contextmanager
def applied_env(env: Mapping[str, str | None]) -> Iterator[None]:
    saved = {name: os.environ.get(name) for name in env}

    def apply(values: Mapping[str, str | None]) -> None:
        for name, value in values.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value

    apply(env)
    try:
        yield
    finally:
        apply(saved)


_SECRET_WORDS = ("TOKEN", "SECRET", "PASSWORD", "KEY", "CREDENTIAL")


def recorded_env(env: Mapping[str, str | None]) -> dict[str, str | None]:
    """The environment a job ran with, as its record keeps it: the values of secret-looking variables are hidden."""
    return {name: ("***" if value and any(word in name.upper() for word in _SECRET_WORDS) else value) for name, value in env.items()}


def record_path(output: str | os.PathLike, job_id: str) -> Path:
    return Path(output) / RECORDS / f"{job_id}.json"


# --- stamps: what a result depends on, computed cheaply without loading data or models ----------------


def dataset_stamp(task: str, data_dir: str | None, accept_drift: bool | None = None) -> str:
    """What a job's data is, in the current environment (call it with the job's environment applied): the mirror
    folder the job reads (``data_dir``, else R2MED_DATA_DIR), its recorded commit and its files' content, or
    the hub commit; and whether drift is accepted (a job that would now be refused is not kept as done)."""
    from r2med_plugin.catalog import get_task_spec
    from r2med_plugin.data.hub import data_dir_from_env, recorded_mirror_revision
    from r2med_plugin.data.loader import drift_accepted

    spec = get_task_spec(task)
    drift = f"drift-accepted:{drift_accepted(accept_drift)}"
    mirror = data_dir_from_env(data_dir)
    if mirror is not None:
        root = (mirror / spec.hub_org / spec.hub_repo_name).absolute()
        if not root.is_dir():
            return f"missing:{root}"
        return f"mirror:{root.resolve()}:{recorded_mirror_revision(root) or spec.revision or '-'}:{files_stamp(root)}:{drift}"
    return f"hub:{spec.revision or cached_hub_commit(spec.hub_repo, 'dataset', 'main') or 'main'}:{drift}"


def model_stamp(name: str, revision: str | None, *, loader: str | None = None, settings: Mapping[str, Any] | None = None) -> str:
    """A model's (or run file's) stamp, resolved like every name (r2med_plugin.models.registry)."""
    from r2med_plugin.models.registry import resolve

    return resolve(name, revision, loader=loader, settings=settings).stamp()


def _loading(retriever: Mapping[str, Any]) -> dict[str, Any]:
    """The retriever entry's loader and endpoint settings, as resolve() takes them."""
    from r2med_plugin.sweep.entries import LOADING_KEYS

    settings = {key: retriever[key] for key in LOADING_KEYS if key != "loader" and retriever.get(key) is not None}
    return {"loader": retriever.get("loader"), "settings": settings}


def job_stamps(job: Job) -> dict[str, str]:
    """Stamps of a job's dataset and of every model or run file it reads, in the job's own environment
    (``job.env``: the driver's R2MED_DATA_DIR, HF_HOME, ... with the spec's `env:` over them), as the job will run."""
    with applied_env(job.env):
        return _job_stamps(job)


def _job_stamps(job: Job) -> dict[str, str]:
    stamps = {"dataset": dataset_stamp(job.task, job.options.get("data_dir"), job.options.get("accept_drift"))}
    retriever = job.retriever or {}
    if retriever:
        stamps["retriever"] = model_stamp(retriever.get("bm25") or retriever["model"], retriever.get("revision"),
                                          **_loading(retriever))
    for key in ("rerank", "first_stage"):
        if key == "rerank" and job.options.get("llm_reranker") is not None:
            stamps[key] = _llm_stamp(job.options["rerank"], job.options["llm_reranker"])
        elif isinstance(job.options.get(key), str):
            stamps[key] = model_stamp(job.options[key], None)
    expansion = expansion_name(job.options.get("expansion"))
    if expansion is not None and expansion.is_local:  # released expansions are in the dataset repo
        stamps["expansion"] = _local_expansion_stamp(job.task, expansion)
    return stamps


def _llm_stamp(name: str, asks: Mapping[str, Any]) -> str:
    """An LLM reranker's stamp: the plugin version (its prompts and parsing), the endpoint's host and the model id
    (what it serves cannot be seen from here: a redeployed model under one id is the same stamp)."""
    from r2med_plugin.endpoints.client import endpoint_host
    from r2med_plugin.version import __version__

    return f"r2med-plugin-{__version__}:llm:{endpoint_host(str(asks['base_url']))}:{name}"


def _local_expansion_stamp(task: str, expansion: str) -> str:
    """The task's own file of a local expansion (<folder>/<HubName>/<method>/<llm>/) and its manifest."""
    from r2med_plugin.catalog import get_task_spec
    from r2med_plugin.data.expansions import resolve_local_expansion

    try:
        local = resolve_local_expansion(get_task_spec(task), expansion)
    except (FileNotFoundError, ValueError):
        return f"missing:{expansion}"
    return files_stamp(local.path.parent)


def file_digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def finished_record(job: Job, stamps: Mapping[str, str]) -> dict[str, Any] | None:
    """The job's record when its results are complete and were computed from the same inputs, else None."""
    path = record_path(job.output, job.job_id)
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(record, dict) or record.get("status") != "done" or record.get("job_id") != job.job_id:
        return None
    if record.get("stamps") != dict(stamps) or not record.get("paths"):
        return None
    digests = record.get("digests") or {}
    for kind, relative in record["paths"].items():
        path = Path(job.output) / relative
        if not _complete(path, kind, job.task):
            return None
        # Another job (other candidates, top_k, options) may have written the same file since: then it is not ours.
        if kind in digests and file_digest(path) != digests[kind]:
            return None
    return record


def _complete(path: Path, kind: str, task: str) -> bool:
    if not path.is_file():
        return False
    if not path.name.endswith(".json"):
        return path.stat().st_size > 0
    try:
        payload = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    if kind == "mteb":
        return payload.get("task_name") == task and bool(payload.get("scores"))
    return isinstance(payload, dict) and bool(payload)


# --- running ------------------------------------------------------------------------------------------


def _ray_gpu_devices() -> list[str] | None:
    """cuda:0..n-1 inside a Ray task that was given n GPUs (Ray narrows CUDA_VISIBLE_DEVICES to them)."""
    ray = sys.modules.get("ray")
    if ray is None or not ray.is_initialized():
        return None
    try:
        ids = ray.get_gpu_ids()
    except Exception:  # noqa: BLE001 - not inside a Ray task
        return None
    return [f"cuda:{index}" for index in range(len(ids))] or None


def release_models() -> None:
    """Free the model this process keeps for the next job (and stop its multi-process pool)."""
    for encoder in _LOADED.values():
        as_encoder(encoder).close()  # a plugin loader's own object gets the default (nothing to close)
    _LOADED.clear()


def _encoder(retriever: Mapping[str, Any], show_progress: bool):
    from r2med_plugin.models.registry import resolve

    devices = retriever.get("devices") or _ray_gpu_devices()
    loading = _loading(retriever)
    dtype = {"dtype": retriever["dtype"]} if retriever.get("dtype") else {}  # auto: as the checkpoint loads
    key = (retriever["model"], retriever.get("revision"), tuple(devices or ()), retriever.get("batch_size", 32),
           json.dumps(loading, sort_keys=True), json.dumps(dtype))
    if key not in _LOADED:
        release_models()
        _LOADED[key] = resolve(retriever["model"], retriever.get("revision"), **loading).load_encoder(
            device=None, devices=devices, batch_size=retriever.get("batch_size", 32), show_progress=show_progress, **dtype,
        )
    encoder = _LOADED[key]
    encoder.show_progress = show_progress
    return encoder


def _relative(path: Path, output: Path) -> str:
    try:
        return path.resolve().relative_to(output.resolve()).as_posix()
    except ValueError:
        return str(path)


def execute_job(
    job_payload: Mapping[str, Any], stamps: Mapping[str, str], show_progress: bool = False, quiet: bool = False
) -> dict[str, Any]:
    """Run one job (a Job as a dict, so that it crosses process and machine boundaries) and record it.

    ``quiet``: no library progress bar or message that is not an error (transformers' "Loading weights", hub
    downloads), in whichever process or Ray worker the job runs."""
    from r2med_plugin.quiet import silenced

    with silenced(quiet):
        return _execute_job(job_payload, stamps, show_progress)


def estimate_job_cost(job: Job, show_progress: bool = False):
    """What an LLM reranker job would cost (r2med_plugin.evaluation.cost), without sending a request; None for a job
    that sends no LLM request. The request the job runs (job_request), planned as it runs (its first stage runs here)."""
    if "llm_reranker" not in job.options:
        return None
    from dataclasses import replace

    from r2med_plugin.evaluation.cost import estimate_request_cost
    from r2med_plugin.sweep.job_definition import job_request

    with applied_env(job.env):
        request = replace(job_request(job), show_progress=show_progress)
        retriever = job.retriever or {}
        encoder = _encoder(retriever, show_progress) if "model" in retriever else None
        return replace(estimate_request_cost(request.with_loaded(encoder)), what=job.label)


def _execute_job(job_payload: Mapping[str, Any], stamps: Mapping[str, str], show_progress: bool) -> dict[str, Any]:
    from dataclasses import replace

    from r2med_plugin.evaluation.runner import execute
    from r2med_plugin.evaluation.writers import write_outputs
    from r2med_plugin.io import write_json_atomic
    from r2med_plugin.sweep.job_definition import job_request

    job = Job.from_dict(job_payload)
    started = time.perf_counter()
    with applied_env(job.env):  # the request runs as it was checked; an LLM reranker reads its key from the job's env
        request = replace(job_request(job), show_progress=show_progress)
        retriever = job.retriever or {}
        encoder = _encoder(retriever, show_progress) if "model" in retriever else None  # kept for the next job
        result = execute(request.with_loaded(encoder))
        paths = write_outputs(result, job.output, trec=job.trec)
    output = Path(job.output)
    record = {
        "job_id": job.job_id,
        "status": "done",
        "job": job.to_dict() | {"env": recorded_env(job.env)},
        "request": request.to_dict(),
        "stamps": dict(stamps),
        "paths": {kind: _relative(Path(path), output) for kind, path in paths.items()},
        "digests": {kind: file_digest(Path(path)) for kind, path in paths.items()},
        "dataset_revision": result.dataset_revision,
        "model_revision": result.model_revision,
        "main_score": {result.main_score: result.scores[result.main_score]},
        "duration_s": round(time.perf_counter() - started, 3),
        "finished_at": time.time(),
        "host": os.uname().nodename,
    }
    write_json_atomic(record_path(output, job.job_id), record)
    return record
