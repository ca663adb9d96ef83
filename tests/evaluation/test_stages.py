"""Each stage of an evaluation plan alone: first stages, the reranker, scorers, writers, the plan."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from r2med_plugin.data.loader import load_task
from r2med_plugin.data.runs import rank_by_score
from r2med_plugin.evaluation.extras import candidate_scores, hybrid_scores
from r2med_plugin.evaluation.first_stages import Bm25, Dense, RunDict, RunFile, StoredCandidates, as_first_stage
from r2med_plugin.evaluation.reranker_stage import CrossEncoderReranker, as_reranker
from r2med_plugin.evaluation.scorers import CandidateSubsets, FullCorpus, Hybrid, OfficialLayout, Retrieved, merged, within_depth
from r2med_plugin.evaluation.writers import write_mteb, write_official, write_trec
from r2med_plugin.metrics import evaluate_run
from r2med_plugin.models.hashing import HashingEncoder
from r2med_plugin.models.protocols import Reranker
from r2med_plugin.retrieval.bm25_cache import bm25_run
from r2med_plugin.retrieval.dense import dense_search, score_candidates
from r2med_plugin.retrieval.ranking import truncate_run
from tests.support.requests import planned, requested


@pytest.fixture()
def nano(mirror_env: Path):
    return load_task("NanoR2MEDBiology")


class FirstWordScorer:
    """Scores a pair 1.0 when the document's first word occurs in the query, else 0.0."""

    def predict(self, pairs):
        return [1.0 if document.split()[0].lower() in query.lower() else 0.0 for query, document in pairs]


def test_bm25_stage_is_the_cached_bm25_run(nano):
    assert Bm25("bm25-robertson").search(nano, 50, show_progress=False) == bm25_run(nano, "robertson", top_k=50, show_progress=False)
    ranked = Bm25("bm25-lucene").ranked(nano, 100, show_progress=False)
    assert ranked.name == "bm25-lucene" and ranked.revision.startswith("r2med-plugin-")
    assert ranked.run == bm25_run(nano, "lucene", top_k=100, show_progress=False, ties="corpus")
    with pytest.raises(ValueError, match="unknown retriever 'bm25'"):
        Bm25("bm25")


def test_dense_stage_searches_with_its_prompt(nano):
    encoder = HashingEncoder(dim=32)
    stage = Dense(encoder, query_prompt="Query: ")
    expected = dense_search(encoder, nano.corpus, nano.queries, dataset_revision=nano.revision, query_prompt="Query: ", top_k=20)
    assert stage.search(nano, 20, show_progress=False) == expected
    ranked = stage.ranked(nano, 5)
    assert ranked.name.startswith("hashing-encoder+prompt-") and all(len(docs) == 5 for docs in ranked.run.values())
    assert all(list(docs) == list(rank_by_score(docs)) for docs in ranked.run.values())


def test_stored_candidates_stage_encodes_only_the_lists(nano):
    encoder = HashingEncoder(dim=32)
    stage = StoredCandidates(Dense(encoder), ("hybrid",))
    run = stage.search(nano, 10)
    lists = {q: nano.candidates["hybrid"][q] for q in nano.qrels}
    assert run == score_candidates(encoder, nano.corpus, nano.queries, lists, dataset_revision=nano.revision)
    assert {q: set(docs) for q, docs in stage.saved_run(nano, run).items()} == {q: set(ids) for q, ids in lists.items()}


def test_run_file_and_run_dict_stages(nano, tmp_path: Path):
    query = next(iter(nano.qrels))
    docs = nano.corpus["id"].to_list()[:3]
    trec = tmp_path / "NanoR2MEDBiology.trec"
    trec.write_text("".join(f"{query} Q0 {doc} {rank} {3 - rank}.0 x\n" for rank, doc in enumerate(docs, start=1)))
    from_file = RunFile(tmp_path).ranked(nano, 10)
    assert from_file.name == tmp_path.name and from_file.source == trec and list(from_file.run[query]) == docs
    from_dict = RunDict({query: {docs[0]: 0.1, docs[1]: 0.9}}).ranked(nano, 10)
    assert list(from_dict.run[query]) == [docs[1], docs[0]] and from_dict.revision.startswith("run-")
    assert isinstance(as_first_stage("bm25-lucene"), Bm25) and isinstance(as_first_stage(str(trec)), RunFile)
    with pytest.raises(ValueError, match="query prompt"):
        as_first_stage("bm25-lucene", query_prompt="Query: ")
    with pytest.raises(TypeError, match="first_stage must be"):
        as_first_stage(3.5)


def test_cross_encoder_reranker_keeps_the_top_k_in_its_scores(nano):
    reranker = as_reranker(FirstWordScorer())
    assert isinstance(reranker, Reranker) and isinstance(reranker, CrossEncoderReranker)
    query = next(iter(nano.qrels))
    first = {query: {doc: 1.0 / (rank + 1) for rank, doc in enumerate(nano.corpus["id"].to_list()[:5])}}
    texts = dict(zip(nano.corpus["id"].to_list(), nano.corpus["text"].to_list(), strict=True))
    query_text = dict(zip(nano.queries["id"].to_list(), nano.queries["text"].to_list(), strict=True))
    reranked = reranker.rerank(first, query_text, texts, depth=3, show_progress=False)
    assert set(reranked[query]) == set(list(first[query])[:3])
    assert list(reranked[query].values()) == sorted(reranked[query].values(), reverse=True)
    with pytest.raises(TypeError, match="predict"):
        as_reranker(object())


def test_scorers_alone(nano):
    run = bm25_run(nano, "robertson", top_k=nano.corpus.height, show_progress=False)
    retrieved = Retrieved(nano, run, top_k=100, show_progress=False)
    full = FullCorpus(100).score(retrieved).metrics
    assert full == within_depth(evaluate_run(nano.qrels, truncate_run(run, 100)), 100) and "ndcg_at_1000" not in full
    partner = bm25_run(nano, "lucene", show_progress=False)
    assert Hybrid("bm25-lucene", 100).score(retrieved).metrics == hybrid_scores(nano, truncate_run(run, 100), partner)
    assert CandidateSubsets(("bm25",)).score(retrieved).metrics == candidate_scores(nano, run, ["bm25"])
    official = OfficialLayout(Bm25("bm25-robertson")).score(retrieved)
    assert official.layout == "bm25" and set(official.official) >= {"ndcg_at_10", "mrr"} and official.metrics == {}
    both = merged((FullCorpus(100), CandidateSubsets(("bm25",))), retrieved)
    assert list(both.metrics) == list(full) + [key for key in candidate_scores(nano, run, ["bm25"])]
    assert within_depth({"recall_at_1000_with_safeguard": 1.0, "recall_at_10": 0.5}, 100) == {"recall_at_10": 0.5}


def test_writers_alone(mirror_env: Path, tmp_path: Path):
    from r2med_plugin.evaluation.runner import execute

    result = execute(requested("R2MEDBiology", "bm25-lucene", show_progress=False))
    mteb = write_mteb(result, tmp_path)["mteb"]
    assert json.loads(mteb.read_text())["scores"]["test"][0]["ndcg_at_10"] == result.scores["ndcg_at_10"]
    official = write_official(result, tmp_path)
    assert json.loads(official["official"].read_text())["test"] == result.official
    assert json.loads(official["official_metadata"].read_text())["model_name"] == "bm25-lucene"
    trec = write_trec(result, tmp_path, depth=2)["trec"]
    assert len(trec.read_text().splitlines()) == 2 * len(result.run)


def test_plans_are_checked_before_any_data_loads(monkeypatch):
    monkeypatch.setenv("R2MED_DATA_DIR", "/nonexistent-mirror")  # loading would fail: every error below comes first
    cases = [
        (dict(task="NanoR2MEDBiology", retriever="bm25-lucene", hybrid=True, candidates=["bm25"], candidates_only=True), "hybrid"),
        (dict(task="NanoR2MEDBiology", retriever="bm25-lucene", top_k=5), "at least 10"),
        (dict(task="R2MEDBiology", retriever="bm25-lucene", candidates=["bm25"]), "no stored candidate lists"),
        (dict(task="NanoR2MEDBiology", retriever="bm25-lucene", candidates=["bm25"], candidates_only=False, expansion="hyde/x"),
         "expansions apply to the R2MED tasks"),
        (dict(task="NanoR2MEDBiology", retriever="bm25-lucene", first_stage="bm25-lucene"), "pass rerank="),
        (dict(task="NanoR2MEDBiology", rerank=FirstWordScorer(), hybrid=True, first_stage="bm25-lucene"), "one first stage"),
        (dict(task="NanoR2MEDBiology", rerank=FirstWordScorer()), "needs a first stage"),
    ]
    for options, message in cases:
        with pytest.raises(ValueError, match=message):
            requested(**options)
    with pytest.raises(TypeError, match="retriever must be"):
        requested("NanoR2MEDBiology", 42)
    plan = planned("NanoR2MEDBiology", "bm25-hakari", hybrid=True, candidates=["hybrid"])
    assert [type(scorer).__name__ for scorer in plan.scorers] == ["FullCorpus", "Hybrid", "CandidateSubsets", "OfficialLayout"]
    assert plan.hybrid_with == "bm25-lucene"  # bm25-hakari is the task's own BM25: fused with the other one
    assert planned("NanoR2MEDBiology", "bm25-robertson", hybrid=True).hybrid_with == "bm25-hakari"


def test_bm25_workers_reach_the_analysis_through_the_plan_not_the_environment(mirror_env: Path, monkeypatch):
    import os

    import r2med_plugin.evaluation.first_stages as first_stages
    from r2med_plugin.evaluation.runner import execute

    seen = []
    real = first_stages.bm25_run
    monkeypatch.setattr(first_stages, "bm25_run", lambda *a, **k: seen.append(k.get("workers")) or real(*a, **k))
    before = dict(os.environ)
    execute(requested("R2MEDBiology", "bm25-lucene", bm25_workers=1, show_progress=False))
    assert seen and set(seen) == {1} and dict(os.environ) == before
    with pytest.raises(ValueError, match="positive integer"):
        requested("R2MEDBiology", "bm25-lucene", bm25_workers=0)
