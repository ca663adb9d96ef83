from __future__ import annotations

import json
from pathlib import Path

import pytest

from r2med_plugin.cli import main


def test_tasks_lists_all_twenty_four(capsys: pytest.CaptureFixture[str]):
    assert main(["tasks"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 16 + 8  # the 8 NanoR2MED<Domain>Reranking tasks too
    assert lines[1].split()[:2] == ["R2MEDBioinformatics", "R2MED/Bioinformatics"]
    assert [line.split()[0] for line in lines[16:]] == [f"{line.split()[0]}Reranking" for line in lines[8:16]]
    assert main(["tasks", "--kind", "nano"]) == 0
    assert all(line.startswith("NanoR2MED") for line in capsys.readouterr().out.splitlines())


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
