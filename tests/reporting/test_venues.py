"""`r2med export --venue mteb|hakari` (r2med_plugin.reporting.venues): round trips through each venue's reader
(mteb's own ResultCache; for HAKARI-Bench a stand-in that reads its documented layout as its read_result_json
does: an lzma JSON object at hakari-results/<model>/<dataset>/<Task>.json.xz), refusals and folder names."""

from __future__ import annotations

import json
import lzma
from pathlib import Path

import pytest

from r2med_plugin.cli import main
from r2med_plugin.errors import InputFileError, UserError
from r2med_plugin.evaluation.hakari_metrics import hakari_metrics, rankings_from_run
from r2med_plugin.evaluation.runner import evaluate_task
from r2med_plugin.evaluation.writers import write_outputs
from r2med_plugin.models.hashing import HashingEncoder
from r2med_plugin.reporting.hakari_files import hakari_record_path, read_xz_json
from r2med_plugin.reporting.result_files import ResultRecord
from r2med_plugin.reporting.venues import (
    evaluate_command,
    export_hakari,
    export_mteb,
    hakari_dataset_revision,
    hakari_path_part,
    mteb_path_part,
)
from r2med_plugin.rules import SettingError
from tests.support.builders import write_result

NANO = "NanoR2MEDIIYiClinical"


def as_on_exact_counts(paths: dict) -> dict:
    """A result of the fixture mirror as an exact-size mirror writes it: the fixture's counts are tiny, so its results
    record count drift, which every venue refuses; an exact-size mirror's record none. Its files still prove no commit."""
    payload = json.loads(paths["mteb"].read_text())
    payload["r2med_provenance"]["dataset_count_drift"] = {}
    for holder in (payload, payload["r2med_provenance"]):
        holder["dataset_revision"] = holder["dataset_revision"].removesuffix("+count-drift")
    paths["mteb"].write_text(json.dumps(payload, indent=2))
    return paths


def evaluated(result, folder: Path) -> tuple:
    return result, as_on_exact_counts(write_outputs(result, folder))


@pytest.fixture()
def results(mirror_env: Path, tmp_path: Path) -> dict:
    """One NanoR2MED BM25 result, one encoder result with the hybrid list re-ranked, one R2MED BM25 result (on mirror
    files that prove no commit, with the counts of the dataset card)."""
    folder = tmp_path / "results"
    bm25 = evaluate_task(NANO, "bm25-robertson", show_progress=False)
    encoder = evaluate_task(NANO, HashingEncoder(dim=64, name="org/hash-64"), candidates=["hybrid"], show_progress=False)
    r2med = evaluate_task("R2MEDBiology", "bm25-robertson", show_progress=False)
    return {"folder": folder, "bm25": evaluated(bm25, folder), "encoder": evaluated(encoder, folder),
            "r2med": evaluated(r2med, folder)}


@pytest.mark.parametrize(("name", "part"), [
    ("org/model", "org__model"), ("..", "value"), ("../../etc", "etc"), ("/abs/path", "abs__path"),
    ("a/../b", "a__..__b"), ("C:\\x\\y", "C___x__y"), (" spaced name ", "spaced_name"), ("", "value"), ("._x_.", "x"),
])
def test_hakari_folder_names_are_made_as_safe_path_part_makes_them(name, part):
    assert hakari_path_part(name) == part
    assert "/" not in part and part not in {".", ".."}


@pytest.mark.parametrize(("name", "part"), [("org/model", "org__model"), ("a b/c", "a_b__c"), ("/abs", "__abs"),
                                            ("a/../b", "a__..__b")])
def test_mteb_folder_names_are_made_as_mteb_makes_them(name, part):
    assert mteb_path_part(name) == part


@pytest.mark.parametrize("name", ["..", ".", ""])
def test_an_mteb_folder_name_that_would_leave_the_folder_is_refused(name):
    with pytest.raises(SettingError) as refused:
        mteb_path_part(name)
    assert refused.value.field == "model" and "cannot hold inside --out" in refused.value.render("flag")
    assert "out_dir (--out)" in str(refused.value)  # the Python API names export_mteb's parameter


@pytest.mark.parametrize(("name", "character"), [
    ("<script>alert(1)</script>", "<"), ("a\\..\\b", "\\"), ("bm25-hakari:regex", ":"), ('say"hi"', '"'),
    ("a|b", "|"), ("what?", "?"), ("star*", "*"), ("tab\tname", "\t"), ("bell\x07", "\x07"), ("del\x7f", "\x7f"),
])
def test_an_mteb_folder_name_with_a_character_some_file_system_cannot_hold_is_refused_naming_it(name, character):
    with pytest.raises(UserError) as raised:
        mteb_path_part(name)
    assert repr(character) in str(raised.value) and repr(name) in str(raised.value) and "--model-name" in str(raised.value)
    with pytest.raises(UserError, match="model revision"):
        mteb_path_part(name, "model revision")


def test_a_hakari_folder_name_never_holds_a_character_some_file_system_cannot_hold():
    for name in ("<script>alert(1)</script>", "a\\b", "x:y", 'q"', "a|b?c*", "tab\tname\x7f"):
        assert set(hakari_path_part(name)) <= set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-")


def test_mteb_export_round_trips_through_mtebs_result_cache(results: dict, tmp_path: Path):
    import mteb

    out = tmp_path / "mteb-out"
    with pytest.raises(InputFileError) as refused:
        export_mteb([results["folder"]], "org/hash-64", out)
    assert str(results["encoder"][1]["mteb"]) in str(refused.value) and refused.value.field == "allow_incomplete"
    assert "or pass --allow-incomplete to write it" in refused.value.render("flag")
    assert not out.exists()
    written = export_mteb([results["folder"]], "org/hash-64", out, allow_incomplete=True)
    result, paths = results["encoder"]
    folder = out / "results" / "org__hash-64" / result.model_revision
    assert sorted(path.relative_to(folder).as_posix() for path in written) == [f"{NANO}.json", "model_meta.json", "run_settings.jsonl"]
    assert json.loads((folder / "model_meta.json").read_text())["name"] == "org/hash-64"
    assert [json.loads(line)["task"] for line in (folder / "run_settings.jsonl").read_text().splitlines()] == [NANO]
    loaded = mteb.ResultCache(out).load_results(models=["org/hash-64"], tasks=[NANO])
    task_result = loaded.model_results[0].task_results[0]
    loaded_scores = task_result.scores["test"][0]
    assert {key: loaded_scores[key] for key in result.scores} == result.scores  # every score, equal
    assert (folder / f"{NANO}.json").read_bytes() == paths["mteb"].read_bytes()  # mteb's keys and values, unchanged
    assert json.loads((folder / f"{NANO}.json").read_text())["r2med_provenance"]["dataset_revision_verified"] is False


def test_mteb_export_refuses_what_mteb_cannot_hold(results: dict, tmp_path: Path):
    with pytest.raises(ValueError, match="no results for model 'nobody'"):
        export_mteb([results["folder"]], "nobody", tmp_path / "x", allow_incomplete=True)
    only = results["folder"] / "candidates-only"
    evaluate_copy = evaluate_task(NANO, "bm25-robertson", candidates=["bm25"], candidates_only=True, show_progress=False)
    write_outputs(evaluate_copy, only.parent)
    with pytest.raises(SettingError) as refused:
        export_mteb([only], "bm25-robertson", tmp_path / "y", allow_incomplete=True)
    assert refused.value.field == "candidates_only" and "ranks stored lists" in str(refused.value)
    assert "a --candidates-only result" in refused.value.render("flag")


def test_mteb_export_keeps_another_tasks_run_settings_and_refuses_to_overwrite_another_result(results: dict, tmp_path: Path):
    out = tmp_path / "mteb-out"
    result, _ = results["bm25"]
    folder = out / "results" / "bm25-robertson" / result.model_revision
    folder.mkdir(parents=True)
    (folder / "run_settings.jsonl").write_text(json.dumps({"task": "Other", "splits": ["test"], "subsets": ["default"]}) + "\n")
    (folder / f"{NANO}.json").write_text("{}")
    with pytest.raises(SettingError) as refused:
        export_mteb([results["folder"]], "bm25-robertson", out, allow_incomplete=True)
    assert refused.value.field == "out_dir" and "holds another result" in str(refused.value)
    assert "give another --out, or --force" in refused.value.render("flag")
    export_mteb([results["folder"]], "bm25-robertson", out, allow_incomplete=True, force=True)
    tasks = [json.loads(line)["task"] for line in (folder / "run_settings.jsonl").read_text().splitlines()]
    assert tasks == ["Other", NANO, "R2MEDBiology"]


def _read_hakari(path: Path) -> dict:
    """HAKARI's read_result_json on a .json.xz: lzma text, one JSON object."""
    with lzma.open(path, "rt", encoding="utf-8") as handle:
        payload = json.load(handle)
    assert isinstance(payload, dict)
    return payload


def test_hakari_export_writes_hakaris_layout_and_payload(results: dict, tmp_path: Path):
    out = tmp_path / "hakari-out"
    folder = results["folder"]
    with pytest.raises(ValueError, match="HAKARI-Bench lists NanoR2MED's tasks only, not 'R2MEDBiology'"):
        export_hakari([folder], "bm25-robertson", out, allow_incomplete=True)
    written = export_hakari([folder], "org/hash-64", out, allow_incomplete=True)
    target = out / "hakari-results" / "org__hash-64" / "hakari-bench__NanoR2MED" / f"{NANO}.json.xz"
    assert written == [target, out / "org__hash-64_results_pr.md"]
    payload = _read_hakari(target)
    result, paths = results["encoder"]
    record = read_xz_json(hakari_record_path(paths["mteb"]))
    assert payload["model"]["id"] == "org/hash-64" and payload["target"]["split_name"] == NANO
    assert payload["target"]["dataset_id"] == "hakari-bench/NanoR2MED" and payload["target"]["dataset_revision"]["resolved"] is None
    prefix = f"NanoR2MED_{NANO}_cosine_"
    assert set(payload["metrics"]) == {prefix + "ndcg@10", prefix + "acc@100"}
    assert payload["evaluation"]["aggregate_metric"] == "ndcg@10"
    assert payload["evaluation"]["aggregate_metric_value"] == record["metrics"][prefix + "ndcg@10"]
    top_k = record["candidate_rankings"]["reranking_hybrid"]["top_k"]
    assert set(payload["rerank_metrics"]) == {f"{prefix}reranking_hybrid_top{top_k}_rerank_ndcg@10",
                                              f"{prefix}reranking_hybrid_top{top_k}_rerank_acc@100"}
    rows = payload["artifacts"]["top_rankings"]["rankings"]
    assert {row["ranking_kind"] for row in rows} == {"retrieval", "candidate_rerank"}
    assert all(len(row["corpus_ids"]) <= 100 for row in rows)
    assert len(payload["experiment_manifest"]["fingerprint_sha256"]) == 64
    body = (out / "org__hash-64_results_pr.md").read_text()
    assert "org/hash-64" in body and "reranking_hybrid" in body and "Not included (7 of 8 NanoR2MED tasks)" in body


def test_a_bm25_hakari_export_records_hakaris_bm25_configuration_and_bm25s_order(mirror_env: Path, tmp_path: Path):
    result, _ = evaluated(evaluate_task(NANO, "bm25-hakari:regex", show_progress=False), tmp_path / "results")
    (target, _) = export_hakari([tmp_path / "results"], "bm25-hakari:regex", tmp_path / "out", allow_incomplete=True)
    payload = _read_hakari(target)
    bm25 = payload["config"]["bm25"]
    assert (bm25["tokenizer"], bm25["k1"], bm25["b"], bm25["top_k"], bm25["source"]) == ("regex", 1.5, 0.75, 1000, "computed_bm25s")
    assert payload["model"]["backend_library"] == "bm25s" and payload["model"]["method"] == "bm25"
    (row,) = [row for row in payload["artifacts"]["top_rankings"]["rankings"] if row["query_id"] == next(iter(result.run))]
    assert row["corpus_ids"] == list(next(iter(result.run.values())))[:100]  # bm25s's order, ties included
    assert target.parent.parent.name == "bm25-hakari_regex"  # HAKARI's safe_path_part of the name
    body = (tmp_path / "out" / "bm25-hakari_regex_results_pr.md").read_text()
    assert f"| {NANO} | {payload['evaluation']['aggregate_metric_value']:.4f} | bm25_has_no_candidate_reranking |" in body


def test_the_hakari_aggregate_is_hakaris_ndcg_at_10_of_the_same_run(results: dict):
    """The record's nDCG@10 is HAKARI's: recomputed here from the run and qrels, ties by id ascending, every
    query counted; the MTEB file keeps pytrec_eval's (the two differ only where the conventions differ)."""
    result, paths = results["bm25"]
    record = read_xz_json(hakari_record_path(paths["mteb"]))
    positives = {query: [doc for doc, grade in judged.items() if grade > 0] for query, judged in result.data.qrels.items()}
    ours = hakari_metrics(rankings_from_run(result.run), positives, metric_names=["ndcg@10"], query_ids=record["query_ids"])
    assert record["metrics"][f"NanoR2MED_{NANO}_bm25-robertson_ndcg@10"] == pytest.approx(ours["ndcg@10"], abs=1e-15)
    assert "ndcg@10" not in json.dumps(json.loads(paths["mteb"].read_text())["scores"])  # mteb's keys stay mteb's


def test_hakari_export_refuses_a_reranked_result(tmp_path: Path):
    with pytest.raises(ValueError, match="is a reranked result; the HAKARI export holds a retriever's full-corpus ranking"):
        export_hakari([tmp_path], "cross-encoder/ms-marco|bm25-robertson|top_100", tmp_path / "out")


def test_hakari_export_refuses_unproven_data_and_results_without_a_record(results: dict, tmp_path: Path):
    with pytest.raises(InputFileError) as refused:
        export_hakari([results["folder"]], "org/hash-64", tmp_path / "a")
    assert str(results["encoder"][1]["mteb"]) in str(refused.value) and "no hub commit" in str(refused.value)
    assert "--allow-incomplete" in str(refused.value)
    _, paths = results["encoder"]
    hakari_record_path(paths["mteb"]).unlink()
    with pytest.raises(ValueError, match=r"no HAKARI record beside it \(NanoR2MEDIIYiClinical.hakari.json.xz\); .* re-run"):
        export_hakari([results["folder"]], "org/hash-64", tmp_path / "b", allow_incomplete=True)


def test_a_hub_commit_is_hakaris_resolved_revision_and_a_result_without_a_revision_is_refused(tmp_path: Path):
    commit = "0123456789abcdef0123456789abcdef01234567"
    record = ResultRecord(model="m", revision="r", task=NANO, scores={}, date=0.0, path=tmp_path / "x.json",
                          dataset_revision=commit)
    assert hakari_dataset_revision(record, allow_incomplete=False) == {"requested": None, "resolved": commit,
                                                                        "source": "r2med-plugin"}
    edited = ResultRecord(**{**record.__dict__, "dataset_revision": commit + "+unverified-files-abc"})
    with pytest.raises(InputFileError, match="do not prove hub commit"):
        hakari_dataset_revision(edited, allow_incomplete=False)
    written = hakari_dataset_revision(edited, allow_incomplete=True)
    assert written["resolved"] is None and "do not prove hub commit" in written["error"]
    assert str(tmp_path) not in written["error"] and "x.json" not in written["error"]  # no path of the user's machine


def test_the_cli_exports_to_each_venue_and_refuses_options_a_venue_does_not_read(results: dict, tmp_path: Path, capsys):
    folder = str(results["folder"])
    assert main(["export", "--submission", folder, "--model", "org/hash-64", "--venue", "mteb", "--out", str(tmp_path / "m")]) == 2
    assert "no hub commit" in capsys.readouterr().err
    assert main(["export", "--submission", folder, "--model", "org/hash-64", "--venue", "mteb", "--allow-incomplete",
                 "--out", str(tmp_path / "m")]) == 0
    assert main(["export", "--submission", folder, "--model", "org/hash-64", "--venue", "hakari", "--allow-incomplete",
                 "--out", str(tmp_path / "h")]) == 0
    assert "hakari-bench__NanoR2MED" in capsys.readouterr().out
    assert main(["export", "--submission", folder, "--model", "org/hash-64", "--venue", "hakari", "--model-size", "7B",
                 "--out", str(tmp_path / "h2")]) == 2
    assert "--model-size reaches no code here" in capsys.readouterr().err
    assert main(["export", "--trec", folder, "--venue", "mteb", "--out", str(tmp_path / "t")]) == 2
    assert "--venue reaches no code here" in capsys.readouterr().err


@pytest.mark.parametrize("venue", ["mteb", "hakari"])
def test_every_venue_refuses_synthetic_sample_and_count_drift_results_even_with_allow_incomplete(
        venue: str, mirror_env: Path, tmp_path: Path):
    export = export_mteb if venue == "mteb" else export_hakari
    drifted = tmp_path / "drifted"
    paths = write_outputs(evaluate_task(NANO, "bm25-robertson", show_progress=False), drifted)  # tiny fixture counts
    with pytest.raises(InputFileError) as refused:
        export([drifted], "bm25-robertson", tmp_path / "a", allow_incomplete=True)
    assert str(paths["mteb"]) in str(refused.value) and "counts differ from the dataset card" in str(refused.value)
    synthetic = tmp_path / "synthetic"
    path = write_result(synthetic, "org/m", NANO, 0.5, "synthetic-sample")
    with pytest.raises(InputFileError) as refused:
        export([synthetic], "org/m", tmp_path / "b", allow_incomplete=True)
    assert str(path) in str(refused.value) and "synthetic demo sample" in str(refused.value)
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()


def test_an_unproven_result_exported_with_allow_incomplete_says_so_without_a_path(results: dict, tmp_path: Path):
    out = tmp_path / "h"
    (target, body) = export_hakari([results["folder"]], "org/hash-64", out, allow_incomplete=True)
    revision = _read_hakari(target)["target"]["dataset_revision"]
    assert revision["resolved"] is None and "no hub commit" in revision["error"]
    assert str(tmp_path) not in json.dumps(_read_hakari(target)["target"])
    assert "none resolved" in body.read_text()
    older = results["encoder"][1]["mteb"]  # a result whose provenance lacks the verification (an earlier release's)
    payload = json.loads(older.read_text())
    del payload["r2med_provenance"]["dataset_revision_verified"]
    older.write_text(json.dumps(payload))
    export_mteb([results["folder"]], "org/hash-64", tmp_path / "m", allow_incomplete=True)
    copied = next((tmp_path / "m").rglob(f"{NANO}.json"))
    assert json.loads(copied.read_text())["r2med_provenance"]["dataset_revision_verified"] is False


def test_the_command_line_is_the_recorded_request_and_an_older_result_says_not_recorded():
    from r2med_plugin.evaluation.request import EvaluationRequest, Outputs, Scoring
    from r2med_plugin.evaluation.specs import ModelSpec

    request = EvaluationRequest(NANO, ModelSpec("minilm-packaged", device="cuda", batch_size=64),
                                scoring=Scoring(hybrid=True, candidates=("hybrid",)), outputs=Outputs("/home/me/results"),
                                data_dir="/home/me/mirror", show_progress=False)
    assert evaluate_command(request.to_dict()) == ("--retriever minilm-packaged --device cuda --batch-size 64 --hybrid "
                                                   "--candidates hybrid --data-dir DATA_DIR --output RESULTS --quiet")
    assert evaluate_command(None).startswith("not recorded")


def test_the_hakari_pr_body_gives_the_command_that_produced_the_results(mirror_env: Path, tmp_path: Path, results: dict):
    out = str(tmp_path / "cli-results")
    assert main(["evaluate", "--task", NANO, "--retriever", "bm25-robertson", "--top-k", "500", "--quiet", "--output", out]) == 0
    as_on_exact_counts({"mteb": next((Path(out) / "results").rglob(f"{NANO}.json"))})
    (target, body) = export_hakari([out], "bm25-robertson", tmp_path / "h", allow_incomplete=True)
    assert (f"- Command: `r2med evaluate --task {NANO} --retriever bm25-robertson --top-k 500 --output RESULTS --quiet`, "
            "then `r2med export --submission RESULTS --model bm25-robertson --venue hakari --allow-incomplete --out DIR`"
            ) in body.read_text()
    assert _read_hakari(target)["config"]["r2med_plugin"]["request"]["scoring"]["top_k"] == 500
    (_, older) = export_hakari([results["folder"]], "org/hash-64", tmp_path / "o", allow_incomplete=True)
    assert f"- Command: {NANO}: not recorded" in older.read_text()
