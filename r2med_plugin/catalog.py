"""The task catalog: task_metadata/*.json turned into frozen TaskSpec objects."""

from __future__ import annotations

import difflib
import json
from dataclasses import MISSING, fields
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

from r2med_plugin.errors import MissingFileError, UnknownNameError, UserError

if TYPE_CHECKING:
    from r2med_plugin.types import TaskKind, TaskSpec

# r2med_plugin.types is imported when a TaskSpec is first built, not with this module: registering the tasks with mteb
# (on every `import mteb`) needs only their names and kinds (task_kinds), and the dataclasses cost milliseconds to make.
BENCHMARKS_FILE = "benchmarks.json"
LEADERBOARD_EXPANSIONS_FILE = "leaderboard_expansions.json"  # not a task: read by evaluation/matrix.py
_KINDS = ("r2med", "nano")


@lru_cache(maxsize=1)
def _spec_fields() -> tuple[frozenset[str], frozenset[str]]:
    """(every TaskSpec field, the required ones)."""
    from r2med_plugin.types import TaskSpec

    every = frozenset(f.name for f in fields(TaskSpec))
    required = frozenset(f.name for f in fields(TaskSpec) if f.default is MISSING and f.default_factory is MISSING)
    return every, required


def metadata_dir() -> Path:
    """The folder holding task_metadata/*.json: inside the installed wheel, or at the repo top level."""
    packaged = resources.files("r2med_plugin") / "task_metadata"
    if packaged.is_dir():
        return Path(str(packaged))
    source_tree = Path(__file__).resolve().parent.parent / "task_metadata"
    if source_tree.is_dir():
        return source_tree
    raise MissingFileError(
        "task_metadata/ was not found inside the r2med_plugin package nor next to it; "
        "reinstall r2med-plugin (pip install --force-reinstall r2med-plugin)"
    )


def spec_from_dict(payload: dict[str, Any], origin: str) -> TaskSpec:
    """Build a TaskSpec from a metadata dict, rejecting unknown and missing keys."""
    from r2med_plugin.types import TaskSpec, freeze

    spec_fields, required_fields = _spec_fields()
    unknown = sorted(set(payload) - spec_fields)
    if unknown:
        raise ValueError(f"{origin}: unknown keys {unknown}; allowed keys are {sorted(spec_fields)}")
    missing = sorted(required_fields - set(payload))
    if missing:
        raise ValueError(f"{origin}: missing keys {missing}; regenerate it with scripts/generate_task_metadata.py")
    if payload["kind"] not in _KINDS:
        raise ValueError(f"{origin}: kind {payload['kind']!r} is not one of {_KINDS}")
    values = {key: freeze(value) for key, value in payload.items()}
    return TaskSpec(**values)


@lru_cache(maxsize=1)
def _read_payloads() -> tuple[tuple[Path, dict[str, Any]], ...]:
    """(file, parsed JSON) of every task's metadata file, in file-name order."""
    payloads = []
    for path in sorted(metadata_dir().glob("*.json")):
        if path.name in (BENCHMARKS_FILE, LEADERBOARD_EXPANSIONS_FILE):
            continue
        try:
            payloads.append((path, json.loads(path.read_text(encoding="utf-8"))))
        except json.JSONDecodeError as error:
            raise ValueError(f"{path}: not valid JSON ({error})") from error
    return tuple(payloads)


def _official_order(kind: str, order: int) -> tuple[int, int]:
    return _KINDS.index(kind), order


@lru_cache(maxsize=1)
def _load_catalog() -> dict[str, TaskSpec]:
    specs: dict[str, TaskSpec] = {}
    for path, payload in _read_payloads():
        spec = spec_from_dict(payload, str(path))
        if spec.name != path.stem:
            raise ValueError(f"{path}: task name {spec.name!r} differs from the file name {path.stem!r}")
        specs[spec.name] = spec
    return dict(sorted(specs.items(), key=lambda item: _official_order(item[1].kind, item[1].official_order)))


def task_kinds() -> dict[str, TaskKind]:
    """Task name -> kind ("r2med" or "nano"), in official order, read without building any TaskSpec: what registering
    the tasks with mteb needs on every ``import mteb`` (their metadata is built when mteb first reads it)."""
    kinds = {}
    for path, payload in _read_payloads():
        if payload.get("kind") not in _KINDS or not isinstance(payload.get("official_order"), int):
            spec_from_dict(payload, str(path))  # raises the catalog's own message for the bad file
        kinds[path.stem] = (payload["kind"], payload["official_order"])
    return {name: kind for name, (kind, _) in sorted(kinds.items(), key=lambda item: _official_order(*item[1]))}


def list_tasks(kind: TaskKind | None = None) -> list[TaskSpec]:
    """All tasks in official order (R2MED first, then NanoR2MED), optionally of one kind."""
    if kind is not None and kind not in _KINDS:
        raise UserError(f"kind must be one of {_KINDS} or None, got {kind!r}")
    return [spec for spec in _load_catalog().values() if kind is None or spec.kind == kind]


def task_names(kind: TaskKind | None = None) -> list[str]:
    return [spec.name for spec in list_tasks(kind)]


def get_task_spec(name: str) -> TaskSpec:
    """The TaskSpec named ``name``; an unknown name raises KeyError with a "did you mean" hint."""
    catalog = _load_catalog()
    if name in catalog:
        return catalog[name]
    base = name.removesuffix("Reranking")
    if base != name and base in catalog and catalog[base].kind == "nano":
        raise UnknownNameError(
            f"{name} is the MTEB reranking task over {base}'s stored hybrid lists: run it with "
            f"`mteb run -t {name} -m <cross-encoder>`, or rank the same lists here with "
            f"`r2med evaluate --task {base} --candidates hybrid --candidates-only --retriever <model>`"
        )
    raise UnknownNameError(unknown_name_message("task", name, list(catalog)))


def unknown_name_message(what: str, name: str, known: list[str]) -> str:
    lowered = {candidate.lower(): candidate for candidate in known}
    guesses = difflib.get_close_matches(name.lower(), list(lowered), n=3, cutoff=0.5)
    hint = f" Did you mean {', '.join(repr(lowered[g]) for g in guesses)}?" if guesses else ""
    return f"unknown {what} {name!r}.{hint} Known {what}s: {', '.join(known)}"


@lru_cache(maxsize=1)
def _load_benchmarks() -> dict[str, Any]:
    return json.loads((metadata_dir() / BENCHMARKS_FILE).read_text(encoding="utf-8"))


def list_benchmarks() -> dict[str, list[str]]:
    """Benchmark name -> its task names (NanoR2MED, R2MED-Full)."""
    return {name: list(entry["tasks"]) for name, entry in _load_benchmarks().items()}


def benchmark_description(name: str) -> str:
    benchmarks = _load_benchmarks()
    if name not in benchmarks:
        raise UnknownNameError(unknown_name_message("benchmark", name, list(benchmarks)))
    return benchmarks[name]["description"]
