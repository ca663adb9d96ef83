"""load_task: one task's corpus, queries, qrels and candidate lists, validated against task_metadata."""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import polars as pl

from r2med_plugin.catalog import get_task_spec
from r2med_plugin.data.fingerprint import files_fingerprint
from r2med_plugin.data.hub import UNKNOWN_MIRROR_REVISION, evict_from_hub_cache, locate_repo, mirror_files_verified
from r2med_plugin.data.layout import README, config_files, read_front_matter, resolve_split_file
from r2med_plugin.data.readers import DamagedFileError, check_ids, read_table
from r2med_plugin.data.validate import check_known, check_texts, check_unique, count_differences
from r2med_plugin.names import LOCAL_REVISION_PREFIX, SYNTHETIC_REVISION
from r2med_plugin.types import Candidates, LoadReport, Qrels, TaskData, TaskSpec

logger = logging.getLogger(__name__)
T = TypeVar("T")

_TEXT_TABLE = {
    "jsonl": {"id": pl.Utf8, "text": pl.Utf8},
    "parquet": {"_id": pl.Utf8, "text": pl.Utf8},
}
_QRELS_TABLE = {
    "jsonl": {"q_id": pl.Utf8, "p_id": pl.Utf8, "score": pl.Int64},
    "parquet": {"query-id": pl.Utf8, "corpus-id": pl.Utf8},
}
_CANDIDATE_TABLE = {"query-id": pl.Utf8, "corpus-ids": pl.List(pl.Utf8)}


ACCEPT_DRIFT_ENV = "R2MED_ACCEPT_DRIFT"


def load_task(
    name: str, *, data_dir: str | os.PathLike | None = None, accept_drift: bool | None = None
) -> TaskData:
    """Load and validate task ``name`` from the hub (pinned revision) or from ``data_dir`` / R2MED_DATA_DIR.

    ``accept_drift=True`` (default: the R2MED_ACCEPT_DRIFT environment variable) turns count and revision
    mismatches into entries of ``TaskData.report`` instead of errors.
    """
    accept_drift = drift_accepted(accept_drift)
    spec = get_task_spec(name)
    repo = locate_repo(spec, data_dir, accept_drift=accept_drift)
    front = read_front_matter(repo.root)
    layout = config_files(front, repo.root / README)
    synthetic = front.get("synthetic_sample") is True  # the demo sample: made-up data in the hub layout

    def file_of(entry: Any) -> Path:
        return resolve_split_file(repo.root, layout, entry["config"], entry["split"], repo.trusted_root)

    corpus_path, queries_path, qrels_path = (file_of(spec.configs[key]) for key in ("corpus", "queries", "qrels"))
    corpus = _evicting(repo.source, corpus_path, lambda: _read_texts(corpus_path, spec, "document id"))
    queries = _evicting(repo.source, queries_path, lambda: _read_texts(queries_path, spec, "query id"))
    qrels_frame = _evicting(repo.source, qrels_path, lambda: _read_qrels(qrels_path, spec))
    check_known(qrels_frame["query_id"], queries["id"], qrels_path, "query id")
    check_known(qrels_frame["doc_id"], corpus["id"], qrels_path, "document id")

    found = {"queries": queries.height, "documents": corpus.height, "qrels": qrels_frame.height}
    drift = count_differences(dict(spec.expected_counts), found)
    if drift and not synthetic:
        logger.warning("%s: counts differ from task_metadata: %s", spec.name, drift)
    if drift and not accept_drift and not synthetic:
        details = "; ".join(f"{key}: expected {v['expected']}, found {v['found']}" for key, v in drift.items())
        raise ValueError(
            f"{repo.root}: task {spec.name} counts differ from task_metadata ({details}). The mirror is incomplete "
            "or from another revision; re-download it, or pass accept_drift=True (--accept-drift) to evaluate anyway (or set R2MED_ACCEPT_DRIFT=1)"
        )

    candidates = {
        key: _evicting(repo.source, file_of(entry), lambda entry=entry: _read_candidates(file_of(entry), queries, corpus))
        for key, entry in spec.candidate_configs.items()
    }
    qrels = qrels_to_dict(qrels_frame)
    read = [repo.root / README, corpus_path, queries_path, qrels_path, *(file_of(e) for e in spec.candidate_configs.values())]
    # Without a commit that vouches for them, a task's results are named by the files that task reads: editing
    # one NanoR2MED split moves that task's results only, never the other tasks of the same repo.
    fingerprint = files_fingerprint(read, repo.root) if repo.source == "mirror" else None
    revision = SYNTHETIC_REVISION if synthetic else repo.revision
    if revision == UNKNOWN_MIRROR_REVISION:
        revision = LOCAL_REVISION_PREFIX + fingerprint
    verified = repo.verified and (repo.source != "mirror" or mirror_files_verified(repo.root, read, repo.revision))
    if not verified and not synthetic:
        _warn_unverified(repo.root, spec.name, revision)
    without_qrels = sorted(set(queries["id"].to_list()) - set(qrels))
    if without_qrels:
        logger.warning("%s: %d queries have no qrels and are dropped", spec.name, len(without_qrels))
        queries = queries.filter(~pl.col("id").is_in(without_qrels))
    zero_only = sorted(query_id for query_id, judged in qrels.items() if not any(rel > 0 for rel in judged.values()))
    if zero_only:
        logger.warning("%s: %d queries are judged but have no positive; kept (they score 0), as MTEB and the official evaluator keep them",
                       spec.name, len(zero_only))
    without_positives = sorted(without_qrels + zero_only)
    report = LoadReport(
        found_counts=found,
        count_drift=drift,
        queries_without_positives=without_positives,
        queries_without_qrels=without_qrels,
        query_ids_in_corpus=sorted(queries.filter(pl.col("id").is_in(corpus["id"].implode()))["id"].to_list()),
        unknown_candidate_ids={key: value[1] for key, value in candidates.items()},
        synthetic_sample=synthetic,
        revision_verified=verified,
        files_fingerprint=fingerprint,
    )
    return TaskData(
        spec=spec,
        corpus=corpus,
        queries=queries,
        qrels=qrels,
        candidates={key: _only(value[0], qrels) for key, value in candidates.items()},
        revision=revision,
        source=repo.source,
        report=report,
        revision_verified=verified,
        files_fingerprint=fingerprint,
    )


def _warn_unverified(root: Path, task: str, revision: str) -> None:
    """One message per mirror (the same text for every task of it: a command shows it once, see cli)."""
    if revision.startswith(LOCAL_REVISION_PREFIX):
        logger.warning(
            "the mirror %s records no commit it was downloaded at, so each task's results are filed under a fingerprint of "
            "the files it reads (local-<fingerprint>); `huggingface-cli download --local-dir` records the commit", root,
        )
    else:
        logger.warning(
            "the mirror %s does not record every file read at one commit, or a file changed since its download; its "
            "files are not verified to be revision %s (results record <revision>+unverified-files-<fingerprint>; download it "
            "again with `huggingface-cli download --local-dir`)", root, revision,
        )
    logger.debug("%s: unverified mirror files, filed as revision %s", task, revision)


def _evicting(source: str, path: Path, read: Callable[[], T]) -> T:
    """Run ``read``; a file from the hub cache that cannot be parsed is removed, so the next run re-downloads it."""
    try:
        return read()
    except DamagedFileError as error:
        if source == "hub":
            evict_from_hub_cache(path)
            raise ValueError(f"{error}. The damaged download was removed from the Hugging Face cache: run again to re-download it") from error
        raise


def drift_accepted(accept_drift: bool | None) -> bool:
    """The explicit choice, else the R2MED_ACCEPT_DRIFT environment variable."""
    if accept_drift is not None:
        return accept_drift
    return os.environ.get(ACCEPT_DRIFT_ENV, "").strip().lower() in {"1", "true", "yes"}


def _read_texts(path: Path, spec: TaskSpec, what: str) -> pl.DataFrame:
    columns = _TEXT_TABLE[spec.data_format]
    frame = read_table(path, columns).rename({next(iter(columns)): "id"})
    check_ids(frame, ["id"], path)
    check_unique(frame, ["id"], path, what)
    check_texts(frame, path)
    return frame


def _read_qrels(path: Path, spec: TaskSpec) -> pl.DataFrame:
    columns = _QRELS_TABLE[spec.data_format]
    frame = read_table(path, columns)
    if spec.data_format == "jsonl":
        frame = frame.rename({"q_id": "query_id", "p_id": "doc_id"})
    else:
        frame = frame.rename({"query-id": "query_id", "corpus-id": "doc_id"}).with_columns(score=pl.lit(1, pl.Int64))
    check_ids(frame, ["query_id", "doc_id"], path)
    check_unique(frame, ["query_id", "doc_id"], path, "qrels pair")
    return frame


def qrels_to_dict(frame: pl.DataFrame) -> Qrels:
    """query id -> {doc id: relevance} for every query with at least one qrels row.

    A query judged only non-relevant stays (it scores 0): mteb keeps every query with qrels
    (AbsTaskRetrieval drops only queries without any), and so does the official evaluator (pytrec_eval).
    """
    grouped = frame.group_by("query_id", maintain_order=True).agg("doc_id", "score")
    return {
        query_id: dict(zip(doc_ids, scores))
        for query_id, doc_ids, scores in zip(grouped["query_id"], grouped["doc_id"], grouped["score"])
    }


def _read_candidates(path: Path, queries: pl.DataFrame, corpus: pl.DataFrame) -> tuple[Candidates, int]:
    """The stored candidate lists (ordered), and how many listed ids are not in the corpus."""
    frame = read_table(path, _CANDIDATE_TABLE)
    check_unique(frame, ["query-id"], path, "query id")
    check_known(frame["query-id"], queries["id"], path, "query id")
    listed = frame.explode("corpus-ids")["corpus-ids"].drop_nulls()
    unknown = int((~listed.is_in(corpus["id"].implode())).sum())
    return dict(zip(frame["query-id"].to_list(), frame["corpus-ids"].to_list())), unknown


def _only(candidates: Candidates, qrels: Qrels) -> Candidates:
    return {query_id: ids for query_id, ids in candidates.items() if query_id in qrels}
