"""Parallel corpus analysis and the on-disk analysed-corpus cache of bm25-lucene."""

from __future__ import annotations

import polars as pl
import pytest

from r2med_plugin.retrieval import analyzed as analyzed_module
from r2med_plugin.retrieval.analyzed import WORKERS_ENV, analyze_corpus, analyze_texts, resolve_workers
from r2med_plugin.retrieval.analyzer import analyze_many
from r2med_plugin.retrieval.bm25 import bm25_search

TEXTS = [
    "The patient's BMI was 31 kg/m² and PaCO₂ 45 mmHg.",
    "© 2020 Elsevier Ltd. Tylenol® 👩\u200d⚕️ Barre\u0301's syndrome",
    "",
    "ภาษาไทย 人々 〆切 ג'ירפה צה\"ל 1️⃣ 🇺🇸",
    "x" * 600,
] * 30


def test_parallel_analysis_equals_in_process(monkeypatch):
    monkeypatch.setattr(analyzed_module, "_PARALLEL_MIN_CHARS", 0)
    parallel = analyze_texts(TEXTS, workers=2)
    assert parallel.terms() == analyze_many(TEXTS)
    assert analyze_texts(TEXTS, workers=1).terms() == analyze_many(TEXTS)
    assert len(set(parallel.vocabulary)) == len(parallel.vocabulary)


def test_resolve_workers(monkeypatch):
    monkeypatch.delenv(WORKERS_ENV, raising=False)
    assert resolve_workers(3) == 3
    assert resolve_workers(None) >= 1
    monkeypatch.setenv(WORKERS_ENV, "2")
    assert resolve_workers(None) == 2
    for bad in (0, -1, 1.5, True):
        with pytest.raises(ValueError, match="workers"):
            resolve_workers(bad)
    monkeypatch.setenv(WORKERS_ENV, "many")
    with pytest.raises(ValueError, match=WORKERS_ENV):
        resolve_workers(None)


def test_analysed_corpus_cache_skips_analysis_on_a_second_run(tmp_path, monkeypatch):
    monkeypatch.setenv("R2MED_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("R2MED_NO_CACHE", raising=False)
    corpus = pl.DataFrame({"id": [f"d{i}" for i in range(len(TEXTS))], "text": TEXTS})
    first = analyze_corpus(corpus, workers=1, show_progress=False)
    stored = list((tmp_path / "lucene-analyzed").glob("*.npz"))
    assert len(stored) == 1

    def no_analysis(*args, **kwargs):
        raise AssertionError("the corpus was analysed again")

    monkeypatch.setattr(analyzed_module, "analyze_texts", no_analysis)
    second = analyze_corpus(corpus, workers=1, show_progress=False)
    assert second.terms() == first.terms() == analyze_many(TEXTS)
    queries = pl.DataFrame({"id": ["q1", "q2"], "text": ["kg/m² patient", "Tylenol® syndrome"]})
    run = bm25_search(corpus, queries, variant="lucene", top_k=5, show_progress=False)  # other queries: no analysis
    assert len(run["q1"]) == 5
    # another corpus is another key; a corrupt entry is a miss, rewritten
    changed = corpus.with_columns(pl.col("text").str.replace("patient", "doctor"))
    with pytest.raises(AssertionError, match="analysed again"):
        analyze_corpus(changed, workers=1, show_progress=False)
    monkeypatch.undo()
    monkeypatch.setenv("R2MED_CACHE_DIR", str(tmp_path))
    stored[0].write_bytes(b"not an npz")
    assert analyze_corpus(corpus, workers=1, show_progress=False).terms() == first.terms()
    assert stored[0].read_bytes()[:2] == b"PK"


def test_bm25_search_same_run_for_any_worker_count(tmp_path, monkeypatch):
    monkeypatch.setenv("R2MED_NO_CACHE", "1")
    monkeypatch.setattr(analyzed_module, "_PARALLEL_MIN_CHARS", 0)
    corpus = pl.DataFrame({"id": [f"d{i}" for i in range(len(TEXTS))], "text": [f"{t} {i}" for i, t in enumerate(TEXTS)]})
    queries = pl.DataFrame({"id": ["q"], "text": ["patient kg/m² 👩\u200d⚕️ 7"]})
    one = bm25_search(corpus, queries, variant="lucene", top_k=20, show_progress=False, workers=1)
    two = bm25_search(corpus, queries, variant="lucene", top_k=20, show_progress=False, workers=2)
    assert one == two


def test_long_tokens_are_cut_in_every_chunk_of_a_session():
    """A token over 255 units found by the joined fast path sends its group the per-text way, in
    every chunk: it is never cached, so a later chunk holding it again is cut too."""
    session = object()
    chunks = [
        ["short text", "a " + "x" * 600],
        ["x" * 600 + " tail", "café " + "é" * 300],
        ["x" * 600, "é" * 300 + " café"],
    ]
    merged = analyzed_module.merge_analyzed([analyzed_module.analyze_compact(chunk, session) for chunk in chunks])
    assert merged.terms() == [
        ["short", "text"], ["x" * 255, "x" * 255, "x" * 90],
        ["x" * 255, "x" * 255, "x" * 90, "tail"], ["café", "é" * 255, "é" * 45],
        ["x" * 255, "x" * 255, "x" * 90], ["é" * 255, "é" * 45, "café"],
    ]
