from __future__ import annotations

import copy
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import r2med_plugin
from r2med_plugin.retrieval.candidates import (
    build_reranking_hybrid,
    candidate_profile,
    candidates_as_run,
    restrict_run,
    safeguard_pick,
)
from r2med_plugin.retrieval.fusion import rrf, score_fusion
from tests.support.strategies import run_strategy

RUN_A = {"q": {"d1": 3.0, "d2": 2.0, "d3": 1.0}}
RUN_B = {"q": {"d3": 9.0, "d1": 5.0, "d4": 5.0}}  # d4 beats d1 on the tie (doc id descending)


def test_rrf_arithmetic():
    fused = rrf([RUN_A, RUN_B], k=60)["q"]
    assert fused["d1"] == pytest.approx(1 / (60 + 1) + 1 / (60 + 3))
    assert fused["d3"] == pytest.approx(1 / (60 + 3) + 1 / (60 + 1))
    assert fused["d2"] == pytest.approx(1 / (60 + 2))
    assert fused["d4"] == pytest.approx(1 / (60 + 2))
    assert list(fused) == ["d3", "d1", "d4", "d2"]  # d1/d3 and d2/d4 tie: doc id descending
    assert list(rrf([RUN_A, RUN_B], k=60, top_k=2)["q"]) == ["d3", "d1"]


def test_rrf_is_symmetric_and_pure():
    rng = random.Random(3)
    runs = [{f"q{q}": {f"d{d}": rng.random() for d in rng.sample(range(30), 10)} for q in range(5)} for _ in range(3)]
    before = copy.deepcopy(runs)
    assert rrf(runs) == rrf(runs[::-1])
    assert runs == before


def test_score_fusion_arithmetic():
    fused = score_fusion([RUN_A, RUN_B], weights=[0.5, 1.0])["q"]
    # min-max: A d1=1, d2=0.5, d3=0; B d3=1, d1=0, d4=0
    assert fused["d1"] == pytest.approx(0.5 * 1.0 + 1.0 * 0.0)
    assert fused["d2"] == pytest.approx(0.5 * 0.5)
    assert fused["d3"] == pytest.approx(0.5 * 0.0 + 1.0 * 1.0)
    assert fused["d4"] == 0.0
    assert score_fusion([{"q": {"a": 2.0, "b": 2.0}}])["q"] == {"b": 1.0, "a": 1.0}


def test_fusion_bad_input():
    with pytest.raises(TypeError, match="non-empty list of runs"):
        rrf(RUN_A)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="non-empty list of runs"):
        rrf([])
    with pytest.raises(ValueError, match="2 weights for 1 runs"):
        score_fusion([RUN_A], weights=[1.0, 2.0])


def test_hybrid_construction_order_and_tie_breaks():
    bm25 = {"q": ["a", "b", "ghost", "c"]}
    dense = {"q": ["c", "a", "d"]}
    hybrid = build_reranking_hybrid(bm25, dense, {"q": {"a": 1}}, {"a", "b", "c", "d"}, split="S", top_k=100, rrf_k=100)
    # a: 1/101 + 1/102; c: 1/104 + 1/101 (ghost keeps its rank 3 but is skipped); b: 1/102; d: 1/103
    assert hybrid["q"] == ["a", "c", "b", "d"]
    tied = build_reranking_hybrid({"q": ["y", "x"]}, {"q": ["x", "y"]}, {}, {"x", "y"}, split="S")
    assert tied["q"] == ["x", "y"]  # equal scores, equal best rank: doc id ascending


def test_hybrid_safeguard_is_the_seeded_positive():
    bm25 = {"q7": [f"n{i}" for i in range(3)]}
    qrels = {"q7": {"p1": 1, "p2": 1, "p0": 0}}
    corpus = {"n0", "n1", "n2", "p1", "p2", "p0"}
    hybrid = build_reranking_hybrid(bm25, {}, qrels, corpus, split="NanoR2MEDBiology", top_k=2)
    expected = random.Random("20260524\0NanoR2MEDBiology\0q7\0positive_safeguard").choice(["p1", "p2"])
    assert hybrid["q7"] == ["n0", "n1", expected]
    assert safeguard_pick({"p2", "p1"}, seed=20260524, split="NanoR2MEDBiology", query_id="q7") == expected


def test_candidate_profile_arithmetic():
    qrels = {"q1": {"a": 1, "b": 1}, "q2": {"c": 1}}
    candidates = {"q1": ["x", "a"] + [f"n{i}" for i in range(98)] + ["b"], "q2": ["c"]}
    profile = candidate_profile(candidates, qrels, top_k=100)
    assert profile["hit_at_10"] == 1.0
    assert profile["pooled_recall_at_100"] == pytest.approx(2 / 3)  # a and c found among 3 positives; b is row 101
    assert "recall_at_100" not in profile  # the per-query mean would be (1/2 + 1/1) / 2: another number, another name
    assert profile["rows_with_101_candidates"] == 1 and profile["safeguard_positive_rows"] == 1
    assert profile["candidate_count_min"] == 1 and profile["candidate_count_max"] == 101
    idcg_q1 = 1 + 1 / 1.5849625007211563
    assert profile["ndcg_at_10"] == pytest.approx(((1 / 1.5849625007211563) / idcg_q1 + 1.0) / 2)


def test_restrict_and_as_run():
    run = {"q": {"a": 0.9, "b": 0.8, "c": 0.7}}
    assert restrict_run(run, {"q": ["c", "a", "z"]}) == {"q": {"c": 0.7, "a": 0.9}}
    assert restrict_run(run, {"q": ["c", "a"]}, limit=1) == {"q": {"c": 0.7}}
    assert candidates_as_run({"q": ["b", "a"]}) == {"q": {"b": 2.0, "a": 1.0}}


def test_fixture_hybrid_lists_rebuild_and_profile(mirror_env):
    data = r2med_plugin.load_task("NanoR2MEDBiology")
    rebuilt = build_reranking_hybrid(
        data.candidates["bm25"], data.candidates["dense"], data.qrels, set(data.corpus["id"].to_list()),
        split=data.spec.configs["corpus"]["split"],
    )
    assert rebuilt == data.candidates["hybrid"]
    profile = candidate_profile(data.candidates["hybrid"], data.qrels, top_k=100)
    assert profile["rows_with_101_candidates"] == profile["safeguard_positive_rows"] == 1
    assert profile["query_coverage"] == 1.0


@settings(max_examples=100, deadline=None)
@given(st.lists(run_strategy.filter(bool), min_size=1, max_size=4), st.integers(0, 100))
def test_rrf_is_pure_and_order_free(runs, k):
    before = copy.deepcopy(runs)
    fused = rrf(runs, k=k)
    assert runs == before
    assert fused == rrf(list(reversed(runs)), k=k)
    for query_id, ranked in fused.items():
        assert set(ranked) == {d for run in runs for d in run.get(query_id, {})}
        assert all(value > 0 for value in ranked.values())


@settings(max_examples=100, deadline=None)
@given(st.lists(run_strategy.filter(bool), min_size=1, max_size=4))
def test_score_fusion_is_pure_bounded_and_order_free(runs):
    before = copy.deepcopy(runs)
    fused = score_fusion(runs)
    assert runs == before
    assert fused == score_fusion(list(reversed(runs)))
    assert all(0.0 <= value <= len(runs) + 1e-9 for ranked in fused.values() for value in ranked.values())
