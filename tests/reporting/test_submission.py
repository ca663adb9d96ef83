"""`r2med export --submission` and `--trec` (r2med_plugin.reporting.submission): the result sets it takes, refuses or
warns about."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from r2med_plugin.catalog import list_tasks
from r2med_plugin.cli import main
from r2med_plugin.evaluation.runner import evaluate_task
from r2med_plugin.evaluation.writers import write_outputs
from r2med_plugin.reporting.submission import export_submission
from tests.support.builders import official_row, two_mirrors, write_result

R2MED = list_tasks("r2med")
NANO = list_tasks("nano")


def test_submission_refuses_results_of_one_task_on_two_mirror_files_and_names_both(tmp_path: Path):
    a, b = two_mirrors(tmp_path)
    with pytest.raises(ValueError, match="2 different revision sets") as raised:
        export_submission([a, b], "org/m", tmp_path / "out")
    message = str(raised.value)
    assert str(a / "results" / "org__m" / "r1" / f"{R2MED[0].name}.json") in message
    assert str(b / "results" / "org__m" / "r1" / f"{R2MED[0].name}.json") in message
    assert not (tmp_path / "out").exists()


def test_submission_of_an_incomplete_or_unverified_set_needs_allow_incomplete(tmp_path: Path, capsys):
    from r2med_plugin.cli import main

    for spec in R2MED[:3]:
        write_result(tmp_path / "r", "org/m", spec.name, official_row(0.1), f"{spec.revision}+unverified-files-abc")
    command = ["export", "--submission", str(tmp_path / "r"), "--model", "org/m", "--out", str(tmp_path / "out")]
    assert main(command) == 2
    error = capsys.readouterr().err
    assert "no results for" in error and "do not prove the pinned commit" in error and "--allow-incomplete" in error
    assert not (tmp_path / "out").exists()
    assert main([*command, "--allow-incomplete"]) == 0
    assert "**Incomplete:**" in (tmp_path / "out" / "README.md").read_text()


def test_export_trec_names_a_missing_folder(tmp_path: Path, capsys):
    from r2med_plugin.cli import main

    assert main(["export", "--trec", str(tmp_path / "no-such"), "--out", str(tmp_path / "o")]) == 2
    assert f"{tmp_path / 'no-such'}: no such folder" in capsys.readouterr().err


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
        export_submission([tmp_path / "r"], "org/m", tmp_path / "out", allow_incomplete=True)  # refused without it
    messages = " ".join(record.getMessage() for record in caplog.records)
    assert f"no results for {', '.join(spec.hub_name for spec in R2MED[3:])}" in messages and "all 8 tasks" in messages
    assert f"{', '.join(sorted(spec.name for spec in R2MED[:3]))} ran on mirror files that do not prove" in messages
    readme = (tmp_path / "out" / "README.md").read_text()
    assert "**Incomplete:**" in readme and "**Unverified data:**" in readme


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


def test_submission_of_nano_only_results_says_why(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    for spec in NANO:
        write_result(tmp_path, "org/m", spec.name, 0.4)
    assert main(["export", "--submission", str(tmp_path), "--model", "org/m", "--out", str(tmp_path / "s")]) == 2
    err = capsys.readouterr().err
    assert "only NanoR2MED results were found" in err and "not comparable" in err and "R2MED<Domain>" in err
