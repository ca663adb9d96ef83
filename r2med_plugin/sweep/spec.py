"""A sweep spec (YAML) -> validated settings -> one plain, serialisable job per evaluation.

A job is (task, retriever, expansion or reranker option). Expansions apply to the R2MED tasks,
candidate subsets to the NanoR2MED tasks (as ``evaluate_task`` requires); each job's keyword arguments
for ``evaluate_task`` are kept as a plain dict, so options that ``evaluate_task`` gains later pass
through the ``options`` key unchanged (they are checked against its signature before anything runs).
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from r2med_plugin.evaluation.request import RequestError, Scoring, TaskArguments
from r2med_plugin.evaluation.specs import EndpointSpec, ModelSpec
from r2med_plugin.data.expansions import is_local
from r2med_plugin.rules import neutral_fields, whole_number_problem
from r2med_plugin.metrics import check_rerank_depth
from r2med_plugin.identifiers import BM25_NAMES, CANDIDATE_SUBSETS
from r2med_plugin.catalog import get_task_spec, list_benchmarks, task_names, unknown_name_message

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
    "devices": "default devices of every model, e.g. [cuda:0, cuda:1] or [cpu, cpu]",
    "batch_size": "default encoding batch size (default 32)",
    "data_dir": "local mirror (default: $R2MED_DATA_DIR, else the hub)",
    "accept_drift": "true: accept counts/revisions that differ from task_metadata",
    "resources": "Ray resources per job: {model_gpus: 1, model_cpus: 1, bm25_cpus: 1}",
    "options": "extra keyword arguments of evaluate_task, passed as given",
    "env": "environment variables set in every job (e.g. HF_HOME on the workers)",
}
MODEL_KEYS = {"model", "revision", "batch_size", "devices", "instruction", "loader", "base_url", "api_key_env", "dimensions",
              "concurrency", "extra_body"}
# How a model loads (issue 22): --loader, and an openai:<model> endpoint's settings; kept in a job only when given
LOADING_KEYS = ("loader", "base_url", "api_key_env", "dimensions", "concurrency", "extra_body")
# An LLM reranker's settings (llm-listwise:<model>, ...): what it asks (in a job's identity), and how its requests go (not)
LLM_RERANKER_KEYS = ("base_url", "window", "step", "max_tokens", "extra_body", "set_size", "setwise_method", "setwise_k",
                     "group_size", "grouping", "group_seed", "regroup", "show_scores", "reasoning_effort")
LLM_REQUEST_KEYS = neutral_fields(EndpointSpec)  # how its requests go
RERANKER_KEYS = {"model", "first_stage", "depth", "batch_size", *LLM_RERANKER_KEYS, *LLM_REQUEST_KEYS}
RESOURCE_KEYS = {"model_gpus", "model_cpus", "bm25_cpus"}


# What a job's id leaves out, as the types mark it neutral: a retrievers entry's devices (ModelSpec.device, one per
# worker), batch size and endpoint sending settings; evaluate_task's neutral arguments (where the data lives, progress
# bars) and an LLM reranker's ``llm_requests`` (EndpointSpec's neutral fields: the key's variable, concurrency, ...).
NEUTRAL_MODEL_KEYS = frozenset({"devices", *neutral_fields(ModelSpec), *neutral_fields(EndpointSpec)})
NEUTRAL_OPTIONS = frozenset({*neutral_fields(TaskArguments), "llm_requests"})


class SpecError(ValueError):
    """A spec that cannot run; the message names the file, the key and the fix."""


@dataclass(frozen=True)
class Job:
    """One evaluation: ``evaluate_task(task, <retriever>, **options)`` then ``write_outputs``. JSON-able."""

    task: str
    retriever: dict[str, Any] | None  # {"bm25": name} or {"model": ..., "revision": ..., ...}; None: reranker's first stage
    options: dict[str, Any]
    output: str
    trec: bool = False
    instruction: bool = False
    env: dict[str, str | None] = field(default_factory=dict)  # None: unset the variable in the job

    @property
    def job_id(self) -> str:
        return job_identity(self)

    @property
    def is_model_job(self) -> bool:
        return bool(self.retriever and "model" in self.retriever) or "rerank" in self.options

    @property
    def label(self) -> str:
        name = (self.retriever or {}).get("model") or (self.retriever or {}).get("bm25") or "-"
        path = Path(str(name))
        shown = "/".join(path.parts[-2:]) if path.is_absolute() or str(name).startswith(".") else str(name)  # folder: its tail
        parts = [self.task, shown]
        if self.options.get("expansion"):
            parts.append(f"+{self.options['expansion']}")
        if self.options.get("rerank"):
            parts.append(f"rerank={Path(str(self.options['rerank'])).name}")
        return " ".join(parts)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, payload: Mapping[str, Any]) -> Job:
        return cls(**dict(payload))


JOB_SCHEMA_VERSION = 1  # a new version is a new identity formula; existing sweep folders keep resuming under version 1


def job_identity(job: Job) -> str:
    """A stable id for what a job computes (job schema version 1): the JSON of [task, retriever, instruction,
    options] with sorted keys, where retriever is {"bm25": name} or {"model", "revision", ...} (never devices, batch
    size, API key variable or concurrency, which change no score) and options are what the job computes with (never
    where the data lives: data_dir, accept_drift, show_progress). Pinned by tests/test_sweep_trust.py: ids of fixed
    specs never change."""
    retriever = {key: value for key, value in (job.retriever or {}).items() if key not in NEUTRAL_MODEL_KEYS}
    options = {key: value for key, value in job.options.items() if key not in NEUTRAL_OPTIONS}
    payload = json.dumps([job.task, retriever, job.instruction, options], sort_keys=True, default=str)
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()[:16]


@dataclass(frozen=True)
class SweepSpec:
    path: Path
    output: Path
    tasks: list[str]
    retrievers: list[dict[str, Any]]
    expansions: list[str | None]
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


def _fail(path: Path, key: str, problem: str, fix: str) -> SpecError:
    return SpecError(f"{path}: `{key}` {problem}; {fix}")


def _as_list(path: Path, key: str, value: Any) -> list:
    if value is None:
        return []
    if isinstance(value, (str, int, float, dict)):
        return [value]
    if isinstance(value, list):
        return value
    raise _fail(path, key, f"is a {type(value).__name__}", f"give a list, e.g. {key}: [{TOP_KEYS.get(key, '...')}]")


def _as_bool(path: Path, key: str, value: Any, default: bool | None = False) -> bool | None:
    if value is None:
        return default
    if not isinstance(value, bool):
        raise _fail(path, key, f"is {value!r}", "write true or false")
    return value


def _as_int(path: Path, key: str, value: Any, default: int, minimum: int) -> int:
    if value is None:
        return default
    problem = whole_number_problem(value, minimum)
    if problem:
        raise _fail(path, key, problem, f"write a whole number, e.g. {key.rsplit('.', 1)[-1]}: {max(default, minimum)}")
    return value


def _tasks(path: Path, raw: Mapping[str, Any]) -> list[str]:
    known_tasks, benchmarks = task_names(), list_benchmarks()
    chosen: list[str] = []
    for name in _as_list(path, "benchmarks", raw.get("benchmarks")):
        if name not in benchmarks:
            raise _fail(path, "benchmarks", f"names {name!r}", unknown_name_message("benchmark", str(name), list(benchmarks)))
        chosen += benchmarks[name]
    for name in _as_list(path, "tasks", raw.get("tasks")):
        if name not in known_tasks:
            raise _fail(path, "tasks", f"names {name!r}", unknown_name_message("task", str(name), known_tasks))
        chosen.append(name)
    if not chosen:
        raise _fail(path, "tasks", "is missing", "name tasks (tasks: [NanoR2MEDBiology]) or benchmarks (benchmarks: [NanoR2MED])")
    return list(dict.fromkeys(chosen))


def _devices(path: Path, key: str, value: Any) -> list[str] | None:
    if value is None:
        return None
    devices = value.split(",") if isinstance(value, str) else value
    if not isinstance(devices, list) or not devices or not all(isinstance(d, str) and d.strip() for d in devices):
        raise _fail(path, key, f"is {value!r}", "give device names, e.g. [cuda:0, cuda:1] or [cpu, cpu]")
    return [device.strip() for device in devices]


def _looks_like_path(name: str) -> bool:
    """Whether a model name is meant as a local path: absolute, ./ ../ ~, or a relative path whose first folder
    exists here ("models/m" with a models/ folder). Hub names ("org/name") contain "/" too, so they pass."""
    if name in (".", "..") or name.startswith(("./", "../", "~", ".\\", "..\\")) or Path(name).is_absolute():
        return True
    parts = Path(name).parts
    return len(parts) > 1 and Path(parts[0]).is_dir()


def check_model_path(path: Path, key: str, name: str) -> None:
    """Refuse a model (or first stage) that names a local path that does not exist, before any job runs.

    Jobs read relative paths from the folder ``r2med sweep`` runs in (not the spec's folder)."""
    if not _looks_like_path(name) or Path(name).expanduser().exists():
        return
    beside_spec = path.parent / name
    hint = (f" ({beside_spec} exists: model paths are relative to the folder you run r2med from, not to the spec; "
            "write the absolute path)") if not Path(name).is_absolute() and path.name != "<spec>" and beside_spec.exists() else ""
    raise _fail(
        path, key, f"is {name!r}, a local path that does not exist (looked for {Path(name).expanduser().absolute()}){hint}",
        "give an existing model folder (or run file), or a hub name such as org/name",
    )


def _retriever(path: Path, index: int, entry: Any, raw: Mapping[str, Any]) -> dict[str, Any]:
    key = f"retrievers[{index}]"
    if isinstance(entry, str):
        if entry in BM25_NAMES:
            return {"bm25": entry}
        entry = {"model": entry}
    if not isinstance(entry, dict) or not isinstance(entry.get("model"), str) or not entry["model"]:
        raise _fail(path, key, f"is {entry!r}", "write bm25-lucene, bm25-hakari, bm25-robertson, a model name, or {model: NAME_OR_FOLDER, revision: ...}")
    unknown = sorted(set(entry) - MODEL_KEYS)
    if unknown:
        raise _fail(path, f"{key}.{unknown[0]}", "is not a model setting", f"use only {sorted(MODEL_KEYS)}")
    if entry["model"] in BM25_NAMES:
        raise _fail(path, key, f"uses {entry['model']!r} as a model", f"write it as a plain string: - {entry['model']}")
    from r2med_plugin.evaluation.specs import check_retriever_name

    try:
        check_retriever_name(entry["model"])  # "bm25-lucen" is a typo, not a hub model to download
    except ValueError as error:
        raise _fail(path, key, f"is {entry['model']!r}", str(error)) from None
    check_model_path(path, key if set(entry) == {"model"} else f"{key}.model", entry["model"])
    revision = entry.get("revision")
    if revision is not None and not isinstance(revision, str):
        raise _fail(path, f"{key}.revision", f"is {revision!r}", "quote it as a string (a commit sha or a tag)")
    loading = {name: entry[name] for name in LOADING_KEYS if entry.get(name) is not None}
    instruction = bool(_as_bool(path, f"{key}.instruction", entry.get("instruction")))
    model_spec(entry["model"], revision, loading, instruction, path=path, key=key)  # resolved and checked once, here
    return {
        "model": entry["model"],
        "revision": revision,
        "batch_size": _as_int(path, f"{key}.batch_size", entry.get("batch_size"), _as_int(path, "batch_size", raw.get("batch_size"), 32, 1), 1),
        "devices": _devices(path, f"{key}.devices", entry.get("devices")) or _devices(path, "devices", raw.get("devices")),
        "instruction": instruction,
        **loading,
    }


def model_spec(name: str, revision: str | None, loading: Mapping[str, Any], instruction: bool, *,
               path: Path = Path("<spec>"), key: str = "retrievers[0]") -> Any:
    """The ModelSpec of a retrievers entry (what the name is and how it loads: mteb's registry, an endpoint's
    settings, the instruction rule), its refusal keyed under the entry."""
    from r2med_plugin.evaluation.request import RequestError
    from r2med_plugin.evaluation.specs import EndpointSpec, ModelSpec

    settings = {option: value for option, value in loading.items() if option != "loader"}
    try:
        return ModelSpec(name, revision, loader=loading.get("loader"), endpoint=EndpointSpec(**settings) if settings else None,
                         instruction=instruction)
    except RequestError as error:
        raise SpecError(f"{path}: {error.keyed(f'`{key}.{error.key}`')}") from None
    except ValueError as error:
        field_key = f"{key}.revision" if revision is not None and "revision" in str(error) else key
        raise _fail(path, field_key, f"is {name!r}" if field_key == key else f"is {revision!r}",
                    str(error).replace("--", "")) from None


def _expansions(path: Path, raw: Mapping[str, Any]) -> list[str | None]:
    values = _as_list(path, "expansions", raw.get("expansions")) or [None]
    chosen: list[str | None] = []
    for value in values:
        if value is None or value == "none":
            chosen.append(None)
        elif isinstance(value, str) and (value == "all" or is_local(value) or "/" in value):
            chosen.append(value)
        else:
            raise _fail(path, "expansions", f"holds {value!r}", "write none, all, method/llm (e.g. hyde/o3-mini) or local:FOLDER")
    return list(dict.fromkeys(chosen))


def _scoring(path: Path, raw: Mapping[str, Any]) -> Scoring:
    """The spec's scoring settings, checked by ``Scoring`` (the rules the CLI and evaluate_task follow)."""
    try:
        return Scoring(top_k=_as_int(path, "top_k", raw.get("top_k"), DEFAULT_TOP_K, 1),
                       hybrid=bool(_as_bool(path, "hybrid", raw.get("hybrid"))),
                       candidates=tuple(_as_list(path, "candidates", raw.get("candidates"))),
                       candidates_only=bool(_as_bool(path, "candidates_only", raw.get("candidates_only"))))
    except RequestError as error:
        raise SpecError(f"{path}: {error.keyed(f'`{error.key}`')}") from None


def _check_expansions(path: Path, tasks: Sequence[str], expansions: Sequence[str | None]) -> None:
    """Each released expansion ("method/llm") must be one of every R2MED task of the spec (as `r2med evaluate`
    requires), and the spec must have an R2MED task for it to reach."""
    from r2med_plugin.data.expansions import list_expansions

    released = [value for value in expansions if value is not None and value != "all" and not is_local(value)]
    if not released and "all" not in expansions:
        return
    r2med = [task for task in tasks if get_task_spec(task).kind == "r2med"]
    if not r2med:
        given = next(value for value in expansions if value is not None and not is_local(value))
        raise _fail(
            path, "expansions", f"holds {given!r}, which reaches no task: released expansions exist for the R2MED tasks only, "
            f"and this spec's tasks ({', '.join(tasks)}) are NanoR2MED tasks",
            "remove it, or add R2MED tasks (e.g. tasks: [R2MEDBiology] or benchmarks: [R2MED-Full])",
        )
    for value in released:
        for task in r2med:
            known = list_expansions(task)
            if value not in known:
                raise _fail(path, "expansions", f"holds {value!r}, not a released expansion of {task}",
                            unknown_name_message("expansion", value, known) + "; or local:FOLDER for one you generated")


def _check_candidates(path: Path, tasks: Sequence[str], candidates: Sequence[str]) -> None:
    """Candidate subsets reach only tasks with stored candidate lists (the NanoR2MED tasks)."""
    if candidates and not any(get_task_spec(task).candidate_profiles for task in tasks):
        raise _fail(
            path, "candidates", f"is {list(candidates)}, which reaches no task: stored candidate lists exist for the NanoR2MED "
            f"tasks only, and this spec's tasks ({', '.join(tasks)}) have none",
            "remove `candidates` (and `candidates_only`), or add NanoR2MED tasks (e.g. benchmarks: [NanoR2MED])",
        )


def evaluate_task_parameters() -> set[str]:
    """evaluate_task's parameters: the task, the retriever and the keyword arguments (TaskArguments' fields)."""
    return {"task", "retriever", *(item.name for item in fields(TaskArguments))}


def _rerankers(path: Path, raw: Mapping[str, Any]) -> list[dict[str, Any]]:
    entries = _as_list(path, "rerankers", raw.get("rerankers"))
    if not entries:
        return []
    missing = sorted({"rerank", "first_stage", "rerank_depth"} - evaluate_task_parameters())
    if missing:
        raise _fail(
            path, "rerankers", f"needs evaluate_task({', '.join(f'{name}=' for name in missing)}), which this r2med-plugin lacks",
            "remove `rerankers` from the spec, or install a release with the reranker mode",
        )
    rerankers = []
    for index, entry in enumerate(entries):
        key = f"rerankers[{index}]"
        plain = isinstance(entry, str)
        entry = {"model": entry} if plain else entry
        if not isinstance(entry, dict) or not isinstance(entry.get("model"), str):
            raise _fail(path, key, f"is {entry!r}", "write {model: CROSS_ENCODER, first_stage: bm25-lucene, depth: 10}")
        unknown = sorted(set(entry) - RERANKER_KEYS)
        if unknown:
            raise _fail(path, f"{key}.{unknown[0]}", "is not a reranker setting", f"use only {sorted(RERANKER_KEYS)}")
        check_model_path(path, key if plain else f"{key}.model", entry["model"])
        kwargs: dict[str, Any] = {"rerank": entry["model"], "rerank_depth": _as_int(path, f"{key}.depth", entry.get("depth"), 10, 1)}
        try:
            check_rerank_depth(kwargs["rerank_depth"], f"`{key}.depth`")  # as evaluate --rerank-depth checks it
        except ValueError as error:
            raise SpecError(f"{path}: {error}") from None
        if entry.get("first_stage") is not None:
            kwargs["first_stage"] = str(entry["first_stage"])
            check_model_path(path, f"{key}.first_stage", kwargs["first_stage"])
        if entry.get("batch_size") is not None:
            kwargs["rerank_batch_size"] = _as_int(path, f"{key}.batch_size", entry["batch_size"], 32, 1)
        kwargs |= _llm_reranker_settings(path, key, entry)
        rerankers.append(kwargs)
    return rerankers


def _llm_reranker_settings(path: Path, key: str, entry: Mapping[str, Any]) -> dict[str, Any]:
    """{"llm_reranker": what it asks, "llm_requests": how} for an LLM reranker entry, checked as the CLI checks them;
    {} for a cross-encoder, which refuses LLM settings."""
    from r2med_plugin.llm.rerankers import is_llm_reranker_name

    given = [name for name in (*LLM_RERANKER_KEYS, *LLM_REQUEST_KEYS) if entry.get(name) is not None]
    if not is_llm_reranker_name(entry["model"]):
        if given:
            raise _fail(path, f"{key}.{given[0]}", f"is set, but {entry['model']} is a cross-encoder",
                        "LLM settings apply to llm-listwise:<model>, llm-pointwise:<model>, llm-reasoning:<model>, "
                        "llm-setwise:<model> or llm-groupwise:<model>: drop it")
        return {}
    if entry.get("batch_size") is not None:
        raise _fail(path, f"{key}.batch_size", "is set, but an LLM reranker batches nothing",
                    "its requests go `concurrency` at a time: drop batch_size")
    if not entry.get("base_url"):
        raise _fail(path, f"{key}.base_url", "is missing", "an LLM reranker needs its endpoint: base_url: http://localhost:8000/v1")
    asks = {name: entry[name] for name in LLM_RERANKER_KEYS if entry.get(name) is not None}
    requests = {name: entry[name] for name in LLM_REQUEST_KEYS if entry.get(name) is not None}
    from r2med_plugin.evaluation.request import RequestError

    try:  # the kind's settings, each value, and the endpoint: checked by the type, as for the CLI and the Python API
        llm_reranker_spec(entry["model"], asks, requests, depth=entry.get("depth") or 10)
    except RequestError as error:
        raise SpecError(f"{path}: {error.keyed(f'`{key}.{error.key}`')}") from None
    except (TypeError, ValueError) as error:
        raise _fail(path, key, f"is {entry['model']!r}", str(error).replace("--", "")) from None
    return {"llm_reranker": asks, "llm_requests": requests}


def llm_reranker_spec(model: str, asks: Mapping[str, Any], requests: Mapping[str, Any], *, depth: int = 10) -> Any:
    """The LlmRerankerSpec of a rerankers entry: what it asks (``asks``: base_url, extra_body and the kind's settings)
    and how its requests go (``requests``)."""
    from r2med_plugin.evaluation.specs import EndpointSpec, LlmRerankerSpec

    endpoint = EndpointSpec(base_url=asks.get("base_url"), extra_body=asks.get("extra_body"), **requests)
    settings = {name: value for name, value in asks.items() if name not in ("base_url", "extra_body")}
    return LlmRerankerSpec(model, endpoint, depth=depth, settings=settings)


def _options(path: Path, raw: Mapping[str, Any]) -> dict[str, Any]:
    options = raw.get("options") or {}
    if not isinstance(options, dict):
        raise _fail(path, "options", f"is {options!r}", "give a mapping of evaluate_task keyword arguments, e.g. {top_k: 100}")
    known = evaluate_task_parameters() - {"task", "retriever"}
    for name in options:
        if name not in known:
            raise _fail(path, f"options.{name}", "is not an argument of evaluate_task", f"use one of {sorted(known)}")
    return dict(options)


def _resources(path: Path, raw: Mapping[str, Any]) -> dict[str, float]:
    given = raw.get("resources") or {}
    if not isinstance(given, dict) or set(given) - RESOURCE_KEYS:
        raise _fail(path, "resources", f"is {given!r}", f"give a mapping with keys among {sorted(RESOURCE_KEYS)}")
    resources = {"model_gpus": 1.0, "model_cpus": 1.0, "bm25_cpus": 1.0} | given
    for name, value in resources.items():
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
            raise _fail(path, f"resources.{name}", f"is {value!r}", "give a non-negative number")
    return {name: float(value) for name, value in resources.items()}


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
        raise _fail(path, "output", "is missing", "give the folder results go to, e.g. output: sweep-results")
    base = path.parent if path.name != "<spec>" else Path.cwd()
    retrievers = [_retriever(path, i, entry, raw) for i, entry in enumerate(_as_list(path, "retrievers", raw.get("retrievers")))]
    seen: dict[tuple, int] = {}
    for index, entry in enumerate(retrievers):
        identity = (entry.get("bm25") or entry.get("model"), entry.get("revision"))
        if identity in seen:
            raise _fail(
                path, f"retrievers[{index}]", f"repeats retrievers[{seen[identity]}] ({identity[0]}, revision {identity[1]})",
                "both would write the same result files: keep one, or run the other into another `output`",
            )
        seen[identity] = index
    rerankers = _rerankers(path, raw)
    if not retrievers and not any("first_stage" in r for r in rerankers):
        raise _fail(path, "retrievers", "is missing", "list at least one, e.g. retrievers: [bm25-lucene]")
    env = raw.get("env") or {}
    if not isinstance(env, dict) or not all(isinstance(k, str) for k in env):
        raise _fail(path, "env", f"is {env!r}", "give a mapping of variable names to values")
    data_dir = raw.get("data_dir")
    tasks = _tasks(path, raw)
    expansions = _expansions(path, raw)
    _check_expansions(path, tasks, expansions)
    scoring = _scoring(path, raw)
    candidates, candidates_only = list(scoring.candidates), scoring.candidates_only
    _check_candidates(path, tasks, candidates)
    models = [entry for entry in retrievers if "model" in entry] + rerankers
    for key in ("batch_size", "devices"):
        if raw.get(key) is not None and not models:
            raise _fail(path, key, "reaches no job", "every retriever is BM25 and no reranker is given: drop it")
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
        trec=bool(_as_bool(path, "trec", raw.get("trec"))),
        rerankers=rerankers,
        retries=_as_int(path, "retries", raw.get("retries"), 1, 0),
        data_dir=str((base / str(data_dir)).resolve()) if data_dir else None,
        accept_drift=_as_bool(path, "accept_drift", raw.get("accept_drift"), None),
        resources=_resources(path, raw),
        options=_options(path, raw),
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
                raise ValueError(f"api_key_env {key_env}: the variable {key_env} is set neither here nor in the spec's "
                                 "env:; export it first")
            job_request(job, models)
        except (ValueError, KeyError, TypeError) as error:
            message = error.args[0] if isinstance(error, KeyError) and error.args else error
            raise SpecError(f"{spec.path}: job {job.label}: {message} (see `top_k`, `options`, `candidates`, `hybrid`, "
                            "`rerankers` in the spec)") from None


def job_request(job: Job, models: dict[str, Any] | None = None) -> Any:
    """The EvaluationRequest a job runs, built from its plain form (models named, not loaded; ``models`` keeps the
    ModelSpecs built so far, so a model of many jobs is resolved once)."""
    from r2med_plugin.evaluation.plan import request_of
    from r2med_plugin.evaluation.request import TaskArguments
    from r2med_plugin.evaluation.specs import Bm25Spec, CrossEncoderSpec

    options = {key: value for key, value in job.options.items() if key not in ("llm_reranker", "llm_requests")}
    retriever = job.retriever or {}
    first = Bm25Spec(retriever["bm25"]) if "bm25" in retriever else None
    if "model" in retriever:
        loading = {name: retriever[name] for name in LOADING_KEYS if retriever.get(name) is not None}
        key = json.dumps([retriever["model"], retriever.get("revision"), loading, job.instruction], sort_keys=True, default=str)
        models = {} if models is None else models
        if key not in models:
            models[key] = model_spec(retriever["model"], retriever.get("revision"), loading, job.instruction)
        first = models[key]
    if "rerank" in options:
        depth, batch_size = options.pop("rerank_depth", None) or 10, options.pop("rerank_batch_size", None)
        asks = job.options.get("llm_reranker")
        options["rerank"] = (llm_reranker_spec(options["rerank"], asks, job.options.get("llm_requests") or {}, depth=depth)
                             if asks is not None else CrossEncoderSpec(options["rerank"], depth=depth, batch_size=batch_size))
    return request_of(job.task, first, TaskArguments.of({**options, "show_progress": False}, "a sweep job's evaluate_task"))


def load_spec(path: str | os.PathLike) -> SweepSpec:
    """Read and validate a sweep spec YAML file."""
    import yaml

    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"sweep spec {path} does not exist; write one (see README, 'Sweeps and clusters')")
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as error:
        raise SpecError(f"{path}: not valid YAML ({error})") from None
    return parse_spec(raw, path)


def _task_expansions(task: str, expansions: Sequence[str | None]) -> list[str | None]:
    """The expansion options that apply to a task: released ones to R2MED tasks, local ones to every task."""
    from r2med_plugin.data.expansions import list_expansions, parse_expansion

    spec = get_task_spec(task)
    chosen: list[str | None] = []
    for expansion in expansions:
        if expansion is None or is_local(expansion):
            chosen.append(expansion)
        elif spec.kind == "r2med":
            if expansion == "all":
                chosen += list_expansions(task)
            else:
                parse_expansion(spec, expansion)  # a misspelt expansion fails here, before anything runs
                chosen.append(expansion)
    return list(dict.fromkeys(chosen))


def _base_options(spec: SweepSpec, task: str, expansion: str | None) -> dict[str, Any]:
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
        first_stages = [None] if "first_stage" in reranker else spec.retrievers
        for retriever in first_stages:
            for task in spec.tasks:
                options = {k: v for k, v in _base_options(spec, task, None).items() if k in ("data_dir", "accept_drift")}
                if spec.top_k != DEFAULT_TOP_K:  # the depth of the first stage's own result (its first_stage_* keys);
                    options["top_k"] = spec.top_k  # left out at the default, so the job ids of earlier specs hold
                jobs.append(Job(task, retriever, options | spec.options | reranker, str(spec.output), spec.trec,
                                bool((retriever or {}).get("instruction")), env))
    unique = list({job.job_id: job for job in jobs}.values())
    if not unique:
        raise SpecError(f"{spec.path}: the spec expands to no job; check `tasks` and `expansions` (released expansions exist for R2MED tasks only)")
    return unique
