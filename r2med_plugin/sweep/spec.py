"""A sweep spec (YAML) -> validated settings -> one plain, serialisable job per evaluation.

A spec is a list of requests written in shorthand: its keys are read in ``sweep/shorthand.py`` (top level) and
``sweep/entries.py`` (retrievers, rerankers), and every job it expands to (``sweep/job_definition.py``) is built as the
``EvaluationRequest`` it runs before anything runs, so a spec is checked by the same types as ``r2med evaluate``.
A job is (task, retriever, expansion or reranker option). Expansions apply to the R2MED tasks, candidate subsets to
the NanoR2MED tasks; options that ``evaluate_task`` gains later pass through the ``options`` key unchanged.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from r2med_plugin.catalog import get_task_spec, unknown_name_message
from r2med_plugin.data.expansions import ExpansionName, list_expansions, parse_expansion
from r2med_plugin.errors import MissingFileError, UserError
from r2med_plugin.sweep.entries import read_rerankers, read_retriever
from r2med_plugin.sweep.job_definition import JOB_SCHEMA_VERSION, Job, job_identity, job_request
from r2med_plugin.sweep.shorthand import (
    DEFAULT_TOP_K,
    TOP_KEYS,
    SpecError,
    as_bool,
    as_int,
    as_list,
    check_candidates,
    check_expansions,
    evaluate_task_parameters,
    read_expansions,
    read_options,
    read_resources,
    read_scoring,
    read_tasks,
    spec_error,
)

__all__ = ["JOB_SCHEMA_VERSION", "Job", "SpecError", "SweepSpec", "evaluate_task_parameters", "expand_jobs",
           "job_identity", "job_request", "load_spec", "parse_spec"]


@dataclass(frozen=True)
class SweepSpec:
    path: Path
    output: Path
    tasks: list[str]
    retrievers: list[dict[str, Any]]
    expansions: list[ExpansionName | None]
    candidates: list[str]
    candidates_only: bool
    hybrid: bool
    top_k: int
    trec: bool
    rerankers: list[dict[str, Any]]
    retries: int
    data_dir: str | None
    accept_drift: bool | None
    resources: dict[str, float]
    options: dict[str, Any]
    env: dict[str, str | None]


def parse_spec(raw: Any, path: str | os.PathLike = "<spec>") -> SweepSpec:
    """Validate a spec mapping (as read from YAML); relative folders are relative to the spec file."""
    path = Path(path)
    if not isinstance(raw, dict):
        raise SpecError(f"{path}: the spec must be a YAML mapping with at least `output`, `tasks` (or `benchmarks`) and `retrievers`")
    unknown = sorted(set(raw) - set(TOP_KEYS))
    if unknown:
        hint = unknown_name_message("key", unknown[0], list(TOP_KEYS))
        raise SpecError(f"{path}: unknown key `{unknown[0]}`. {hint.split('. ', 1)[1]}")  # the hint without its own first sentence
    if not isinstance(raw.get("output"), str) or not raw["output"]:
        raise spec_error(path, "output", "is missing", "give the folder results go to, e.g. output: sweep-results")
    base = path.parent if path.name != "<spec>" else Path.cwd()
    retrievers = [read_retriever(path, i, entry, raw) for i, entry in enumerate(as_list(path, "retrievers", raw.get("retrievers")))]
    seen: dict[tuple, int] = {}
    for index, entry in enumerate(retrievers):
        identity = (entry.get("bm25") or entry.get("model"), entry.get("revision"))
        if identity in seen:
            raise spec_error(
                path, f"retrievers[{index}]", f"repeats retrievers[{seen[identity]}] ({identity[0]}, revision {identity[1]})",
                "both would write the same result files: keep one, or run the other into another `output`",
            )
        seen[identity] = index
    rerankers = read_rerankers(path, raw)
    if not retrievers and not any("first_stage" in r for r in rerankers):
        raise spec_error(path, "retrievers", "is missing", "list at least one, e.g. retrievers: [bm25-lucene]")
    env = raw.get("env") or {}
    if not isinstance(env, dict) or not all(isinstance(k, str) for k in env):
        raise spec_error(path, "env", f"is {env!r}", "give a mapping of variable names to values")
    data_dir = raw.get("data_dir")
    tasks = read_tasks(path, raw)
    expansions = read_expansions(path, raw)
    check_expansions(path, tasks, expansions)
    scoring = read_scoring(path, raw)
    candidates, candidates_only = list(scoring.candidates), scoring.candidates_only
    check_candidates(path, tasks, candidates)
    models = [entry for entry in retrievers if "model" in entry] + rerankers
    for key in ("batch_size", "device", "devices", "dtype"):
        if raw.get(key) is not None and not models:
            raise spec_error(path, key, "reaches no job", "every retriever is BM25 and no reranker is given: drop it")
    spec = SweepSpec(
        path=path,
        output=(base / raw["output"]).resolve(),
        tasks=tasks,
        retrievers=retrievers,
        expansions=expansions,
        candidates=candidates,
        candidates_only=candidates_only,
        hybrid=scoring.hybrid,
        top_k=scoring.top_k,
        trec=bool(as_bool(path, "trec", raw.get("trec"))),
        rerankers=rerankers,
        retries=as_int(path, "retries", raw.get("retries"), 1, 0),
        data_dir=str((base / str(data_dir)).resolve()) if data_dir else None,
        accept_drift=as_bool(path, "accept_drift", raw.get("accept_drift"), None),
        resources=read_resources(path, raw),
        options=read_options(path, raw),
        env={key: None if value is None else str(value) for key, value in env.items()},  # null: unset it in the jobs
    )
    _check_jobs(spec)
    return spec


def _check_jobs(spec: SweepSpec) -> None:
    """Every job's EvaluationRequest built, and so checked as `r2med evaluate` checks it, before anything runs: a value
    that would fail at run time (options: {top_k: 5}) fails here, naming the job."""
    models: dict[str, Any] = {}  # each model resolved once for all its jobs
    for job in expand_jobs(spec):
        try:
            requests = job.options.get("llm_requests") or {}
            key_env = requests.get("api_key_env")
            if key_env and not (job.env[key_env] if key_env in job.env else os.environ.get(key_env)):
                raise UserError(f"api_key_env {key_env}: the variable {key_env} is set neither here nor in the spec's "
                                "env:; export it first")
            job_request(job, models)
        except (ValueError, KeyError, TypeError) as error:
            message = error.render("key") if isinstance(error, UserError) else (
                error.args[0] if isinstance(error, KeyError) and error.args else error)
            raise SpecError(f"{spec.path}: job {job.label}: {message} (see `top_k`, `options`, `candidates`, `hybrid`, "
                            "`rerankers` in the spec)") from None


def load_spec(path: str | os.PathLike) -> SweepSpec:
    """Read and validate a sweep spec YAML file."""
    path = Path(path)
    if not path.is_file():
        raise MissingFileError(f"sweep spec {path} does not exist; write one (docs/how-to/sweeps.md; `r2med sweep --help`)")
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as error:
        raise SpecError(f"{path}: not valid YAML ({error})") from None
    return parse_spec(raw, path)


def _task_expansions(task: str, expansions: Sequence[ExpansionName | None]) -> list[ExpansionName | None]:
    """The expansion options that apply to a task: released ones to R2MED tasks, local ones to every task."""
    spec = get_task_spec(task)
    chosen: list[ExpansionName | None] = []
    for expansion in expansions:
        if expansion is None or expansion.is_local:
            chosen.append(expansion)
        elif spec.kind == "r2med":
            if expansion.is_all:
                chosen += [ExpansionName(name) for name in list_expansions(task)]
            else:
                parse_expansion(spec, expansion)  # a misspelt expansion fails here, before anything runs
                chosen.append(expansion)
    return list(dict.fromkeys(chosen))


def _base_options(spec: SweepSpec, task: str, expansion: ExpansionName | None) -> dict[str, Any]:
    nano = get_task_spec(task).kind == "nano"
    options: dict[str, Any] = {"hybrid": spec.hybrid, "top_k": spec.top_k}
    if nano and spec.candidates and expansion is None:
        options |= {"candidates": list(spec.candidates), "candidates_only": spec.candidates_only}
    if expansion is not None:
        options["expansion"] = expansion
    if spec.data_dir is not None:
        options["data_dir"] = spec.data_dir
    if spec.accept_drift is not None:
        options["accept_drift"] = spec.accept_drift
    return options | spec.options


def expand_jobs(spec: SweepSpec, env: Mapping[str, str | None] | None = None) -> list[Job]:
    """One job per (task, retriever, expansion) plus one per (task, [retriever,] reranker); model jobs grouped by model."""
    jobs: list[Job] = []
    env = dict(env or {}) | spec.env
    for retriever in spec.retrievers:
        for task in spec.tasks:
            for expansion in _task_expansions(task, spec.expansions):
                jobs.append(Job(task, retriever, _base_options(spec, task, expansion), str(spec.output), spec.trec,
                                bool(retriever.get("instruction")), env))
    for reranker in spec.rerankers:
        first_stages: list[dict[str, Any] | None] = [None] if "first_stage" in reranker else list(spec.retrievers)
        for first_stage in first_stages:
            for task in spec.tasks:
                options = {k: v for k, v in _base_options(spec, task, None).items() if k in ("data_dir", "accept_drift")}
                if spec.top_k != DEFAULT_TOP_K:  # the depth of the first stage's own result (its first_stage_* keys);
                    options["top_k"] = spec.top_k  # left out at the default, so the job ids of earlier specs hold
                jobs.append(Job(task, first_stage, options | spec.options | reranker, str(spec.output), spec.trec,
                                bool((first_stage or {}).get("instruction")), env))
    unique = list({job.job_id: job for job in jobs}.values())
    if not unique:
        raise SpecError(f"{spec.path}: the spec expands to no job; check `tasks` and `expansions` (released expansions exist for R2MED tasks only)")
    return unique
