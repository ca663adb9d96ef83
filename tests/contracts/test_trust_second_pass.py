"""Issue 20: paths that kept or showed a wrong result, and flags that reached no code."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from r2med_plugin.catalog import list_tasks
from r2med_plugin.reporting.leaderboard import build_leaderboard, render
from r2med_plugin.reporting.submission import export_submission
from tests.support.builders import official_row, write_result

R2MED = list_tasks("r2med")
NANO = list_tasks("nano")


# --- item 2: results on two different mirror files never share a row, and are never picked silently --------


def _two_mirrors(tmp_path: Path) -> tuple[Path, Path]:
    """mirror A's results for every task; mirror B differs in Biology's files only (a second output folder)."""
    a, b = tmp_path / "a", tmp_path / "b"
    for spec in R2MED:
        write_result(a, "org/m", spec.name, official_row(0.3322), f"{spec.revision}+unverified-files-c1f3a2b4{spec.name[:4].lower()}", date=1.0)
    biology = R2MED[0]
    write_result(b, "org/m", biology.name, official_row(0.4812), f"{biology.revision}+unverified-files-48bb0000", date=2.0)
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
        write_result(tmp_path, "org/m", spec.name, official_row(0.2), f"local-{index:016x}")
    (row,) = build_leaderboard([tmp_path], benchmark="nano")
    assert row.ranked and row.note == ""


# --- item 3: two sets of weights under one name never share a row silently ------------------------------


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


# --- ir_datasets: a count never changes once the data is iterated ----------------------------------------


def test_ir_datasets_counts_of_a_drifted_mirror_are_its_real_counts_before_and_after_iteration(
        mirror_env: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("IR_DATASETS_HOME", str(tmp_path / "irds"))
    from tests.data_package.test_mirror_revisions import _fresh_dataset

    import r2med_plugin

    data = r2med_plugin.load_task("NanoR2MEDBiology")
    dataset = _fresh_dataset("nano-r2med/biology")
    qrels = sum(len(judged) for judged in data.qrels.values())
    before = (dataset.docs_count(), dataset.queries_count(), dataset.qrels_count())
    assert before == (data.corpus.height, data.queries.height, qrels)  # not the dataset card's 10000 documents
    assert sum(1 for _ in dataset.docs_iter()) == data.corpus.height
    assert (dataset.docs_count(), dataset.queries_count(), dataset.qrels_count()) == before


# --- item 5: --output is checked before any work -----------------------------------------------------------


def test_an_unusable_output_is_refused_before_any_work(mirror_env: Path, tmp_path: Path, capsys, monkeypatch):
    from r2med_plugin.cli import main

    ran = []
    monkeypatch.setattr("r2med_plugin.evaluation.runner.execute", lambda *a, **k: ran.append(a))
    (tmp_path / "a-file").write_text("x")
    for output, problem in ((tmp_path / "a-file", "is a file"), (tmp_path / "a-file" / "sub", "a-file is a file")):
        assert main(["evaluate", "--task", "NanoR2MEDBiology", "--retriever", "bm25-lucene", "--output", str(output)]) == 2
        error = capsys.readouterr().err
        assert f"--output {output}" in error and problem in error and "Traceback" not in error
    assert main(["evaluate", "--task", "NanoR2MEDBiology", "--rerank", "org/ce", "--first-stage", "bm25-lucene",
                 "--output", str(tmp_path / "a-file")]) == 2
    assert "is a file" in capsys.readouterr().err
    assert ran == []


# --- item 7: clear errors ------------------------------------------------------------------------------------


def test_clear_errors_name_the_argument_and_the_fix(mirror_env: Path, tmp_path: Path, capsys):
    from r2med_plugin.cli import main

    cases = [
        (["evaluate", "--task", "NanoR2MEDBiology", "--retriever", "org/m", "--device", "banana"],
         "--device 'banana' is not a device torch knows"),
        (["generate", "--task", "R2MEDBiology", "--method", "hyde", "--llm", "m", "--base-url", "http://127.0.0.1:9/v1",
          "--extra-body", "{bad json"], "--extra-body is not valid JSON"),
        (["leaderboard", str(tmp_path), "--plot", str(tmp_path / "x.jpg")], "--plot"),
        (["evaluate", "--task", "NanoR2MEDBiologyReranking", "--retriever", "bm25-lucene"],
         "mteb run -t NanoR2MEDBiologyReranking -m <cross-encoder>"),
    ]
    for argv, expected in cases:
        assert main(argv) == 2, argv
        captured = capsys.readouterr()
        assert expected in captured.err and "Traceback" not in captured.err, captured.err
        assert captured.out == ""  # e.g. no leaderboard table printed before --plot is refused
    assert main(["evaluate", "--task", "NanoR2MEDBiologyReranking", "--retriever", "bm25-lucene"]) == 2
    assert "--candidates hybrid --candidates-only" in capsys.readouterr().err


# --- noise: --quiet says when each task starts and ends; a mirror warning shows once -------------------------------


def test_quiet_prints_one_line_per_task_start_and_end(mirror_env: Path, capsys):
    from r2med_plugin.cli import main

    assert main(["evaluate", "--task", "NanoR2MEDBiology", "NanoR2MEDMedQADiag", "--retriever", "bm25-robertson", "--quiet"]) == 0
    out = capsys.readouterr().out.splitlines()
    started = [line for line in out if line.endswith(": started")]
    finished = [line for line in out if ": finished in " in line]
    assert started == ["NanoR2MEDBiology: started", "NanoR2MEDMedQADiag: started"] and len(finished) == 2


def test_the_unverified_mirror_warning_shows_once_per_mirror(mirror_env: Path, capsys):
    from r2med_plugin.cli import main

    nano = [spec.name for spec in NANO[:3]]
    assert main(["evaluate", "--task", *nano, "--retriever", "bm25-robertson", "--quiet"]) == 0
    err = capsys.readouterr().err
    assert err.count("records no commit it was downloaded at") == 1, err
    assert f"the mirror {mirror_env}:" in err


def test_the_unverified_mirror_warning_shows_once_for_tasks_of_several_repos(mirror_env: Path, capsys):
    """Each R2MED task is a repo of its own: the warning named the repo, so `reproduce` printed it 8 times, --quiet or
    not. It names the mirror folder now, one line per command."""
    from r2med_plugin.cli import main

    tasks = ["R2MEDBiology", "R2MEDIIYiClinical", "R2MEDPMCTreatment"]
    assert main(["evaluate", "--task", *tasks, "--retriever", "bm25-robertson", "--quiet"]) == 0
    err = capsys.readouterr().err
    assert err.count(f"the mirror {mirror_env}: a repo in it does not record every file read at one commit") == 1, err
    assert err.count("a repo in it") == 1  # and the files that contradict their published hash are named apart
    line = next(line for line in err.splitlines() if line.startswith("R2MEDIIYiClinical: 3 files of "))
    assert str(mirror_env / "R2MED" / "IIYi-Clinical") in line and "are not the files of revision" in line
    assert all(f"{name}: " in line for name in ("corpus.jsonl", "qrels.jsonl", "query.jsonl"))
    assert all(err.count(f"{task}: ") and sum(line.startswith(f"{task}: ") and "not the file" in line
                                             for line in err.splitlines()) <= 1 for task in tasks)  # a line per task


# --- export --------------------------------------------------------------------------------------------------------


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


# --- generation leaves no lock file, and a failed first run no folder -----------------------------------------------


def test_generation_leaves_no_lock_file_and_a_failed_run_no_folder(mirror_env: Path, tmp_path: Path, monkeypatch, capsys):
    from r2med_plugin.cli import main
    from tests.support.loopback_openai import LoopbackOpenAI

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    with LoopbackOpenAI(api_key="sk-test", max_seconds=60) as server:
        base = ["generate", "--task", "R2MEDBiology", "--method", "hyde", "--base-url", server.base_url,
                "--out", str(tmp_path / "exp"), "--quiet", "--max-retries", "0"]
        assert main([*base, "--llm", "no-such-llm"]) == 1  # 404 for every query
        assert "unknown model 'no-such-llm'" in capsys.readouterr().err
        assert not (tmp_path / "exp").exists()
        assert main([*base, "--llm", "test-llm"]) == 0
    folder = tmp_path / "exp" / "Biology" / "hyde" / "test-llm"
    assert sorted(path.name for path in folder.iterdir()) == ["manifest.json", "query_with_hydoc.jsonl", "usage.jsonl"]


# --- the packaged model by a short alias, filed under its hub name and revision -------------------------------------


def test_the_packaged_minilm_alias_is_filed_under_its_hub_name_and_revision(mirror_env: Path, tmp_path: Path, capsys):
    from r2med_plugin.cli import main
    from r2med_plugin.models.identity import PACKAGED_MODELS

    packaged = PACKAGED_MODELS["minilm-packaged"]
    assert main(["evaluate", "--task", "NanoR2MEDBiology", "--retriever", "minilm-packaged", "--output", str(tmp_path), "--quiet"]) == 0
    result = tmp_path / "results" / packaged.hub_name.replace("/", "__") / packaged.hub_revision / "NanoR2MEDBiology.json"
    payload = json.loads(result.read_text())
    assert payload["r2med_provenance"]["model_name"] == packaged.hub_name
    assert main(["evaluate", "--task", "NanoR2MEDBiology", "--retriever", "minilm-packaged", "--model-revision", "v1"]) == 2
    assert "drop --model-revision" in capsys.readouterr().err


# --- the new-user trial's findings ----------------------------------------------------------------------------------


def test_an_edited_released_expansion_file_is_never_filed_as_verified_data(mirror_copy: Path, monkeypatch):
    import os

    import r2med_plugin
    from r2med_plugin.data.expansions import list_expansions, released_expansion_file
    from r2med_plugin.evaluation.runner import evaluate_task
    from tests.fixture_mirror import record_download_metadata

    spec = r2med_plugin.get_task_spec("R2MEDBioinformatics")
    record_download_metadata(mirror_copy / spec.hub_repo, spec.revision)
    expansion = list_expansions(spec.name)[0]
    run = dict(retriever="bm25-lucene", expansion=expansion, data_dir=mirror_copy, accept_drift=True, show_progress=False)
    before = evaluate_task(spec.name, **run)
    assert before.dataset_revision_verified and before.data.result_revision == f"{spec.revision}+count-drift"
    _, path = released_expansion_file(spec, expansion, data_dir=mirror_copy, accept_drift=True)
    path.write_text(path.read_text().replace("The answer", "Perhaps the answer"))
    later = path.stat().st_mtime + 60
    os.utime(path, (later, later))
    after = evaluate_task(spec.name, **run)
    assert not after.dataset_revision_verified
    assert after.data.result_revision.startswith(f"{spec.revision}+unverified-files-")
    plain = evaluate_task(spec.name, "bm25-lucene", data_dir=mirror_copy, accept_drift=True, show_progress=False)
    assert plain.dataset_revision_verified  # the task's own files are still the pinned ones


def test_released_expansion_versions_on_an_unverified_mirror_never_share_a_revision(mirror_copy: Path):
    from r2med_plugin.catalog import get_task_spec
    from r2med_plugin.data.expansions import list_expansions, released_expansion_file
    from r2med_plugin.evaluation.runner import evaluate_task

    expansion = list_expansions("R2MEDBiology")[0]
    run = dict(retriever="bm25-lucene", expansion=expansion, data_dir=mirror_copy, accept_drift=True, show_progress=False)
    first = evaluate_task("R2MEDBiology", **run).data.result_revision
    _, path = released_expansion_file(get_task_spec("R2MEDBiology"), expansion, data_dir=mirror_copy, accept_drift=True)
    path.write_text(path.read_text().replace("The answer", "Perhaps the answer"))
    assert evaluate_task("R2MEDBiology", **run).data.result_revision != first


def test_generation_never_resumes_a_folder_made_from_other_data(mirror_env: Path, mirror_copy: Path, tmp_path: Path, monkeypatch):
    from r2med_plugin.generation import generate_expansions
    from tests.support.loopback_openai import LoopbackOpenAI

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    with LoopbackOpenAI(api_key="sk-test", max_seconds=60) as server:
        first = generate_expansions("R2MEDBiology", "hyde", "test-llm", server.base_url, out=tmp_path / "exp", show_progress=False)
        lines = first.folder.joinpath("query_with_hydoc.jsonl").read_text().splitlines()
        first.folder.joinpath("query_with_hydoc.jsonl").write_text("\n".join(lines[:-1]) + "\n")  # one query left to do
        queries = mirror_copy / "R2MED" / "Biology" / "query.jsonl"
        queries.write_text(queries.read_text().replace("insulin", "glucagon", 1))
        with pytest.raises(ValueError, match="another configuration .*dataset_revision"):
            generate_expansions("R2MEDBiology", "hyde", "test-llm", server.base_url, out=tmp_path / "exp",
                                data_dir=mirror_copy, show_progress=False)


def test_rows_on_drifted_data_are_never_ranked_next_to_published_rows(tmp_path: Path):
    for spec in R2MED:
        write_result(tmp_path, "org/fixture-model", spec.name, official_row(0.99), f"{spec.revision}+count-drift")
    rows = build_leaderboard([tmp_path], compare_published=True)
    (drifted,) = [row for row in rows if row.source == "yours"]
    assert not drifted.ranked and "counts differ from the dataset card" in drifted.excluded
    assert rows[0].source == "published"  # 99.0 is not placed above the published rows
    (alone,) = build_leaderboard([tmp_path])  # among its own kind (a fixture), it is ranked, and says so
    assert alone.ranked and "counts differ from the dataset card" in alone.note


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


def test_non_positive_counts_are_refused_by_the_parser(capsys):
    from r2med_plugin.cli import main

    for argv in (["evaluate", "--task", "NanoR2MEDBiology", "--retriever", "org/m", "--batch-size", "0"],
                 ["evaluate", "--task", "NanoR2MEDBiology", "--retriever", "bm25-lucene", "--workers", "-1"]):
        with pytest.raises(SystemExit) as exit_info:
            main(argv)
        assert exit_info.value.code == 2 and "must be an integer of at least 1" in capsys.readouterr().err


# --- the second new-user trial's findings ---------------------------------------------------------------------------


def test_rows_of_different_models_on_different_files_are_labelled_and_never_tested_against_each_other(
        mirror_env: Path, mirror_copy: Path, tmp_path: Path):
    import polars as pl

    from r2med_plugin.evaluation.runner import evaluate_task

    from r2med_plugin.evaluation.writers import write_outputs
    from r2med_plugin.reporting.leaderboard_significance import add_significance

    qrels = mirror_copy / "hakari-bench" / "NanoR2MED" / "qrels" / "NanoR2MEDBiology.parquet"
    frame = pl.read_parquet(qrels)
    frame.with_columns(pl.col("corpus-id").shift(1, fill_value=frame["corpus-id"][-1])).write_parquet(qrels)  # other positives
    for spec in NANO:  # two models, one mirror each (no commit recorded): Biology's files differ
        write_outputs(evaluate_task(spec.name, "bm25-robertson", show_progress=False), tmp_path)
        write_outputs(evaluate_task(spec.name, "bm25-lucene", data_dir=mirror_copy, show_progress=False), tmp_path)
    rows = build_leaderboard([tmp_path], benchmark="nano")
    biology = NANO[0].hub_name
    assert all(f"{biology} files " in row.note for row in rows) and rows[0].note != rows[1].note
    tested = add_significance(rows)
    other = next(row for row in tested if "computed on other data" in (row.significance or ""))
    assert other.versus_best == "-" and biology in other.significance
    assert all(row.versus_best == "-" for row in tested)  # nothing was compared: no row is called "best"


def test_an_old_revision_re_run_on_one_task_never_hides_a_newer_complete_run(tmp_path: Path):
    for spec in R2MED:
        write_result(tmp_path, "my/minilm", spec.name, official_row(0.7299), spec.revision, date=1.0, model_revision="local-c006")
    for spec in R2MED:
        write_result(tmp_path, "my/minilm", spec.name, official_row(0.7724), spec.revision, date=2.0, model_revision="local-aaaa")
    write_result(tmp_path, "my/minilm", R2MED[0].name, official_row(0.7299), R2MED[0].revision, date=3.0, model_revision="local-c006")  # one task again
    rows = build_leaderboard([tmp_path])
    assert sorted(round(row.average, 2) for row in rows if row.ranked) == [72.99, 77.24]  # both shown, neither hidden
    assert all("model revision local-" in row.note for row in rows)


def test_compare_and_inspect_refuse_results_on_different_dataset_revisions(mirror_env: Path, mirror_copy: Path, tmp_path: Path):
    from r2med_plugin.evaluation.runner import evaluate_task
    from r2med_plugin.evaluation.writers import write_outputs
    from r2med_plugin.reporting.compare import compare_results
    from r2med_plugin.reporting.inspect import inspect_query

    write_outputs(evaluate_task("NanoR2MEDBiology", "bm25-robertson", show_progress=False), tmp_path / "a")
    qrels = mirror_copy / "hakari-bench" / "NanoR2MED" / "qrels" / "NanoR2MEDBiology.parquet"
    import polars as pl

    frame = pl.read_parquet(qrels)
    frame.with_columns(pl.col("corpus-id").shift(1, fill_value=frame["corpus-id"][-1])).write_parquet(qrels)  # other positives
    write_outputs(evaluate_task("NanoR2MEDBiology", "bm25-lucene", data_dir=mirror_copy, show_progress=False), tmp_path / "b")
    with pytest.raises(ValueError, match="different dataset revisions|other data"):
        compare_results([tmp_path / "a", tmp_path / "b"], baseline="bm25-robertson")
    query = frame["query-id"][0]
    with pytest.raises(ValueError, match="different dataset revisions"):
        inspect_query([tmp_path / "a", tmp_path / "b"], "NanoR2MEDBiology", query)


def test_a_local_expansion_made_from_other_data_is_refused(mirror_env: Path, mirror_copy: Path, tmp_path: Path, monkeypatch):
    from r2med_plugin.evaluation.runner import evaluate_task
    from r2med_plugin.generation import generate_expansions
    from tests.support.loopback_openai import LoopbackOpenAI

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    with LoopbackOpenAI(api_key="sk-test", max_seconds=60) as server:
        generate_expansions("R2MEDBioinformatics", "hyde", "test-llm", server.base_url, out=tmp_path / "gen", show_progress=False)
    expansion = f"local:{tmp_path / 'gen' / 'hyde' / 'test-llm'}"
    evaluate_task("R2MEDBioinformatics", "bm25-lucene", expansion=expansion, show_progress=False)  # its own data: fine
    corpus = mirror_copy / "R2MED" / "Bioinformatics" / "corpus.jsonl"
    corpus.write_text(corpus.read_text().replace("the", "a", 1))
    with pytest.raises(ValueError, match="was generated from R2MEDBioinformatics at dataset revision"):
        evaluate_task("R2MEDBioinformatics", "bm25-lucene", expansion=expansion, data_dir=mirror_copy, show_progress=False)


def test_the_python_api_refuses_reranker_options_without_a_reranker_and_workers_without_bm25_lucene(mirror_env: Path):
    from r2med_plugin.evaluation.plan import build_plan

    for option in ({"rerank_depth": 100}, {"rerank_batch_size": 4}, {"first_stage_name": "x"}):
        with pytest.raises(ValueError, match="configures a reranker"):
            build_plan("NanoR2MEDBiology", "bm25-robertson", **option)
    with pytest.raises(ValueError, match="runs no bm25-lucene"):
        build_plan("NanoR2MEDBiology", "bm25-robertson", bm25_workers=2)
    assert build_plan("NanoR2MEDBiology", "bm25-hakari", hybrid=True, bm25_workers=2)  # the hybrid partner is bm25-lucene
    with pytest.raises(ValueError, match="runs no bm25-lucene"):  # bm25-robertson's partner on NanoR2MED: bm25-hakari
        build_plan("NanoR2MEDBiology", "bm25-robertson", hybrid=True, bm25_workers=2)


def test_a_result_written_without_trec_warns_about_an_earlier_run_file(mirror_env: Path, tmp_path: Path, caplog):
    from r2med_plugin.evaluation.runner import evaluate_task
    from r2med_plugin.evaluation.writers import write_outputs

    write_outputs(evaluate_task("NanoR2MEDBiology", "bm25-robertson", show_progress=False), tmp_path, trec=True)
    with caplog.at_level("WARNING"):
        write_outputs(evaluate_task("NanoR2MEDBiology", "bm25-robertson", top_k=20, show_progress=False), tmp_path)
    assert any("a TREC run of an earlier run" in record.getMessage() for record in caplog.records)
