"""Leaked pairs of a BEIR training folder: its queries and documents sit in two files, and what pairs them is its
qrels (``qrels/*.tsv``: query-id, corpus-id, score). A pair leaks when the training query copies an evaluation query
and the document it is judged relevant to copies one of that query's relevant documents, in the same task."""

from __future__ import annotations

import csv
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

from r2med_plugin.audit.index import PAIR, QUERY, RELEVANT, EvalIndex
from r2med_plugin.audit.matching import EXACT, NEAR
from r2med_plugin.errors import UserError

QUERIES_FILE, CORPUS_FILE = "queries.jsonl", "corpus.jsonl"


def qrels_files(folder: Path) -> list[Path]:
    """The qrels files of a BEIR folder (every split), in name order."""
    return sorted((folder / "qrels").glob("*.tsv")) if (folder / "qrels").is_dir() else []


def read_positive_pairs(path: Path) -> Iterator[tuple[int, str, str]]:
    """(line, query id, corpus id) of each judged-relevant row (score > 0) of a BEIR qrels file; a header is skipped."""
    with path.open(encoding="utf-8", newline="") as handle:
        for line, fields in enumerate(csv.reader(handle, delimiter="\t"), start=1):
            if len(fields) < 3 or fields[0] == "query-id":
                continue
            try:
                score = float(fields[2])
            except ValueError:
                raise UserError(f"{path}, line {line}: the score {fields[2]!r} is not a number; a BEIR qrels row is "
                                "query-id, corpus-id, score (tab-separated)") from None
            if score > 0:
                yield line, fields[0], fields[1]


def by_id(hits: Sequence[dict], kind: str) -> dict[str, list[dict]]:
    """Training id -> its hits of ``kind`` (the hits of one BEIR file)."""
    found: dict[str, list[dict]] = {}
    for hit in hits:
        if hit["kind"] == kind and hit.get("id") is not None:
            found.setdefault(str(hit["id"]), []).append(hit)
    return found


def qrels_pair_hits(index: EvalIndex, folder: Path, query_hits: Sequence[dict], document_hits: Sequence[dict]) -> list[dict]:
    """The leaked pairs of a BEIR folder, from the hits of its queries and corpus files and its qrels."""
    queries, documents = by_id(query_hits, QUERY), by_id(document_hits, RELEVANT)
    pairs = []
    for path in qrels_files(folder):
        for line, query_id, doc_id in read_positive_pairs(path):
            for query in queries.get(query_id, ()):
                relevant = index.positives.get(query["task"], {}).get(query["eval_id"], frozenset())
                pairs += [_pair(query, document, path, line) for document in documents.get(doc_id, ())
                          if document["task"] == query["task"] and document["eval_id"] in relevant]
    return pairs


def _pair(query: dict, document: dict, path: Path, line: int) -> dict:
    both_exact = query["match"] == document["match"] == EXACT
    return {"row": query["row"], "id": query["id"], "field": "query+qrels", "field_index": 0, "task": query["task"],
            "kind": PAIR, "eval_id": query["eval_id"], "doc_id": document["eval_id"], "match": EXACT if both_exact else NEAR,
            "similarity": min(query["similarity"], document["similarity"]), "query_similarity": query["similarity"],
            "positive_similarity": document["similarity"], "training_doc_id": document["id"], "qrels_file": str(path),
            "qrels_line": line}


def beir_folders(paths: Mapping[str, Path]) -> dict[Path, dict[str, str]]:
    """BEIR folder -> {file name: source label} for the sources (label -> path) that are a BEIR folder's queries and
    corpus files."""
    folders: dict[Path, dict[str, str]] = {}
    for label, path in paths.items():
        if path.name in (QUERIES_FILE, CORPUS_FILE):
            folders.setdefault(path.parent, {})[path.name] = label
    return {folder: files for folder, files in folders.items() if len(files) == 2 and qrels_files(folder)}
