"""Result and TREC files as written (r2med_plugin.reporting.export): replaced results, dropped score groups, TREC order,
depth and tag."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from r2med_plugin.cli import main
from r2med_plugin.evaluation.runner import evaluate_task
from r2med_plugin.evaluation.writers import write_outputs
from r2med_plugin.reporting.export import write_trec_run
from r2med_plugin.reporting.submission import export_trec_runs

NANO_TASK = "NanoR2MEDBioinformatics"


def test_another_top_k_into_one_output_warns_and_leaves_no_stale_official_file(mirror_env: Path, tmp_path: Path, caplog):
    from r2med_plugin.evaluation.runner import evaluate_task
    from r2med_plugin.evaluation.writers import write_outputs
    from r2med_plugin.models.hashing import HashingEncoder

    encoder = HashingEncoder(dim=32, name="topk-probe")
    deep = write_outputs(evaluate_task("NanoR2MEDBiology", encoder, show_progress=False), tmp_path)
    assert deep["official"].is_file()
    with caplog.at_level("WARNING"):
        shallow = write_outputs(evaluate_task("NanoR2MEDBiology", encoder, top_k=20, show_progress=False), tmp_path)
    messages = " ".join(record.getMessage() for record in caplog.records)
    assert re.search(r"replaces a result computed on each query's top 200 \(this one: top 20\)", messages)  # 200: the corpus
    assert "official" not in shallow and not deep["official"].exists() and not deep["official_metadata"].exists()


def _scores_of(out: Path, model: str) -> dict:
    (path,) = (out / "results" / model).glob(f"*/{NANO_TASK}.json")
    return json.loads(path.read_text())["scores"]["test"][0]


def test_a_rerun_with_fewer_options_names_the_score_groups_it_drops(mirror_env: Path, tmp_path: Path,
                                                                    caplog: pytest.LogCaptureFixture):
    """Re-running into one --output without --hybrid and --candidates replaced the result (98 keys to 58) and the
    leaderboard's Hybrid and Cand. columns vanished, without a word; it warns now, naming each group and its flag."""
    out = tmp_path / "out"
    full = ["evaluate", "--task", NANO_TASK, "--retriever", "bm25-robertson", "--output", str(out), "--quiet"]
    assert main([*full, "--hybrid", "--candidates", "bm25", "dense", "hybrid"]) == 0
    wide = _scores_of(out, "bm25-robertson")
    with caplog.at_level("WARNING"):
        assert main([*full, "--hybrid", "--candidates", "bm25", "dense", "hybrid"]) == 0  # the same options: no word
    assert not [record for record in caplog.records if "drops" in record.getMessage()]
    with caplog.at_level("WARNING"):
        assert main(full) == 0
    narrow = _scores_of(out, "bm25-robertson")
    dropped = set(wide) - set(narrow)
    groups = {key.split("_ndcg_at_10")[0] for key in dropped if "_ndcg_at_10" in key}
    assert groups == {"hybrid", "candidates_bm25", "candidates_dense", "candidates_hybrid"} and not set(narrow) - set(wide)
    (message,) = [record.getMessage() for record in caplog.records if "drops" in record.getMessage()]
    count = {group: sum(key.startswith(f"{group}_") for key in dropped) for group in ("hybrid", "candidates_bm25")}
    assert f"hybrid_* ({count['hybrid']} scores; --hybrid)" in message
    assert f"candidates_bm25_* ({count['candidates_bm25']} scores; --candidates bm25)" in message
    assert "candidates_dense_*" in message and "candidates_hybrid_*" in message and "--output" in message


def _pytrec_eval_of_file(path: Path, qrels: dict) -> dict[str, float]:
    """nDCG@10 and MRR of a TREC file as trec_eval reads it: each line's score, ties by document id descending."""
    import pytrec_eval

    run: dict[str, dict[str, float]] = {}
    for line in path.read_text().splitlines():
        query_id, _, doc_id, _, score, _ = line.split()
        run.setdefault(query_id, {})[doc_id] = float(score)
    evaluated = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut.10", "recip_rank"}).evaluate(run)
    return {"ndcg_at_10": sum(q["ndcg_cut_10"] for q in evaluated.values()) / len(qrels),
            "mrr": sum(q["recip_rank"] for q in evaluated.values()) / len(qrels)}


def test_a_trec_file_keeps_the_order_of_scores_1e_7_apart(tmp_path: Path):
    """Scores written at 6 decimals made ties of logits less than 1e-6 apart, and pytrec_eval on the file broke them by
    document id (0.198103 on the file against 0.19738 printed, found by a third trial). Every TREC writer keeps every
    order: pytrec_eval on the written file gives the score of the run it holds."""
    from r2med_plugin.metrics import evaluate_run
    from r2med_plugin.reporting.export import write_trec_run
    from r2med_plugin.reporting.submission import export_trec_runs

    # per query, 12 documents 1e-7 apart, the positive ranked below documents of larger ids (a tie puts it above them)
    run = {f"q{q}": {f"d{d:02d}": 3.2 + (12 - d) * 1e-7 for d in range(12)} for q in range(3)}
    run["q3"] = {"d00": float(np.float32(0.1)), "d01": float(np.float32(0.1) - np.float32(1e-8))}  # float32 logits
    qrels = {"q0": {"d05": 1}, "q1": {"d03": 1, "d09": 1}, "q2": {"d11": 1}, "q3": {"d00": 1}}
    printed = evaluate_run(qrels, run)
    for path in (write_trec_run(tmp_path / "run.trec", run, "m"), *_exported(tmp_path, run, export_trec_runs)):
        assert _pytrec_eval_of_file(path, qrels) == {"ndcg_at_10": printed["ndcg_at_10"], "mrr": printed["mrr"]}
    six = {query: {doc: round(score, 6) for doc, score in ranked.items()} for query, ranked in run.items()}
    assert evaluate_run(qrels, six)["mrr"] < printed["mrr"]  # what 6 decimals did to this run


def _exported(tmp_path: Path, run: dict, export_trec_runs) -> list[Path]:
    predictions = tmp_path / "pred"
    predictions.mkdir()
    (predictions / "R2MEDBiology_predictions.json").write_text(json.dumps(
        {"mteb_model_meta": {"model_name": "org/m"}, "default": {"test": run}}))
    return export_trec_runs([predictions], tmp_path / "trec")


def test_trec_depth_and_tag_are_the_same_for_evaluate_and_export(mirror_env: Path, tmp_path: Path):
    result = evaluate_task("R2MEDBiology", "bm25-lucene", expansion="hyde/o3-mini", show_progress=False)
    trec = write_outputs(result, tmp_path, trec=True)["trec"]
    tags = {line.split()[5] for line in trec.read_text().splitlines()}
    assert tags == {"hyde__o3-mini+bm25-lucene"}
    deep = {f"d{i}": float(i) for i in range(1500)}
    predictions = tmp_path / "pred"
    predictions.mkdir()
    (predictions / "R2MEDBiology_predictions.json").write_text(json.dumps(
        {"mteb_model_meta": {"model_name": "org/m"}, "default": {"test": {"q1": deep}}}))
    (path,) = export_trec_runs([predictions], tmp_path / "trec")
    lines = path.read_text().splitlines()
    assert len(lines) == 1000 and lines[0].split() == ["q1", "Q0", "d1499", "1", "1499.0", "org__m"]
    (shallow,) = export_trec_runs([predictions], tmp_path / "trec10", depth=10)
    assert len(shallow.read_text().splitlines()) == 10
    (predictions / "other").mkdir()
    (predictions / "other" / "R2MEDBiology_predictions.json").write_text(json.dumps(
        {"mteb_model_meta": {"name": "org/other"}, "default": {"test": {"q1": {"d1": 1.0}}}}))
    (predictions / "newer").mkdir()
    (predictions / "newer" / "R2MEDBiology_predictions.json").write_text(json.dumps(
        {"mteb_model_meta": {"model_name": "org/m", "revision": "c0ffee"}, "default": {"test": {"q1": {"d2": 1.0}}}}))
    # two models, and two revisions of one model, one task: three files, none overwritten
    two = export_trec_runs([predictions], tmp_path / "two")
    assert sorted(p.relative_to(tmp_path / "two").as_posix() for p in two) == [
        "org__m/c0ffee/R2MEDBiology.trec", "org__m/no_revision_available/R2MEDBiology.trec",
        "org__other/no_revision_available/R2MEDBiology.trec"]
    with pytest.raises(ValueError, match="a second R2MEDBiology run of 'org/m' at revision 'no_revision_available'"):
        export_trec_runs([predictions, predictions], tmp_path / "twice")
    nameless = tmp_path / "nameless" / "my-model"
    nameless.mkdir(parents=True)
    (nameless / "R2MEDBiology_predictions.json").write_text(json.dumps({"default": {"test": {"q1": {"d1": 1.0}}}}))
    with pytest.raises(ValueError, match="names no model"):
        export_trec_runs([nameless], tmp_path / "x")


def test_a_result_on_other_data_replacing_one_says_so(tmp_path: Path, caplog: pytest.LogCaptureFixture):
    from r2med_plugin.catalog import get_task_spec
    from r2med_plugin.reporting.export import write_mteb_result

    spec = get_task_spec("NanoR2MEDBiology")

    def write(revision: str) -> Path:
        return write_mteb_result(tmp_path, spec=spec, task_name=spec.name, model_name="bm25-lucene", model_revision="v",
                                 dataset_revision=revision, scores={"ndcg_at_10": 0.5}, main_score="ndcg_at_10", evaluation_time=1.0)

    with caplog.at_level("WARNING"):
        first, same = write("synthetic-sample"), write("synthetic-sample")
        assert not caplog.records  # the same data again: a plain re-run
        other = write("local-abc+count-drift")
    assert first == same == other
    (record,) = caplog.records
    assert "replaces a result computed on dataset revision synthetic-sample (this one: local-abc+count-drift)" in record.getMessage()
    assert json.loads(other.read_text())["dataset_revision"] == "local-abc+count-drift"


def test_interrupted_trec_write_leaves_no_partial_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    target = tmp_path / "runs" / "m" / "T.trec"
    write_trec_run(target, {"q1": {"d1": 1.0}}, "m")
    before = target.read_bytes()

    def interrupted_replace(self, other):
        raise KeyboardInterrupt

    monkeypatch.setattr(Path, "replace", interrupted_replace)
    with pytest.raises(KeyboardInterrupt):
        write_trec_run(target, {"q1": {f"d{i}": float(i) for i in range(50)}}, "m")
    assert target.read_bytes() == before and sorted(p.name for p in target.parent.iterdir()) == ["T.trec"]
