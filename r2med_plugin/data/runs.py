"""First-stage run files: TREC runs and the official R2MED ``topk_docs`` JSONL, read and written.

Two formats, told apart by the first non-blank line:

- TREC: ``qid Q0 docid rank score tag`` (six whitespace-separated fields). As in trec_eval, the
  rank column is checked but not used: each query's documents are ordered by score descending,
  ties by document id descending (pytrec_eval's order).
- ``topk_docs`` JSONL, what the official code writes to ``output/topk_docs/<retriever>/<Task>.jsonl``:
  one ``{"id": qid, "topk_pid": [[pid, score], ...]}`` object per line. The list order is the
  ranking (the official reranker takes the first k entries as listed).

Both readers return a :data:`Run` whose per-query dict order is the ranking. Every error names
the file and the line and says how to fix it.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Literal

from r2med_plugin.errors import MissingFileError, UserError
from r2med_plugin.io import write_text_atomic
from r2med_plugin.types import Run

RunFormat = Literal["trec", "topk_docs"]
RUN_FILE_SUFFIXES = (".jsonl", ".trec", ".run", ".txt", ".tsv")


def detect_run_format(path: str | os.PathLike) -> RunFormat:
    """"topk_docs" when the first non-blank line is a JSON object, else "trec"."""
    path = Path(path)
    with _open(path) as handle:
        for line in handle:
            if line.strip():
                return "topk_docs" if line.lstrip().startswith("{") else "trec"
    raise UserError(f"{path}: the run file is empty; write one line per (query, document) or one JSON object per query")


def read_run_file(path: str | os.PathLike, run_format: RunFormat | None = None) -> Run:
    """The run in ``path`` (TREC or topk_docs JSONL, detected when ``run_format`` is None), ranked."""
    path = Path(path)
    chosen = run_format or detect_run_format(path)
    if chosen == "trec":
        return read_trec_run(path)
    if chosen == "topk_docs":
        return read_topk_docs(path)
    raise UserError(f"run_format must be 'trec', 'topk_docs' or None (detect), got {run_format!r}")


def read_trec_run(path: str | os.PathLike) -> Run:
    """A TREC run file; each query's documents ordered by score desc, then doc id desc (trec_eval's order)."""
    path = Path(path)
    run: Run = {}
    with _open(path) as handle:
        for number, line in enumerate(handle, start=1):
            fields = line.split()
            if not fields:
                continue
            if len(fields) != 6:
                raise UserError(
                    f"{path}, line {number}: expected 6 fields 'qid Q0 docid rank score tag', found {len(fields)} "
                    f"({line.strip()[:80]!r})"
                )
            query_id, _, doc_id, rank, score, _ = fields
            if not _is_int(rank):
                raise UserError(f"{path}, line {number}: the rank {rank!r} is not an integer")
            value = _score(score, path, number)
            ranked = run.setdefault(query_id, {})
            if doc_id in ranked:
                raise UserError(f"{path}, line {number}: document {doc_id!r} occurs twice for query {query_id!r}; keep one line per pair")
            ranked[doc_id] = value
    if not run:
        raise UserError(f"{path}: the run file has no lines")
    return {query_id: rank_by_score(ranked) for query_id, ranked in run.items()}


def read_topk_docs(path: str | os.PathLike) -> Run:
    """The official ``topk_docs`` JSONL; each query's documents in the listed order."""
    path = Path(path)
    run: Run = {}
    with _open(path) as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            query_id, pairs = _topk_record(line, path, number)
            if query_id in run:
                raise UserError(f"{path}, line {number}: query {query_id!r} occurs on two lines; write one line per query")
            ranked: dict[str, float] = {}
            for position, pair in enumerate(pairs, start=1):
                doc_id, score = _topk_pair(pair, path, number, position)
                if doc_id in ranked:
                    raise UserError(f"{path}, line {number}: document {doc_id!r} occurs twice in the topk_pid list of query {query_id!r}")
                ranked[doc_id] = score
            run[query_id] = ranked
    if not run:
        raise UserError(f"{path}: the run file has no lines")
    return run


def rank_by_score(ranked: Mapping[str, float]) -> dict[str, float]:
    """The same scores, ordered as pytrec_eval ranks them: score descending, then document id descending."""
    return dict(sorted(ranked.items(), key=lambda item: (item[1], item[0]), reverse=True))


def write_topk_docs(path: str | os.PathLike, run: Mapping[str, Mapping[str, float]], depth: int | None = None) -> Path:
    """Write ``run`` as official topk_docs JSONL (each query's documents in pytrec_eval order, ``depth`` kept)."""
    lines = []
    for query_id, ranked in run.items():
        pairs = [[doc_id, score] for doc_id, score in rank_by_score(ranked).items()][:depth]
        lines.append(json.dumps({"id": query_id, "topk_pid": pairs}, ensure_ascii=False))
    return write_text_atomic(path, "".join(line + "\n" for line in lines))


def locate_run_line(path: str | os.PathLike, query_id: str, doc_id: str | None = None) -> int | None:
    """The first line of ``path`` that holds ``query_id`` (and ``doc_id`` when given), for error messages."""
    path = Path(path)
    trec = detect_run_format(path) == "trec"
    with _open(path) as handle:
        for number, line in enumerate(handle, start=1):
            if trec:
                fields = line.split()
                if len(fields) == 6 and fields[0] == query_id and (doc_id is None or fields[2] == doc_id):
                    return number
            elif line.strip():
                try:
                    record = json.loads(line)
                except json.JSONDecodeError:
                    continue
                if str(record.get("id")) == query_id:
                    return number
    return None


def check_run_ids(
    run: Mapping[str, Mapping[str, float]],
    query_ids: Collection[str],
    doc_ids: Collection[str],
    *,
    source: str | os.PathLike | None = None,
    task: str = "the task",
) -> None:
    """Every query id of ``run`` must be in ``query_ids`` and every document id in ``doc_ids``."""
    for query_id, ranked in run.items():
        if query_id not in query_ids:
            raise UserError(f"{_where(source, query_id)}query id {query_id!r} is not a query of {task}; is the run for another task?")
        for doc_id in ranked:
            if doc_id not in doc_ids:
                raise UserError(
                    f"{_where(source, query_id, doc_id)}document id {doc_id!r} (query {query_id!r}) is not in the corpus of {task}; "
                    "is the run for another task or dataset revision?"
                )


def _where(source: str | os.PathLike | None, query_id: str, doc_id: str | None = None) -> str:
    if source is None:
        return "first-stage run: "
    line = locate_run_line(source, query_id, doc_id)
    return f"{source}, line {line}: " if line else f"{source}: "


def _open(path: Path):
    if not path.is_file():
        raise MissingFileError(f"{path}: no such run file (expected a TREC run or an official topk_docs .jsonl)")
    return path.open(encoding="utf-8")


def _topk_record(line: str, path: Path, number: int) -> tuple[str, list]:
    try:
        record = json.loads(line)
    except json.JSONDecodeError as error:
        raise UserError(f"{path}, line {number}: malformed JSON ({error}); each line must be one {{\"id\", \"topk_pid\"}} object") from error
    if not isinstance(record, dict) or "id" not in record or "topk_pid" not in record:
        raise UserError(f"{path}, line {number}: expected an object with the keys 'id' and 'topk_pid' (official topk_docs format)")
    query_id, pairs = record["id"], record["topk_pid"]
    if isinstance(query_id, bool) or not isinstance(query_id, (str, int)):
        raise UserError(f"{path}, line {number}: 'id' must be a string, got {query_id!r}")
    if not isinstance(pairs, list):
        raise UserError(f"{path}, line {number}: 'topk_pid' must be a list of [doc_id, score] pairs")
    return str(query_id), pairs


def _topk_pair(pair: object, path: Path, number: int, position: int) -> tuple[str, float]:
    if not isinstance(pair, list) or len(pair) != 2 or isinstance(pair[0], bool) or not isinstance(pair[0], (str, int)):
        raise UserError(f"{path}, line {number}: topk_pid entry {position} is {pair!r}; expected [doc_id, score]")
    score = pair[1]
    if isinstance(score, bool) or not isinstance(score, (int, float)) or not math.isfinite(score):
        raise UserError(f"{path}, line {number}: topk_pid entry {position} has the score {score!r}; expected a finite number")
    return str(pair[0]), float(score)


def _score(text: str, path: Path, number: int) -> float:
    try:
        value = float(text)
    except ValueError:
        raise UserError(f"{path}, line {number}: the score {text!r} is not a number") from None
    if not math.isfinite(value):
        raise UserError(f"{path}, line {number}: the score {text!r} is not finite")
    return value


def _is_int(text: str) -> bool:
    try:
        int(text)
    except ValueError:
        return False
    return True
