"""Issue 20: paths that kept or showed a wrong result, and flags that reached no code."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from r2med_plugin.catalog import list_tasks
from r2med_plugin.reporting.leaderboard import build_leaderboard, render
from r2med_plugin.reporting.submission import export_submission

R2MED = list_tasks("r2med")
NANO = list_tasks("nano")


def _result(root: Path, model: str, task: str, ndcg: float, dataset_revision: str, *, date: float = 1.0,
            model_rev: str = "r1") -> Path:
    folder = root / "results" / model.replace("/", "__") / model_rev
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "model_meta.json").write_text(json.dumps({"name": model, "revision": model_rev}))
    official = {f"{f}_at_{k}": ndcg / 2 for f in ("ndcg", "map", "recall", "precision") for k in (1, 3, 5, 10, 25, 50, 100)}
    scores = official | {"mrr": 0.1, "ndcg_at_10": ndcg, "main_score": ndcg, "hf_subset": "default", "languages": ["eng-Latn"]}
    path = folder / f"{task}.json"
    path.write_text(json.dumps({"dataset_revision": dataset_revision, "task_name": task, "date": date,
                                "evaluation_time": 1.0, "scores": {"test": [scores]}}))
    return path


# --- item 2: results on two different mirror files never share a row, and are never picked silently --------


def _two_mirrors(tmp_path: Path) -> tuple[Path, Path]:
    """mirror A's results for every task; mirror B differs in Biology's files only (a second output folder)."""
    a, b = tmp_path / "a", tmp_path / "b"
    for spec in R2MED:
        _result(a, "org/m", spec.name, 0.3322, f"{spec.revision}+unverified-files-c1f3a2b4{spec.name[:4].lower()}", date=1.0)
    biology = R2MED[0]
    _result(b, "org/m", biology.name, 0.4812, f"{biology.revision}+unverified-files-48bb0000", date=2.0)
    return a, b


def test_leaderboard_shows_one_row_per_set_of_mirror_files(tmp_path: Path):
    a, b = _two_mirrors(tmp_path)
    for order in ([a, b], [b, a]):  # whichever folder comes first
        rows = build_leaderboard(order)
        biology = R2MED[0].hub_name
        assert sorted(round(row.scores[biology], 2) for row in rows) == [33.22, 48.12]
        newest = next(row for row in rows if row.scores[biology] == pytest.approx(48.12))
        older = next(row for row in rows if row.scores[biology] == pytest.approx(33.22))
        assert f"{biology} files 48bb0000" in newest.note and f"{biology} files c1f3a2b4" in older.note
        assert newest.note != older.note and not older.ranked  # older holds only its Biology result
        assert newest.ranked and newest.average == pytest.approx((48.12 + 7 * 33.22) / 8)
        text = render(rows, "md")
        assert "48.12" in text and "33.22" in text


def test_submission_refuses_results_of_one_task_on_two_mirror_files_and_names_both(tmp_path: Path):
    a, b = _two_mirrors(tmp_path)
    with pytest.raises(ValueError, match="2 different revision sets") as raised:
        export_submission([a, b], "org/m", tmp_path / "out")
    message = str(raised.value)
    assert str(a / "results" / "org__m" / "r1" / f"{R2MED[0].name}.json") in message
    assert str(b / "results" / "org__m" / "r1" / f"{R2MED[0].name}.json") in message
    assert not (tmp_path / "out").exists()


def test_nano_tasks_of_one_unverified_mirror_share_a_row(tmp_path: Path):
    for index, spec in enumerate(NANO):  # each task is named by its own files
        _result(tmp_path, "org/m", spec.name, 0.2, f"local-{index:016x}")
    (row,) = build_leaderboard([tmp_path], benchmark="nano")
    assert row.ranked and row.note == ""


# --- item 3: two sets of weights under one name never share a row silently ------------------------------


def test_the_row_says_which_model_revision_it_shows_when_another_exists(tmp_path: Path):
    for spec in R2MED:
        _result(tmp_path, "local-model", spec.name, 0.2171, spec.revision, date=1.0, model_rev="local-4a55")
    for spec in R2MED:  # the other checkpoint re-run later (from cache): it supersedes, and says so
        _result(tmp_path, "local-model", spec.name, 0.0047, spec.revision, date=2.0, model_rev="local-c006")
    (row,) = build_leaderboard([tmp_path])
    assert row.average == pytest.approx(0.47)
    assert "model revision local-c006" in row.note and "local-4a55" in row.note
    with pytest.raises(ValueError, match="model revision local-c006 and also local-4a55") as raised:
        export_submission([tmp_path], "local-model", tmp_path / "out")
    assert "local-4a55" in str(raised.value) and f"{R2MED[0].name}.json" in str(raised.value)
