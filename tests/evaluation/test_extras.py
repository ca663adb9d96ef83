from __future__ import annotations

from pathlib import Path

import pytest

import r2med_plugin
from r2med_plugin.cache import cache_dir
from r2med_plugin.evaluation.extras import EXTRA_METRICS, candidate_scores, extra_scores, hybrid_scores
from r2med_plugin.retrieval.bm25_cache import bm25_run
from r2med_plugin.retrieval.candidates import candidate_profile, candidates_as_run


def test_hybrid_of_a_run_with_itself_ranks_like_the_run(mirror_env: Path):
    data = r2med_plugin.load_task("NanoR2MEDPMCTreatment")
    bm25 = bm25_run(data, show_progress=False)
    hybrid = hybrid_scores(data, bm25, bm25)
    plain = r2med_plugin.evaluate_run(data.qrels, bm25)
    assert hybrid == {f"hybrid_{name}": plain[name] for name in EXTRA_METRICS}


def test_candidate_scores_of_the_stored_order_equal_the_profile(mirror_env: Path):
    data = r2med_plugin.load_task("NanoR2MEDBiology")
    stored = candidates_as_run(data.candidates["hybrid"])
    scores = candidate_scores(data, stored)
    profile = candidate_profile(data.candidates["hybrid"], data.qrels, top_k=100)
    assert scores["candidates_hybrid_ndcg_at_10_with_safeguard"] == pytest.approx(profile["ndcg_at_10"])
    # The safeguard row is a positive at rank 101: it counts with the safeguard only.
    assert scores["candidates_hybrid_recall_at_100_without_safeguard"] <= scores["candidates_hybrid_recall_at_100_with_safeguard"]
    assert scores["candidates_hybrid_mrr_with_safeguard"] > scores["candidates_hybrid_mrr_without_safeguard"]


def test_positives_outside_a_list_are_misses(mirror_env: Path):
    data = r2med_plugin.load_task("NanoR2MEDBiology")
    perfect = {q: {d: 1.0 for d in judged} for q, judged in data.qrels.items()}
    scores = candidate_scores(data, perfect)
    # One fixture query has no positive in its bm25 and dense lists: a perfect model still misses it there.
    share_of_that_query = 1 / len(data.qrels)
    assert scores["candidates_dense_recall_at_100"] == pytest.approx(1 - share_of_that_query)
    assert scores["candidates_bm25_hit_at_10"] == pytest.approx(1 - share_of_that_query)
    # Its hybrid list carries a positive as safeguard row: found with the safeguard, missed without.
    assert scores["candidates_hybrid_hit_at_10_with_safeguard"] == 1.0
    assert scores["candidates_hybrid_hit_at_10_without_safeguard"] == pytest.approx(1 - share_of_that_query)


def test_bm25_run_is_cached_with_content_keys(mirror_env: Path, mirror_copy: Path, monkeypatch: pytest.MonkeyPatch):
    first = r2med_plugin.load_task("R2MEDBiology")
    run = bm25_run(first, show_progress=False)
    cached = list((cache_dir() / "bm25-lucene").glob("*.json.gz"))
    assert cached
    assert bm25_run(first, show_progress=False) == run
    # Same task and revision, different texts: a different cache entry, never a stale hit.
    corpus = mirror_copy / "R2MED" / "Biology" / "corpus.jsonl"
    corpus.write_text(corpus.read_text().replace("patient", "person"))
    changed = r2med_plugin.load_task("R2MEDBiology", data_dir=mirror_copy)
    bm25_run(changed, show_progress=False)
    assert len(list((cache_dir() / "bm25-lucene").glob("*.json.gz"))) == len(cached) + 1


def test_corrupt_cache_entry_is_recomputed(mirror_env: Path):
    data = r2med_plugin.load_task("R2MEDIIYiClinical")
    run = bm25_run(data, show_progress=False)
    for path in (cache_dir() / "bm25-lucene").glob("*.json.gz"):
        path.write_bytes(b"not gzip")
    assert bm25_run(data, show_progress=False) == run


def test_extra_scores_keys(mirror_env: Path):
    data = r2med_plugin.load_task("R2MEDMedQADiag")
    run = bm25_run(data, show_progress=False)
    assert set(extra_scores(data, run, show_progress=False)) == {f"hybrid_{name}" for name in EXTRA_METRICS}
