from __future__ import annotations

import copy
import math
import random

import pytest
import pytrec_eval
from hypothesis import given, settings

from r2med_plugin import evaluate_run, evaluate_run_per_query
from r2med_plugin.metrics import DEFAULT_K_VALUES
from tests.support.strategies import qrels_strategy, run_strategy


def log2(x: float) -> float:
    return math.log(x, 2)


QRELS = {"q1": {"d1": 1, "d3": 1}, "q2": {"d5": 1}, "q3": {"d9": 1}}
RUN = {
    "q1": {"d1": 3.0, "d2": 2.0, "d3": 1.0},
    "q2": {"d4": 5.0, "d5": 5.0},  # a tie: pytrec_eval ranks d5 first (doc id descending)
    # q3 is missing from the run: it scores 0 everywhere
}


def test_hand_computed_values():
    per_query = evaluate_run_per_query(QRELS, RUN, k_values=(1, 3))
    q1 = per_query["q1"]
    assert q1["ndcg_at_3"] == pytest.approx((1 / log2(2) + 1 / log2(4)) / (1 / log2(2) + 1 / log2(3)))
    assert q1["precision_at_3"] == pytest.approx(2 / 3)
    assert q1["recall_at_1"] == pytest.approx(1 / 2)
    assert q1["map_at_3"] == pytest.approx((1 / 1 + 2 / 3) / 2)
    assert q1["mrr"] == 1.0 and q1["hit_at_1"] == 1.0
    assert per_query["q2"]["ndcg_at_1"] == 1.0 and per_query["q2"]["mrr_at_1"] == 1.0
    assert set(per_query["q3"].values()) == {0.0}

    means = evaluate_run(QRELS, RUN, k_values=(1, 3))
    assert means["ndcg_at_1"] == pytest.approx((1 + 1 + 0) / 3)
    assert means["recall_at_1"] == pytest.approx((1 / 2 + 1 + 0) / 3)
    assert means["precision_at_3"] == pytest.approx((2 / 3 + 1 / 3 + 0) / 3)
    assert means["hit_at_3"] == pytest.approx(2 / 3)


def test_mrr_cut_at_k():
    qrels = {"q": {"d3": 1}}
    run = {"q": {"d1": 3.0, "d2": 2.0, "d3": 1.0}}
    scores = evaluate_run(qrels, run, k_values=(1, 2, 3))
    assert scores["mrr"] == pytest.approx(1 / 3)
    assert scores["mrr_at_1"] == 0.0 and scores["mrr_at_2"] == 0.0
    assert scores["mrr_at_3"] == pytest.approx(1 / 3)
    assert scores["hit_at_2"] == 0.0 and scores["hit_at_3"] == 1.0


def test_keys_are_mteb_style():
    scores = evaluate_run(QRELS, RUN)
    for k in DEFAULT_K_VALUES:
        for prefix in ("ndcg_at", "map_at", "recall_at", "precision_at", "hit_at", "mrr_at"):
            assert f"{prefix}_{k}" in scores
    assert "mrr" in scores and len(scores) == 6 * len(DEFAULT_K_VALUES) + 1


def _random_case(seed: int, n_queries: int = 30, n_docs: int = 80) -> tuple[dict, dict]:
    rng = random.Random(seed)
    docs = [f"doc{i}" for i in range(n_docs)]
    qrels, run = {}, {}
    for q in range(n_queries):
        qid = f"q{q}"
        qrels[qid] = {d: rng.choice([1, 1, 2]) for d in rng.sample(docs, rng.randint(1, 5))}
        if rng.random() < 0.2:
            qrels[qid][rng.choice(docs)] = 0  # judged non-relevant
        # coarse scores make many ties
        run[qid] = {d: float(rng.randint(0, 6)) for d in rng.sample(docs, rng.randint(10, 60))}
    return qrels, run


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_equals_raw_pytrec_eval_per_query(seed: int):
    qrels, run = _random_case(seed)
    del run["q3"], run["q7"]  # missing queries
    ks = (1, 5, 10, 50)
    measures = {f"{m}.{','.join(map(str, ks))}" for m in ("ndcg_cut", "map_cut", "recall", "P", "success")}
    raw = pytrec_eval.RelevanceEvaluator(qrels, measures | {"recip_rank"}).evaluate(run)
    ours = evaluate_run_per_query(qrels, run, ks)
    for qid, values in raw.items():
        for k in ks:
            assert ours[qid][f"ndcg_at_{k}"] == values[f"ndcg_cut_{k}"]
            assert ours[qid][f"map_at_{k}"] == values[f"map_cut_{k}"]
            assert ours[qid][f"recall_at_{k}"] == values[f"recall_{k}"]
            assert ours[qid][f"precision_at_{k}"] == values[f"P_{k}"]
            assert ours[qid][f"hit_at_{k}"] == values[f"success_{k}"]
        assert ours[qid]["mrr"] == values["recip_rank"]
    assert set(ours["q3"].values()) == {0.0}
    means = evaluate_run(qrels, run, ks)
    expected = sum(values["ndcg_cut_10"] for values in raw.values()) / len(qrels)
    assert means["ndcg_at_10"] == pytest.approx(expected, abs=1e-12)


@pytest.mark.parametrize("seed", [3, 4])
def test_equals_mteb_evaluator(seed: int):
    from mteb._evaluators.retrieval_metrics import calculate_retrieval_scores

    qrels, run = _random_case(seed)
    ks = (1, 3, 5, 10, 100, 1000)
    mteb_result = calculate_retrieval_scores(run, qrels, ks)
    ours = evaluate_run(qrels, run, ks)
    for k in ks:
        assert round(ours[f"ndcg_at_{k}"], 5) == mteb_result.ndcg[f"NDCG@{k}"]
        assert round(ours[f"map_at_{k}"], 5) == mteb_result.map[f"MAP@{k}"]
        assert round(ours[f"recall_at_{k}"], 5) == mteb_result.recall[f"Recall@{k}"]
        assert round(ours[f"precision_at_{k}"], 5) == mteb_result.precision[f"P@{k}"]
        assert round(ours[f"hit_at_{k}"], 5) == mteb_result.hit_rate[f"HitRate@{k}"]
        assert ours[f"mrr_at_{k}"] == pytest.approx(mteb_result.mrr[f"MRR@{k}"], abs=1e-12)


def test_inputs_are_not_mutated():
    qrels, run = _random_case(5)
    before = copy.deepcopy((qrels, run))
    evaluate_run(qrels, run)
    assert (qrels, run) == before


def test_bad_inputs():
    with pytest.raises(ValueError, match="k_values must be positive integers"):
        evaluate_run(QRELS, RUN, k_values=(0, 10))
    with pytest.raises(ValueError, match="qrels is empty"):
        evaluate_run({}, RUN)
    with pytest.raises(TypeError, match="qrels must be a dict of dicts"):
        evaluate_run([("q1", "d1", 1)], RUN)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"run\['q1'\] must be a dict"):
        evaluate_run(QRELS, {"q1": ["d1"]})  # type: ignore[dict-item]
    with pytest.raises(ValueError, match=r"run\['q1'\] contains NaN"):
        evaluate_run(QRELS, {"q1": {"d1": float("nan")}})
    with pytest.raises(TypeError, match="relevance that is not an integer"):
        evaluate_run({"q1": {"d1": "high"}}, RUN)  # type: ignore[dict-item]


def test_metric_keys_as_parts_round_trip():
    from r2med_plugin.metrics import Metric, metric_names

    for key in [*metric_names(), "candidates_hybrid_ndcg_at_1000_with_safeguard", "hybrid_mrr", "first_stage_recall_at_25"]:
        metric = Metric.parse(key)
        assert metric is not None and metric.key == key
    assert Metric.parse("candidates_hybrid_ndcg_at_1000_with_safeguard") == Metric("ndcg_at", 1000, "with_safeguard", "candidates_hybrid_")
    assert Metric.parse("main_score") is None and Metric.parse("mrr").cutoff is None


@settings(max_examples=150, deadline=None)
@given(qrels_strategy, run_strategy)
def test_metrics_are_bounded_and_equal_pytrec_eval(qrels, run):
    before = copy.deepcopy((qrels, run))
    per_query = evaluate_run_per_query(qrels, run, k_values=(1, 5, 10))
    assert all(0.0 <= value <= 1.0 for values in per_query.values() for value in values.values())
    raw = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut.5", "recall.10", "recip_rank"}).evaluate(run)
    for query_id, values in raw.items():
        assert per_query[query_id]["ndcg_at_5"] == values["ndcg_cut_5"]
        assert per_query[query_id]["recall_at_10"] == values["recall_10"]
        assert per_query[query_id]["mrr"] == values["recip_rank"]
    means = evaluate_run(qrels, run, k_values=(10,))
    assert 0.0 <= means["ndcg_at_10"] <= 1.0
    assert (qrels, run) == before
