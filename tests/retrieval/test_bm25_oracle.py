"""bm25-lucene equals the official scorer (gensim LuceneBM25Model + SparseMatrixSimilarity) fed REAL
Lucene tokens, on a corpus holding every fuzz class (tokens stored from the Lucene oracle)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from r2med_plugin.retrieval.analyzer import analyze
from r2med_plugin.retrieval.bm25 import bm25_search

DATA = Path(__file__).parents[1] / "fixtures" / "bm25_oracle_corpus.json.gz"


@pytest.fixture(scope="module")
def oracle_corpus() -> dict:
    with gzip.open(DATA, "rt", encoding="utf-8") as stream:
        return json.load(stream)


def _gensim_scores(doc_tokens: list[list[str]], query_tokens: list[list[str]]) -> np.ndarray:
    from gensim.corpora import Dictionary
    from gensim.models import LuceneBM25Model
    from gensim.similarities import SparseMatrixSimilarity

    dictionary = Dictionary(doc_tokens)
    model = LuceneBM25Model(dictionary=dictionary, k1=0.9, b=0.4)
    index = SparseMatrixSimilarity(model[[dictionary.doc2bow(t) for t in doc_tokens]], num_docs=len(doc_tokens),
                                   num_terms=len(dictionary), normalize_queries=False, normalize_documents=False)
    return np.vstack([index[model[dictionary.doc2bow(t)]] for t in query_tokens])


def test_oracle_corpus_covers_the_issue_classes(oracle_corpus):
    text = " ".join(row["text"] for row in oracle_corpus["documents"] + oracle_corpus["queries"])
    for needle in ("m²", "PaCO₂", "10⁹", "½", "©", "®", "™", "Ⓐ", "˂", "\u05f3", "Barre\u0301's", "\u00ad", "\u200d",
                   "\U0001f3fd", "\u20e3", "\U0001f1fa", "ภ", "ᨠ", "\U00011700", "々", "〆"):
        assert needle in text, needle
    assert any(len(token.encode("utf-16-le")) > 510 for token in text.split())


def test_our_terms_are_lucenes(oracle_corpus):
    rows = oracle_corpus["documents"] + oracle_corpus["queries"]
    assert [analyze(row["text"]) for row in rows] == [row["tokens"] for row in rows]


def test_bm25_lucene_equals_gensim_on_oracle_tokens(oracle_corpus):
    documents, queries = oracle_corpus["documents"], oracle_corpus["queries"]
    corpus = pl.DataFrame({"id": [d["id"] for d in documents], "text": [d["text"] for d in documents]})
    query_frame = pl.DataFrame({"id": [q["id"] for q in queries], "text": [q["text"] for q in queries]})
    run = bm25_search(corpus, query_frame, variant="lucene", top_k=len(documents), show_progress=False, workers=1)
    reference = _gensim_scores([d["tokens"] for d in documents], [q["tokens"] for q in queries])
    ours = np.array([[run[q["id"]].get(d["id"], 0.0) for d in documents] for q in queries])
    assert (reference > 0).sum() > len(queries) * 20  # the queries really match documents
    np.testing.assert_allclose(ours, reference, rtol=1e-5, atol=1e-6)
