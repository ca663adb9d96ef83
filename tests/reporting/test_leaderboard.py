"""The leaderboard's rows (r2med_plugin.reporting.leaderboard): which results share a row, which are ranked, and what
each row's note says."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from r2med_plugin.catalog import list_tasks
from r2med_plugin.cli import main
from r2med_plugin.evaluation.runner import evaluate_task
from r2med_plugin.evaluation.writers import write_outputs
from r2med_plugin.models.hashing import HashingEncoder
from r2med_plugin.reporting.leaderboard import build_leaderboard, published_leaderboard
from r2med_plugin.reporting.published import published_rows, published_table
from r2med_plugin.reporting.render import render
from r2med_plugin.reporting.submission import export_submission
from tests.support.builders import official_row, score_row, two_mirrors, write_result

R2MED = list_tasks("r2med")
NANO = list_tasks("nano")
NANO_NAMES = [spec.name for spec in NANO]


def test_leaderboard_shows_one_row_per_set_of_mirror_files(tmp_path: Path):
    a, b = two_mirrors(tmp_path)
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


def test_nano_tasks_of_one_unverified_mirror_share_a_row(tmp_path: Path):
    for index, spec in enumerate(NANO):  # each task is named by its own files
        write_result(tmp_path, "org/m", spec.name, official_row(0.2), f"local-{index:016x}")
    (row,) = build_leaderboard([tmp_path], benchmark="nano")
    assert row.ranked and row.note == ""


def test_the_row_says_which_model_revision_it_shows_when_another_exists(tmp_path: Path):
    for spec in R2MED:
        write_result(tmp_path, "local-model", spec.name, official_row(0.2171), spec.revision, date=1.0, model_revision="local-4a55")
    for spec in R2MED:  # the other checkpoint re-run later (from cache): it supersedes, and says so
        write_result(tmp_path, "local-model", spec.name, official_row(0.0047), spec.revision, date=2.0, model_revision="local-c006")
    (row,) = build_leaderboard([tmp_path])
    assert row.average == pytest.approx(0.47)
    assert "model revision local-c006" in row.note and "local-4a55" in row.note
    with pytest.raises(ValueError, match="model revision local-c006 and also local-4a55") as raised:
        export_submission([tmp_path], "local-model", tmp_path / "out")
    assert "local-4a55" in str(raised.value) and f"{R2MED[0].name}.json" in str(raised.value)


def test_rows_on_drifted_data_are_never_ranked_next_to_published_rows(tmp_path: Path):
    for spec in R2MED:
        write_result(tmp_path, "org/fixture-model", spec.name, official_row(0.99), f"{spec.revision}+count-drift")
    rows = build_leaderboard([tmp_path], compare_published=True)
    (drifted,) = [row for row in rows if row.source == "yours"]
    assert not drifted.ranked and "counts differ from the dataset card" in drifted.excluded
    assert rows[0].source == "published"  # 99.0 is not placed above the published rows
    (alone,) = build_leaderboard([tmp_path])  # among its own kind (a fixture), it is ranked, and says so
    assert alone.ranked and "counts differ from the dataset card" in alone.note


def test_an_old_revision_re_run_on_one_task_never_hides_a_newer_complete_run(tmp_path: Path):
    for spec in R2MED:
        write_result(tmp_path, "my/minilm", spec.name, official_row(0.7299), spec.revision, date=1.0, model_revision="local-c006")
    for spec in R2MED:
        write_result(tmp_path, "my/minilm", spec.name, official_row(0.7724), spec.revision, date=2.0, model_revision="local-aaaa")
    write_result(tmp_path, "my/minilm", R2MED[0].name, official_row(0.7299), R2MED[0].revision, date=3.0, model_revision="local-c006")  # one task again
    rows = build_leaderboard([tmp_path])
    assert sorted(round(row.average, 2) for row in rows if row.ranked) == [72.99, 77.24]  # both shown, neither hidden
    assert all("model revision local-" in row.note for row in rows)


def test_leaderboard_reads_candidate_only_results_as_candidate_columns_only(mirror_env: Path, tmp_path: Path):
    encoder = HashingEncoder(dim=32, name="cand-board")
    for task in NANO_NAMES:
        write_outputs(evaluate_task(task, encoder, candidates=["bm25"], show_progress=False), tmp_path)
    for task in NANO_NAMES:  # newer, candidate-only, hybrid list
        write_outputs(evaluate_task(task, encoder, candidates=["hybrid"], candidates_only=True, show_progress=False), tmp_path)
    (row,) = build_leaderboard([tmp_path], benchmark="nano")
    full = {spec.hub_name: 100 * evaluate_task(spec.name, encoder, show_progress=False).scores["ndcg_at_10"] for spec in list_tasks("nano")}
    assert row.scores == pytest.approx(full)
    assert set(row.extras) == {"candidates_bm25_ndcg_at_10", "candidates_hybrid_ndcg_at_10_with_safeguard"}
    only = [evaluate_task(t, encoder, candidates=["hybrid"], candidates_only=True, show_progress=False) for t in NANO_NAMES]
    expected = 100 * sum(r.scores["candidates_hybrid_ndcg_at_10_with_safeguard"] for r in only) / len(only)
    assert row.extras["candidates_hybrid_ndcg_at_10_with_safeguard"] == pytest.approx(expected)


def test_candidate_only_results_alone_make_an_unranked_row(mirror_env: Path, tmp_path: Path):
    encoder = HashingEncoder(dim=32, name="cand-alone")
    for task in NANO_NAMES:
        write_outputs(evaluate_task(task, encoder, candidates=["hybrid"], candidates_only=True, show_progress=False), tmp_path)
    (row,) = build_leaderboard([tmp_path], benchmark="nano")
    assert row.scores == {} and not row.ranked and "candidates_hybrid_ndcg_at_10_with_safeguard" in row.extras


def test_synthetic_results_are_never_ranked_next_to_real_ones(tmp_path: Path):
    demo, real = tmp_path / "demo", tmp_path / "real"
    for task in NANO_NAMES:
        write_result(demo, "bm25-lucene", task, official_row(0.9), "synthetic-sample")
    write_result(real, "bm25-lucene", NANO_NAMES[0], official_row(0.2), "abc123", date=2.0)  # newer and real, one task only
    for task in NANO_NAMES:
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
    for task in NANO_NAMES:
        write_result(tmp_path, "org/m", task, official_row(0.1), "rev-old", date=1.0)
    write_result(tmp_path, "org/m", NANO_NAMES[0], official_row(0.5), "rev-new", date=2.0, model_revision="r2")  # newer, another dataset revision
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


def test_a_newer_revision_with_only_candidate_results_never_hides_an_older_full_row(tmp_path: Path):
    for task in NANO_NAMES:
        write_result(tmp_path, "org/m", task, official_row(0.4), "abc123", date=1.0, model_revision="weights-a")
    for task in NANO_NAMES:  # a newer revision, candidate-only results only
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


def test_the_published_board_holds_its_reranked_row_first():
    """R2MED/r2med.github.io c85a571: 68 rows; the first, ReasonRank(32B) over E5-mistral-7b-instruct, is the only one
    with a reranker."""
    table = published_table()
    assert len(table["rows"]) == 68 and "c85a571" in table["source"]
    assert [row["reranker"] for row in table["rows"]] == ["ReasonRank(32B)"] + [None] * 67
    assert table["reranker_papers"] == {"ReasonRank(32B)": "https://arxiv.org/abs/2508.07050"}
    first = published_rows()[0]
    assert (first.llm, first.retriever, first.reranked, first.published_average) == (
        "", "ReasonRank(32B) | E5-mistral-7b-instruct", True, 42.85)
    assert first.scores == {"Biology": 45.56, "Bioinformatics": 67.73, "Medical-Sciences": 63.45, "MedXpertQA-Exam": 18.9,
                            "MedQA-Diag": 30.6, "PMC-Treatment": 41.08, "PMC-Clinical": 46.11, "IIYi-Clinical": 29.35}
    assert first.note == "reranker paper: arXiv 2508.07050"
    plain = [row for row in published_rows() if row.retriever == "E5-mistral-7b-instruct"]
    assert [(row.llm, row.reranked, row.published_average) for row in plain] == [("", False, 24.92)]  # still its own row
    assert published_leaderboard()[0].retriever == "ReasonRank(32B) | E5-mistral-7b-instruct"  # first by its average


def test_your_rows_carry_the_published_llm_name_beside_the_expansion_file(tmp_path: Path):
    for spec in R2MED:
        write_result(tmp_path, "hyde/gpt4+bm25-lucene", spec.name, official_row(0.3), spec.revision)
        write_result(tmp_path, "hyde/llama-70b+bm25-lucene", spec.name, official_row(0.2), spec.revision)
        write_result(tmp_path, "local/hyde/gpt4@1a2b3c4d+bm25-lucene", spec.name, official_row(0.1), spec.revision)
    alone = build_leaderboard([tmp_path])
    assert [row.llm for row in alone] == ["gpt4", "llama-70b", "gpt4"]
    rows = build_leaderboard([tmp_path], compare_published=True)
    ours = [row for row in rows if row.source == "yours"]
    assert [row.llm for row in ours] == ["GPT4o (hyde/gpt4)", "Llama3.1-70B-Ins (hyde/llama-70b)", "gpt4"]  # local: no name
    assert [row.average for row in ours] == [row.average for row in alone]  # the same rows, in the same order
    text = render(rows, "md")
    assert "| GPT4o (hyde/gpt4) | bm25-lucene (hyde) |" in text and "| GPT4o | BM25 [published] |" in text
def test_a_verdict_s_data_is_named_with_the_leaderboard_s_words():
    from r2med_plugin.reporting.grouping import (
        DRIFT_LABEL,
        LOCAL_MIRROR_SET,
        SYNTHETIC_LABEL,
        UNVERIFIED_SET,
        data_label,
    )

    commit = "8b9fec2db9eda4b5742d03732213fbaee8169556"
    proven = {"dataset_revision": commit, "verified": True, "files_fingerprint": "ab", "count_drift": {}}
    assert data_label([proven, proven]) is None
    assert data_label([proven, proven | {"verified": False}]) == UNVERIFIED_SET
    drift = {"documents": {"expected": 10, "found": 9}}
    assert data_label([proven | {"count_drift": drift}]) == DRIFT_LABEL
    assert data_label([proven | {"verified": False, "count_drift": drift}]) == f"{UNVERIFIED_SET}, {DRIFT_LABEL}"
    assert data_label([proven | {"dataset_revision": "local-0123", "verified": False}]) == LOCAL_MIRROR_SET
    assert data_label([proven | {"dataset_revision": "synthetic-sample", "verified": False}]) == SYNTHETIC_LABEL


def test_leaderboard_shows_the_benchmarks_the_folder_holds(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    nano_only = tmp_path / "nano"
    for spec in NANO:
        write_result(nano_only, "org/m", spec.name, 0.4)
    assert main(["leaderboard", str(nano_only)]) == 0
    out = capsys.readouterr().out
    assert "| 1 | - | org/m | 40.00 |" in out and "## " not in out
    both = tmp_path / "both"
    shutil.copytree(nano_only, both)
    for spec in R2MED:
        write_result(both, "org/m", spec.name, 0.2, spec.revision)
    assert main(["leaderboard", str(both)]) == 0
    out = capsys.readouterr().out
    r2med, nano = out.split("## NanoR2MED")
    assert r2med.startswith("## R2MED") and "| 1 | - | org/m | 20.00 |" in r2med and "| 1 | - | org/m | 40.00 |" in nano
    assert main(["leaderboard", str(both), "--benchmark", "nano"]) == 0
    assert "20.00" not in capsys.readouterr().out
    assert main(["leaderboard", str(both), "--format", "html"]) == 0
    page = capsys.readouterr().out
    assert page.count("<table") == 2 and page.index("<h2>R2MED</h2>") < page.index("<h2>NanoR2MED</h2>") and page.count("<html>") == 1
    assert main(["leaderboard", str(both), "--format", "csv"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "R2MED" and "NanoR2MED" in lines and lines[1].startswith("Rank,LLM")
    assert main(["leaderboard", str(nano_only), "--compare-published"]) == 2
    assert "only NanoR2MED results" in capsys.readouterr().err


def test_nano_columns_held_on_some_tasks_show_each_tasks_value(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    """The NanoR2MED table showed Hybrid and Cand. as "-" unless all 8 tasks held them, so a run of 2 tasks with
    --hybrid showed its hybrid scores nowhere. Each task's value is listed under the table now."""
    for index, spec in enumerate(NANO):
        extra = {"hybrid_ndcg_at_10": 0.41 + index / 100} if index < 2 else {}
        write_result(tmp_path, "org/partial", spec.name, score_row(0.30, **extra))
    assert main(["leaderboard", str(tmp_path), "--benchmark", "nano"]) == 0
    out = capsys.readouterr().out
    assert "org/partial: no average for Hybrid, found on 2 of 8 tasks only (averages need every task)" in out
    (line,) = [line for line in out.splitlines() if line.startswith("| org/partial | Hybrid |")]
    assert line.split(" | ")[2:4] == ["41.00", "42.00"] and line.count("| - ") == 6
