"""The HAKARI record a NanoR2MED result keeps (r2med_plugin.evaluation.hakari_record), on a hand-made task."""

from __future__ import annotations

import math
from pathlib import Path
from types import SimpleNamespace

import polars as pl
import pytest

from r2med_plugin.catalog import get_task_spec
from r2med_plugin.evaluation.hakari_record import hakari_record, safeguard_positives, score_name
from r2med_plugin.evaluation.writers import write_hakari
from r2med_plugin.reporting.hakari_files import hakari_record_path, read_xz_json, write_hakari_record
from r2med_plugin.types import LoadReport, TaskData

TASK = "NanoR2MEDBiology"
PREFIX = f"NanoR2MED_{TASK}_"


def _data() -> TaskData:
    """Three documents and a blank one; q1 and q2 judged, q3 without qrels (dropped at loading, as MTEB drops it)."""
    corpus = pl.DataFrame({"id": ["d1", "d2", "d3", "blank"], "text": ["one", "two", "three", ""]})
    return TaskData(spec=get_task_spec(TASK), corpus=corpus, queries=pl.DataFrame({"id": ["q1", "q2"], "text": ["a", "b"]}),
                    qrels={"q1": {"d2": 1}, "q2": {"d3": 1, "d1": 0}}, candidates={"hybrid": {"q1": ["d3", "d2"], "q2": ["d1"]}},
                    revision="r", source="test", report=LoadReport(queries_without_qrels=["q3"]))


RUN = {"q1": {"blank": 0.95, "d2": 0.9, "d1": 0.9, "d3": 0.1}, "q2": {"d3": 0.8, "d1": 0.7, "d2": 0.6}}


def test_the_full_corpus_metrics_follow_hakaris_conventions():
    record = hakari_record(_data(), RUN, "org/model", ["hybrid"])
    assert record["query_ids"] == ["q1", "q2", "q3"]
    # q1: the blank document is not ranked, d1 and d2 tie and d1 (the smaller id) goes first: d2 at rank 2
    assert record["top_rankings"][0]["rankings"]["q1"] == ["d1", "d2", "d3"]
    ndcg = (1 / math.log2(3) + 1.0 + 0.0) / 3  # q1: rank 2; q2: rank 1; q3: no qrels, counted as 0
    assert record["metrics"][PREFIX + "cosine_ndcg@10"] == pytest.approx(ndcg, abs=1e-15)
    assert record["metrics"][PREFIX + "cosine_map@10"] == pytest.approx((1 / 2 + 1 + 0) / 3, abs=1e-15)
    assert record["qrels"] == {"q1": ["d2"], "q2": ["d3"]}  # grade 0 is no positive


def test_each_listed_candidate_list_is_re_ranked_by_the_runs_scores():
    record = hakari_record(_data(), RUN, "org/model", ["hybrid"])
    entry = record["candidate_rankings"]["reranking_hybrid"]
    assert entry["top_k"] == 2 and entry["score_name"] == "cosine_reranking_hybrid_top2_rerank"
    rerank = record["top_rankings"][1]
    assert rerank["ranking_kind"] == "candidate_rerank"
    assert rerank["rankings"] == {"q1": ["d2", "d3"], "q2": ["d1"], "q3": []}
    assert entry["metrics"][PREFIX + "cosine_reranking_hybrid_top2_rerank_acc@10"] == pytest.approx((1 + 0 + 0) / 3)


def test_a_bm25_run_keeps_its_order_when_it_is_bm25s_and_re_ranks_no_list():
    run = {"q1": {"d2": 0.5, "d1": 0.5}, "q2": {"d3": 1.0}}
    hakari = hakari_record(_data(), run, "bm25-hakari", ["hybrid"])
    assert hakari["score_name"] == "bm25_bm25s_okapi" and hakari["candidate_rankings"] == {}
    assert hakari["top_rankings"][0]["rankings"]["q1"] == ["d2", "d1"]  # bm25s's tie order, kept
    other = hakari_record(_data(), run, "bm25-robertson")
    assert other["top_rankings"][0]["rankings"]["q1"] == ["d1", "d2"]
    assert [score_name(name) for name in ("bm25-hakari:regex", "bm25-lucene", "minilm-packaged")] == [
        "bm25_bm25s_okapi", "bm25-lucene", "cosine"]


def test_a_safeguard_row_is_the_101st_candidate_when_only_it_is_a_positive():
    lists = {"q1": ["n1", "n2", "p"], "q2": ["p", "n1", "p2"], "q3": ["n1", "n2"]}
    qrels = {"q1": {"p": 1}, "q2": {"p": 1, "p2": 1}, "q3": {"p": 1}}
    assert safeguard_positives(lists, qrels, top_k=2) == {"q1": "p"}  # q2 finds a positive in its first 2


def test_the_record_is_written_beside_the_result_and_an_earlier_one_goes_when_a_result_holds_none(tmp_path: Path):
    mteb_path = tmp_path / f"{TASK}.json"
    record = hakari_record(_data(), RUN, "org/model")
    written = write_hakari_record(record, mteb_path)
    assert written == hakari_record_path(mteb_path) == tmp_path / f"{TASK}.hakari.json.xz"
    assert read_xz_json(written) == record
    assert write_hakari(SimpleNamespace(hakari=None), mteb_path) == {} and not written.exists()


def test_a_damaged_record_is_refused_naming_the_file(tmp_path: Path):
    path = tmp_path / "x.hakari.json.xz"
    path.write_bytes(b"not xz")
    with pytest.raises(ValueError, match=r"x.hakari.json.xz: not an lzma-compressed JSON file"):
        read_xz_json(path)
