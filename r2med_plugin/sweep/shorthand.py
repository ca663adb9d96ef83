"""A sweep spec's shorthand, read: the top-level YAML keys and the value each must hold.

A spec names tasks (or benchmarks), retrievers, expansions, candidates and rerankers as lists, and the scoring
settings once for all its jobs; this module reads those keys into plain values. What a value means is checked by the
types every front end shares (``Scoring``, ``TaskArguments``, the specs in ``evaluation/specs.py``), their refusals
keyed under the spec's key. Retriever and reranker entries are read in ``sweep/entries.py``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import fields
from pathlib import Path
from typing import Any

from r2med_plugin.catalog import get_task_spec, list_benchmarks, task_names, unknown_name_message
from r2med_plugin.data.expansions import ExpansionName, list_expansions
from r2med_plugin.errors import UserError
from r2med_plugin.evaluation.request import RequestError, Scoring, TaskArguments
from r2med_plugin.rules import whole_number_problem

DEFAULT_TOP_K = 1000  # evaluate_task's own default


TOP_KEYS = {
    "output": "folder for results/, official/, the summary and the job records (required)",
    "tasks": "task names, e.g. [NanoR2MEDBiology, R2MEDBiology]",
    "benchmarks": "benchmark names: NanoR2MED, R2MED-Full",
    "retrievers": "bm25-lucene, bm25-hakari[:<tokenizer>], bm25-robertson, or {model: NAME_OR_FOLDER, revision: ...}",
    "expansions": "[none, hyde/o3-mini, all, local:...] (R2MED tasks)",
    "candidates": "[bm25, dense, hybrid] (NanoR2MED tasks)",
    "candidates_only": "true: rank the candidate lists only (NanoR2MED tasks)",
    "hybrid": "true: also report hybrid_* scores",
    "top_k": "run depth (default 1000)",
    "trec": "true: also write TREC run files",
    "rerankers": "[{model: CROSS_ENCODER, first_stage: bm25-lucene, depth: 10}, {model: llm-listwise:<model>, base_url: URL, ...}]",
    "retries": "extra attempts for a failed job (default 1)",
    "device": "default device(s) of every model, as r2med evaluate --device: cuda:1, or a list, e.g. [cuda:0, cuda:1] or "
              "[cpu, cpu] (one process per device)",
    "devices": "the same setting as device (its earlier name)",
    "batch_size": "default encoding batch size (default 32)",
    "dtype": "default compute dtype of every model: auto (default), float32, bfloat16, float16",
    "data_dir": "local mirror (default: $R2MED_DATA_DIR, else the hub)",
    "accept_drift": "true: accept counts/revisions that differ from task_metadata",
    "resources": "Ray resources per job: {model_gpus: 1, model_cpus: 1, bm25_cpus: 1}",
    "options": "extra keyword arguments of evaluate_task, passed as given",
    "env": "environment variables set in every job (e.g. HF_HOME on the workers)",
}


RESOURCE_KEYS = {"model_gpus", "model_cpus", "bm25_cpus"}


class SpecError(UserError):
    """A spec that cannot run; the message names the file, the key and the fix."""


def spec_error(path: Path, key: str, problem: str, fix: str) -> SpecError:
    return SpecError(f"{path}: `{key}` {problem}; {fix}")


def as_list(path: Path, key: str, value: Any) -> list:
    if value is None:
        return []
    if isinstance(value, (str, int, float, dict)):
        return [value]
    if isinstance(value, list):
        return value
    raise spec_error(path, key, f"is a {type(value).__name__}", f"give a list, e.g. {key}: [{TOP_KEYS.get(key, '...')}]")


def as_bool(path: Path, key: str, value: Any, default: bool | None = False) -> bool | None:
    if value is None:
        return default
    if not isinstance(value, bool):
        raise spec_error(path, key, f"is {value!r}", "write true or false")
    return value


def as_int(path: Path, key: str, value: Any, default: int, minimum: int) -> int:
    if value is None:
        return default
    problem = whole_number_problem(value, minimum)
    if problem:
        raise spec_error(path, key, problem, f"write a whole number, e.g. {key.rsplit('.', 1)[-1]}: {max(default, minimum)}")
    return value


def _refuse_repeats(path: Path, key: str, names: list) -> None:
    """A name given twice in one list is refused (as `r2med evaluate --task X X`), never dropped silently."""
    repeated = sorted({str(name) for name in names if names.count(name) > 1})
    if repeated:
        raise spec_error(path, key, f"names {', '.join(repeated)} more than once", "each runs once: give it once")


def read_tasks(path: Path, raw: Mapping[str, Any]) -> list[str]:
    known_tasks, benchmarks = task_names(), list_benchmarks()
    chosen: list[str] = []
    covered: dict[str, str] = {}  # task -> the listed benchmark that runs it
    listed = as_list(path, "benchmarks", raw.get("benchmarks"))
    _refuse_repeats(path, "benchmarks", listed)
    for name in listed:
        if not isinstance(name, str) or name not in benchmarks:
            raise spec_error(path, "benchmarks", f"names {name!r}", unknown_name_message("benchmark", str(name), list(benchmarks)))
        overlap = [task for task in benchmarks[name] if task in covered]
        if overlap:
            raise spec_error(path, "benchmarks", f"names {name}, which runs {overlap[0]} as {covered[overlap[0]]} does",
                             "give each task once: list one of the two benchmarks, or their tasks in `tasks`")
        chosen += benchmarks[name]
        covered.update(dict.fromkeys(benchmarks[name], name))
    listed = as_list(path, "tasks", raw.get("tasks"))
    _refuse_repeats(path, "tasks", listed)
    for name in listed:
        if name not in known_tasks:
            raise spec_error(path, "tasks", f"names {name!r}", unknown_name_message("task", str(name), known_tasks))
        if name in covered:
            raise spec_error(path, "tasks", f"names {name}, which benchmark {covered[name]} in `benchmarks` already runs",
                             "give it once: remove it from `tasks`")
        chosen.append(name)
    if not chosen:
        raise spec_error(path, "tasks", "is missing", "name tasks (tasks: [NanoR2MEDBiology]) or benchmarks (benchmarks: [NanoR2MED])")
    return chosen


def read_device_setting(path: Path, key: str, entry: Any) -> list[str] | None:
    """The device setting of a spec's mapping (``key`` is its path, "" at the top): ``device``, or ``devices``, its
    earlier name; both at once are refused."""
    where = f"{key}." if key else ""
    if entry.get("device") is not None and entry.get("devices") is not None:
        raise spec_error(path, f"{where}devices", "repeats device", "give one of the two (they are the same setting)")
    name = "device" if entry.get("device") is not None else "devices"
    return read_devices(path, f"{where}{name}", entry.get(name))


def read_devices(path: Path, key: str, value: Any) -> list[str] | None:
    if value is None:
        return None
    devices = value.split(",") if isinstance(value, str) else value
    if not isinstance(devices, list) or not devices or not all(isinstance(d, str) and d.strip() for d in devices):
        raise spec_error(path, key, f"is {value!r}", "give device names, e.g. [cuda:0, cuda:1] or [cpu, cpu]")
    return [device.strip() for device in devices]


def read_expansions(path: Path, raw: Mapping[str, Any]) -> list[ExpansionName | None]:
    values = as_list(path, "expansions", raw.get("expansions")) or [None]
    chosen: list[ExpansionName | None] = []
    for value in values:
        if value is None or value == "none":
            chosen.append(None)
        elif isinstance(value, str) and (ExpansionName(value).kind != "released" or "/" in value):
            chosen.append(ExpansionName(value))
        else:
            raise spec_error(path, "expansions", f"holds {value!r}", "write none, all, method/llm (e.g. hyde/o3-mini) or local:FOLDER")
    return list(dict.fromkeys(chosen))


def read_scoring(path: Path, raw: Mapping[str, Any]) -> Scoring:
    """The spec's scoring settings, checked by ``Scoring`` (the rules the CLI and evaluate_task follow)."""
    try:
        return Scoring(top_k=as_int(path, "top_k", raw.get("top_k"), DEFAULT_TOP_K, 1),
                       hybrid=bool(as_bool(path, "hybrid", raw.get("hybrid"))),
                       candidates=tuple(as_list(path, "candidates", raw.get("candidates"))),
                       candidates_only=bool(as_bool(path, "candidates_only", raw.get("candidates_only"))))
    except RequestError as error:
        raise SpecError(f"{path}: {error.keyed(f'`{error.key}`')}") from None


def check_expansions(path: Path, tasks: Sequence[str], expansions: Sequence[ExpansionName | None]) -> None:
    """Each released expansion ("method/llm") must be one of every R2MED task of the spec (as `r2med evaluate`
    requires), and the spec must have an R2MED task for it to reach."""
    released = [value for value in expansions if value is not None and value.kind == "released"]
    if not released and not any(value is not None and value.is_all for value in expansions):
        return
    r2med = [task for task in tasks if get_task_spec(task).kind == "r2med"]
    if not r2med:
        given = next(value for value in expansions if value is not None and not value.is_local)
        raise spec_error(
            path, "expansions", f"holds {given!r}, which reaches no task: released expansions exist for the R2MED tasks only, "
            f"and this spec's tasks ({', '.join(tasks)}) are NanoR2MED tasks",
            "remove it, or add R2MED tasks (e.g. tasks: [R2MEDBiology] or benchmarks: [R2MED-Full])",
        )
    for value in released:
        for task in r2med:
            known = list_expansions(task)
            if value not in known:
                raise spec_error(path, "expansions", f"holds {value!r}, not a released expansion of {task}",
                            unknown_name_message("expansion", value, known) + "; or local:FOLDER for one you generated")


def check_candidates(path: Path, tasks: Sequence[str], candidates: Sequence[str]) -> None:
    """Candidate subsets reach only tasks with stored candidate lists (the NanoR2MED tasks)."""
    if candidates and not any(get_task_spec(task).candidate_profiles for task in tasks):
        raise spec_error(
            path, "candidates", f"is {list(candidates)}, which reaches no task: stored candidate lists exist for the NanoR2MED "
            f"tasks only, and this spec's tasks ({', '.join(tasks)}) have none",
            "remove `candidates` (and `candidates_only`), or add NanoR2MED tasks (e.g. benchmarks: [NanoR2MED])",
        )


def evaluate_task_parameters() -> set[str]:
    """evaluate_task's parameters: the task, the retriever and the keyword arguments (TaskArguments' fields)."""
    return {"task", "retriever", *(item.name for item in fields(TaskArguments))}


def read_options(path: Path, raw: Mapping[str, Any]) -> dict[str, Any]:
    options = raw.get("options") or {}
    if not isinstance(options, dict):
        raise spec_error(path, "options", f"is {options!r}", "give a mapping of evaluate_task keyword arguments, e.g. {top_k: 100}")
    known = evaluate_task_parameters() - {"task", "retriever"}
    for name in options:
        if name not in known:
            raise spec_error(path, f"options.{name}", "is not an argument of evaluate_task", f"use one of {sorted(known)}")
    return dict(options)


def read_resources(path: Path, raw: Mapping[str, Any]) -> dict[str, float]:
    given = raw.get("resources") or {}
    if not isinstance(given, dict) or set(given) - RESOURCE_KEYS:
        raise spec_error(path, "resources", f"is {given!r}", f"give a mapping with keys among {sorted(RESOURCE_KEYS)}")
    resources = {"model_gpus": 1.0, "model_cpus": 1.0, "bm25_cpus": 1.0} | given
    for name, value in resources.items():
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
            raise spec_error(path, f"resources.{name}", f"is {value!r}", "give a non-negative number")
    return {name: float(value) for name, value in resources.items()}
