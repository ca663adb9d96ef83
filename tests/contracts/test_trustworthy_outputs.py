"""Issue 12: no path may print or save a wrong number (candidate-only files, revisions, hybrid BM25, TREC)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import r2med_plugin
from r2med_plugin.catalog import list_tasks
from r2med_plugin.evaluation.extras import HYBRID_RRF_K
from r2med_plugin.evaluation.runner import evaluate_task
from r2med_plugin.evaluation.writers import write_outputs
from r2med_plugin.reporting.leaderboard import build_leaderboard, render
from r2med_plugin.reporting.submission import export_trec_runs
from r2med_plugin.retrieval.bm25 import bm25_search
from r2med_plugin.models.hashing import HashingEncoder
from tests.support.builders import official_row, write_result

NANO = [spec.name for spec in list_tasks("nano")]
R2MED = list_tasks("r2med")


# --- item 3: a candidate-only run never lands where a full-corpus result is read ----------------------


def test_candidates_only_never_overwrites_the_full_corpus_result(mirror_env: Path, tmp_path: Path):
    encoder = HashingEncoder(dim=32, name="cand-probe")
    full = evaluate_task("NanoR2MEDBiology", encoder, candidates=["hybrid"], show_progress=False)
    full_paths = write_outputs(full, tmp_path, trec=True)
    before = full_paths["mteb"].read_bytes(), full_paths["trec"].read_bytes()
    only = evaluate_task("NanoR2MEDBiology", encoder, candidates=["hybrid"], candidates_only=True, show_progress=False)
    only_paths = write_outputs(only, tmp_path, trec=True)
    assert (full_paths["mteb"].read_bytes(), full_paths["trec"].read_bytes()) == before
    assert only_paths["mteb"] != full_paths["mteb"] and only_paths["trec"] != full_paths["trec"]
    assert "results" not in only_paths["mteb"].relative_to(tmp_path).parts  # ResultCache reads <dir>/results/ only
    payload = json.loads(only_paths["mteb"].read_text())
    assert payload["r2med_evaluation"] == "candidates-only"
    # Every ResultCache reader sees only the full-corpus result.
    full_files = sorted(p.relative_to(tmp_path) for p in (tmp_path / "results").rglob("NanoR2MEDBiology.json"))
    assert full_files == [full_paths["mteb"].relative_to(tmp_path)]


def test_leaderboard_reads_candidate_only_results_as_candidate_columns_only(mirror_env: Path, tmp_path: Path):
    encoder = HashingEncoder(dim=32, name="cand-board")
    for task in NANO:
        write_outputs(evaluate_task(task, encoder, candidates=["bm25"], show_progress=False), tmp_path)
    for task in NANO:  # newer, candidate-only, hybrid list
        write_outputs(evaluate_task(task, encoder, candidates=["hybrid"], candidates_only=True, show_progress=False), tmp_path)
    (row,) = build_leaderboard([tmp_path], benchmark="nano")
    full = {spec.hub_name: 100 * evaluate_task(spec.name, encoder, show_progress=False).scores["ndcg_at_10"] for spec in list_tasks("nano")}
    assert row.scores == pytest.approx(full)
    assert set(row.extras) == {"candidates_bm25_ndcg_at_10", "candidates_hybrid_ndcg_at_10_with_safeguard"}
    only = [evaluate_task(t, encoder, candidates=["hybrid"], candidates_only=True, show_progress=False) for t in NANO]
    expected = 100 * sum(r.scores["candidates_hybrid_ndcg_at_10_with_safeguard"] for r in only) / len(only)
    assert row.extras["candidates_hybrid_ndcg_at_10_with_safeguard"] == pytest.approx(expected)


def test_candidate_only_results_alone_make_an_unranked_row(mirror_env: Path, tmp_path: Path):
    encoder = HashingEncoder(dim=32, name="cand-alone")
    for task in NANO:
        write_outputs(evaluate_task(task, encoder, candidates=["hybrid"], candidates_only=True, show_progress=False), tmp_path)
    (row,) = build_leaderboard([tmp_path], benchmark="nano")
    assert row.scores == {} and not row.ranked and "candidates_hybrid_ndcg_at_10_with_safeguard" in row.extras


# --- item 4: dataset revisions are never merged into one row; synthetic results never ranked with real ones -------


def test_synthetic_results_are_never_ranked_next_to_real_ones(tmp_path: Path):
    demo, real = tmp_path / "demo", tmp_path / "real"
    for task in NANO:
        write_result(demo, "bm25-lucene", task, official_row(0.9), "synthetic-sample")
    write_result(real, "bm25-lucene", NANO[0], official_row(0.2), "abc123", date=2.0)  # newer and real, one task only
    for task in NANO:
        write_result(real, "org/real-model", task, official_row(0.3), "abc123")
    rows = build_leaderboard([demo, real], benchmark="nano")
    by_label = {(row.retriever, row.note): row for row in rows}
    real_bm25 = by_label[("bm25-lucene", "")]
    assert real_bm25.scores == {"Biology": pytest.approx(20.0)} and not real_bm25.ranked
    synthetic = next(row for row in rows if row.retriever == "bm25-lucene" and "synthetic" in row.note)
    assert synthetic.scores == pytest.approx({spec.hub_name: 90.0 for spec in list_tasks("nano")})
    assert not synthetic.ranked  # 90 > 30, yet never placed above a real row
    assert [row.retriever for row in rows if row.ranked] == ["org/real-model"]
    text = render(rows, "md")
    assert "synthetic" in text and "| 1 | - | org/real-model | 30.00 |" in text
    # Synthetic results alone (the demo) are ranked among themselves, still labelled.
    (alone,) = build_leaderboard([demo], benchmark="nano")
    assert alone.ranked and alone.average == pytest.approx(90.0) and alone.note == "synthetic sample"
    assert "| 1 | - | bm25-lucene (synthetic sample) | 90.00 |" in render([alone], "md")


def test_dataset_revisions_are_kept_apart(tmp_path: Path):
    for task in NANO:
        write_result(tmp_path, "org/m", task, official_row(0.1), "rev-old", date=1.0)
    write_result(tmp_path, "org/m", NANO[0], official_row(0.5), "rev-new", date=2.0, model_revision="r2")  # newer, another dataset revision
    rows = build_leaderboard([tmp_path], benchmark="nano")
    assert len(rows) == 2
    old = next(row for row in rows if "rev-old" in row.note)
    new = next(row for row in rows if "rev-new" in row.note)
    assert old.ranked and old.average == pytest.approx(10.0)  # not 15: the rev-new Biology never enters it
    assert new.scores == {"Biology": pytest.approx(50.0)} and not new.ranked


def test_r2med_rows_split_by_off_pin_revision(tmp_path: Path):
    for spec in R2MED:
        write_result(tmp_path, "org/m", spec.name, official_row(0.2), spec.revision)
    write_result(tmp_path, "org/m", R2MED[0].name, official_row(0.6), "drifted-commit", date=5.0, model_revision="r2")
    rows = build_leaderboard([tmp_path])
    pinned = next(row for row in rows if row.ranked)
    assert pinned.average == pytest.approx(20.0) and pinned.note == ""
    drifted = next(row for row in rows if not row.ranked)
    assert "drifted-commit" in drifted.note and drifted.scores == {"Biology": pytest.approx(60.0)}


# --- item 5: --hybrid with a BM25 retriever fuses with the other BM25 variant ----------------------------------


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


# --- item 8: one TREC depth and one tag convention ---------------------------------------------------------------


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


def test_cli_depth_flag_reaches_both_writers(mirror_env: Path, tmp_path: Path):
    from r2med_plugin.cli import main

    assert main(["evaluate", "--task", "NanoR2MEDBiology", "--retriever", "bm25-robertson", "--output", str(tmp_path), "--trec",
                 "--depth", "3", "--quiet"]) == 0
    (trec,) = (tmp_path / "runs").rglob("*.trec")
    per_query: dict[str, int] = {}
    for line in trec.read_text().splitlines():
        per_query[line.split()[0]] = per_query.get(line.split()[0], 0) + 1
    assert set(per_query.values()) == {3}


# --- README's result paths are the paths written ----------------------------------------------------------------


def test_readme_result_paths_match_what_is_written(mirror_env: Path, tmp_path: Path):
    root = Path(__file__).resolve().parents[2]
    # the result paths moved from README.md to the docs site's file-format reference (issue 32): both are read
    readme = "\n".join((root / name).read_text(encoding="utf-8") for name in ("README.md", "docs/reference/file-formats.md"))
    result = evaluate_task("NanoR2MEDBiology", "bm25-robertson", candidates=["hybrid"], show_progress=False)
    written = write_outputs(result, tmp_path / "DIR", trec=True)
    only = evaluate_task("NanoR2MEDBiology", "bm25-robertson", candidates=["hybrid"], candidates_only=True, show_progress=False)
    written_only = write_outputs(only, tmp_path / "DIR", trec=True)
    documented = {
        "mteb": "DIR/results/<model>/<revision>/<Task>.json",
        "official": "DIR/official/<model>/<revision>/<Task>.json",
        "trec": "DIR/runs/<model>/<revision>/<Task>.trec",
    }
    for kind, pattern in documented.items():
        assert f"`{pattern}`" in readme
        actual = written[kind].relative_to(tmp_path).as_posix()
        assert actual == pattern.replace("<model>", "bm25-robertson").replace("<revision>", result.model_revision).replace(
            "<Task>", "NanoR2MEDBiology")
    assert "`DIR/candidates-only/<model>/<revision>/<Task>.json`" in readme
    assert written_only["mteb"].relative_to(tmp_path).as_posix() == f"DIR/candidates-only/bm25-robertson/{only.model_revision}/NanoR2MEDBiology.json"
    assert "`runs/<model>/<revision>/<Task>.candidates-only.trec`" in readme
    assert written_only["trec"].name == "NanoR2MEDBiology.candidates-only.trec"
    assert "`results/<model>/<revision>/<Task>.json`, readable" not in readme  # the old, wrong claim


def test_model_revisions_are_merged_only_when_one_supersedes_the_other(tmp_path: Path):
    for spec in R2MED:
        write_result(tmp_path, "org/m", spec.name, official_row(0.1), spec.revision, date=1.0, model_revision="weights-a")
    for spec in R2MED[:4]:  # re-run with new weights on half the tasks
        write_result(tmp_path, "org/m", spec.name, official_row(0.5), spec.revision, date=2.0, model_revision="weights-b")
    rows = build_leaderboard([tmp_path])
    assert sorted(row.note for row in rows) == ["model revision weights-a", "model revision weights-b"]
    a = next(row for row in rows if row.note.endswith("weights-a"))
    assert a.ranked and a.average == pytest.approx(10.0)  # not (4*50 + 4*10)/8 = 30: no row mixes the two weights
    b = next(row for row in rows if row.note.endswith("weights-b"))
    assert not b.ranked and list(b.scores.values()) == pytest.approx([50.0] * 4)
    for spec in R2MED[4:]:  # the new weights now cover every task: they supersede the old row
        write_result(tmp_path, "org/m", spec.name, official_row(0.5), spec.revision, date=3.0, model_revision="weights-b")
    (row,) = build_leaderboard([tmp_path])
    assert row.average == pytest.approx(50.0)
    assert row.note.startswith("model revision weights-b (newest; also found: weights-a")  # never silently


def test_submission_takes_one_revision_set_and_no_synthetic_results(tmp_path: Path):
    from r2med_plugin.reporting.submission import export_submission

    mixed = tmp_path / "mixed"
    for spec in R2MED:
        write_result(mixed, "org/m", spec.name, official_row(0.1), spec.revision, date=1.0, model_revision="weights-a")
    write_result(mixed, "org/m", R2MED[0].name, official_row(0.5), spec.revision, date=2.0, model_revision="weights-b")
    with pytest.raises(ValueError, match="come from 2 different revision sets.*weights-a: 8 tasks.*weights-b: 1 tasks"):
        export_submission([mixed], "org/m", tmp_path / "out-mixed")
    synthetic = tmp_path / "synthetic"
    for spec in R2MED:
        write_result(synthetic, "org/m", spec.name, official_row(0.1), "synthetic-sample")
    with pytest.raises(ValueError, match="synthetic demo sample"):
        export_submission([synthetic], "org/m", tmp_path / "out-synthetic")
    clean = tmp_path / "clean"
    for spec in R2MED:
        write_result(clean, "org/m", spec.name, official_row(0.1), spec.revision)
    export_submission([clean], "org/m", tmp_path / "out")
    card = json.loads((tmp_path / "out" / "model_card.json").read_text())
    assert card["dataset_revisions"] == {spec.name: spec.revision for spec in R2MED}
    assert "Unverified" not in (tmp_path / "out" / "README.md").read_text()


def test_submission_warns_about_missing_tasks_and_unverified_files(tmp_path: Path, caplog: pytest.LogCaptureFixture):
    from r2med_plugin.reporting.submission import export_submission

    for spec in R2MED[:3]:
        write_result(tmp_path / "r", "org/m", spec.name, official_row(0.1), f"{spec.revision}+unverified-files-abc")
    with caplog.at_level("WARNING"):
        export_submission([tmp_path / "r"], "org/m", tmp_path / "out", allow_incomplete=True)  # refused without (issue 20)
    messages = " ".join(record.getMessage() for record in caplog.records)
    assert f"no results for {', '.join(spec.hub_name for spec in R2MED[3:])}" in messages and "all 8 tasks" in messages
    assert f"{', '.join(sorted(spec.name for spec in R2MED[:3]))} ran on mirror files that do not prove" in messages
    readme = (tmp_path / "out" / "README.md").read_text()
    assert "**Incomplete:**" in readme and "**Unverified data:**" in readme


def test_top_k_never_reports_metrics_deeper_than_the_run(mirror_env: Path, tmp_path: Path):
    shallow = evaluate_task("NanoR2MEDBiology", "bm25-robertson", top_k=10, show_progress=False)
    deep = evaluate_task("NanoR2MEDBiology", "bm25-robertson", show_progress=False)
    assert shallow.scores["ndcg_at_10"] == deep.scores["ndcg_at_10"]
    assert "recall_at_100" not in shallow.scores and "ndcg_at_1000" not in shallow.scores  # would be recall_at_10 in disguise
    assert "recall_at_100" in deep.scores and "mrr" in shallow.scores
    paths = write_outputs(shallow, tmp_path)
    assert "recall_at_1000" not in json.loads(paths["mteb"].read_text())["scores"]["test"][0]
    # The official file needs each query's top 100: BM25 ranks again that deep, so it equals the deep run's.
    assert shallow.official == deep.official and "recall_at_100" in shallow.official


def test_mteb_reranking_results_fill_the_candidate_hybrid_column_only(tmp_path: Path):
    for i, spec in enumerate(list_tasks("nano")):
        folder = tmp_path / "results" / "org__ce" / "r1"
        folder.mkdir(parents=True, exist_ok=True)
        scores = {"ndcg_at_10_with_safeguard": 0.4 + i / 100, "ndcg_at_10_without_safeguard": 0.3, "main_score": 0.4 + i / 100,
                  "hf_subset": "default", "languages": ["eng-Latn"]}
        (folder / f"{spec.name}Reranking.json").write_text(json.dumps(
            {"dataset_revision": "rev", "task_name": f"{spec.name}Reranking", "date": 1.0, "scores": {"test": [scores]}}))
    (row,) = build_leaderboard([tmp_path], benchmark="nano")
    assert row.scores == {} and not row.ranked  # a reranking score is never a full-corpus task score
    assert row.extras == {"candidates_hybrid_ndcg_at_10_with_safeguard": pytest.approx(100 * sum(0.4 + i / 100 for i in range(8)) / 8)}


def test_a_candidates_only_bm25_run_keeps_only_the_candidates(mirror_env: Path, tmp_path: Path):
    result = evaluate_task("NanoR2MEDBiology", "bm25-robertson", candidates=["bm25"], candidates_only=True, show_progress=False)
    lists = result.data.candidates["bm25"]
    assert result.run and all(set(ranked) <= set(lists[query_id]) for query_id, ranked in result.run.items())
    trec = write_outputs(result, tmp_path, trec=True)["trec"]
    written = {(line.split()[0], line.split()[2]) for line in trec.read_text().splitlines()}
    assert written == {(query_id, doc_id) for query_id, ranked in result.run.items() for doc_id in ranked}


def test_a_newer_revision_with_only_candidate_results_never_hides_an_older_full_row(tmp_path: Path):
    for task in NANO:
        write_result(tmp_path, "org/m", task, official_row(0.4), "abc123", date=1.0, model_revision="weights-a")
    for task in NANO:  # a newer revision, candidate-only results only
        folder = tmp_path / "candidates-only" / "org__m" / "weights-b"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "model_meta.json").write_text(json.dumps({"name": "org/m", "revision": "weights-b"}))
        scores = {"candidates_hybrid_ndcg_at_10_with_safeguard": 0.7, "main_score": 0.7, "hf_subset": "default", "languages": ["eng-Latn"]}
        (folder / f"{task}.json").write_text(json.dumps({"dataset_revision": "abc123", "task_name": task, "date": 2.0,
                                                         "evaluation_time": 1.0, "r2med_evaluation": "candidates-only",
                                                         "scores": {"test": [scores]}}))
    rows = build_leaderboard([tmp_path], benchmark="nano")
    full = [row for row in rows if row.scores]
    assert len(full) == 1 and full[0].scores == pytest.approx({spec.hub_name: 40.0 for spec in list_tasks("nano")})


def test_submission_refuses_results_of_drifted_data(mirror_env: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    """The fixture mirror's counts differ from the dataset card (R2MED_ACCEPT_DRIFT lets it be evaluated): its
    results record how, and a submission refuses them, naming the task, the counts and the file."""
    from r2med_plugin.cli import main
    from r2med_plugin.reporting.submission import export_submission

    paths = write_outputs(evaluate_task("R2MEDBiology", "bm25-robertson", show_progress=False), tmp_path / "out")
    drift = json.loads(paths["mteb"].read_text())["r2med_provenance"]["dataset_count_drift"]
    assert drift["queries"]["expected"] == 103 and drift["queries"]["found"] < 103
    assert json.loads(paths["official_metadata"].read_text())["dataset_count_drift"] == drift
    with pytest.raises(ValueError, match=r"R2MEDBiology \[documents 27 of 57359, qrels 9 of 374, queries 6 of 103\] in .*R2MEDBiology\.json\. .*download it again"):
        export_submission([tmp_path / "out"], "bm25-robertson", tmp_path / "submission")
    assert not (tmp_path / "submission").exists()
    assert main(["export", "--submission", str(tmp_path / "out"), "--model", "bm25-robertson", "--out", str(tmp_path / "s")]) == 2
    assert "counts differ from the dataset card" in capsys.readouterr().err


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
