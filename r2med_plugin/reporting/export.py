"""Result files: MTEB's result layout (readable by mteb.ResultCache) and TREC run files."""

from __future__ import annotations

import json
import logging
import os
import tempfile
import time
from collections.abc import Mapping
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

from r2med_plugin.errors import UserError
from r2med_plugin.identifiers import CANDIDATE_SUBSETS, described_data, judged_data
from r2med_plugin.io import write_json_atomic, write_text_atomic
from r2med_plugin.types import TaskSpec

logger = logging.getLogger(__name__)

LANGUAGES = ["eng-Latn"]
TREC_DEPTH = 1000  # documents per query in every TREC run this package writes (``--depth``)
CANDIDATES_ONLY_FOLDER = "candidates-only"  # outside <dir>/results/, where ResultCache never looks
CANDIDATES_ONLY_MARKER = "candidates-only"


def check_output_dir(folder: str | os.PathLike, flag: str = "output") -> Path:
    """Make sure ``folder`` is, or can become, a writable folder, before any long work writes into it
    (nothing is created here: a refused command leaves no folder behind)."""
    path = Path(folder)
    existing = next((candidate for candidate in (path, *path.parents) if candidate.exists()), Path("."))
    if not existing.is_dir():
        where = "is a file" if existing == path else f"cannot be created: {existing} is a file"
        raise UserError(f"{flag} {folder}: {where}; give a folder (it is created when missing)")
    try:
        with tempfile.NamedTemporaryFile(dir=existing, prefix=".r2med-write-check-"):
            pass
    except OSError as error:
        raise UserError(f"{flag} {folder}: not writable ({error.strerror or error}); choose a folder you can write to") from None
    return path


def model_folder_name(model_name: str) -> str:
    # "|" (reranked results: "<reranker>|<first stage>|top_<k>") is not allowed in Windows file names.
    return model_name.replace("/", "__").replace(" ", "_").replace("|", "--")


def trec_tag(model_name: str) -> str:
    """The run tag of every TREC file: the model name as filed (expansion included), without "/" or spaces."""
    return model_folder_name(model_name)


def mteb_result_path(output_dir: Path, model_name: str, model_revision: str, task_name: str) -> Path:
    """Where MTEB's ResultCache keeps a result: results/<model>/<revision>/<task>.json."""
    return Path(output_dir) / "results" / model_folder_name(model_name) / model_revision / f"{task_name}.json"


def candidates_only_result_path(output_dir: Path, model_name: str, model_revision: str, task_name: str) -> Path:
    """A candidate-only result: candidates-only/<model>/<revision>/<task>.json, never read as a task score."""
    return Path(output_dir) / CANDIDATES_ONLY_FOLDER / model_folder_name(model_name) / model_revision / f"{task_name}.json"


def _mteb_version() -> str:
    try:
        return version("mteb")
    except PackageNotFoundError:
        return "unknown"


_NOT_SCORES = ("hf_subset", "languages", "main_score")


def _score_group(key: str) -> tuple[str, str]:
    """(group, the evaluate option that computes it) of a score key: ``hybrid_*`` (--hybrid), ``candidates_<list>_*``
    (--candidates <list>), ``first_stage_*``; any other key is its own group."""
    if key.startswith("hybrid_"):
        return "hybrid_*", "--hybrid"
    for subset in CANDIDATE_SUBSETS:
        if key.startswith(f"candidates_{subset}_"):
            return f"candidates_{subset}_*", f"--candidates {subset}"
    if key.startswith("first_stage_"):
        return "first_stage_*", ""
    return key, ""


def dropped_score_groups(previous: Mapping[str, object], scores: Mapping[str, object]) -> list[str]:
    """The groups of scores ``previous`` holds and ``scores`` lacks, each with its count and option:
    ``["hybrid_* (14 scores; --hybrid)", "candidates_bm25_* (28 scores; --candidates bm25)"]``."""
    counts: dict[tuple[str, str], int] = {}
    for key in previous:
        if key not in scores and key not in _NOT_SCORES:
            key_group = _score_group(key)
            counts[key_group] = counts.get(key_group, 0) + 1
    described = []
    for (group, option), count in counts.items():
        details = [f"{count} scores"] if group.endswith("*") else []
        details += [option] if option else []
        described.append(f"{group} ({'; '.join(details)})" if details else group)
    return described


def _warn_if_other_data_is_replaced(path: Path, dataset_revision: str, provenance: Mapping[str, object] | None = None,
                                    scores: Mapping[str, object] | None = None) -> None:
    """MTEB's layout has one file per model, revision and task: a result on other data, at another run depth
    (--top-k), or without scores the file held (--hybrid, --candidates), replaces it; say so."""
    try:
        payload = json.loads(path.read_text(encoding="utf-8"))
        previous, previous_top_k = _recorded_data(payload), (payload.get("r2med_provenance") or {}).get("top_k")
    except (OSError, ValueError, AttributeError):
        return
    try:
        previous_scores = dict(payload["scores"]["test"][0])
    except (KeyError, IndexError, TypeError, ValueError):
        previous_scores = {}
    top_k = (provenance or {}).get("top_k")
    other_depth = previous_top_k is not None and top_k is not None and previous_top_k != top_k
    if scores is not None:
        # metrics deeper than a shallower --top-k are said by the --top-k warning below
        dropped = [group for group in dropped_score_groups(previous_scores, scores) if not other_depth or "*" in group]
        if dropped:
            logger.warning("%s: replaces a result that also held scores this run drops: %s; add those options to keep "
                           "them, or write runs with other options into another --output folder", path, ", ".join(dropped))
    if other_depth:
        logger.warning("%s: replaces a result computed on each query's top %s (this one: top %s); keep results of "
                       "different --top-k in different --output folders to compare them", path, previous_top_k, top_k)
    previous_texts = (payload.get("r2med_provenance") or {}).get("expansion_file_sha256")
    texts = (provenance or {}).get("expansion_file_sha256")
    if isinstance(previous_texts, str) and isinstance(texts, str) and previous_texts and texts and previous_texts != texts:
        logger.warning("%s: replaces a result of this local expansion computed from other expansion texts (file sha256 "
                       "%s, this one: %s); keep results of different expansion texts in different --output folders, or "
                       "generate them into another folder (another @ name)", path, previous_texts[:16], texts[:16])
    current = _judged_data(dataset_revision, dict(provenance or {}))
    if previous is not None and previous != current:
        logger.warning("%s: replaces a result computed on %s (this one: %s); runs/ and official/ files beside it from "
                       "that data are replaced only when written again. Keep results of different data in different "
                       "--output folders to compare them", path, described_data(previous),
                       described_data(current).removeprefix("dataset revision "))


def _recorded_data(payload: Mapping[str, Any]) -> str | None:
    """What a result file's scores were judged on: its dataset revision and the files fingerprint it records
    (r2med_plugin.identifiers.judged_data); None when it records no revision."""
    revision = payload.get("dataset_revision")
    if revision is None:
        return None
    return _judged_data(str(revision), payload.get("r2med_provenance") or {})


def _judged_data(revision: str, recorded: Mapping[str, Any]) -> str:
    """The judged-data value of a dataset revision and the provenance recorded beside it."""
    return judged_data(revision, recorded.get("dataset_files_fingerprint"), recorded.get("dataset_revision_verified") is True)



def write_mteb_result(
    output_dir: Path,
    *,
    spec: TaskSpec,
    task_name: str,
    model_name: str,
    model_revision: str,
    dataset_revision: str,
    scores: Mapping[str, float],
    main_score: str,
    evaluation_time: float,
    provenance: Mapping[str, object] | None = None,
    candidates_only: bool = False,
    extra_fields: Mapping[str, object] | None = None,
) -> Path:
    """One TaskResult JSON in MTEB's layout (plus the model_meta.json MTEB reads beside it).

    A ``candidates_only`` result (no full-corpus scores) goes to ``candidates-only/`` instead of
    ``results/`` and is marked, so neither mteb.ResultCache nor the leaderboard takes its main score
    as the task's score.

    ``provenance`` (query prompt, whether the dataset revision was verified, ...) is kept under the
    ``r2med_provenance`` key, which mteb's TaskResult ignores on loading.
    """
    if main_score not in scores:
        raise UserError(f"main score {main_score!r} is not among the scores")
    payload: dict[str, Any] = {
        "dataset_revision": dataset_revision,
        "task_name": task_name,
        "mteb_version": _mteb_version(),
        "scores": {
            "test": [{**scores, "main_score": scores[main_score], "hf_subset": "default", "languages": LANGUAGES}]
        },
        "evaluation_time": evaluation_time,
        "kg_co2_emissions": None,
        "date": time.time(),
        **(extra_fields or {}),
    }
    if provenance is not None:
        payload["r2med_provenance"] = dict(provenance)
    if candidates_only:
        payload["r2med_evaluation"] = CANDIDATES_ONLY_MARKER
        path = candidates_only_result_path(output_dir, model_name, model_revision, task_name)
    else:
        path = mteb_result_path(output_dir, model_name, model_revision, task_name)
    _warn_if_other_data_is_replaced(path, dataset_revision, provenance, payload["scores"]["test"][0])
    write_json_atomic(path, payload)
    meta = path.parent / "model_meta.json"
    if not meta.exists():
        write_json_atomic(meta, {"name": model_name, "revision": model_revision, "loader": None, "framework": [], "modalities": ["text"]})
    return path


def write_trec_run(path: Path, run: Mapping[str, Mapping[str, float]], tag: str, depth: int = TREC_DEPTH, *,
                   keep_order: bool = False) -> Path:
    """A TREC run file (qid Q0 docid rank score tag), each query's top ``depth`` in pytrec_eval order.

    Scores are written in full (the shortest text that reads back as the same float): fewer digits would tie
    scores closer than their last digit, and trec_eval/pytrec_eval on the file would break those ties by document
    id, scoring another order than the run's. ``keep_order``: tied scores keep the run's own order (a bm25-hakari
    run: bm25s's ranking, which HAKARI-Bench's metrics read as given)."""
    if depth < 1:
        raise UserError(f"TREC depth must be a positive number of documents per query, got {depth}")
    lines: list[str] = []
    for query_id, ranked in run.items():
        if keep_order:
            ordered = sorted(ranked.items(), key=lambda item: -item[1])[:depth]  # stable: ties stay in the run's order
        else:
            ordered = sorted(ranked.items(), key=lambda item: (item[1], item[0]), reverse=True)[:depth]
        lines.extend(f"{query_id} Q0 {doc_id} {rank} {float(score)!r} {tag}" for rank, (doc_id, score) in enumerate(ordered, start=1))
    return write_text_atomic(path, "\n".join(lines) + ("\n" if lines else ""))
