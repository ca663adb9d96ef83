"""The evaluation side of the audit, indexed once: every query and relevant document of the chosen tasks
(and with ``corpus=True`` every corpus document), for exact copies and for MinHash LSH near-duplicates.

One entry per distinct normalised text; an entry lists every (task, kind, id) that holds the text, so a text
shared by R2MEDBiology and NanoR2MEDBiology is hashed once and reported for both.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from r2med_plugin.audit.minhash import MinHasher, band_keys, lsh_index
from r2med_plugin.audit.text import prepare, split_shingles
from r2med_plugin.types import TaskData

QUERY, RELEVANT, CORPUS, PAIR = "query", "relevant_doc", "corpus_doc", "pair"
EVALUATION_KINDS = (QUERY, RELEVANT, PAIR)  # the table's columns; CORPUS is reported apart
_BATCH = 2000


@dataclass(frozen=True)
class EvalIndex:
    """What training texts are compared with. ``refs[entry]``: the (task, kind, id) triples of that text."""

    ngram: int
    threshold: float
    hasher: MinHasher
    lsh: Any  # datasketch.MinHashLSH over the entries with at least ``ngram`` words
    normalized: list[str]
    sets: list[np.ndarray]
    refs: list[tuple[tuple[str, str, str], ...]]
    exact: dict[int, tuple[int, ...]]  # hash of the normalised text -> entries
    exact_keys: np.ndarray = field(repr=False)  # sorted
    band_keys: np.ndarray = field(repr=False)  # sorted: every (entry, band) key of the LSH
    positives: dict[str, dict[str, frozenset[str]]] = field(default_factory=dict)  # task -> query -> relevant docs
    totals: dict[str, dict[str, int]] = field(default_factory=dict)  # task -> kind -> how many the task has


def task_entries(data: TaskData, corpus: bool = False) -> Iterator[tuple[str, str, str, str]]:
    """(task, kind, id, text) for each evaluated query, each relevant document and, with ``corpus``, each document."""
    documents = dict(zip(data.corpus["id"].to_list(), data.corpus["text"].to_list(), strict=True))
    queries = dict(zip(data.queries["id"].to_list(), data.queries["text"].to_list(), strict=True))
    for query_id, text in queries.items():
        yield data.name, QUERY, query_id, text or ""
    relevant = sorted({doc for query_id, judged in data.qrels.items() if query_id in queries
                       for doc, grade in judged.items() if grade > 0})
    for doc_id in relevant:
        yield data.name, RELEVANT, doc_id, documents.get(doc_id) or ""
    if corpus:
        for doc_id, text in documents.items():
            yield data.name, CORPUS, doc_id, text or ""


def task_positives(data: TaskData) -> dict[str, frozenset[str]]:
    queries = set(data.queries["id"].to_list())
    return {query_id: frozenset(doc for doc, grade in judged.items() if grade > 0)
            for query_id, judged in data.qrels.items() if query_id in queries}


def task_totals(data: TaskData, corpus: bool = False) -> dict[str, int]:
    positives = task_positives(data)
    totals = {QUERY: len(positives), RELEVANT: len(set().union(*positives.values())) if positives else 0,
              PAIR: sum(len(docs) for docs in positives.values())}
    return {**totals, CORPUS: data.corpus.height} if corpus else totals


def build_index(entries: Iterable[tuple[str, str, str, str]], *, ngram: int, threshold: float,
                positives: dict[str, dict[str, frozenset[str]]] | None = None,
                totals: dict[str, dict[str, int]] | None = None, progress: Any = None) -> EvalIndex:
    """Index ``entries`` (task, kind, id, text); texts empty after normalisation are left out (they copy nothing).
    ``progress``: a tqdm-like bar updated per entry, or None."""
    hasher, lsh = MinHasher(), lsh_index(threshold)
    position: dict[str, int] = {}
    normalized: list[str] = []
    sets: list[Any] = []
    keys: list[int] = []
    bands: list[Any] = []
    refs: list[list[tuple[str, str, str]]] = []
    for batch in _batches(entries, _BATCH):
        prepared = prepare([text for *_, text in batch], ngram)
        fresh: list[int] = []
        for (task, kind, ident, _), text, key, words, shingles in zip(
                batch, prepared["normalized"], prepared["keys"].tolist(), prepared["words"].tolist(), split_shingles(prepared), strict=True):
            if not text:
                continue
            if text not in position:
                position[text] = len(normalized)
                normalized.append(text)
                sets.append(shingles)
                keys.append(key)
                refs.append([])
                if words >= ngram:  # near-duplicates are looked for between texts of at least one whole n-gram
                    fresh.append(position[text])
            refs[position[text]].append((task, kind, ident))
        bands.append(_insert(lsh, hasher, [(entry, sets[entry]) for entry in fresh]))
        if progress is not None:
            progress.update(len(batch))
    exact: dict[int, list[int]] = {}
    for entry, key in enumerate(keys):
        exact.setdefault(key, []).append(entry)
    return EvalIndex(ngram=ngram, threshold=threshold, hasher=hasher, lsh=lsh, normalized=normalized, sets=sets,
                     refs=[tuple(r) for r in refs], exact={key: tuple(v) for key, v in exact.items()},
                     exact_keys=np.unique(np.array(keys, dtype=np.uint64)),
                     band_keys=np.unique(np.concatenate(bands)) if bands else np.empty(0, dtype=np.uint64),
                     positives=positives or {}, totals=totals or {})


def _insert(lsh, hasher: MinHasher, items: Sequence[tuple[int, np.ndarray]]) -> np.ndarray:
    """Insert ``items`` (entry, shingles) into ``lsh``; returns their band keys."""
    if not items:
        return np.empty(0, dtype=np.uint64)
    counts = np.array([shingles.size for _, shingles in items], dtype=np.int64)
    signatures = hasher.signatures(np.concatenate([shingles for _, shingles in items]), counts)
    for (entry, _), signature in zip(items, signatures, strict=True):
        lsh.insert(entry, hasher.minhash(signature), check_duplication=False)
    return band_keys(signatures, lsh.b, lsh.r).ravel()


def _batches(items: Iterable, size: int) -> Iterator[list]:
    batch: list = []
    for item in items:
        batch.append(item)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch
