"""Building an evaluation plan (r2med_plugin.evaluation.plan): options without their stage are refused, and --hybrid
picks its partner."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import r2med_plugin
from r2med_plugin.evaluation.extras import HYBRID_RRF_K
from r2med_plugin.evaluation.runner import evaluate_task
from r2med_plugin.models.hashing import HashingEncoder
from r2med_plugin.retrieval.bm25 import bm25_search
from tests.support.requests import requested


def test_the_python_api_refuses_reranker_options_without_a_reranker_and_workers_without_bm25_lucene(mirror_env: Path):

    for option in ({"rerank_depth": 100}, {"rerank_batch_size": 4}, {"first_stage_name": "x"}):
        with pytest.raises(ValueError, match="configures a reranker"):
            requested("NanoR2MEDBiology", "bm25-robertson", **option)
    with pytest.raises(ValueError, match="runs no bm25-lucene"):
        requested("NanoR2MEDBiology", "bm25-robertson", bm25_workers=2)
    assert requested("NanoR2MEDBiology", "bm25-hakari", hybrid=True, bm25_workers=2)  # the hybrid partner is bm25-lucene
    with pytest.raises(ValueError, match="runs no bm25-lucene"):  # bm25-robertson's partner on NanoR2MED: bm25-hakari
        requested("NanoR2MEDBiology", "bm25-robertson", hybrid=True, bm25_workers=2)


@pytest.mark.parametrize(("task", "retriever", "partner"), [("NanoR2MEDBiology", "bm25-hakari", "bm25-lucene"),
                                                           ("R2MEDBiology", "bm25-lucene", "bm25-robertson")])
def test_hybrid_bm25_fuses_the_other_variant(mirror_env: Path, task: str, retriever: str, partner: str):
    result = evaluate_task(task, retriever, hybrid=True, show_progress=False)
    assert result.hybrid_with == partner
    data = r2med_plugin.load_task(task)
    own = bm25_search(data.corpus, data.queries, variant=retriever.split("-")[1], top_k=1000, show_progress=False)
    other = bm25_search(data.corpus, data.queries, variant=partner.split("-")[1], top_k=1000, show_progress=False)
    fused = r2med_plugin.rrf([own, other], k=HYBRID_RRF_K, top_k=1000)
    assert result.scores["hybrid_ndcg_at_10"] == pytest.approx(r2med_plugin.evaluate_run(data.qrels, fused)["ndcg_at_10"])
    self_fused = r2med_plugin.evaluate_run(data.qrels, r2med_plugin.rrf([own, own], k=HYBRID_RRF_K, top_k=1000))
    assert self_fused["ndcg_at_10"] == pytest.approx(result.scores["ndcg_at_10"])  # what hybrid used to report


def test_hybrid_partner_is_printed_and_recorded(mirror_env: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    from r2med_plugin.cli import main

    assert main(["evaluate", "--task", "NanoR2MEDBiology", "--retriever", "bm25-hakari", "--hybrid", "--quiet",
                 "--output", str(tmp_path)]) == 0
    assert "hybrid = RRF(bm25-hakari, bm25-lucene)" in capsys.readouterr().out
    (path,) = (tmp_path / "results").rglob("NanoR2MEDBiology.json")
    assert json.loads(path.read_text())["r2med_hybrid_with"] == "bm25-lucene"
    encoder_run = evaluate_task("NanoR2MEDBiology", HashingEncoder(dim=16, name="hy"), hybrid=True, show_progress=False)
    assert encoder_run.hybrid_with == "bm25-hakari"
