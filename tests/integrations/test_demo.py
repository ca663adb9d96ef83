"""The demo (r2med_plugin.integrations.demo) as scripts/demo.sh starts it: a complete .venv is kept, an
incomplete one rebuilt; the demo's output folder is git-ignored; piped, it prints no progress bar."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _demo_copy(tmp_path: Path, complete: bool) -> Path:
    root = tmp_path / "clone"
    (root / "scripts").mkdir(parents=True)
    shutil.copy(ROOT / "scripts" / "demo.sh", root / "scripts" / "demo.sh")
    # Stand-in for the 75-second installer: it only records that it ran (the decision under test is demo.sh's).
    (root / "scripts" / "bootstrap_venv.sh").write_text("echo rebuilt >> bootstrap.calls\n")
    bin_dir = root / ".venv" / "bin"
    bin_dir.mkdir(parents=True)
    (bin_dir / "r2med").write_text("#!/usr/bin/env bash\necho \"demo $*\" >> demo.calls\n")
    (bin_dir / "r2med").chmod(0o755)
    if complete:
        (bin_dir / "python").write_text(f"#!/bin/sh\nexec {sys.executable} \"$@\"\n")  # this interpreter has the demo's packages
        (bin_dir / "python").chmod(0o755)
    return root


@pytest.mark.slow
@pytest.mark.parametrize("complete", [True, False])
def test_demo_script_keeps_a_complete_venv(tmp_path: Path, complete: bool):
    root = _demo_copy(tmp_path, complete)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    out = subprocess.run(["bash", str(root / "scripts" / "demo.sh"), "--quiet"], check=False, capture_output=True, text=True, timeout=60, env=env)
    assert out.returncode == 0, out.stderr
    assert (root / "bootstrap.calls").exists() is not complete
    assert (root / "demo.calls").read_text() == "demo demo --quiet\n"


def test_demo_output_folder_is_git_ignored(tmp_path: Path):
    # a scratch repository with the project's .gitignore: the check holds in an sdist or an unpacked tarball too
    shutil.copy(ROOT / ".gitignore", tmp_path / ".gitignore")
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True, timeout=30)
    ignored = subprocess.run(["git", "-C", str(tmp_path), "check-ignore", "-q", "r2med-demo/leaderboard.md"], check=False, timeout=30)
    kept = subprocess.run(["git", "-C", str(tmp_path), "check-ignore", "-q", "r2med_plugin/cli.py"], check=False, timeout=30)
    assert (ignored.returncode, kept.returncode) == (0, 1)


@pytest.mark.slow
def test_the_demo_piped_to_a_file_prints_no_progress_bar(tmp_path: Path):
    """Without --quiet, but not on a terminal: no bar (mteb's, the tasks' BM25, a dataset's map) writes escape codes."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("R2MED_")}
    env.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", R2MED_CACHE_DIR=str(tmp_path / "cache"))
    out = subprocess.run([sys.executable, "-m", "r2med_plugin.cli", "demo", "--out", str(tmp_path / "demo")], check=False,
                         capture_output=True, text=True, timeout=600, env=env, cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "[2/3] sentence-transformers/all-MiniLM-L6-v2 through mteb.evaluate" in out.stdout  # the part with the bars ran
    for stream in (out.stdout, out.stderr):
        assert "\x1b[" not in stream and "\r" not in stream and "Evaluating task" not in stream
