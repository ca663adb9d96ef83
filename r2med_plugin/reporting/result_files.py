"""Reading MTEB result folders (ResultCache layout) into records: one per task result file."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from r2med_plugin.catalog import list_tasks
from r2med_plugin.errors import MissingFileError, UserError
from r2med_plugin.identifiers import judged_data

RERANKING_SUFFIX = "Reranking"


@dataclass(frozen=True)
class ResultRecord:
    model: str
    revision: str
    task: str
    scores: dict
    date: float
    path: Path
    dataset_revision: str = ""
    candidates_only: bool = False
    count_drift: dict = field(default_factory=dict)  # counts that differed from the dataset card (--accept-drift)
    files_fingerprint: str = ""  # the recorded fingerprint of the files read ("" when none: a hub snapshot, mteb run)
    revision_verified: bool = False  # whether the files were proven to be the revision's
    sidecar_data: str = ""  # an mteb run's result records no files: its per-query sidecar's paired_data says them

    @property
    def judged_data(self) -> str:
        """What the result was judged on (r2med_plugin.identifiers.judged_data): the revision and the files read."""
        if not self.files_fingerprint and self.sidecar_data:
            return self.sidecar_data
        return judged_data(self.dataset_revision, self.files_fingerprint, self.revision_verified)


def read_result_folders(folders: Iterable[str | Path]) -> list[ResultRecord]:
    """Every MTEB TaskResult JSON under the folders (ResultCache layout: <model>/<revision>/<task>.json)."""
    records = []
    for folder in folders:
        folder = Path(folder)
        if not folder.is_dir():
            raise MissingFileError(f"{folder} is not a folder of MTEB results (expected results/<model>/<revision>/<task>.json)")
        for path in sorted(folder.rglob("*.json")):
            if path.name == "model_meta.json" or path.name.endswith("_predictions.json"):
                continue
            try:
                payload = json.loads(path.read_text(encoding="utf-8"))
            except (OSError, ValueError) as error:
                raise UserError(f"{path}: not a readable result file ({error})") from error
            if not isinstance(payload, dict) or "task_name" not in payload or "scores" not in payload:
                continue
            task, scores = payload["task_name"], _main_split_scores(payload, path)
            candidates_only = payload.get("r2med_evaluation") == "candidates-only"
            if task.endswith(RERANKING_SUFFIX) and task.removesuffix(RERANKING_SUFFIX) in _nano_names():
                task, scores, candidates_only = task.removesuffix(RERANKING_SUFFIX), _reranking_as_candidates(scores), True
            records.append(
                ResultRecord(
                    model=_model_name(path), revision=path.parent.name, task=task,
                    scores=scores, date=float(payload.get("date") or path.stat().st_mtime), path=path,
                    dataset_revision=str(payload.get("dataset_revision") or ""), candidates_only=candidates_only,
                    count_drift=_recorded_drift(payload), **_recorded_files(payload, path),
                )
            )
    return records


def _recorded_drift(payload: dict) -> dict:
    provenance = payload.get("r2med_provenance")
    drift = provenance.get("dataset_count_drift") if isinstance(provenance, dict) else None
    return drift if isinstance(drift, dict) else {}


def _recorded_files(payload: dict, path: Path) -> dict:
    """The files fingerprint and verification a result records in its provenance; for a result without provenance
    (``mteb run`` writes its own file), what its per-query sidecar says it was judged on; else nothing."""
    provenance = payload.get("r2med_provenance")
    if not isinstance(provenance, dict):
        return {"sidecar_data": _sidecar_data(path)}
    return {"files_fingerprint": str(provenance.get("dataset_files_fingerprint") or ""),
            "revision_verified": provenance.get("dataset_revision_verified") is True}


def _sidecar_data(result_path: Path) -> str:
    sidecar = result_path.with_name(f"{result_path.stem}.per_query.parquet")  # reporting.per_query.per_query_path
    if not sidecar.is_file():
        return ""
    import pyarrow.parquet as pq

    try:
        info = json.loads((pq.read_schema(sidecar).metadata or {}).get(b"r2med_per_query", b"{}"))
    except (OSError, ValueError):
        return ""
    return str(info.get("paired_data") or "") if isinstance(info, dict) else ""


def _nano_names() -> set[str]:
    return {spec.name for spec in list_tasks("nano")}


def _reranking_as_candidates(scores: dict) -> dict:
    """A NanoR2MED<Domain>Reranking result ranks the stored hybrid lists: its scores are the candidate-hybrid column."""
    return {f"candidates_hybrid_{key}": value for key, value in scores.items() if key.endswith("_safeguard")}


def _model_name(result_path: Path) -> str:
    meta = result_path.parent / "model_meta.json"
    if meta.is_file():
        try:
            name = json.loads(meta.read_text(encoding="utf-8")).get("name")
            if name:
                return str(name)
        except (OSError, ValueError):
            pass
    return result_path.parent.parent.name.replace("__", "/")


def _main_split_scores(payload: dict, path: Path) -> dict:
    splits = payload["scores"]
    entries: list[dict] = splits.get("test") or next(iter(splits.values()), [])
    for entry in entries:
        if entry.get("hf_subset", "default") == "default":
            return entry
    if entries:
        return entries[0]
    raise UserError(f"{path}: the result holds no scores")
