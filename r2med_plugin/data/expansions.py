"""The released LLM query expansions (GAR configs) of the R2MED repos.

Names: the official code spells an expansion ``<method>/<llm>`` with hyphens (``hyde/o3-mini``,
``search-r1/qwen-7b-ins``); the hub split names use underscores (``o3_mini``). This module is the
one place that maps between the two.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import polars as pl

from r2med_plugin.catalog import get_task_spec, unknown_name_message
from r2med_plugin.data.fingerprint import files_fingerprint
from r2med_plugin.data.hub import LocatedRepo, locate_repo, mirror_files_verified
from r2med_plugin.identifiers import EXPANSION_METHODS
from r2med_plugin.data.layout import README, config_files, read_front_matter, resolve_split_file
from r2med_plugin.data.readers import read_table
from r2med_plugin.data.validate import check_texts, check_unique
from r2med_plugin.types import TaskData, TaskSpec

METHODS = EXPANSION_METHODS
LOCAL_PREFIX = "local:"
LOCAL_FILE = "query_with_hydoc.jsonl"
LOCAL_MANIFEST = "manifest.json"


def llm_name(hub_split: str) -> str:
    """Hub split name -> the LLM name as the official code spells it (o3_mini -> o3-mini)."""
    return hub_split.replace("_", "-")


def hub_split(llm: str) -> str:
    """The LLM name as the official code spells it -> hub split name (o3-mini -> o3_mini)."""
    return llm.replace("-", "_")


def list_expansions(task: str) -> list[str]:
    """Every released expansion of an R2MED task as "method/llm", in the hub's order."""
    spec = get_task_spec(task)
    return [f"{method}/{llm_name(split)}" for method, splits in spec.gar_configs.items() for split in splits]


def parse_expansion(spec: TaskSpec, expansion: str) -> tuple[str, str]:
    """"method/llm" -> (method, hub split), validated against the task's released expansions.

    A local expansion ("local:<folder>/<method>/<llm>") -> (method, llm), its file checked to exist.
    """
    if is_local(expansion):
        local = resolve_local_expansion(spec, expansion)
        return local.method, local.llm
    known = [f"{method}/{llm_name(split)}" for method, splits in spec.gar_configs.items() for split in splits]
    if expansion not in known:
        if not known:
            raise ValueError(f"{spec.name} has no released expansions; they exist for the R2MED tasks")
        raise KeyError(unknown_name_message("expansion", expansion, known))
    method, llm = expansion.split("/", 1)
    return method, hub_split(llm)


def load_expansions(
    task: str, expansion: str, *, data_dir: str | os.PathLike | None = None, accept_drift: bool | None = None
) -> pl.DataFrame:
    """The expansion file of ``task`` as a frame with columns id, text, hy_doc (one row per query)."""
    from r2med_plugin.data.loader import drift_accepted

    spec = get_task_spec(task)
    if is_local(expansion):
        return _read_expansion_file(resolve_local_expansion(spec, expansion).path)
    _, path = released_expansion_file(spec, expansion, data_dir=data_dir, accept_drift=drift_accepted(accept_drift))
    return _read_expansion_file(path)


def released_expansion_file(spec: TaskSpec, expansion: str, *, data_dir: str | os.PathLike | None = None,
                            accept_drift: bool = False) -> tuple[LocatedRepo, Path]:
    """Where a released expansion's file lies (in the task's repo: a mirror or the hub snapshot)."""
    method, split = parse_expansion(spec, expansion)
    repo = locate_repo(spec, data_dir, accept_drift=accept_drift, extra_configs=[(method, split)])
    layout = config_files(read_front_matter(repo.root), repo.root / README)
    return repo, resolve_split_file(repo.root, layout, method, split, repo.trusted_root)


def check_local_expansion_data(data: TaskData, expansion: str) -> None:
    """A local expansion is the output of `r2med generate` on some data: refuse it on other data (its manifest
    records the dataset revision it was generated from), as its queries and first-stage passages were those."""
    if not is_local(expansion):
        return
    local = resolve_local_expansion(data.spec, expansion)
    made_on = local.manifest.get("dataset_revision")
    if made_on and made_on not in (data.revision, data.result_revision):
        raise ValueError(
            f"--expansion {expansion}: {local.path.parent} was generated from {data.name} at dataset revision {made_on} "
            f"(its manifest.json), and this data is {data.result_revision}. Generate it again from this data "
            f"(r2med generate --task {data.name} ... --out <another folder>), or evaluate on the data it was made from"
        )


def with_expansion_files(data: TaskData, expansion: str, data_dir: str | os.PathLike | None = None) -> TaskData:
    """The task as an expansion run reads it: a released expansion's file joins the files its dataset revision
    vouches for. On a mirror, the file must have its own download record at the commit (else the revision is
    unverified), and it is part of the files fingerprint, so an edited expansion file never passes as the
    pinned data and two versions of it never share a revision."""
    from r2med_plugin.data.loader import drift_accepted

    if is_local(expansion) or data.source != "mirror":
        return data
    repo, path = released_expansion_file(data.spec, expansion, data_dir=data_dir, accept_drift=drift_accepted(None))
    verified = data.revision_verified and mirror_files_verified(repo.root, [path], data.revision)
    combined = hashlib.sha256(f"{data.files_fingerprint}\0{files_fingerprint([path], repo.root)}".encode()).hexdigest()[:16]
    report = replace(data.report, revision_verified=verified, files_fingerprint=combined, expansion_file=str(path),
                     base_result_revision=data.report.base_result_revision or data.result_revision,
                     base_judged_data=data.paired_judged_data)
    return replace(data, files_fingerprint=combined, revision_verified=verified, report=report)


def _read_expansion_file(path: Path) -> pl.DataFrame:
    frame = read_table(path, {"id": pl.Utf8, "text": pl.Utf8, "hy_doc": pl.Utf8})
    check_unique(frame, ["id"], path, "query id")
    check_texts(frame, path)
    return frame


# --- expansions generated locally (r2med generate) ----------------------------------------------


@dataclass(frozen=True)
class LocalExpansion:
    """One task's file of a local expansion: <folder>/<HubName>/<method>/<llm>/query_with_hydoc.jsonl."""

    method: str
    llm: str
    path: Path
    manifest: dict[str, Any]

    @property
    def label(self) -> str:
        """The name results are filed under: distinct from the released "<method>/<llm>", and from the same
        LLM name generated into another folder ("@" + a hash of the folder holding the task folders)."""
        return f"local/{self.method}/{self.llm}@{self.folder_id}"

    @property
    def folder_id(self) -> str:
        root = self.path.parent.parent.parent.parent.resolve()  # <root>/<HubName>/<method>/<llm>/query_with_hydoc.jsonl
        return hashlib.sha256(str(root).encode("utf-8", "surrogatepass")).hexdigest()[:8]

    @property
    def reasoning(self) -> bool | None:
        """Whether the generating LLM reasons (from the manifest); None when unknown."""
        value = self.manifest.get("reasoning")
        return value if isinstance(value, bool) else None


def is_local(expansion: str | None) -> bool:
    return isinstance(expansion, str) and expansion.startswith(LOCAL_PREFIX)


def resolve_local_expansion(spec: TaskSpec, expansion: str) -> LocalExpansion:
    """``local:<folder>/<method>/<llm>`` -> the task's file ``<folder>/<HubName>/<method>/<llm>/query_with_hydoc.jsonl``.

    The exact task folder (``local:<folder>/<HubName>/<method>/<llm>``) is accepted too.
    """
    given = Path(expansion[len(LOCAL_PREFIX):]).expanduser()
    if not given.name or not given.parent.name:
        raise ValueError(f"--expansion {expansion}: expected local:<folder>/<method>/<llm>, e.g. local:r2med-expansions/hyde/qwen-7b")
    method, llm = given.parent.name, given.name
    if method not in METHODS:
        raise ValueError(f"--expansion {expansion}: {method!r} is not an expansion method ({', '.join(METHODS)}); "
                         "expected local:<folder>/<method>/<llm>")
    per_task = given.parent.parent / spec.hub_name / method / llm
    hub_names = {other.hub_name for other in _r2med_specs()}
    if given.parent.parent.name in hub_names:  # the exact task folder was given
        if given.parent.parent.name != spec.hub_name:
            raise ValueError(f"--expansion {expansion} is the {given.parent.parent.name} folder, not {spec.hub_name}'s; "
                             f"use local:{given.parent.parent.parent / method / llm} for every task")
        per_task = given
    for folder in (per_task, given):
        if (folder / LOCAL_FILE).is_file():
            return LocalExpansion(method, llm, folder / LOCAL_FILE, _read_manifest(folder / LOCAL_MANIFEST))
    raise FileNotFoundError(
        f"--expansion {expansion}: no {LOCAL_FILE} for {spec.name} at {per_task / LOCAL_FILE}; generate it with "
        f"`r2med generate --task {spec.name} --method {method} --name {llm} --out {given.parent.parent} ...`"
    )


def _r2med_specs() -> list[TaskSpec]:
    from r2med_plugin.catalog import list_tasks

    return list_tasks("r2med")


def _read_manifest(path: Path) -> dict[str, Any]:
    if not path.is_file():
        return {}
    try:
        payload = json.loads(path.read_text(encoding="utf-8"))
    except ValueError as error:
        raise ValueError(f"{path}: not valid JSON ({error}); regenerate it or remove it") from error
    return payload if isinstance(payload, dict) else {}


def expansion_label(spec: TaskSpec, expansion: str) -> str:
    """The expansion's name in results: "method/llm" for released ones, "local/method/llm" for local ones."""
    return resolve_local_expansion(spec, expansion).label if is_local(expansion) else expansion


def reasoning_llms_for(spec: TaskSpec, expansion: str) -> tuple[str, ...]:
    """The LLM names whose outputs get answer extraction: the official list, plus a local LLM whose
    manifest says it reasons (a reasoning part came back, or its text holds </think>)."""
    if not is_local(expansion):
        return tuple(spec.reasoning_llms)
    local = resolve_local_expansion(spec, expansion)
    if local.reasoning is True:
        return (*spec.reasoning_llms, local.llm)
    if local.reasoning is False:
        return tuple(name for name in spec.reasoning_llms if name != local.llm)
    return tuple(spec.reasoning_llms)
