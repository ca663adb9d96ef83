"""Training rows against the evaluation index: exact copies, near-duplicates (LSH candidates confirmed by exact
Jaccard) and leaked pairs. Pure functions of the index and a batch of rows."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from r2med_plugin.audit.index import CORPUS, PAIR, QUERY, RELEVANT, EvalIndex
from r2med_plugin.audit.minhash import band_keys
from r2med_plugin.audit.text import jaccard, prepare

EXACT, NEAR = "exact", "near"
Match = tuple[int, str, float]  # (entry, exact | near, Jaccard similarity)


def match_texts(index: EvalIndex, texts: Sequence[str]) -> list[list[Match]]:
    """For each text, the index entries it copies: exact (after normalisation), or near (Jaccard >= threshold)."""
    prepared = prepare(texts, index.ngram)
    found: list[list[Match]] = [[] for _ in texts]
    for position in np.flatnonzero(np.isin(prepared["keys"], index.exact_keys)).tolist():
        key, text = int(prepared["keys"][position]), prepared["normalized"][position]
        found[position] = [(entry, EXACT, 1.0) for entry in index.exact[key] if index.normalized[entry] == text]
    for position, candidates, shingles in _near_candidates(index, prepared):
        exact = {entry for entry, _, _ in found[position]}
        for entry in sorted(set(candidates) - exact):
            similarity = jaccard(shingles, index.sets[entry])
            if similarity >= index.threshold:
                found[position].append((entry, NEAR, similarity))
    return found


def _near_candidates(index: EvalIndex, prepared: dict) -> list[tuple[int, list[int], np.ndarray]]:
    """(text position, LSH candidates, its shingles) for the texts that share a band with some entry."""
    eligible = np.flatnonzero(prepared["words"] >= index.ngram)
    if eligible.size == 0 or index.band_keys.size == 0:
        return []
    counts = prepared["shingle_counts"]
    ends = np.cumsum(counts)
    pieces = [prepared["shingles"][ends[i] - counts[i]:ends[i]] for i in eligible.tolist()]
    signatures = index.hasher.signatures(np.concatenate(pieces), counts[eligible])
    lsh = index.lsh
    touched = np.isin(band_keys(signatures, lsh.b, lsh.r), index.band_keys).any(axis=1)
    out = []
    for slot in np.flatnonzero(touched).tolist():
        candidates = lsh.query(index.hasher.minhash(signatures[slot]))
        if candidates:
            out.append((int(eligible[slot]), candidates, np.unique(pieces[slot])))
    return out


def row_hits(index: EvalIndex, rows: Sequence[dict]) -> list[dict]:
    """Every hit of a batch of training rows (see training.py for a row): one dict per (text, task, evaluation id),
    plus one per leaked pair (a query copying an evaluation query whose positive copies one of its relevant documents)."""
    texts = [(row, role, number, text) for row in rows for role, number, text in row["fields"]]
    matches = match_texts(index, [text for *_, text in texts])
    by_row: dict[int, list[dict]] = {}
    for (row, role, number, _), found in zip(texts, matches, strict=True):
        for entry, match, similarity in found:
            for task, kind, ident in index.refs[entry]:
                by_row.setdefault(row["row"], []).append(_hit(row, role, number, task, kind, ident, match, similarity))
    hits = []
    for row in rows:
        mine = by_row.get(row["row"], [])
        hits += mine + pair_hits(index, row, mine)
    return hits


def _hit(row: dict, field: str, number: int, task: str, kind: str, ident: str, match: str, similarity: float) -> dict:
    hit = {"row": row["row"], "field": field, "field_index": number, "task": task, "kind": kind, "eval_id": ident,
           "match": match, "similarity": round(similarity, 4)}
    return {**hit, **{key: row[key] for key in ("line", "id") if row.get(key) is not None}}


def pair_hits(index: EvalIndex, row: dict, hits: Sequence[dict]) -> list[dict]:
    """Leaked pairs of one row from its hits: a training query on an evaluation query, and a training positive on one
    of that query's relevant documents, in the same task."""
    queries = [h for h in hits if h["field"] == "query" and h["kind"] == QUERY]
    positives: dict[tuple[str, str], dict] = {}
    for hit in hits:
        if hit["field"] == "positive" and hit["kind"] == RELEVANT:
            key = (hit["task"], hit["eval_id"])
            if key not in positives or hit["similarity"] > positives[key]["similarity"]:
                positives[key] = hit
    pairs = []
    for query in queries:
        for doc in sorted(index.positives.get(query["task"], {}).get(query["eval_id"], ())):
            positive = positives.get((query["task"], doc))
            if positive is not None:
                pairs.append(_pair(row, query, positive))
    return pairs


def _pair(row: dict, query: dict, positive: dict) -> dict:
    both_exact = query["match"] == positive["match"] == EXACT
    hit = {"row": row["row"], "field": "query+positive", "field_index": positive["field_index"], "task": query["task"],
           "kind": PAIR, "eval_id": query["eval_id"], "doc_id": positive["eval_id"], "match": EXACT if both_exact else NEAR,
           "similarity": min(query["similarity"], positive["similarity"]), "query_similarity": query["similarity"],
           "positive_similarity": positive["similarity"]}
    return {**hit, **{key: row[key] for key in ("line", "id") if row.get(key) is not None}}


__all__ = ["CORPUS", "EXACT", "NEAR", "PAIR", "QUERY", "RELEVANT", "match_texts", "pair_hits", "row_hits"]
