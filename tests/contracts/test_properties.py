"""Property tests (hypothesis): readers, metrics and fusion on arbitrary inputs."""

from __future__ import annotations

import copy
import tempfile
from pathlib import Path

import polars as pl
import pytrec_eval
from hypothesis import given, settings
from hypothesis import strategies as st

from r2med_plugin import evaluate_run, evaluate_run_per_query
from r2med_plugin.data.readers import read_table
from r2med_plugin.retrieval.fusion import rrf, score_fusion
from tests.support.strategies import printable, qrels_strategy, run_strategy


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


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(printable, printable), min_size=1, max_size=20, unique_by=lambda row: row[0]))
def test_jsonl_and_parquet_round_trip(rows):
    frame = pl.DataFrame({"id": [r[0] for r in rows], "text": [r[1] for r in rows]}, schema={"id": pl.Utf8, "text": pl.Utf8})
    with tempfile.TemporaryDirectory() as tmp:
        jsonl, parquet = Path(tmp) / "t.jsonl", Path(tmp) / "t.parquet"
        frame.write_ndjson(jsonl)
        frame.write_parquet(parquet)
        for path in (jsonl, parquet):
            back = read_table(path, {"id": pl.Utf8, "text": pl.Utf8})
            assert back.to_dict(as_series=False) == frame.to_dict(as_series=False)
