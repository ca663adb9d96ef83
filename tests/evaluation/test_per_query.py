"""Every result comes with its per-query scores (<Task>.per_query.parquet beside <Task>.json)."""

from __future__ import annotations

import json
from pathlib import Path

import mteb
import polars as pl
import pytest
import pytrec_eval

import r2med_plugin
from r2med_plugin.evaluation.per_query import official_per_query
from r2med_plugin.evaluation.runner import evaluate_task
from r2med_plugin.evaluation.writers import write_outputs
from r2med_plugin.models.hashing import HashingEncoder
from r2med_plugin.reporting.official_files import BM25_K_VALUES
from r2med_plugin.reporting.per_query import (
    PER_QUERY_SUFFIX,
    per_query_frame,
    per_query_path,
    read_per_query,
    top_ranked,
    write_per_query,
)
from r2med_plugin.reporting.result_files import read_result_folders


def _means(frame: pl.DataFrame) -> dict[str, float]:
    return dict(frame.group_by("metric").agg(pl.col("value").mean()).iter_rows())


def test_bm25_sidecar_holds_pytrec_eval_values_and_the_official_layout(mirror_env: Path, tmp_path: Path):
    result = evaluate_task("R2MEDBiology", "bm25-lucene", show_progress=False)
    paths = write_outputs(result, tmp_path)
    assert paths["per_query"] == paths["mteb"].with_name("R2MEDBiology" + PER_QUERY_SUFFIX)
    sidecar = read_per_query(paths["per_query"])
    assert sidecar.frame.columns == ["task", "query_id", "metric", "value"]
    means = _means(sidecar.frame)
    # Every metric of the result file, and its mean is the reported score, to the last bit.
    assert {key: means[key] for key in result.scores} == pytest.approx(result.scores, abs=1e-15)
    # The official layout: pytrec_eval's own values on the official top-100 run, averaged and rounded as eval_BM25.py.
    assert {key.removeprefix("official_"): round(value, 5) for key, value in means.items() if key.startswith("official_")} == result.official
    # Per-query nDCG@10 is pytrec_eval's, query by query.
    data = result.data
    raw = pytrec_eval.RelevanceEvaluator(data.qrels, {"ndcg_cut.10"}).evaluate(result.run)
    ours = dict(sidecar.frame.filter(pl.col("metric") == "ndcg_at_10").select("query_id", "value").iter_rows())
    assert ours == {query_id: raw.get(query_id, {}).get("ndcg_cut_10", 0.0) for query_id in data.qrels}
    assert sidecar.info["model_name"] == "bm25-lucene" and sidecar.info["dataset_revision"] == data.result_revision


def test_official_per_query_is_pytrec_eval_unchanged():
    qrels = {"q1": {"a": 1, "b": 1}, "q2": {"c": 1}}
    run = {"q1": {"a": 0.2, "x": 0.9, "b": 0.1}, "q2": {"y": 1.0}, "q3": {"a": 1.0}}
    values = official_per_query(qrels, run, "bm25")
    assert set(values) == {"q1", "q2"}  # q3 has no qrels: pytrec_eval does not evaluate it
    raw = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut.1,10,25,50,100", "recip_rank"}).evaluate(run)
    assert values["q1"]["ndcg_at_10"] == raw["q1"]["ndcg_cut_10"] and values["q1"]["mrr"] == 1 / 2
    assert [f"ndcg_at_{k}" in values["q2"] for k in BM25_K_VALUES] == [True] * len(BM25_K_VALUES)
    assert "mrr" not in official_per_query(qrels, run, "dense")["q1"]
    with pytest.raises(ValueError, match="layout must be"):
        official_per_query(qrels, run, "splade")


def test_dense_and_candidates_only_sidecars(mirror_env: Path, tmp_path: Path):
    dense = evaluate_task("NanoR2MEDBiology", HashingEncoder(), show_progress=False)
    sidecar = read_per_query(write_outputs(dense, tmp_path)["per_query"])
    means = _means(sidecar.frame)
    assert {key: means[key] for key in dense.scores} == pytest.approx(dense.scores, abs=1e-15)
    assert {k.removeprefix("official_"): round(v, 5) for k, v in means.items() if k.startswith("official_")} == dense.official
    only = evaluate_task("NanoR2MEDBiology", HashingEncoder(), candidates=["hybrid", "bm25"], candidates_only=True, show_progress=False)
    paths = write_outputs(only, tmp_path)
    assert paths["per_query"].parent.parts[-3] == "candidates-only"
    assert _means(read_per_query(paths["per_query"]).frame) == pytest.approx(only.scores, abs=1e-15)


def test_top_ranked_lists_and_ranks_of_positives():
    qrels = {"q": {"a": 1, "b": 0, "z": 2}}
    run = {"q": {"a": 0.5, "b": 0.9, "c": 0.5, **{f"d{i}": 0.1 for i in range(10)}}}
    ranked = top_ranked(qrels, run)
    # pytrec_eval's order: score descending, then document id descending ("c" before "a" at 0.5)
    assert [row[0] for row in ranked["q"]["top"][:3]] == ["b", "c", "a"]
    assert ranked["q"]["top"][2] == ["a", 0.5, 1] and len(ranked["q"]["top"]) == 10
    assert ranked["q"]["positives"] == {"a": 3, "z": None} and ranked["q"]["depth"] == 13
    assert top_ranked({"q2": {"a": 1}}, run)["q2"] == {"top": [], "positives": {"a": None}, "depth": 0}


def test_sidecar_write_is_atomic_and_inputs_untouched(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    values = {"q1": {"ndcg_at_10": 0.5}, "q2": {"ndcg_at_10": 1.0}}
    frame = per_query_frame("T", values)
    target = write_per_query(tmp_path / "T.per_query.parquet", frame, info={"model_name": "m"})
    assert values == {"q1": {"ndcg_at_10": 0.5}, "q2": {"ndcg_at_10": 1.0}}
    before = target.read_bytes()

    import os

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(os, "replace", interrupted)
    with pytest.raises(KeyboardInterrupt):
        write_per_query(target, per_query_frame("T", {"q1": {"ndcg_at_10": 0.0}}))
    assert target.read_bytes() == before and [p.name for p in tmp_path.iterdir()] == ["T.per_query.parquet"]
    assert read_per_query(target).info == {"format": 1, "model_name": "m"}


def test_bad_sidecars_are_named(tmp_path: Path):
    with pytest.raises(ValueError, match="not a result file"):
        per_query_path(tmp_path / "T.parquet")
    broken = tmp_path / "T.per_query.parquet"
    broken.write_text("not parquet")
    with pytest.raises(ValueError, match=r"T\.per_query\.parquet: not a readable per-query parquet file"):
        read_per_query(broken)
    pl.DataFrame({"query_id": ["q"], "value": [1.0]}).write_parquet(broken)
    with pytest.raises(ValueError, match=r"lacks the columns \['task', 'metric'\]"):
        read_per_query(broken)
    with pytest.raises(ValueError, match="a per-query table needs the columns"):
        write_per_query(broken, pl.DataFrame({"query_id": ["q"]}))


def test_readers_of_result_folders_ignore_the_sidecar(mirror_env: Path, tmp_path: Path):
    result = evaluate_task("NanoR2MEDIIYiClinical", "bm25-robertson", show_progress=False)
    paths = write_outputs(result, tmp_path)
    assert paths["per_query"].is_file()
    assert [record.path for record in read_result_folders([tmp_path])] == [paths["mteb"]]
    loaded = mteb.ResultCache(tmp_path).load_results(tasks=["NanoR2MEDIIYiClinical"], models=["bm25-robertson"])
    assert [r.task_name for r in loaded.model_results[0].task_results] == ["NanoR2MEDIIYiClinical"]


@pytest.mark.slow
def test_mteb_run_writes_the_sidecar_in_the_result_folder(mirror_env: Path, tmp_path: Path):
    from tests.integrations.test_mteb_integration import _minilm

    r2med_plugin.register()
    model = _minilm()
    for name, main in (("NanoR2MEDBioinformatics", "ndcg_at_10"), ("NanoR2MEDBiologyReranking", "ndcg_at_10_with_safeguard")):
        result = mteb.evaluate(model, mteb.get_task(name), cache=mteb.ResultCache(tmp_path), show_progress_bar=False)
        scores = result.task_results[0].scores["test"][0]
        (result_path,) = tmp_path.rglob(f"{name}.json")
        sidecar = read_per_query(per_query_path(result_path))  # in mteb's own results/<model>/<revision>/ folder
        assert result_path.parent.parent.parent == tmp_path / "results"
        means = _means(sidecar.frame)
        assert means[main] == pytest.approx(scores[main], abs=5e-6)  # mteb rounds its own metrics to 5 decimals
        assert sidecar.info["writer"] == "mteb" and sidecar.info["main_score"] == main
        assert set(sidecar.ranked) == set(json.loads(json.dumps(sidecar.ranked)))
    loaded = mteb.ResultCache(tmp_path).load_results()
    assert len(loaded.model_results[0].task_results) == 2  # the parquet files are not results to mteb


def test_task_evaluated_directly_keeps_its_per_query_scores(mirror_env: Path):
    from tests.integrations.test_mteb_integration import _minilm

    r2med_plugin.register()
    task = mteb.get_task("R2MEDPMCClinical")
    scores = task.evaluate(_minilm(), "test", encode_kwargs={})["default"]
    assert round(_means(task.per_query_scores)["ndcg_at_10"], 5) == pytest.approx(scores["ndcg_at_10"], abs=1e-12)


def test_reranked_result_has_reranked_first_stage_and_official_values(mirror_env: Path, tmp_path: Path):
    from tests.retrieval.test_rerank import WordOverlap

    result = evaluate_task("R2MEDBiology", rerank=WordOverlap(), first_stage="bm25-lucene", rerank_depth=10, show_progress=False)
    paths = write_outputs(result, tmp_path)
    sidecar = read_per_query(paths["per_query"])
    assert paths["per_query"].parent == paths["mteb"].parent
    means = _means(sidecar.frame)
    assert {key: means[key] for key in result.scores} == pytest.approx(result.scores, abs=1e-15)  # reranked and first_stage_*
    assert any(key.startswith("first_stage_") for key in result.scores)
    official = {key.removeprefix("official_"): value for key, value in means.items() if key.startswith("official_")}
    assert official == pytest.approx(result.rerank.official_scores, abs=1e-15)
    assert sidecar.info["official_layout"] == "reranker" and sidecar.info["model_name"] == result.retriever


def test_sweep_jobs_write_and_record_the_sidecar(mirror_env: Path, tmp_path: Path):
    import yaml

    from r2med_plugin.sweep import load_spec, run_sweep

    spec_path = tmp_path / "sweep.yaml"
    spec_path.write_text(yaml.safe_dump({"output": "out", "tasks": ["R2MEDBiology"], "retrievers": ["bm25-robertson"]}))
    summary = run_sweep(load_spec(spec_path), show_progress=False)
    assert summary.count("done") == 1
    (record,) = (tmp_path / "out").rglob("*.per_query.parquet")
    assert read_per_query(record).info["task"] == "R2MEDBiology"
    record.unlink()  # a job whose sidecar is gone is not done
    assert run_sweep(load_spec(spec_path), show_progress=False).count("done") == 1 and record.is_file()
