"""HAKARI-Bench's metric conventions (r2med_plugin.evaluation.hakari_metrics), on hand-made rankings."""

from __future__ import annotations

import math

import pytest

from r2med_plugin.evaluation.hakari_metrics import (
    candidate_rankings,
    candidate_top_k,
    canonical_metric,
    hakari_metrics,
    metric_prefix,
    ranking_from_run,
    rankings_from_run,
)
from r2med_plugin.metrics import evaluate_run


def test_map_divides_by_min_of_positives_and_cutoff_where_trec_eval_divides_by_all_positives():
    positives = [f"p{i:02d}" for i in range(19)]
    ranking = positives[:10] + [f"n{i}" for i in range(10)]
    ours = hakari_metrics({"q": ranking}, {"q": positives}, metric_names=["map@10"])
    assert ours == {"map@10": 1.0}  # 10 hits at ranks 1..10, each precision 1, over min(19, 10)
    run = {"q": {doc_id: float(100 - rank) for rank, doc_id in enumerate(ranking)}}
    trec = evaluate_run({"q": {doc_id: 1 for doc_id in positives}}, run)["map_at_10"]
    assert trec == pytest.approx(10 / 19)


def test_a_two_document_tie_goes_to_the_smaller_id_where_pytrec_eval_takes_the_larger():
    run = {"q": {"d2": 0.5, "d1": 0.5}}
    assert ranking_from_run(run["q"]) == ["d1", "d2"]
    assert hakari_metrics(rankings_from_run(run), {"q": ["d1"]}, metric_names=["ndcg@1"]) == {"ndcg@1": 1.0}
    assert evaluate_run({"q": {"d1": 1}}, run)["ndcg_at_1"] == 0.0


def test_a_bm25s_run_keeps_its_own_order_among_ties():
    run = {"q": {"d2": 0.5, "d1": 0.5, "d3": 0.9}}
    assert rankings_from_run(run, keep_order=True) == {"q": ["d2", "d1", "d3"]}
    assert rankings_from_run(run) == {"q": ["d3", "d1", "d2"]}


def test_a_query_without_qrels_counts_and_scores_zero():
    rankings = {"q1": ["a", "b"], "q2": ["c"]}
    values = hakari_metrics(rankings, {"q1": ["a"]}, metric_names=["ndcg@10", "hit@10"])
    assert values == {"ndcg@10": (1.0 + 0.0) / 2, "acc@10": (1.0 + 0.0) / 2}


def test_a_counted_query_without_a_ranking_scores_zero():
    values = hakari_metrics({"q1": ["a"]}, {"q1": ["a"], "q2": ["b"]}, metric_names=["recall@100"], query_ids=["q1", "q2", "q3"])
    assert values == {"recall@100": (1.0 + 0.0 + 0.0) / 3}


def test_each_family_on_one_ranking():
    ranking = ["n1", "p1", "n2", "p2"]
    positives = ["p1", "p2", "p3"]
    names = ["ndcg@3", "acc@1", "acc@2", "precision@4", "recall@4", "mrr@1", "mrr@4", "map@4"]
    values = hakari_metrics({"q": ranking}, {"q": positives}, metric_names=names)
    dcg = 1 / math.log2(3)
    ideal = 1 / math.log2(2) + 1 / math.log2(3) + 1 / math.log2(4)
    assert values == pytest.approx({
        "ndcg@3": dcg / ideal, "acc@1": 0.0, "acc@2": 1.0, "precision@4": 2 / 4, "recall@4": 2 / 3,
        "mrr@1": 0.0, "mrr@4": 1 / 2, "map@4": (1 / 2 + 2 / 4) / 3,
    })


def test_graded_qrels_count_grades_above_zero():
    assert hakari_metrics({"q": ["a", "b"]}, {"q": {"a": 0, "b": 2}}, metric_names=["mrr@10"]) == {"mrr@10": 1 / 2}


def test_keys_carry_the_prefix_hakari_writes():
    prefix = metric_prefix("NanoR2MEDBiology", "cosine")
    assert prefix == "NanoR2MED_NanoR2MEDBiology_cosine_"
    assert hakari_metrics({"q": ["a"]}, {"q": ["a"]}, prefix=prefix) == {
        "NanoR2MED_NanoR2MEDBiology_cosine_ndcg@10": 1.0, "NanoR2MED_NanoR2MEDBiology_cosine_acc@100": 1.0}


def test_documents_with_empty_text_are_never_ranked():
    assert rankings_from_run({"q": {"gone": 0.9, "a": 0.1}}, dropped_documents=["gone"]) == {"q": ["a"]}


def test_candidate_re_ranking_keeps_listed_documents_in_the_run_scores_order():
    run = {"q1": {"a": 0.1, "b": 0.9, "c": 0.5, "d": 0.7}, "q2": {"a": 0.3}}
    lists = {"q1": ["a", "c", "a", "b"]}
    ranked = candidate_rankings(run, lists, ["q1", "q2"])
    assert ranked == {"q1": ["b", "c", "a"], "q2": []}
    assert candidate_top_k(lists) == 3  # "a" once


@pytest.mark.parametrize("name", ["ndcg", "ndcg@0", "ndcg@x", "bpref@10"])
def test_a_metric_name_hakari_does_not_know_is_refused(name):
    with pytest.raises(ValueError, match="family"):
        canonical_metric(name)


def test_a_ranking_that_repeats_a_document_is_refused():
    with pytest.raises(ValueError, match="query 'q' repeats a document id"):
        hakari_metrics({"q": ["a", "a"]}, {"q": ["a"]})


def test_inputs_are_not_changed():
    rankings, qrels = {"q": ["b", "a"]}, {"q": {"a": 1}}
    hakari_metrics(rankings, qrels, query_ids=["q", "z"])
    assert rankings == {"q": ["b", "a"]} and qrels == {"q": {"a": 1}}
