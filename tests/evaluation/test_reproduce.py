"""`r2med reproduce` on the fixture mirror, with expected values computed for the fixture."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import pytrec_eval

import r2med_plugin
from r2med_plugin.cli import main
from r2med_plugin.evaluation.reproduce import load_expected, published_bm25
from r2med_plugin.reporting.grouping import DRIFT_LABEL, LOCAL_MIRROR_SET, UNVERIFIED_SET
from tests.support.official_reference import full_bm25, reference_bm25_file, row_ids

R2MED_TASKS = [spec.name for spec in r2med_plugin.list_tasks("r2med")]


def _fixture_bm25_points(task: str) -> float:
    """nDCG@10 x 100 of the official BM25 on the fixture task, by the reference re-implementation."""
    data = r2med_plugin.load_task(task)
    text = reference_bm25_file(row_ids(data), full_bm25(data), data.qrels, 0.0, data.spec.hub_name)
    return round(json.loads(text)["test"]["ndcg_at_10"] * 100, 2)


def _fixture_profile(task: str, subset: str, top_k: int) -> dict[str, float]:
    """nDCG@10 (pytrec_eval on the stored order), hit@10, pooled recall@100 and counts of one stored list."""
    data = r2med_plugin.load_task(task)
    lists = data.candidates[subset]
    run = {q: {d: float(len(ids) - rank) for rank, d in enumerate(ids[:top_k])} for q, ids in lists.items()}
    ndcg = pytrec_eval.RelevanceEvaluator(data.qrels, {"ndcg_cut.10"}).evaluate(run)
    hits = [any(d in data.qrels[q] for d in ids[:10]) for q, ids in lists.items()]
    found = sum(len(set(ids[:100]) & set(data.qrels[q])) for q, ids in lists.items())
    return {
        "ndcg_at_10": sum(v["ndcg_cut_10"] for v in ndcg.values()) / len(data.qrels),
        "hit_at_10": sum(hits) / len(data.qrels),
        "pooled_recall_at_100": found / sum(len(p) for p in data.qrels.values()),
        "candidate_count_max": max(len(ids) for ids in lists.values()),
        "rows_with_101_candidates": sum(len(ids) == 101 for ids in lists.values()),
    }


@pytest.fixture()
def expected_file(mirror_env: Path, tmp_path: Path) -> Path:
    profiles = {
        spec.name: {subset: {"top_k": profile["top_k"], **_fixture_profile(spec.name, subset, profile["top_k"])}
                    for subset, profile in spec.candidate_profiles.items()}
        for spec in r2med_plugin.list_tasks("nano")[:2]
    }
    payload = {"bm25_ndcg_at_10": {task: _fixture_bm25_points(task) for task in R2MED_TASKS}, "candidate_profiles": profiles}
    path = tmp_path / "expected.json"
    path.write_text(json.dumps(payload), encoding="utf-8")
    return path


def test_reproduce_passes_on_the_fixture(expected_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    assert main(["reproduce", "--expected", str(expected_file), "--quiet", "--output", str(tmp_path / "out")]) == 0
    out = capsys.readouterr().out
    expected = json.loads(expected_file.read_text())["bm25_ndcg_at_10"]
    for task in R2MED_TASKS:
        line = next(line for line in out.splitlines() if line.startswith(task + " "))
        assert line.startswith(f"{task:<28} {expected[task]:>9.2f} {expected[task]:>9.2f} {0:>+7.2f}  PASS")
        # the verdict says what it stands on: the fixture mirror's files prove no commit and its counts are tiny
        assert line.endswith(f"PASS (data: {UNVERIFIED_SET}, {DRIFT_LABEL})")
    assert f"{2 * 3 * 5}/{2 * 3 * 5} values match" in out and "all checks PASS" in out  # 2 tasks x 3 lists x 5 metrics
    # the NanoR2MED mirror records no commit at all: its files are named by their fingerprint
    assert f"values match the expected profiles (data: {LOCAL_MIRROR_SET}, {DRIFT_LABEL})" in out
    assert (tmp_path / "out" / "official" / "bm25-lucene" / f"r2med-plugin-{r2med_plugin.__version__}" / "R2MEDBiology.json").is_file()


def test_reproduce_fails_on_a_mismatch(expected_file: Path, capsys: pytest.CaptureFixture[str]):
    payload = json.loads(expected_file.read_text())
    biology = payload["bm25_ndcg_at_10"]["R2MEDBiology"]
    payload["bm25_ndcg_at_10"]["R2MEDBiology"] = round(biology + 0.11, 2)  # just outside 0.1 points
    payload["bm25_ndcg_at_10"]["R2MEDPMCClinical"] += 0.1  # just inside: still a PASS
    expected_file.write_text(json.dumps(payload))
    assert main(["reproduce", "--expected", str(expected_file), "--quiet", "--skip-nano"]) == 1
    out = capsys.readouterr().out
    on = f" (data: {UNVERIFIED_SET}, {DRIFT_LABEL})"  # the fixture mirror's data, named on every verdict
    biology_line = next(line for line in out.splitlines() if line.startswith("R2MEDBiology "))
    assert biology_line.removesuffix(on).split()[-2:] == ["-0.11", "FAIL"] and biology_line.endswith(on)
    assert next(line for line in out.splitlines() if line.startswith("R2MEDPMCClinical ")).endswith("PASS" + on)
    assert "MISMATCH" in out and "candidate profiles" not in out


def test_reproduce_fails_on_a_profile_mismatch(expected_file: Path, capsys: pytest.CaptureFixture[str]):
    payload = json.loads(expected_file.read_text())
    task = next(iter(payload["candidate_profiles"]))
    payload["candidate_profiles"][task]["bm25"]["hit_at_10"] += 0.01
    payload["bm25_ndcg_at_10"] = {"Biology": payload["bm25_ndcg_at_10"]["R2MEDBiology"]}  # hub names work too; one task only
    expected_file.write_text(json.dumps(payload))
    assert main(["reproduce", "--expected", str(expected_file), "--quiet"]) == 1
    out = capsys.readouterr().out
    on = f" (data: {UNVERIFIED_SET}, {DRIFT_LABEL})"
    assert f"FAIL {task} bm25 hit_at_10" in out and sum(line.endswith("PASS" + on) for line in out.splitlines()) == 1


def test_default_expectations_are_the_published_facts():
    bm25 = published_bm25()
    assert set(bm25) == set(R2MED_TASKS)
    assert bm25["R2MEDBiology"] == 19.19 and bm25["R2MEDIIYiClinical"] == 12.02
    assert math.isclose(sum(bm25.values()) / 8, 15.13, abs_tol=0.01)  # the published average (of unrounded scores)
    reference = Path(__file__).resolve().parents[2] / "reference" / "r2med_leaderboard.json"  # the repository's facts
    (row,) = [r for r in json.loads(reference.read_text())["rows"] if r["llm"] is None and r["retriever"] == "BM25"]
    assert {r2med_plugin.get_task_spec(task).hub_name: value for task, value in bm25.items()} == row["scores"]
    _, profiles = load_expected(None)
    assert profiles["NanoR2MEDBiology"]["bm25"]["ndcg_at_10"] == 0.3454997187


def test_expected_file_errors(tmp_path: Path):
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"bm25": {}}))
    with pytest.raises(ValueError, match="'bm25_ndcg_at_10' and/or 'candidate_profiles'"):
        load_expected(bad)
    bad.write_text(json.dumps({"bm25_ndcg_at_10": {"NanoR2MEDBiology": 1.0}}))
    with pytest.raises(ValueError, match="not an R2MED task"):
        load_expected(bad)


def test_unreachable_data_is_an_error_not_a_pass(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    monkeypatch.delenv("R2MED_DATA_DIR", raising=False)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "cold"))  # offline (conftest) with a cold cache
    assert main(["reproduce", "--quiet", "--skip-nano"]) == 2
    assert "R2MED_DATA_DIR" in capsys.readouterr().err


def test_a_partial_expected_table_says_which_tasks_were_not_checked(expected_file: Path, capsys: pytest.CaptureFixture[str]):
    payload = json.loads(expected_file.read_text())
    payload["bm25_ndcg_at_10"] = {"R2MEDBiology": payload["bm25_ndcg_at_10"]["R2MEDBiology"]}
    expected_file.write_text(json.dumps(payload))
    assert main(["reproduce", "--expected", str(expected_file), "--quiet", "--skip-nano"]) == 0
    out = capsys.readouterr().out
    assert f"expected values: {expected_file}" in out and "published" not in out
    assert "not checked (7 of 8 R2MED tasks have no expected value)" in out and "R2MEDIIYiClinical" in out
    assert "all checks PASS (1 of 8 BM25 tasks checked)" in out


def test_an_expected_file_of_bm25_values_only_says_the_profiles_are_the_shipped_ones(
        expected_file: Path, capsys: pytest.CaptureFixture[str]):
    """Found by the third new-user trial: with BM25 values only, the header named the file as the source of every
    expected value, while the candidate profiles were checked against task_metadata."""
    payload = json.loads(expected_file.read_text())
    expected_file.write_text(json.dumps({"bm25_ndcg_at_10": payload["bm25_ndcg_at_10"]}))
    main(["reproduce", "--expected", str(expected_file), "--quiet", "--skip-nano"])
    out = capsys.readouterr().out
    assert f"expected values: BM25 from {expected_file}; candidate profiles from task_metadata (not in the file)" in out


def test_a_mirror_without_nanor2med_says_to_skip_nano_before_any_bm25_run(mirror_copy_env: Path, monkeypatch: pytest.MonkeyPatch,
                                                                           capsys: pytest.CaptureFixture[str]):
    import shutil

    shutil.rmtree(mirror_copy_env / "hakari-bench")
    ran = []
    monkeypatch.setattr("r2med_plugin.evaluation.runner.evaluate_task", lambda *a, **k: ran.append(a))
    assert main(["reproduce", "--quiet"]) == 2
    error = capsys.readouterr().err
    assert "hakari-bench/NanoR2MED is missing" in error and "add --skip-nano" in error
    assert ran == []  # the NanoR2MED check runs first: seconds, not the minutes of eight BM25 runs


def test_the_stored_bm25_lists_are_measured_against_each_tokenizer(mirror_copy_env: Path):
    """A stored bm25 list built by one tokenizer is reproduced, ids and order, by that tokenizer alone; the
    measurement names it, as `r2med reproduce` reports it for the hub's lists."""
    from r2med_plugin.data.mirror import candidate_frame
    from r2med_plugin.evaluation.reproduce import render_coverage, stored_bm25_coverage
    from r2med_plugin.retrieval.bm25 import bm25_search

    task = "NanoR2MEDBiology"
    data = r2med_plugin.load_task(task)
    depth = max(len(ids) for ids in data.candidates["bm25"].values())
    built = bm25_search(data.corpus, data.queries, variant="hakari:regex", top_k=depth, show_progress=False)
    split = data.spec.configs["corpus"]["split"]
    candidate_frame({q: list(r) for q, r in built.items()}).write_parquet(
        mirror_copy_env / data.spec.hub_repo / "bm25" / f"{split}.parquet")
    rows = {row.retriever: row for row in stored_bm25_coverage(r2med_plugin.load_task(task))}
    regex = rows["bm25-hakari:regex"]
    assert (regex.mean_overlap, regex.identical_lists, regex.depth) == (1.0, regex.queries, depth)
    assert rows["bm25-hakari:whitespace"].identical_lists < regex.queries  # "Word," vs "word": another tokenizer
    assert set(rows) == {"bm25-hakari", "bm25-hakari:regex", "bm25-hakari:english_regex", "bm25-hakari:english_porter",
                         "bm25-hakari:stemmer", "bm25-hakari:whitespace", "bm25-robertson"}
    table = "\n".join(render_coverage(list(rows.values())))
    assert f"{task:<28} {'bm25-hakari:regex':<28}   1.0000 {regex.queries:>5} / {regex.queries:<5}" in table


def _profiles_only(expected_file: Path, rename: dict[str, str], shift: float = 0.0) -> Path:
    """The expected file's candidate profiles alone (no BM25 task runs), keys renamed, the recall moved by shift."""
    payload = json.loads(expected_file.read_text())
    profiles = {task: {subset: {rename.get(key, key): value + shift if key == "pooled_recall_at_100" else value
                                for key, value in profile.items()}
                       for subset, profile in subsets.items()} for task, subsets in payload["candidate_profiles"].items()}
    expected_file.write_text(json.dumps({"bm25_ndcg_at_10": {}, "candidate_profiles": profiles}))
    return expected_file


def test_an_expected_file_naming_the_pooled_recall_recall_at_100_is_still_read(expected_file: Path, capsys):
    old = _profiles_only(expected_file, {"pooled_recall_at_100": "recall_at_100"})
    assert main(["reproduce", "--expected", str(old), "--quiet"]) == 0
    assert f"{2 * 3 * 5}/{2 * 3 * 5} values match" in capsys.readouterr().out


def test_a_wrong_pooled_recall_under_the_old_key_fails_under_its_new_name(expected_file: Path, capsys):
    old = _profiles_only(expected_file, {"pooled_recall_at_100": "recall_at_100"}, shift=0.01)
    assert main(["reproduce", "--expected", str(old), "--quiet"]) == 1
    failed = [line for line in capsys.readouterr().out.splitlines() if line.strip().startswith("FAIL")]
    assert len(failed) == 2 * 3 and all(" pooled_recall_at_100:" in line for line in failed)
