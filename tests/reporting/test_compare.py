"""r2med compare, r2med inspect and r2med leaderboard --significance on fixture results, checked
against implementations we did not write (scipy, ranx, PyTerrier, pytrec_eval)."""

from __future__ import annotations

import csv
import io
import json
import shutil
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from scipy import stats

from r2med_plugin import significance as sig
from r2med_plugin.catalog import list_tasks
from r2med_plugin.cli import main
from r2med_plugin.evaluation.runner import evaluate_task
from r2med_plugin.evaluation.writers import write_outputs
from r2med_plugin.metrics import evaluate_run_per_query
from r2med_plugin.models.hashing import HashingEncoder
from r2med_plugin.reporting.compare import compare_results, load_scores, render_report
from r2med_plugin.reporting.inspect import inspect_query, worst_queries
from r2med_plugin.reporting.leaderboard import build_leaderboards
from r2med_plugin.reporting.leaderboard_significance import add_significance
from r2med_plugin.reporting.per_query import per_query_frame, per_query_path, read_per_query, top_ranked, write_per_query
from r2med_plugin.reporting.render import render_many

pytestmark = pytest.mark.slow  # statistics checked against scipy, ranx and PyTerrier

R2MED = [spec.name for spec in list_tasks("r2med")]
MODELS = ("bm25-lucene", "hash-64", "hash-8")


@pytest.fixture(scope="module")
def results(fixture_mirror: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Three models on the 8 R2MED fixture tasks (5 evaluated queries each), written as `r2med evaluate --output` does."""
    out = tmp_path_factory.mktemp("compare") / "out"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("R2MED_DATA_DIR", str(fixture_mirror))
        patch.setenv("R2MED_ACCEPT_DRIFT", "1")
        for task in R2MED:
            for retriever in ("bm25-lucene", HashingEncoder(dim=64, name="hash-64"), HashingEncoder(dim=8, name="hash-8")):
                write_outputs(evaluate_task(task, retriever, show_progress=False), out)
    return out


@pytest.fixture()
def results_copy(results: Path, tmp_path: Path) -> Path:
    target = tmp_path / "out"
    shutil.copytree(results, target)
    return target


def _sidecar(results: Path, model: str, task: str) -> Path:
    (path,) = (results / "results" / model).rglob(f"{task}.per_query.parquet")
    return path


def _values(results: Path, model: str, task: str, metric: str = "ndcg_at_10") -> dict[str, float]:
    frame = read_per_query(_sidecar(results, model, task)).frame
    return dict(frame.filter(pl.col("metric") == metric).select("query_id", "value").iter_rows())


# --- r2med compare --------------------------------------------------------------------------------------------------


def test_compare_table_per_task_and_pooled(results: Path, capsys: pytest.CaptureFixture[str]):
    assert main(["compare", str(results), "--baseline", "bm25-lucene", "--seed", "7", "--permutations", "2000"]) == 0
    out = capsys.readouterr().out
    assert "baseline: bm25-lucene" in out and "2000 permutations, seed 7" in out and "2000 resamples, seed 7" in out
    assert "Holm correction" in out
    rows = [line for line in out.splitlines() if line.startswith("| R2MED") or line.startswith("| all ")]
    assert len(rows) == 8 * 2 + 2  # two models against the baseline, per task and pooled
    pooled = [line for line in rows if line.startswith("| all R2MED tasks")]
    assert all("| 40 |" in line for line in pooled)  # 8 tasks x 5 evaluated queries


def test_compare_numbers_are_the_arithmetic_of_the_per_query_values(results: Path):
    report = compare_results([results], baseline="bm25-lucene", test="t-test", correction="none", seed=3, permutations=500)
    row = next(c for c in report.comparisons if c.scope == "R2MEDBiology" and c.model == "hash-64")
    ours, base = _values(results, "hash-64", "R2MEDBiology"), _values(results, "bm25-lucene", "R2MEDBiology")
    diff = np.array([ours[q] - base[q] for q in sorted(base)])
    assert row.n == len(base) == 5
    assert row.delta == pytest.approx(diff.mean(), abs=1e-15) and row.mean == pytest.approx(np.mean(list(ours.values())), abs=1e-15)
    assert (row.wins, row.ties, row.losses) == (int((diff > 0).sum()), int((diff == 0).sum()), int((diff < 0).sum()))
    assert row.p_value == pytest.approx(stats.ttest_rel([ours[q] for q in sorted(base)], [base[q] for q in sorted(base)]).pvalue, abs=1e-15)
    assert row.effect_size == pytest.approx(diff.mean() / diff.std(ddof=1), abs=1e-12)
    assert row.ci_low <= row.delta <= row.ci_high
    pooled = next(c for c in report.comparisons if c.pooled and c.model == "hash-64")
    everything = np.concatenate([[(_values(results, "hash-64", t)[q] - _values(results, "bm25-lucene", t)[q])
                                  for q in sorted(_values(results, "bm25-lucene", t))] for t in R2MED])
    assert pooled.n == 40 and pooled.delta == pytest.approx(everything.mean(), abs=1e-12)


def test_compare_is_seeded_and_reproducible(results: Path):
    first = render_report(compare_results([results], seed=11, permutations=1000), "csv")
    assert first == render_report(compare_results([results], seed=11, permutations=1000), "csv")
    other = render_report(compare_results([results], seed=12, permutations=1000), "csv")
    assert first != other  # the seed reaches the randomization test and the bootstrap
    table = list(csv.DictReader(io.StringIO(first)))
    assert {row["seed"] for row in table} == {"11"} and {row["permutations"] for row in table} == {"1000"}


def test_default_baseline_is_the_best_model(results: Path):
    report = compare_results([results], permutations=500)
    means = {model: np.mean([np.mean(list(_values(results, model, t).values())) for t in R2MED]) for model in MODELS}
    assert report.baseline == max(means, key=means.get)


@pytest.mark.parametrize("fmt", ["csv", "html"])
def test_compare_formats_out_and_plot(results: Path, tmp_path: Path, fmt: str, capsys: pytest.CaptureFixture[str]):
    out, plot = tmp_path / f"compare.{fmt}", tmp_path / "compare.svg"
    assert main(["compare", str(results), "--format", fmt, "--out", str(out), "--plot", str(plot), "--permutations", "500",
                 "--test", "wilcoxon", "--correction", "bonferroni", "--alpha", "0.1"]) == 0
    text = out.read_text()
    if fmt == "csv":
        rows = list(csv.DictReader(io.StringIO(text)))
        assert {row["test"] for row in rows} == {"wilcoxon"} and {row["correction"] for row in rows} == {"bonferroni"}
        assert {row["alpha"] for row in rows} == {"0.1"}
    else:
        assert text.startswith("<!DOCTYPE html>") and "Wilcoxon signed-rank" in text and "Bonferroni correction" in text
    assert plot.is_file() and "all R2MED tasks" in plot.read_text()
    assert f"wrote {out}" in capsys.readouterr().out


def test_the_smallest_randomization_p_value_is_two_of_all_sign_patterns():
    import itertools

    diffs = np.array([0.05, 0.1, 0.2, 0.3, 0.4, 0.0])  # 5 non-zero differences, all of one sign: the most extreme case
    patterns = [np.array(signs) for signs in itertools.product((-1, 1), repeat=5)]
    extreme = sum(abs((signs * diffs[:5]).mean()) >= abs(diffs[:5].mean()) - 1e-12 for signs in patterns)
    assert (extreme, len(patterns)) == (2, 2**5)  # the observed pattern and its mirror
    assert sig.smallest_p_value("randomization", 5) == 2 / 2**5 == 0.0625
    assert sig.smallest_p_value("randomization", 0) == 1.0 and sig.smallest_p_value("t-test", 5) is None
    # 6 queries: 64 sign patterns fit in the permutations, so the p-value is the exact one, at the floor and not below
    assert sig.randomization_p_values(diffs[None, :], permutations=20_000, seed=3).tolist() == [0.0625]
    mixed = np.array([[0.3, -0.1, 0.2, 0.25, -0.05, 0.4, 0.1]])
    exact = sum(abs((np.array(signs) * mixed[0]).mean()) >= abs(mixed[0].mean()) - 1e-12
                for signs in itertools.product((-1, 1), repeat=7)) / 2**7
    assert sig.randomization_p_values(mixed, permutations=200).tolist() == [exact]  # any seed: nothing is drawn
    assert sig.randomization_p_values(mixed, permutations=200, seed=9).tolist() == [exact]
    (estimated,) = sig.randomization_p_values(np.tile(mixed, 2), permutations=10_000, seed=3)  # 2**14 > 10,000: drawn
    assert estimated >= sig.smallest_p_value("randomization", 14)


def test_compare_says_when_few_differences_cannot_be_significant_and_why_interval_and_test_disagree(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
):
    from r2med_plugin.integrations.demo import sample_dir

    for retriever in ("bm25-lucene", "bm25-robertson"):  # the demo's 6 Biology queries: robertson wins 5, ties 1
        write_outputs(evaluate_task("NanoR2MEDBiology", retriever, data_dir=sample_dir(), show_progress=False), tmp_path)
    report = compare_results([tmp_path], baseline="bm25-lucene")
    row = report.comparisons[0]
    assert (row.n, row.wins, row.ties, row.losses, row.significant) == (6, 5, 1, 0, False) and row.ci_low > 0
    assert ("NanoR2MEDBiology, bm25-robertson: 5 of 6 differences are not 0; a randomization test on 5 differences cannot "
            "give p below 2/2^5 = 0.0625, so it cannot be significant at alpha 0.05") in report.notes[0]
    assert report.notes[-1].startswith("the interval excludes 0 where the test is not significant, or the reverse "
                                       "(NanoR2MEDBiology, bm25-robertson; all NanoR2MED tasks, bm25-robertson); why an "
                                       "interval and a test can disagree: the interval is a bootstrap of the queries at hand")
    # at alpha 0.1 the floor no longer rules significance out: no floor note, and the rows agree
    relaxed = compare_results([tmp_path], baseline="bm25-lucene", alpha=0.1)
    assert not any("cannot be significant" in note for note in relaxed.notes)
    assert all(c.significant for c in relaxed.comparisons) and not any("disagree" in note for note in relaxed.notes)


def test_randomization_and_bonferroni_against_statsmodels_and_scipy():
    rng = np.random.default_rng(5)
    diffs = rng.normal(0.03, 0.2, size=(4, 120))
    p = sig.randomization_p_values(diffs, permutations=20_000, seed=1)
    for row, value in zip(diffs, p, strict=True):
        reference = stats.permutation_test((row,), lambda x, axis: np.mean(x, axis=axis), permutation_type="samples",
                                           vectorized=True, n_resamples=20_000, rng=2).pvalue
        assert abs(value - reference) <= 5 * np.sqrt(2) * sig.monte_carlo_error(reference, 20_000) + 2 / 20_000
    adjusted, rejected = sig.corrected(p, "bonferroni", 0.05)
    assert np.allclose(adjusted, np.minimum(1.0, p * 4)) and list(rejected) == list(adjusted <= 0.05)
    holm, _ = sig.corrected([0.01, 0.04, 0.03], "holm")
    assert holm.tolist() == pytest.approx([0.03, 0.06, 0.06])  # 3 x 0.01; then max(2 x 0.03, 0.03); then max(1 x 0.04, 0.06)
    assert sig.randomization_p_values(np.zeros((1, 30)), permutations=200).tolist() == [1.0]
    original = diffs.copy()
    sig.bootstrap_intervals(diffs, resamples=200)
    assert np.array_equal(diffs, original)  # inputs untouched


# --- the same runs through ranx and PyTerrier -------------------------------------------------------------------------


def _synthetic_runs(queries: int = 60, docs: int = 40) -> tuple[dict, dict[str, dict]]:
    """Binary qrels and three runs without tied scores (so every library ranks them alike)."""
    rng = np.random.default_rng(2024)
    qrels = {f"q{i:03d}": {f"d{j:03d}": 1 for j in rng.choice(docs, size=int(rng.integers(1, 5)), replace=False)} for i in range(queries)}
    runs = {}
    for name, skill in (("base", 0.6), ("better", 0.9), ("worse", 0.3)):
        runs[name] = {}
        for query_id, judged in qrels.items():
            scores = rng.permutation(docs).astype(float) + rng.random(docs) * 1e-3
            scores += np.array([skill * docs * rng.random() if f"d{j:03d}" in judged else 0.0 for j in range(docs)])
            runs[name][query_id] = {f"d{j:03d}": float(s) for j, s in enumerate(scores)}
    return qrels, runs


def _write_synthetic(folder: Path, qrels: dict, runs: dict[str, dict], task: str = "R2MEDBiology") -> Path:
    for name, run in runs.items():
        result = folder / "results" / name / "r1" / f"{task}.json"
        result.parent.mkdir(parents=True, exist_ok=True)
        (result.parent / "model_meta.json").write_text(json.dumps({"name": name, "revision": "r1"}))
        per_query = evaluate_run_per_query(qrels, run)
        mean = float(np.mean([v["ndcg_at_10"] for v in per_query.values()]))
        result.write_text(json.dumps({"dataset_revision": "rev", "task_name": task, "date": 1.0, "evaluation_time": 1.0,
                                      "scores": {"test": [{"ndcg_at_10": mean, "main_score": mean, "hf_subset": "default"}]}}))
        write_per_query(per_query_path(result), per_query_frame(task, per_query), ranked=top_ranked(qrels, run))
    return folder


def test_per_query_ndcg_equals_pytrec_eval_and_ranx(tmp_path: Path):
    import pytrec_eval
    from ranx import Qrels, Run, evaluate

    qrels, runs = _synthetic_runs()
    folder = _write_synthetic(tmp_path, qrels, runs)
    scores = load_scores([folder], "ndcg_at_10")
    for name, run in runs.items():
        ours = dict(zip(scores.get(name, "R2MEDBiology").query_ids, scores.get(name, "R2MEDBiology").values, strict=True))
        reference = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut.10"}).evaluate(run)
        assert ours == {query_id: values["ndcg_cut_10"] for query_id, values in reference.items()}
        ranx_values = evaluate(Qrels(qrels), Run(run), "ndcg@10", return_mean=False)
        assert np.allclose([ours[q] for q in sorted(qrels)], ranx_values, atol=1e-12)  # ranx orders queries by id


def test_p_values_equal_ranx_compare(tmp_path: Path):
    from ranx import Qrels, Run, compare

    qrels, runs = _synthetic_runs()
    folder = _write_synthetic(tmp_path, qrels, runs)
    ranx_runs = [Run(run, name=name) for name, run in runs.items()]
    student = compare(Qrels(qrels), ranx_runs, ["ndcg@10"], stat_test="student", max_p=0.05)
    ours = compare_results([folder], baseline="base", test="t-test", correction="none")
    for c in (c for c in ours.comparisons if not c.pooled):
        assert c.p_value == pytest.approx(student.comparisons["base", c.model]["ndcg@10"]["p_value"], rel=1e-12, abs=1e-15)
        wtl = student.win_tie_loss[(c.model, "base")]["ndcg@10"]
        assert (c.wins, c.ties, c.losses) == (wtl["W"], wtl["T"], wtl["L"])
    permutations = 10_000
    fisher = compare(Qrels(qrels), ranx_runs, ["ndcg@10"], stat_test="fisher", n_permutations=permutations, random_seed=42, max_p=0.05)
    ours = compare_results([folder], baseline="base", test="randomization", correction="none", seed=42, permutations=permutations)
    for c in (c for c in ours.comparisons if not c.pooled):
        theirs = fisher.comparisons["base", c.model]["ndcg@10"]["p_value"]
        # two independent Monte-Carlo estimates of one p-value: within 5 standard errors of their difference
        # (ranx counts k/B, we (k+1)/(B+1): at most 1/B apart)
        assert abs(c.p_value - theirs) <= 5 * np.sqrt(2) * sig.monte_carlo_error(max(theirs, 1 / permutations), permutations) + 1 / permutations


@pytest.mark.parametrize(("test", "pyterrier_test"), [("t-test", "t"), ("wilcoxon", "wilcoxon")])
def test_p_values_equal_pyterrier_experiment_with_holm(tmp_path: Path, test: str, pyterrier_test: str):
    import pandas as pd
    import pyterrier as pt

    qrels, runs = _synthetic_runs()
    folder = _write_synthetic(tmp_path, qrels, runs)
    names = ["base", "better", "worse"]
    topics = pd.DataFrame({"qid": sorted(qrels), "query": "x"})
    qrels_frame = pd.DataFrame([(q, d, r) for q, judged in qrels.items() for d, r in judged.items()], columns=["qid", "docno", "label"])
    systems = [pt.Transformer.from_df(pd.DataFrame([(q, "x", d, s) for q, ranked in runs[name].items() for d, s in ranked.items()],
                                                   columns=["qid", "query", "docno", "score"])) for name in names]
    table = pt.Experiment(systems, topics, qrels_frame, eval_metrics=["ndcg_cut_10"], names=names, baseline=0,
                          correction="holm", test=pyterrier_test).set_index("name")
    ours = compare_results([folder], baseline="base", test=test, correction="holm")
    for c in (c for c in ours.comparisons if not c.pooled):
        assert c.mean == pytest.approx(table.loc[c.model, "ndcg_cut_10"], abs=1e-12)
        assert c.p_value == pytest.approx(table.loc[c.model, "ndcg_cut_10 p-value"], rel=1e-12, abs=1e-15)
        assert c.p_adjusted == pytest.approx(table.loc[c.model, "ndcg_cut_10 p-value corrected"], rel=1e-12, abs=1e-15)
        assert c.significant == bool(table.loc[c.model, "ndcg_cut_10 reject"])
        assert (c.wins, c.losses) == (table.loc[c.model, "ndcg_cut_10 +"], table.loc[c.model, "ndcg_cut_10 -"])


# --- bad input --------------------------------------------------------------------------------------------------------


def test_runs_over_different_query_sets_are_refused(results_copy: Path, capsys: pytest.CaptureFixture[str]):
    path = _sidecar(results_copy, "hash-64", "R2MEDBiology")
    sidecar = read_per_query(path)
    dropped = sidecar.frame["query_id"][0]
    write_per_query(path, sidecar.frame.filter(pl.col("query_id") != dropped), info=sidecar.info, ranked=sidecar.ranked)
    assert main(["compare", str(results_copy), "--baseline", "bm25-lucene"]) == 2
    err = capsys.readouterr().err
    assert "R2MEDBiology: hash-64 was evaluated on 4 queries" in err and str(path) in err
    assert "Paired tests need the same queries" in err and f"{dropped!r} only in" in err


def test_a_task_on_other_data_is_left_out_and_the_others_compared(results_copy: Path, capsys: pytest.CaptureFixture[str]):
    path = _sidecar(results_copy, "hash-64", "R2MEDBiology")
    sidecar = read_per_query(path)
    write_per_query(path, sidecar.frame, info={**sidecar.info, "paired_data": "another-revision+files-0123abcd"},
                    ranked=sidecar.ranked)
    assert main(["compare", str(results_copy), "--baseline", "bm25-lucene", "--permutations", "200"]) == 0
    out = capsys.readouterr().out
    rows = [line for line in out.splitlines() if line.startswith("| R2MED") or line.startswith("| all ")]
    assert not any(line.startswith("| R2MEDBiology | hash-64 |") for line in rows)
    assert len(rows) == 8 * 2 - 1 + 2  # every other task of both models, and both pooled rows
    (pooled,) = [line for line in rows if line.startswith("| all R2MED tasks") and "| hash-64 |" in line]
    assert "without R2MEDBiology: other data" in pooled and "| 35 |" in pooled  # 7 tasks x 5 queries
    (other,) = [line for line in rows if line.startswith("| all R2MED tasks") and "| hash-8 |" in line]
    assert "without" not in other and "| 40 |" in other
    (note,) = [line for line in out.splitlines() if "is left out for hash-64" in line]
    assert "R2MEDBiology" in note and "dataset revision another-revision, files 0123abcd" in note and str(path) in note


@pytest.fixture(scope="module")
def demo_and_edited_copy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """bm25-lucene on the demo sample and bm25-robertson on a copy lacking one qrels row, in one output folder: both
    record ``dataset_revision: synthetic-sample``; their ``dataset_files_fingerprint`` differ."""
    from r2med_plugin.integrations.demo import sample_dir
    from tests.support.builders import demo_copy_without_a_qrels_row

    root = tmp_path_factory.mktemp("edited-demo")
    edited = demo_copy_without_a_qrels_row(root / "edited")
    write_outputs(evaluate_task("NanoR2MEDBiology", "bm25-lucene", data_dir=sample_dir(), show_progress=False), root / "out")
    write_outputs(evaluate_task("NanoR2MEDBiology", "bm25-robertson", data_dir=edited, show_progress=False), root / "out")
    return root / "out"


def _recorded_files(out: Path, model: str) -> str:
    result = out / "results" / model / "r2med-plugin-0.2.0" / "NanoR2MEDBiology.json"
    return json.loads(result.read_text(encoding="utf-8"))["r2med_provenance"]["dataset_files_fingerprint"]


def test_results_on_other_files_under_one_revision_label_are_refused(demo_and_edited_copy: Path,
                                                                     capsys: pytest.CaptureFixture[str]):
    out = demo_and_edited_copy
    demo, edited = _recorded_files(out, "bm25-lucene"), _recorded_files(out, "bm25-robertson")
    assert demo != edited
    assert main(["compare", str(out), "--baseline", "bm25-lucene"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("r2med: error: NanoR2MEDBiology: bm25-robertson was evaluated on dataset revision synthetic-sample, "
                          f"files {edited} (")
    assert f"bm25-lucene on dataset revision synthetic-sample, files {demo} (" in err and "other data" in err
    with pytest.raises(ValueError, match=f"different dataset revisions or files .*files {demo}"):
        inspect_query([out], "NanoR2MEDBiology", "nanor2medbiology-q-000")


def test_sidecars_of_earlier_releases_are_paired_by_their_results_files_too(demo_and_edited_copy: Path, tmp_path: Path):
    """A sidecar written before ``paired_data`` existed: its result file's recorded fingerprint decides."""
    out = tmp_path / "out"
    shutil.copytree(demo_and_edited_copy, out)
    for model in ("bm25-lucene", "bm25-robertson"):
        path = out / "results" / model / "r2med-plugin-0.2.0" / "NanoR2MEDBiology.per_query.parquet"
        sidecar = read_per_query(path)
        info = {key: value for key, value in sidecar.info.items() if key != "paired_data"}
        write_per_query(path, sidecar.frame, info=info, ranked=sidecar.ranked)
    with pytest.raises(ValueError, match="other data"):
        compare_results([out], baseline="bm25-lucene")


def test_missing_per_query_file_is_named(results_copy: Path, capsys: pytest.CaptureFixture[str]):
    path = _sidecar(results_copy, "hash-8", "R2MEDMedQADiag")
    path.unlink()
    assert main(["compare", str(results_copy)]) == 2
    err = capsys.readouterr().err
    assert str(path.with_name("R2MEDMedQADiag.json")) in err and "per-query file R2MEDMedQADiag.per_query.parquet is missing" in err
    assert "evaluate that model again" in err


def test_only_one_model_is_refused(results_copy: Path, capsys: pytest.CaptureFixture[str]):
    for model in ("hash-64", "hash-8"):
        shutil.rmtree(results_copy / "results" / model)
    assert main(["compare", str(results_copy)]) == 2
    assert "compare needs at least two models with ndcg_at_10 results; the folders hold only bm25-lucene" in capsys.readouterr().err


def test_metric_that_is_not_there(results: Path, capsys: pytest.CaptureFixture[str]):
    assert main(["compare", str(results), "--metric", "ndcg_at_11"]) == 2
    err = capsys.readouterr().err
    assert "no per-query values of 'ndcg_at_11'; did you mean " in err and "ndcg_at_10" in err and "choose one with --metric" in err
    assert main(["compare", str(results), "--metric", "official_ndcg_at_10", "--permutations", "200"]) == 0  # official layouts too
    capsys.readouterr()


@pytest.mark.parametrize(("argv", "message"), [
    (["--baseline", "bm25-lucen"], "--baseline 'bm25-lucen' is not among the models in the folders (bm25-lucene, hash-64, hash-8). Did you mean 'bm25-lucene'?"),
    (["--plot", "chart.pdf"], "--plot chart.pdf: the chart is written as .png or .svg"),
    (["--permutations", "10"], "--permutations must be at least 100"),
    (["--alpha", "1.5"], "must lie strictly between 0 and 1"),
])
def test_bad_arguments_are_named(results: Path, capsys: pytest.CaptureFixture[str], argv: list[str], message: str):
    try:
        code = main(["compare", str(results), *argv])
    except SystemExit as exit_info:  # argparse's own checks
        code = exit_info.code
    assert code == 2 and message in capsys.readouterr().err


def test_folders_without_our_results(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    assert main(["compare", str(tmp_path)]) == 2
    assert "no results of R2MED or NanoR2MED tasks" in capsys.readouterr().err
    assert main(["compare", str(tmp_path / "absent")]) == 2
    assert "absent is not a folder of MTEB results" in capsys.readouterr().err


def test_a_baseline_without_the_metric_is_named_as_such(results_copy: Path, capsys: pytest.CaptureFixture[str]):
    """A baseline run too shallow for the metric (--top-k 10 holds no recall_at_100) is there, only without that metric."""
    import polars as pl

    for task in R2MED:
        path = _sidecar(results_copy, "bm25-lucene", task)
        pl.read_parquet(path).filter(pl.col("metric") != "recall_at_100").write_parquet(path)
    assert main(["compare", str(results_copy), "--baseline", "bm25-lucene", "--metric", "recall_at_100"]) == 2
    err = capsys.readouterr().err
    assert "--baseline 'bm25-lucene' has results here but none with per-query recall_at_100" in err
    assert "is not among the models" not in err


def test_two_folders_holding_one_result_twice(results: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    shutil.copytree(results / "results" / "hash-8", tmp_path / "again" / "results" / "hash-8")
    assert main(["compare", str(results), str(tmp_path / "again")]) == 2
    err = capsys.readouterr().err
    assert "hash-8 has two R2MED" in err and "results with ndcg_at_10" in err and "pass only one of them" in err


# --- r2med inspect ----------------------------------------------------------------------------------------------------


def test_inspect_one_query(results: Path, capsys: pytest.CaptureFixture[str]):
    query = sorted(_values(results, "bm25-lucene", "R2MEDBiology"))[1]
    assert main(["inspect", str(results), "--task", "R2MEDBiology", "--query", query]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"# R2MEDBiology, query {query}") and all(f"## {model}" in out for model in MODELS)
    views = {view.model: view for view in inspect_query([results], "R2MEDBiology", query)}
    view = views["hash-8"]
    assert len(view.top) == 10 and view.value == _values(results, "hash-8", "R2MEDBiology")[query]
    # relevance marks and ranks agree with the qrels' positives
    assert {doc for doc, _, rel in view.top if rel > 0} == {doc for doc, rank in view.positives.items() if rank is not None and rank <= 10}
    assert f"| {view.top[0][0]} |" in out


def test_inspect_one_query_refuses_a_model_with_two_results_of_the_task(results: Path, tmp_path: Path, capsys):
    """Two folders holding one model's result of the task: the view shown would be whichever folder came first."""
    shutil.copytree(results / "results" / "hash-8", tmp_path / "again" / "results" / "hash-8")
    query = sorted(_values(results, "bm25-lucene", "R2MEDBiology"))[1]
    for order in ([results, tmp_path / "again"], [tmp_path / "again", results]):
        assert main(["inspect", *map(str, order), "--task", "R2MEDBiology", "--query", query]) == 2
        err = capsys.readouterr().err
        assert "hash-8 has two R2MEDBiology results" in err and "pass only one of them" in err


def test_inspect_worst_queries(results: Path, capsys: pytest.CaptureFixture[str]):
    assert main(["inspect", str(results), "--worst", "3", "--baseline", "bm25-lucene"]) == 0
    out = capsys.readouterr().out
    assert "## hash-8: 3 largest losses to bm25-lucene (ndcg_at_10)" in out
    losses = worst_queries([results], "bm25-lucene", 3)["hash-64"]
    every = sorted(_values(results, "hash-64", t)[q] - _values(results, "bm25-lucene", t)[q]
                   for t in R2MED for q in _values(results, "bm25-lucene", t))
    assert [loss.diff for loss in losses] == every[:3] and all(loss.diff < 0 for loss in losses)
    only = worst_queries([results], "bm25-lucene", 50, task="R2MEDBiology")["hash-8"]
    assert {loss.task for loss in only} == {"R2MEDBiology"} and len(only) <= 5


@pytest.mark.parametrize(("argv", "message"), [
    (["--task", "R2MEDBiology", "--query", "nope"], "--query 'nope' is not an evaluated query of R2MEDBiology"),
    (["--query", "q"], "--query needs --task"),
    (["--worst", "3"], "--worst N needs --baseline MODEL"),
    ([], "say what to inspect"),
    (["--task", "R2MEDBiolgy", "--query", "q"], "Did you mean 'R2MEDBiology'"),
    (["--task", "R2MEDBiology", "--query", "q", "--baseline", "bm25-lucene"], "--baseline reaches no code here"),
])
def test_inspect_bad_input(results: Path, capsys: pytest.CaptureFixture[str], argv: list[str], message: str):
    assert main(["inspect", str(results), *argv]) == 2
    assert message in capsys.readouterr().err


# --- r2med leaderboard --significance --------------------------------------------------------------------------------


def test_leaderboard_marks_ties_and_intervals(results_copy: Path, capsys: pytest.CaptureFixture[str]):
    # a second copy of the best model under another name: not significantly different from it
    shutil.copytree(results_copy / "results" / "bm25-lucene", results_copy / "results" / "bm25-twin")
    for meta in (results_copy / "results" / "bm25-twin").rglob("model_meta.json"):
        meta.write_text(json.dumps({"name": "bm25-twin", "revision": meta.parent.name}))
    assert main(["leaderboard", str(results_copy), "--significance"]) == 0
    out = capsys.readouterr().out
    header = next(line for line in out.splitlines() if line.startswith("| Rank"))
    assert "| Avg. | vs best |" in header
    marks = {line.split(" | ")[2].split(" (")[0]: line.split(" | ")[4] for line in out.splitlines() if line.startswith("| ") and "---" not in line and "Rank" not in line}
    assert set(marks.values()) == {"best", "tied", "below"} and marks["hash-8"] == "below"
    assert {marks["bm25-lucene"], marks["bm25-twin"]} == {"best", "tied"}
    assert "paired randomization test" in out and "Holm correction over the 3 rows compared" in out and "seed 0" in out
    row = next(line for line in out.splitlines() if "| hash-64" in line)
    low, high = (float(x) for x in row.split("[")[1].split("]")[0].split(", "))
    average = float(row.split(" | ")[3].split(" [")[0])
    assert low <= average <= high


def test_leaderboard_significance_with_one_row_of_yours_tests_nothing_and_says_so(results_copy: Path,
                                                                                   capsys: pytest.CaptureFixture[str]):
    """With one model of yours (beside the published rows: `--compare-published`, which the fixture's count drift keeps
    out of the ranking here), the table said "vs best: best" and "Holm correction over the 0 rows compared": no column
    for a test that was not run, and the reason instead."""
    for model in ("hash-8", "hash-64"):
        shutil.rmtree(results_copy / "results" / model)
    assert main(["leaderboard", str(results_copy), "--significance"]) == 0
    out = capsys.readouterr().out
    header = next(line for line in out.splitlines() if line.startswith("| Rank"))
    assert "vs best" not in header and "| best |" not in out and "over the 0 rows" not in out
    assert "vs best: not tested, bm25-lucene" in out and "is the only row of yours with per-query scores on these data" in out
    row = next(line for line in out.splitlines() if "| bm25-lucene" in line)
    assert "[" in row.split(" | ")[3]  # its interval is still shown


def test_leaderboard_significance_is_pure_and_names_missing_files(results_copy: Path):
    _sidecar(results_copy, "hash-8", "R2MEDIIYiClinical").unlink()
    tables = build_leaderboards([results_copy])
    before = [(row.interval, row.versus_best, row.significance) for row in tables["r2med"]]
    rows = add_significance(tables["r2med"], permutations=500)
    assert [(row.interval, row.versus_best, row.significance) for row in tables["r2med"]] == before  # inputs untouched
    hash8 = next(row for row in rows if row.retriever == "hash-8")
    assert hash8.versus_best == "-" and "not tested, no per-query file" in hash8.significance and "R2MEDIIYiClinical" in hash8.significance
    text = render_many({"r2med": rows})
    assert "hash-8" in text and "not tested" in text


def test_cli_choices_match_the_statistics_module():
    from r2med_plugin.cli import compare as cli_compare

    assert (cli_compare.TESTS, cli_compare.CORRECTIONS) == (sig.TESTS, sig.CORRECTIONS)
    assert (cli_compare.DEFAULT_SEED, cli_compare.DEFAULT_PERMUTATIONS) == (sig.DEFAULT_SEED, sig.DEFAULT_PERMUTATIONS)


def test_bca_intervals_match_scipy_bootstrap():
    rng = np.random.default_rng(8)
    diffs = rng.exponential(0.1, size=(3, 80)) - 0.05  # skewed: BCa differs from the percentile interval
    ours = sig.bootstrap_intervals(diffs, resamples=20_000, seed=1)
    reference = stats.bootstrap((diffs,), np.mean, axis=-1, n_resamples=20_000, method="BCa", rng=2).confidence_interval
    width = ours[:, 1] - ours[:, 0]
    # two Monte-Carlo estimates of the same interval: endpoints within a few percent of its width
    assert np.all(np.abs(ours[:, 0] - reference.low) < 0.05 * width) and np.all(np.abs(ours[:, 1] - reference.high) < 0.05 * width)
    assert np.array_equal(sig.bootstrap_intervals(diffs, resamples=500, seed=4), sig.bootstrap_intervals(diffs, resamples=500, seed=4))
    flat = sig.bootstrap_intervals(np.full((1, 10), 0.25), resamples=200)
    assert flat.tolist() == [[0.25, 0.25]]


def test_significance_says_why_it_added_nothing(results_copy: Path, capsys: pytest.CaptureFixture[str]):
    """Found by the third new-user trial: with --compare-published every fixture row is unranked (count drift), and
    --significance added no interval, no column and no word."""
    assert main(["leaderboard", str(results_copy), "--compare-published", "--significance"]) == 0
    out = capsys.readouterr().out
    assert "--significance: no interval and no test, as no row of yours is ranked in this table" in out


def test_a_model_sharing_no_task_with_the_baseline_is_said_to_be_not_compared(tmp_path: Path,
                                                                           capsys: pytest.CaptureFixture[str]):
    """Not "no losses", and no pooled row promised: nothing was compared."""
    qrels, runs = _synthetic_runs(queries=8)
    _write_synthetic(tmp_path, qrels, {"base": runs["base"], "worse": runs["worse"]}, task="R2MEDBiology")
    _write_synthetic(tmp_path, qrels, {"elsewhere": runs["better"]}, task="R2MEDPMCTreatment")
    assert main(["inspect", str(tmp_path), "--worst", "3", "--baseline", "base"]) == 0
    out = capsys.readouterr().out
    assert "## elsewhere: not compared with base" in out and "no task holds both elsewhere and base" in out
    assert "## worse: 3 largest losses to base" in out
    assert worst_queries([tmp_path], "base", 3)["elsewhere"] is None
    report = compare_results([tmp_path], baseline="base")
    assert {c.model for c in report.comparisons} == {"worse"}
    assert any(note.startswith("elsewhere: no result for R2MEDBiology; no task holds both it and the baseline base")
               for note in report.notes)
    assert "R2MEDPMCTreatment: the baseline base has no result; not compared" in report.notes
    assert not any(note.startswith("worse:") for note in report.notes)  # compared where the baseline has a result
