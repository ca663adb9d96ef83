"""LaMer's first stage: each query's ranked documents, from the official BM25 or from a run file.

The official code ranks with its BM25 (``eval_BM25.py``: Python's stable sort by score, so tied
documents stay in corpus order) and hands the top 10 to the LLM. A run file may be TREC
(``qid Q0 docid rank score tag``; ordered by score, ties in file order) or the official
``topk_docs`` JSONL (``{"id": ..., "topk_pid": [[doc_id, score], ...]}``; kept in its order).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from tqdm import tqdm

from r2med_plugin.retrieval.bm25 import build_lucene_index, lucene_scores
from r2med_plugin.types import TaskData

BM25_FIRST_STAGE = "bm25-lucene"
_CHUNK = 64


def bm25_ranking(data: TaskData, depth: int = 10, *, show_progress: bool = True) -> dict[str, list[str]]:
    """Each evaluated query's top ``depth`` documents by the official BM25, ties in corpus order."""
    doc_ids = data.corpus["id"].to_list()
    index = build_lucene_index(doc_ids, data.corpus["text"].to_list(), show_progress=show_progress)
    query_ids, texts = data.queries["id"].to_list(), data.queries["text"].to_list()
    ranking: dict[str, list[str]] = {}
    for start in tqdm(range(0, len(query_ids), _CHUNK), desc="lamer first stage: bm25-lucene", disable=not show_progress):
        scores = lucene_scores(index, texts[start : start + _CHUNK])
        for row, query_id in enumerate(query_ids[start : start + _CHUNK]):
            order = np.argsort(-scores[row], kind="stable")[:depth]
            ranking[query_id] = [doc_ids[i] for i in order]
    return ranking


def read_run_file(path: str | Path) -> dict[str, list[str]]:
    """Ranked document ids per query from a TREC run or an official topk_docs JSONL file."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"first-stage run {path} does not exist; pass bm25-lucene or a TREC / topk_docs JSONL file")
    lines = path.read_text(encoding="utf-8").splitlines()
    first = next((line for line in lines if line.strip()), "")
    if first.lstrip().startswith("{"):
        return _read_topk_jsonl(path, lines)
    return _read_trec(path, lines)


def _read_topk_jsonl(path: Path, lines: list[str]) -> dict[str, list[str]]:
    ranking: dict[str, list[str]] = {}
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            ranking[str(row["id"])] = [str(pair[0]) for pair in row["topk_pid"]]
        except (ValueError, KeyError, TypeError, IndexError) as error:
            raise ValueError(f"{path}, line {number}: expected {{\"id\": ..., \"topk_pid\": [[doc_id, score], ...]}} ({error})") from error
    return ranking


def _read_trec(path: Path, lines: list[str]) -> dict[str, list[str]]:
    rows: dict[str, list[tuple[float, int, str]]] = {}
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        parts = line.split()
        if len(parts) != 6:
            raise ValueError(f"{path}, line {number}: a TREC run line has 6 fields (qid Q0 docid rank score tag), found {len(parts)}")
        try:
            score = float(parts[4])
        except ValueError as error:
            raise ValueError(f"{path}, line {number}: score {parts[4]!r} is not a number") from error
        rows.setdefault(parts[0], []).append((-score, number, parts[2]))
    return {query_id: [doc_id for _, _, doc_id in sorted(entries)] for query_id, entries in rows.items()}


def check_ranking(ranking: dict[str, list[str]], data: TaskData, origin: str) -> None:
    """Every evaluated query has a ranking, and every ranked document is in the corpus."""
    missing = [q for q in data.queries["id"].to_list() if not ranking.get(q)]
    if missing:
        raise ValueError(f"{origin}: no ranked documents for {len(missing)} queries of {data.name} (e.g. {missing[0]!r})")
    known = set(data.corpus["id"].to_list())
    for query_id in data.queries["id"].to_list():
        unknown = [d for d in ranking[query_id][:10] if d not in known]
        if unknown:
            raise ValueError(f"{origin}: query {query_id!r} ranks {unknown[0]!r}, which is not a document of {data.name}")
