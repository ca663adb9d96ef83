"""load_task: one task's corpus, queries, qrels and candidate lists, validated against task_metadata."""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

import polars as pl

from r2med_plugin.catalog import get_task_spec
from r2med_plugin.data.fingerprint import files_fingerprint
from r2med_plugin.data.hub import UNKNOWN_MIRROR_REVISION, LocatedRepo, evict_from_hub_cache, locate_repo, unverified_files
from r2med_plugin.data.layout import README, config_files, read_front_matter, resolve_split_file
from r2med_plugin.data.readers import ColumnTypes, DamagedFileError, check_ids, read_table
from r2med_plugin.data.validate import (
    UniqueRows,
    check_known,
    check_texts,
    check_unique,
    count_differences,
    fold_repeated_ids,
    near_empty_ids,
    rows_repeating_a_text,
)
from r2med_plugin.errors import UserError
from r2med_plugin.identifiers import LOCAL_REVISION_PREFIX, SYNTHETIC_REVISION
from r2med_plugin.types import Candidates, LoadReport, Qrels, TaskData, TaskSpec

logger = logging.getLogger(__name__)
T = TypeVar("T")

_TEXT_TABLE: dict[str, ColumnTypes] = {
    "jsonl": {"id": pl.Utf8, "text": pl.Utf8},
    "parquet": {"_id": pl.Utf8, "text": pl.Utf8},
}
_QRELS_TABLE: dict[str, ColumnTypes] = {
    "jsonl": {"q_id": pl.Utf8, "p_id": pl.Utf8, "score": pl.Int64},
    "parquet": {"query-id": pl.Utf8, "corpus-id": pl.Utf8},
}
_CANDIDATE_TABLE: ColumnTypes = {"query-id": pl.Utf8, "corpus-ids": pl.List(pl.Utf8)}


ACCEPT_DRIFT_ENV = "R2MED_ACCEPT_DRIFT"


def load_task(
    name: str, *, data_dir: str | os.PathLike | None = None, accept_drift: bool | None = None
) -> TaskData:
    """Load and validate task ``name`` from the hub (pinned revision) or from ``data_dir`` / R2MED_DATA_DIR.

    ``accept_drift=True`` (default: the R2MED_ACCEPT_DRIFT environment variable) turns count and revision
    mismatches into entries of ``TaskData.report`` instead of errors. Four steps: locate the repo, read its
    files, validate what was read, and record where it came from (revision, fingerprint, verification).
    """
    accept_drift = drift_accepted(accept_drift)
    spec = get_task_spec(name)
    files = _locate(spec, data_dir, accept_drift)
    read = _read(spec, files)
    drift = _validate(spec, files, read, accept_drift)
    revision, fingerprint, unproven = _provenance(spec, files)
    verified = not unproven
    queries, without_qrels, without_positives = _evaluated_queries(spec, read.queries, read.qrels)
    _report_folded_rows(spec, files, read)
    report = LoadReport(
        found_counts=read.counts, count_drift=drift, queries_without_positives=without_positives,
        queries_without_qrels=without_qrels,
        query_ids_in_corpus=sorted(queries.filter(pl.col("id").is_in(read.corpus["id"].implode()))["id"].to_list()),
        unknown_candidate_ids={key: unknown for key, (_, unknown) in read.candidates.items()},
        synthetic_sample=files.synthetic, revision_verified=verified, files_fingerprint=fingerprint,
        corpus_rows=read.corpus_rows.rows, unique_document_ids=read.corpus.height,
        repeated_document_rows=read.corpus_rows.repeated_rows, repeated_document_ids=read.corpus_rows.repeated_ids,
        repeated_query_ids=read.query_rows.repeated_ids, rows_repeating_an_earlier_text=read.text_repeats,
        near_empty_documents=near_empty_ids(read.corpus), unverified_files=unproven,
    )
    return TaskData(
        spec=spec, corpus=read.corpus, queries=queries, qrels=read.qrels, report=report,
        candidates={key: _only(lists, read.qrels) for key, (lists, _) in read.candidates.items()},
        revision=revision, source=files.repo.source, revision_verified=verified, files_fingerprint=fingerprint,
    )


@dataclass(frozen=True)
class _TaskFiles:
    """Step 1: where the task's files are."""

    repo: LocatedRepo
    corpus: Path
    queries: Path
    qrels: Path
    candidates: dict[str, Path]
    synthetic: bool  # the demo sample: made-up data in the hub layout

    @property
    def all(self) -> list[Path]:
        return [self.repo.root / README, self.corpus, self.queries, self.qrels, *self.candidates.values()]


@dataclass(frozen=True)
class _ReadTask:
    """Step 2: what the files hold, parsed and checked row by row."""

    corpus: pl.DataFrame
    queries: pl.DataFrame
    qrels: Qrels
    candidates: dict[str, tuple[Candidates, int]]  # list key -> (lists, ids not in the corpus)
    counts: dict[str, int]  # rows, as the dataset cards count them
    corpus_rows: UniqueRows
    query_rows: UniqueRows
    text_repeats: int  # corpus rows whose text equals an earlier row's


def _locate(spec: TaskSpec, data_dir: str | os.PathLike | None, accept_drift: bool) -> _TaskFiles:
    repo = locate_repo(spec, data_dir, accept_drift=accept_drift)
    front = read_front_matter(repo.root)
    layout = config_files(front, repo.root / README)

    def file_of(entry: Any) -> Path:
        return resolve_split_file(repo.root, layout, entry["config"], entry["split"], repo.trusted_root)

    return _TaskFiles(repo, file_of(spec.configs["corpus"]), file_of(spec.configs["queries"]), file_of(spec.configs["qrels"]),
                      candidates={key: file_of(entry) for key, entry in spec.candidate_configs.items()},
                      synthetic=front.get("synthetic_sample") is True)


def _read(spec: TaskSpec, files: _TaskFiles) -> _ReadTask:
    source = files.repo.source
    corpus_table = _evicting(source, files.corpus, lambda: _read_text_table(files.corpus, spec))
    corpus_rows = fold_repeated_ids(corpus_table, files.corpus, "document id")
    query_rows = _evicting(source, files.queries, lambda: _read_queries(files.queries, spec))
    corpus, queries = corpus_rows.frame, query_rows.frame
    qrels_frame = _evicting(source, files.qrels, lambda: _read_qrels(files.qrels, spec))
    check_known(qrels_frame["query_id"], queries["id"], files.qrels, "query id")
    check_known(qrels_frame["doc_id"], corpus["id"], files.qrels, "document id")
    candidates = {key: _evicting(source, path, partial(_read_candidates, path, queries, corpus))
                  for key, path in files.candidates.items()}
    counts = {"queries": query_rows.rows, "documents": corpus_rows.rows, "qrels": qrels_frame.height}
    return _ReadTask(corpus, queries, qrels_to_dict(qrels_frame), candidates, counts, corpus_rows, query_rows,
                     rows_repeating_a_text(corpus_table))


def _report_folded_rows(spec: TaskSpec, files: _TaskFiles, read: _ReadTask) -> None:
    """One line for repeated ids and one for near-empty documents: the real files hold both (DESIGN.md §3)."""
    folded = read.corpus_rows
    if folded.repeated_ids:
        logger.warning(
            "%s: %s has %s rows for %s document ids: %s rows repeat an earlier id with identical text (%s ids). "
            "bm25-lucene indexes every row, as the official eval_BM25.py does; every other scorer ranks the %s unique ids, "
            "as mteb does", spec.name, files.corpus.name, f"{folded.rows:,}", f"{read.corpus.height:,}",
            f"{folded.repeated_rows:,}", f"{len(folded.repeated_ids):,}", f"{read.corpus.height:,}",
        )
    if read.query_rows.repeated_ids:
        logger.warning("%s: %s repeats %d query id(s) with identical text; each is evaluated once", spec.name,
                       files.queries.name, len(read.query_rows.repeated_ids))
    tiny = near_empty_ids(read.corpus)
    if tiny:
        shown = ", ".join(repr(doc_id) for doc_id in tiny[:3]) + (", ..." if len(tiny) > 3 else "")
        logger.warning("%s: %d document(s) have at most one character of text (%s); kept as documents with no tokens, "
                       "as the official code and mteb keep them", spec.name, len(tiny), shown)


def _validate(spec: TaskSpec, files: _TaskFiles, read: _ReadTask, accept_drift: bool) -> dict[str, dict[str, int]]:
    """Counts against the dataset card: differences are refused, or (accept_drift) reported."""
    drift = count_differences(dict(spec.expected_counts), read.counts)
    if not drift or files.synthetic:
        return drift
    logger.warning("%s: counts differ from task_metadata: %s", spec.name, drift)
    if not accept_drift:
        details = "; ".join(f"{key}: expected {v['expected']}, found {v['found']}" for key, v in drift.items())
        raise UserError(
            f"{files.repo.root}: task {spec.name} counts differ from task_metadata ({details}). The mirror is incomplete "
            "or from another revision; re-download it, or pass accept_drift=True (--accept-drift) to evaluate anyway (or set R2MED_ACCEPT_DRIFT=1)"
        )
    return drift


def _provenance(spec: TaskSpec, files: _TaskFiles) -> tuple[str, str | None, dict[str, str]]:
    """(revision, files fingerprint, file -> why it is not proven to be that revision's). Without a commit that
    vouches for them, a task's results are named by the files that task reads: editing one NanoR2MED split
    moves that task's results only. Files are proven by their published SHA-256 where the revision has one,
    else by their download record (``unverified_files``)."""
    repo = files.repo
    fingerprint = files_fingerprint(files.all, repo.root) if repo.source == "mirror" else None
    revision = SYNTHETIC_REVISION if files.synthetic else repo.revision
    if revision == UNKNOWN_MIRROR_REVISION and fingerprint is not None:  # a mirror's files always have one
        revision = LOCAL_REVISION_PREFIX + fingerprint
    unproven: dict[str, str] = {}
    if repo.source == "mirror":
        published = spec.published_files if repo.revision == spec.revision else {}
        unproven = unverified_files(repo.root, files.all, repo.revision, published)
        if not repo.verified and not unproven and not published:
            unproven = {README: "the mirror records no commit it was downloaded at"}
    if unproven and not files.synthetic:
        _warn_unverified(repo.root, spec.name, revision, unproven)
    return revision, fingerprint, unproven


def _evaluated_queries(spec: TaskSpec, queries: pl.DataFrame, qrels: Qrels) -> tuple[pl.DataFrame, list[str], list[str]]:
    """(queries kept, queries without qrels (dropped, as MTEB drops them), queries without a positive)."""
    without_qrels = sorted(set(queries["id"].to_list()) - set(qrels))
    if without_qrels:
        logger.warning("%s: %d queries have no qrels and are dropped", spec.name, len(without_qrels))
        queries = queries.filter(~pl.col("id").is_in(without_qrels))
    zero_only = sorted(query_id for query_id, judged in qrels.items() if not any(rel > 0 for rel in judged.values()))
    if zero_only:
        logger.warning("%s: %d queries are judged but have no positive; kept (they score 0), as MTEB and the official evaluator keep them",
                       spec.name, len(zero_only))
    return queries, without_qrels, sorted(without_qrels + zero_only)


def _warn_unverified(root: Path, task: str, revision: str, unproven: dict[str, str]) -> None:
    """One message per mirror folder (its text names the folder that holds every task's repo, not the task's own
    repo or revision, so a command shows it once: see cli), and one per file that contradicts the hash published for
    its revision (that file is named: it is not the revision's)."""
    spec = get_task_spec(task)
    contradicted = sorted(set(unproven) & set(spec.published_files))
    if len(contradicted) == 1:
        (name,) = contradicted
        logger.warning("%s: %s is not the file of revision %s: %s. Its results are not filed under that revision; "
                       "download the file again", task, root / name, revision, unproven[name])
    elif contradicted:  # one line per task, not one per file
        reasons = "; ".join(f"{name}: {unproven[name]}" for name in contradicted)
        logger.warning("%s: %d files of %s are not the files of revision %s (%s). Its results are not filed under that "
                       "revision; download them again", task, len(contradicted), root, revision, reasons)
    mirror = root.parent.parent  # <mirror>/<org>/<repo>
    if revision.startswith(LOCAL_REVISION_PREFIX):
        logger.warning(
            "the mirror %s: a repo in it records no commit it was downloaded at, so that task's results are filed under "
            "a fingerprint of the files it reads (local-<fingerprint>); `huggingface-cli download --local-dir` records "
            "the commit", mirror,
        )
    else:
        logger.warning(
            "the mirror %s: a repo in it does not record every file read at one commit, or a file changed since its "
            "download; those files are not verified to be the task's pinned revision (results record "
            "<revision>+unverified-files-<fingerprint>; download the repo again with `huggingface-cli download "
            "--local-dir`)", mirror,
        )
    logger.debug("%s: unverified mirror files (%s), filed as revision %s", task, root, revision)


def _evicting(source: str, path: Path, read: Callable[[], T]) -> T:
    """Run ``read``; a file from the hub cache that cannot be parsed is removed, so the next run re-downloads it."""
    try:
        return read()
    except DamagedFileError as error:
        if source == "hub":
            evict_from_hub_cache(path)
            raise UserError(f"{error}. The damaged download was removed from the Hugging Face cache: run again to re-download it") from error
        raise


def drift_accepted(accept_drift: bool | None) -> bool:
    """The explicit choice, else the R2MED_ACCEPT_DRIFT environment variable."""
    if accept_drift is not None:
        return accept_drift
    return os.environ.get(ACCEPT_DRIFT_ENV, "").strip().lower() in {"1", "true", "yes"}


def _read_text_table(path: Path, spec: TaskSpec) -> pl.DataFrame:
    """Every row of a corpus or query file (columns id, text), repeated ids included."""
    columns = _TEXT_TABLE[spec.data_format]
    frame = read_table(path, columns).rename({next(iter(columns)): "id"})
    check_ids(frame, ["id"], path)
    return frame


def _read_queries(path: Path, spec: TaskSpec) -> UniqueRows:
    """Queries, each id once; a blank query is refused (a damaged file: no R2MED query is blank)."""
    frame = _read_text_table(path, spec)
    check_texts(frame, path)
    return fold_repeated_ids(frame, path, "query id")


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
        query_id: dict(zip(doc_ids, scores, strict=True))
        for query_id, doc_ids, scores in zip(grouped["query_id"], grouped["doc_id"], grouped["score"], strict=True)
    }


def _read_candidates(path: Path, queries: pl.DataFrame, corpus: pl.DataFrame) -> tuple[Candidates, int]:
    """The stored candidate lists (ordered), and how many listed ids are not in the corpus."""
    frame = read_table(path, _CANDIDATE_TABLE)
    check_unique(frame, ["query-id"], path, "query id")
    check_known(frame["query-id"], queries["id"], path, "query id")
    listed = frame.explode("corpus-ids")["corpus-ids"].drop_nulls()
    unknown = int((~listed.is_in(corpus["id"].implode())).sum())
    return dict(zip(frame["query-id"].to_list(), frame["corpus-ids"].to_list(), strict=True)), unknown


def _only(candidates: Candidates, qrels: Qrels) -> Candidates:
    return {query_id: ids for query_id, ids in candidates.items() if query_id in qrels}
