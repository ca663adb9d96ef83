"""Deterministic real-scale synthetic retrieval tasks (R2MED sizes and lengths), no network.

The largest R2MED task has 61,379 documents (MedXpertQA-Exam: documents of ~155 words, queries of
~233 words). Texts are drawn from a Zipf-distributed vocabulary of pseudo-medical words, and each
query gets 1-5 positives that share some of its words, so BM25 finds something to rank.
"""

from __future__ import annotations

import numpy as np
import polars as pl

SYLLABLES = "car dio neu ro gas tro hep at ic nep hro pul mon ary ren al vas cul ost eo my el in flam ma tion cyt o kin ase".split()


def vocabulary(size: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    lengths = rng.integers(2, 5, size=size)
    words = {"".join(rng.choice(SYLLABLES, size=n)) for n in lengths}
    stop = ["the", "of", "and", "with", "was", "in", "to", "a", "is", "for", "patient", "patients"]
    return np.array(stop + sorted(words), dtype=object)


def _texts(rng: np.random.Generator, vocab: np.ndarray, count: int, mean_words: float) -> list[str]:
    lengths = np.maximum(5, rng.poisson(mean_words, size=count))
    ranks = np.minimum(rng.zipf(1.3, size=int(lengths.sum())) - 1, len(vocab) - 1)
    words = vocab[ranks]
    bounds = np.concatenate([[0], np.cumsum(lengths)])
    return [" ".join(words[bounds[i] : bounds[i + 1]]) + "." for i in range(count)]


def synthetic_task(
    n_docs: int = 61_379, n_queries: int = 150, doc_words: float = 155.0, query_words: float = 233.0, seed: int = 20260524
) -> tuple[pl.DataFrame, pl.DataFrame, dict[str, dict[str, int]]]:
    """(corpus, queries, qrels) with ids shaped like R2MED's."""
    rng = np.random.default_rng(seed)
    vocab = vocabulary(60_000, seed)
    doc_texts = _texts(rng, vocab, n_docs, doc_words)
    query_texts = _texts(rng, vocab, n_queries, query_words)
    doc_ids = [f"doc-{i:06d}" for i in range(n_docs)]
    query_ids = [f"query-{i:04d}" for i in range(n_queries)]
    qrels: dict[str, dict[str, int]] = {}
    for index, query_id in enumerate(query_ids):
        positives = rng.choice(n_docs, size=int(rng.integers(1, 6)), replace=False)
        qrels[query_id] = {doc_ids[p]: 1 for p in positives}
        query_words_sample = query_texts[index].split()[:30]
        for p in positives:  # positives share words with their query
            doc_texts[p] = doc_texts[p] + " " + " ".join(query_words_sample[::2])
    corpus = pl.DataFrame({"id": doc_ids, "text": doc_texts})
    queries = pl.DataFrame({"id": query_ids, "text": query_texts})
    return corpus, queries, qrels
