from __future__ import annotations

import random
import sys
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from r2med_plugin import evaluate_run
from r2med_plugin.retrieval.analyzer import analyze_many
from r2med_plugin.retrieval.bm25 import (
    bm25_search,
    build_lucene_index,
    build_robertson_index,
    lucene_scores,
    robertson_scores,
)
from r2med_plugin.retrieval.ranking import top_k_run

WORDS = (
    "patient patients presented fever cough chronic kidney disease insulin glucose tumour tumor metastasis "
    "antibiotic resistance bacteria genome sequencing variant cardiac arrhythmia ventricle vaccine antibody "
    "the of and with was were in to a is for treatment clinical study's running runs ran gene's"
).split()


def _corpus(seed: int, n_docs: int = 300, n_queries: int = 25) -> tuple[pl.DataFrame, pl.DataFrame]:
    rng = random.Random(seed)
    docs = [" ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 60))) for _ in range(n_docs)]
    queries = [" ".join(rng.choice(WORDS) for _ in range(rng.randint(2, 20))) for _ in range(n_queries)]
    queries.append("zebra unicorn")  # only terms unknown to the corpus
    queries.append("fever zebra fever")  # unknown terms are dropped, repeats count
    corpus = pl.DataFrame({"id": [f"d{i:04d}" for i in range(n_docs)], "text": docs})
    return corpus, pl.DataFrame({"id": [f"q{i}" for i in range(len(queries))], "text": queries})


def _gensim_scores(documents: list[str], queries: list[str]) -> np.ndarray:
    """The official R2MED pipeline: gensim LuceneBM25Model + SparseMatrixSimilarity on the same tokens."""
    from gensim.corpora import Dictionary
    from gensim.models import LuceneBM25Model
    from gensim.similarities import SparseMatrixSimilarity

    corpus = analyze_many(documents)
    dictionary = Dictionary(corpus)
    model = LuceneBM25Model(dictionary=dictionary, k1=0.9, b=0.4)
    index = SparseMatrixSimilarity(
        model[list(map(dictionary.doc2bow, corpus))], num_docs=len(corpus), num_terms=len(dictionary),
        normalize_queries=False, normalize_documents=False,
    )
    return np.vstack([index[model[dictionary.doc2bow(tokens)]] for tokens in analyze_many(queries)])


@pytest.mark.parametrize("seed", [0, 1])
def test_lucene_scores_equal_gensim(seed: int):
    corpus, queries = _corpus(seed)
    index = build_lucene_index(corpus["id"].to_list(), corpus["text"].to_list(), show_progress=False)
    ours = lucene_scores(index, queries["text"].to_list())
    reference = _gensim_scores(corpus["text"].to_list(), queries["text"].to_list())
    assert ours.shape == reference.shape == (queries.height, corpus.height)
    np.testing.assert_allclose(ours, reference, rtol=1e-6, atol=1e-6)
    assert not ours[-2].any()  # a query of unknown terms scores 0 everywhere


def test_lucene_hand_computed():
    # Two documents, k1=0.9, b=0.4: idf = ln(N+1) - ln(df+0.5).
    corpus = pl.DataFrame({"id": ["a", "b"], "text": ["fever fever cough", "cough"]})
    index = build_lucene_index(["a", "b"], corpus["text"].to_list(), show_progress=False)
    avgdl = (3 + 1) / 2
    idf_fever, idf_cough = np.log(3) - np.log(1.5), np.log(3) - np.log(2.5)

    def weight(idf: float, tf: float, length: float) -> float:
        return idf * tf / (tf + 0.9 * (1 - 0.4 + 0.4 * length / avgdl))

    query_fever = weight(idf_fever, 1, 1)  # the query "fever" is one token long
    expected_a = query_fever * weight(idf_fever, 2, 3)
    scores = lucene_scores(index, ["fever"])
    assert scores[0, 0] == pytest.approx(expected_a, rel=1e-6)
    assert scores[0, 1] == 0.0
    # "cough fever": each query term weighted with the query's own length 2
    query_cough, query_fever2 = weight(idf_cough, 1, 2), weight(idf_fever, 1, 2)
    both = lucene_scores(index, ["cough fever"])
    assert both[0, 0] == pytest.approx(query_fever2 * weight(idf_fever, 2, 3) + query_cough * weight(idf_cough, 1, 3), rel=1e-6)
    assert both[0, 1] == pytest.approx(query_cough * weight(idf_cough, 1, 1), rel=1e-6)


def test_run_top_k_and_pytrec_tie_order():
    scores = np.array([[1.0, 3.0, 3.0, 0.5, 3.0]], dtype=np.float32)
    run = top_k_run(["q"], ["d1", "d2", "d3", "d4", "d5"], scores, top_k=2)
    assert list(run["q"]) == ["d5", "d3"]  # score 3 ties, doc id descending, cut at 2
    with pytest.raises(ValueError, match="NaN"):
        top_k_run(["q"], ["d1"], np.array([[np.nan]]), top_k=1)


def test_bm25_search_lucene_run():
    corpus, queries = _corpus(2)
    run = bm25_search(corpus, queries, variant="lucene", top_k=50, show_progress=False)
    reference = _gensim_scores(corpus["text"].to_list(), queries["text"].to_list())
    expected = top_k_run(queries["id"].to_list(), corpus["id"].to_list(), reference, 50)
    assert {q: list(docs)[:20] for q, docs in run.items()} == {q: list(docs)[:20] for q, docs in expected.items()}
    assert all(len(docs) == 50 for docs in run.values())


def test_robertson_equals_bm25s_directly():
    import bm25s
    import Stemmer

    corpus, queries = _corpus(3)
    retriever = build_robertson_index(corpus["text"].to_list(), show_progress=False)
    ours = robertson_scores(retriever, queries["text"].to_list())
    stemmer = Stemmer.Stemmer("porter")
    reference_model = bm25s.BM25(method="robertson", k1=1.5, b=0.75)
    reference_model.index(bm25s.tokenize(corpus["text"].to_list(), stopwords="en", stemmer=stemmer, show_progress=False), show_progress=False)
    query_tokens = bm25s.tokenize(queries["text"].to_list()[:-2], stopwords="en", stemmer=stemmer, show_progress=False)
    docs, scores = reference_model.retrieve(query_tokens, k=10, show_progress=False)
    for row in range(len(queries) - 2):
        np.testing.assert_allclose(np.sort(ours[row])[::-1][:10], scores[row], rtol=1e-6)
    assert not ours[-2].any()


def test_bm25_search_bad_input():
    corpus, queries = _corpus(4, n_docs=5, n_queries=2)
    with pytest.raises(ValueError, match="variant must be one of"):
        bm25_search(corpus, queries, variant="okapi")
    with pytest.raises(ValueError, match="top_k must be a positive integer"):
        bm25_search(corpus, queries, top_k=0)
    with pytest.raises(TypeError, match="polars DataFrame with columns 'id' and 'text'"):
        bm25_search({"a": "b"}, queries)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="corpus is empty"):
        bm25_search(corpus.head(0), queries)


def test_bm25_on_fixture_finds_positives(mirror_env):
    import r2med_plugin

    data = r2med_plugin.load_task("R2MEDBioinformatics")
    run = bm25_search(data.corpus, data.queries, top_k=10, show_progress=False)
    assert evaluate_run(data.qrels, run)["hit_at_10"] == 1.0


def test_truncate_run_keeps_pytrec_top_k():
    from r2med_plugin.retrieval.ranking import truncate_run

    run = {"q": {"a": 1.0, "b": 3.0, "c": 3.0, "d": 0.5, "e": 3.0}, "short": {"x": 1.0}}
    assert truncate_run(run, 2) == {"q": {"e": 3.0, "c": 3.0}, "short": {"x": 1.0}}
    rng = np.random.default_rng(0)
    big = {"q": {f"d{i}": float(v) for i, v in enumerate(rng.integers(0, 50, size=3000))}}
    scores = np.array([list(big["q"].values())])
    assert set(truncate_run(big, 1000)["q"]) == set(top_k_run(["q"], list(big["q"]), scores, 1000)["q"])


# --- one progress bar per step ---


def _bar_names(stderr: str) -> set[str]:
    """The text before the first ':' of every tqdm line ("Split strings:  0%|..." -> "Split strings")."""
    return {line.split(":")[0].strip() for line in stderr.replace("\r", "\n").splitlines() if "%|" in line}


def test_bm25_robertson_shows_one_bar_per_step_on_a_terminal_only(mirror_env: Path, capsys: pytest.CaptureFixture[str],
                                                                    monkeypatch: pytest.MonkeyPatch):
    import bm25s
    import Stemmer

    from r2med_plugin import load_task
    from r2med_plugin.retrieval.bm25 import bm25_search, robertson_tokens

    data = load_task("NanoR2MEDBiology")
    capsys.readouterr()
    bm25_search(data.corpus, data.queries, variant="robertson", show_progress=True)
    assert capsys.readouterr().err == ""  # off a terminal (piped, logged) no bar: its escape codes would fill the file
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True, raising=False)  # as on a terminal
    bm25_search(data.corpus, data.queries, variant="robertson", show_progress=True)
    assert _bar_names(capsys.readouterr().err) == {"bm25-robertson"}  # "analysing documents", then "scoring queries"
    texts = data.corpus["text"].to_list()
    one_call = bm25s.tokenize(texts, stopwords="en", stemmer=Stemmer.Stemmer("porter"), show_progress=False, return_ids=False)
    assert robertson_tokens(texts, show_progress=False) == one_call  # the chunked tokens equal bm25s' own
