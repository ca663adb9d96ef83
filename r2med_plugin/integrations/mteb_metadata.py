"""The TaskMetadata of this package's mteb tasks, built from the catalog.

Apart from r2med_plugin.integrations.mteb, which every ``import mteb`` runs (the autoload hook): a pydantic subclass
costs milliseconds to define, and the 24 metadata objects are built only when mteb first reads a task's metadata
(r2med_plugin.integrations.mteb.LazyTaskMetadata).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, cast

from mteb.abstasks.task_metadata import PromptDict, TaskMetadata
from pydantic import PrivateAttr

from r2med_plugin.catalog import get_task_spec
from r2med_plugin.integrations.compat import mteb_registries
from r2med_plugin.types import TaskSpec


class R2MEDTaskMetadata(TaskMetadata):
    """TaskMetadata whose descriptive statistics live with this package, never in mteb's own folder.

    Statistics shipped in r2med_plugin/integrations/descriptive_stats/ (see integrations/descriptive_statistics.py)
    are read from there while the task's dataset revision is the one they were made for (the pinned commit;
    'main' for NanoR2MED). Statistics a user computes (``task.calculate_descriptive_statistics()``) go to the
    r2med_plugin cache folder, under the dataset revision loaded (a mirror's marked revision included), and
    are preferred once there; statistics of other data are never shown, and the shipped files are never
    overwritten.
    """

    _stats_target: str = PrivateAttr(default="read")

    @property
    def shipped_stat_path(self) -> Path:
        return Path(__file__).resolve().parent / "descriptive_stats" / f"{self.name}.json"

    @property
    def computed_stat_path(self) -> Path:
        from r2med_plugin.cache import cache_dir

        revision = re.sub(r"[^A-Za-z0-9._+-]", "_", self._revision)
        return cache_dir() / "descriptive_stats" / revision / f"{self.name}.json"

    @property
    def _revision(self) -> str:
        return str(self.dataset.get("revision") or "main")

    @property
    def descriptive_stat_path(self) -> Path:
        computed = self.computed_stat_path
        if self._stats_target == "write" or computed.is_file():
            return computed
        shipped = self.shipped_stat_path
        if shipped.is_file() and _stats_revision(shipped) == self._revision:
            return shipped
        return computed


def _stats_revision(path: Path) -> str | None:
    """The dataset revision a shipped statistics file was made for (its provenance block)."""
    stats = json.loads(path.read_text(encoding="utf-8"))
    return next((split.get("provenance", {}).get("dataset_revision") for split in stats.values() if isinstance(split, dict)), None)


def normalise_bibtex(entry: str) -> str:
    """One field per line, fields sorted, two-space indent: the form mteb's metadata checks expect."""
    match = re.match(r"\s*@(\w+)\s*\{\s*([^,\s]+)\s*,(.*)\}\s*$", entry, flags=re.DOTALL)
    if not match:
        raise ValueError(f"citation is not a single BibTeX entry: {entry[:80]!r}")
    kind, key, body = match.groups()
    fields = dict(
        (name.lower(), value.strip())
        for name, value in re.findall(r"(\w+)\s*=\s*(\{(?:[^{}]|\{[^{}]*\})*\}|\"[^\"]*\"|\w+)", body)
    )
    lines = [f"  {name} = {value}," for name, value in sorted(fields.items())]
    return "\n".join([f"@{kind.lower()}{{{key},", *lines, "}"])


def _builtin_facts(spec: TaskSpec) -> dict[str, Any]:
    """Dates, subtypes and annotation facts that mteb's own R2MED task records for the same data."""
    builtin_name = get_task_spec(f"R2MED{spec.domain}").mteb_builtin_task
    _, registry, _ = mteb_registries()
    if builtin_name not in registry:
        return {"date": None, "task_subtypes": ["Article retrieval"], "annotations_creators": "LM-generated and reviewed"}
    builtin = registry[builtin_name].metadata  # the class's own metadata: no task object is made
    return {
        "date": builtin.date,
        "task_subtypes": list(builtin.task_subtypes or []),
        "annotations_creators": builtin.annotations_creators,
    }


def task_metadata(spec: TaskSpec, name: str, *, reranking: bool = False) -> TaskMetadata:
    """The metadata of task ``name`` over ``spec``'s data: the retrieval task, or with ``reranking`` the reranking task
    over its stored hybrid lists."""
    description = spec.description
    if reranking:
        description += " Reranking of the stored reranking_hybrid candidate lists (100 ids, plus a safeguard positive as candidate 101 where none is in the top 100)."
    return R2MEDTaskMetadata(
        name=name,
        description=description,
        reference=f"https://huggingface.co/datasets/{spec.hub_repo}",
        dataset={"path": spec.hub_repo, "revision": spec.revision or "main"},
        type="Reranking" if reranking else "Retrieval",
        category="t2t",
        modalities=["text"],
        eval_splits=["test"],
        eval_langs=["eng-Latn"],
        main_score="ndcg_at_10_with_safeguard" if reranking else "ndcg_at_10",
        domains=["Medical"],
        license=spec.license,
        dialect=[],
        sample_creation="found",
        bibtex_citation=normalise_bibtex(spec.citation),
        prompt=cast(PromptDict, {"query": spec.instruction}),  # mteb builds PromptDict's keys at run time
        **_builtin_facts(spec),
    )
