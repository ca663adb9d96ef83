"""bm25-hakari: HAKARI-Bench's BM25 (its tokenizers, bm25s okapi k1=1.5 b=0.75, bm25s's rank order).

The token facts are those HAKARI-Bench's own tests assert (tests/test_bm25.py at 217c872) and those its regular
expressions give; the parity with its code itself is benchmarks/hakari_parity.py (benchmarks/README.md)."""

from __future__ import annotations

import math

import polars as pl
import pytest

from r2med_plugin.identifiers import BM25_NAMES, is_hakari_bm25
from r2med_plugin.reporting.export import write_trec_run
from r2med_plugin.retrieval.bm25 import bm25_search
from r2med_plugin.retrieval.hakari import STOP_WORDS, TOKENIZERS, hakari_search, hakari_tokens
from r2med_plugin.retrieval.ranking import head_of_run


@pytest.mark.parametrize(("tokenizer", "text", "tokens"), [
    # HAKARI-Bench's own tests
    ("english_porter_stop", "The running runners run in the park.", ["run", "runner", "run", "park"]),
    ("regex", "BM25-based retrieval works.", ["bm25", "based", "retrieval", "works"]),
    ("english_regex", "BM25-based retrieval works.", ["bm25", "based", "retrieval", "works"]),
    ("whitespace", "BM25-based retrieval works.", ["bm25-based", "retrieval", "works."]),
    ("stemmer", "running runners", ["run", "runner"]),
    # a clinical sentence: one-character tokens kept, "he" a stop word, NLTK's Porter ("cours", not "dai")
    ("english_porter_stop", "…he is on β-blockers, e.g. a 2-day course", ["blocker", "e", "g", "2", "day", "cours"]),
    # [A-Za-z0-9]+ is matched on the text as written, then lower-cased: non-ASCII letters split words
    ("english_regex", "İstanbul naïve \u212aelvin", ["stanbul", "na", "ve", "elvin"]),
    ("regex", "İstanbul naïve x_y", ["i̇stanbul", "naïve", "x_y"]),
    ("english_porter", "The generalizations", ["the", "gener"]),
])
def test_tokens_are_hakaris(tokenizer: str, text: str, tokens: list[str]):
    assert hakari_tokens([text], tokenizer) == [tokens]


def test_stop_words_are_hakaris_74():
    assert len(STOP_WORDS) == 74 and {"he", "the", "yourselves", "whom"} <= STOP_WORDS and "not" not in STOP_WORDS


def test_each_distinct_token_is_stemmed_once_and_mapped_back_in_order():
    texts = ["Running runs RUNNING", "", "the of", "runs"]
    assert hakari_tokens(texts) == [["run", "run", "run"], [], [], ["run"]]


def test_an_unknown_tokenizer_is_refused_with_the_choices():
    with pytest.raises(ValueError, match="english_porter_stop, regex"):
        hakari_tokens(["x"], "porter")


def _okapi(tf: int, df: int, n: int, length: int, avgdl: float, k1: float = 1.5, b: float = 0.75) -> float:
    """bm25s's okapi ("robertson") term score: idf ln(max(1, (N-df+0.5)/(df+0.5))) times tf/(tf + k1(1-b+b dl/avgdl))."""
    idf = math.log(max(1.0, (n - df + 0.5) / (df + 0.5)))
    return idf * tf / (tf + k1 * (1 - b + b * length / avgdl))


def test_scores_are_okapi_over_hakaris_tokens_and_empty_documents_are_left_out():
    docs = {"d1": "heart failure heart", "d2": "renal failure", "d3": "", "d4": "kidney", "d5": "bones", "d6": "skin"}
    run = hakari_search(list(docs), list(docs.values()), ["q"], ["The heart's failure"], top_k=10, show_progress=False)
    # d3 has empty text: not in the corpus (N = 5), never ranked; terms: d1 [heart, failur, heart], d2 [renal, failur]
    lengths, avgdl = {"d1": 3, "d2": 2, "d4": 1, "d5": 1, "d6": 1}, (3 + 2 + 1 + 1 + 1) / 5
    expected_d1 = _okapi(2, 1, 5, 3, avgdl) + _okapi(1, 2, 5, 3, avgdl)  # query terms: heart, s, failur
    expected_d2 = _okapi(1, 2, 5, 2, avgdl)
    assert set(run["q"]) == {"d1", "d2", "d4", "d5", "d6"}
    assert list(run["q"])[:2] == ["d1", "d2"]
    assert run["q"]["d1"] == pytest.approx(expected_d1, rel=1e-6) and run["q"]["d2"] == pytest.approx(expected_d2, rel=1e-6)
    assert lengths and run["q"]["d4"] == 0.0


def test_one_ranking_whatever_the_depth_asked_for():
    docs = [f"heart failure {'x' * (i % 3 + 1)}" for i in range(40)] + ["renal"] * 20  # many exact ties
    ids = [f"d{i:02d}" for i in range(len(docs))]
    deep = hakari_search(ids, docs, ["q1", "q2"], ["heart", "renal failure"], top_k=1000, show_progress=False)
    for depth in (5, 30, 59):
        short = hakari_search(ids, docs, ["q1", "q2"], ["heart", "renal failure"], top_k=depth, show_progress=False)
        assert {q: list(r) for q, r in short.items()} == {q: list(r)[:depth] for q, r in deep.items()}
    assert all(list(r.values()) == sorted(r.values(), reverse=True) for r in deep.values())
    assert len(deep["q1"]) == 60


def test_a_ranking_past_bm25s_depth_continues_by_score_then_corpus_position(monkeypatch: pytest.MonkeyPatch):
    import r2med_plugin.retrieval.hakari as hakari

    docs = ["heart heart", "heart", "renal", "heart", "bone", "heart heart"] + [f"filler{i}" for i in range(6)]
    ids = list("abcdef") + [f"z{i}" for i in range(6)]
    retriever = hakari.build_hakari_index(docs, show_progress=False)
    bm25s_top2, _ = retriever.retrieve([["heart"]], k=2, show_progress=False, return_as="tuple")
    monkeypatch.setattr(hakari, "RANK_DEPTH", 2)
    run = hakari_search(ids, docs, ["q"], ["heart"], top_k=12, show_progress=False)["q"]
    # a and f (tf 2) tie above b and d (tf 1); every other document scores 0
    assert list(run)[:2] == [ids[i] for i in bm25s_top2[0]] and sorted(list(run)[:2]) == ["a", "f"]
    assert list(run)[2:] == ["b", "d", "c", "e"] + [f"z{i}" for i in range(6)]  # by score, ties by corpus position
    assert run["b"] == run["d"] > run["c"] == 0.0


def test_names_and_variants():
    assert "bm25-hakari" in BM25_NAMES and all(f"bm25-hakari:{t}" in BM25_NAMES for t in TOKENIZERS[1:])
    assert "bm25-hakari:english_porter_stop" not in BM25_NAMES  # that is bm25-hakari itself
    assert is_hakari_bm25("bm25-hakari:regex") and not is_hakari_bm25("bm25-hakari:nope") and not is_hakari_bm25("bm25-lucene")


def test_bm25_search_runs_each_tokenizer():
    corpus = pl.DataFrame({"id": [f"d{i}" for i in range(1, 7)], "text": ["Running hearts", "renal", "a", "b", "c", "d"]})
    queries = pl.DataFrame({"id": ["q"], "text": ["runs heart"]})
    stemmed = bm25_search(corpus, queries, variant="hakari", show_progress=False)["q"]
    exact = bm25_search(corpus, queries, variant="hakari:english_regex", show_progress=False)["q"]
    assert stemmed["d1"] > 0 and exact["d1"] == 0.0  # "runs"/"running", "heart"/"hearts" meet only when stemmed


def test_trec_keeps_a_runs_own_order_for_ties(tmp_path):
    run = {"q": {"b": 1.0, "a": 1.0, "c": 0.5}}
    kept = write_trec_run(tmp_path / "k.trec", run, "t", keep_order=True).read_text().split("\n")
    pytrec = write_trec_run(tmp_path / "p.trec", run, "t").read_text().split("\n")
    assert [line.split()[2] for line in kept if line] == ["b", "a", "c"]
    assert [line.split()[2] for line in pytrec if line] == ["b", "a", "c"]  # id descending, the same here
    run = {"q": {"a": 1.0, "b": 1.0}}
    assert write_trec_run(tmp_path / "k2.trec", run, "t", keep_order=True).read_text().split()[2] == "a"
    assert write_trec_run(tmp_path / "p2.trec", run, "t").read_text().split()[2] == "b"
    assert head_of_run({"q": {"a": 1.0, "b": 1.0, "c": 0.1}}, 2) == {"q": {"a": 1.0, "b": 1.0}}


def test_the_cli_writes_bm25s_order_and_refuses_an_unknown_tokenizer_before_loading(mirror_env, tmp_path, capsys):
    import r2med_plugin
    from r2med_plugin.cli import main

    assert main(["evaluate", "--task", "NanoR2MEDBiology", "--retriever", "bm25-hakari", "--trec", "--output", str(tmp_path),
                 "--quiet"]) == 0
    (trec,) = (tmp_path / "runs" / "bm25-hakari").rglob("NanoR2MEDBiology.trec")
    written: dict[str, list[str]] = {}
    for line in trec.read_text().splitlines():
        query_id, _, doc_id, rank, _, tag = line.split()
        written.setdefault(query_id, []).append(doc_id)
        assert tag == "bm25-hakari"
    data = r2med_plugin.load_task("NanoR2MEDBiology")
    expected = hakari_search(data.corpus["id"].to_list(), data.corpus["text"].to_list(), data.queries["id"].to_list(),
                             data.queries["text"].to_list(), show_progress=False)
    assert written == {q: list(r) for q, r in expected.items()}  # the fixture's 200 documents, all written
    capsys.readouterr()
    assert main(["evaluate", "--task", "NanoR2MEDBiology", "--retriever", "bm25-hakari:porter"]) == 2
    assert "the tokenizers are regex, english_regex, english_porter, stemmer, whitespace" in capsys.readouterr().err


def test_a_sweep_spec_names_a_hakari_tokenizer(tmp_path):
    import yaml

    from r2med_plugin.sweep import expand_jobs, load_spec

    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump({"output": "out", "tasks": ["NanoR2MEDBiology"],
                                    "retrievers": ["bm25-hakari", "bm25-hakari:regex"]}))
    jobs = expand_jobs(load_spec(path))
    assert sorted(job.retriever["bm25"] for job in jobs) == ["bm25-hakari", "bm25-hakari:regex"]
    assert len({job.job_id for job in jobs}) == 2
