"""`r2med evaluate` (r2med_plugin.cli_evaluate): the output checked before any work, one line per task under --quiet,
flags reaching the writers."""

from __future__ import annotations

from pathlib import Path


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


def test_quiet_prints_one_line_per_task_start_and_end(mirror_env: Path, capsys):
    from r2med_plugin.cli import main

    assert main(["evaluate", "--task", "NanoR2MEDBiology", "NanoR2MEDMedQADiag", "--retriever", "bm25-robertson", "--quiet"]) == 0
    out = capsys.readouterr().out.splitlines()
    started = [line for line in out if line.endswith(": started")]
    finished = [line for line in out if ": finished in " in line]
    assert started == ["NanoR2MEDBiology: started", "NanoR2MEDMedQADiag: started"] and len(finished) == 2


def test_cli_depth_flag_reaches_both_writers(mirror_env: Path, tmp_path: Path):
    from r2med_plugin.cli import main

    assert main(["evaluate", "--task", "NanoR2MEDBiology", "--retriever", "bm25-robertson", "--output", str(tmp_path), "--trec",
                 "--depth", "3", "--quiet"]) == 0
    (trec,) = (tmp_path / "runs").rglob("*.trec")
    per_query: dict[str, int] = {}
    for line in trec.read_text().splitlines():
        per_query[line.split()[0]] = per_query.get(line.split()[0], 0) + 1
    assert set(per_query.values()) == {3}


def test_a_truncated_corpus_of_the_second_task_stops_the_run_before_the_first_result(mirror_copy_env: Path, tmp_path: Path, capsys):
    from r2med_plugin.cli import main

    corpus = mirror_copy_env / "R2MED" / "Bioinformatics" / "corpus.jsonl"
    lines = corpus.read_bytes().splitlines(keepends=True)
    corpus.write_bytes(b"".join(lines[:-1]) + lines[-1][: len(lines[-1]) // 2])
    output = tmp_path / "results"
    assert main(["evaluate", "--task", "R2MEDBiology", "R2MEDBioinformatics", "--retriever", "bm25-robertson",
                 "--output", str(output), "--quiet"]) == 2
    captured = capsys.readouterr()
    assert "corpus.jsonl" in captured.err and f"line {len(lines)}" in captured.err and "Traceback" not in captured.err
    assert "R2MEDBiology: started" not in captured.out  # nothing ran
    assert not output.exists() or not any(path.is_file() for path in output.rglob("*"))


def test_an_expansion_lacking_a_query_names_the_file_and_the_query_before_any_work(mirror_copy_env: Path, tmp_path: Path, capsys):
    import json

    from r2med_plugin.cli import main

    expansion = mirror_copy_env / "R2MED" / "Bioinformatics" / "hyde" / "gpt4" / "query_with_hydoc.jsonl"
    rows = expansion.read_text().splitlines()
    dropped = json.loads(rows[1])["id"]
    expansion.write_text("\n".join(rows[:1] + rows[2:]) + "\n")
    output = tmp_path / "results"
    assert main(["evaluate", "--task", "R2MEDBiology", "R2MEDBioinformatics", "--retriever", "bm25-robertson",
                 "--expansion", "hyde/gpt4", "--output", str(output), "--quiet"]) == 2
    error = capsys.readouterr().err
    assert "query_with_hydoc.jsonl" in error and repr(dropped) in error and "Traceback" not in error
    assert not output.exists() or not any(path.is_file() for path in output.rglob("*"))
