"""--quiet (r2med_plugin.quiet): the libraries' progress bars and warnings silenced, r2med's own lines kept."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest


@pytest.mark.slow
def test_quiet_silences_library_bars_and_warnings(mirror_env: Path, tmp_path: Path):
    from tests.offline_model import populate_hf_cache

    name = populate_hf_cache(tmp_path / "hf")  # a hub name, loaded offline: sentence-transformers says it could not reach the Hub
    env = os.environ | {"HF_HOME": str(tmp_path / "hf"), "R2MED_CACHE_DIR": str(tmp_path / "cache")}
    # sentence-transformers' own load (mteb's registry would load this name at its pinned commit, without the Hub warning)
    command = [sys.executable, "-m", "r2med_plugin.cli", "evaluate", "--task", "R2MEDBiology", "--retriever", name, "--loader", "sentence-transformers"]
    quiet = subprocess.run([*command, "--quiet"], check=False, capture_output=True, text=True, timeout=300, env=env)
    loud = subprocess.run(command, check=False, capture_output=True, text=True, timeout=300, env=env)
    assert quiet.returncode == loud.returncode == 0, quiet.stderr + loud.stderr
    assert "Could not reach the Hub" in loud.stderr  # what --quiet has to silence
    assert "Loading weights" not in loud.stderr  # transformers' loading bar is off while our loaders load
    # Only r2med's own data report remains ("R2MEDBiology: ..."; the fixture differs from the real task on purpose).
    assert quiet.stderr and all(line.startswith(("R2MEDBiology: ", "the mirror ")) for line in quiet.stderr.splitlines())  # ours only
    progress = ("R2MEDBiology: started", "R2MEDBiology: finished in ")  # --quiet's own one line per task start and end
    assert next(line for line in quiet.stdout.splitlines() if line.startswith(progress)) == "R2MEDBiology: started"
    shown = [line for line in quiet.stdout.splitlines() if not line.startswith(progress)]
    assert shown[1:] == loud.stdout.splitlines()[1:]  # same scores
    through_mteb = subprocess.run([*command[:-2], "--quiet"], check=False, capture_output=True, text=True, timeout=300, env=env)  # mteb's loader
    assert through_mteb.returncode == 0 and through_mteb.stderr.splitlines() == quiet.stderr.splitlines(), through_mteb.stderr


def test_no_library_bars_turns_the_datasets_bars_off_for_a_block_then_back():
    """The demo off a terminal: a dataset's map (mteb's "Standardizing text corpus format") would print a bar."""
    import datasets.utils

    from r2med_plugin.quiet import no_library_bars

    datasets.utils.enable_progress_bars()
    with no_library_bars():
        assert datasets.utils.are_progress_bars_disabled()
    assert not datasets.utils.are_progress_bars_disabled()  # as it was


def test_one_rule_for_every_bar(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]):
    """A bar shows on a terminal only (tqdm's disable=None), never when not asked for or under --quiet (TQDM_DISABLE,
    which an explicit disable= would override); a library's show_progress_bar follows the same rule."""
    from r2med_plugin.quiet import bar_disabled, bar_shown

    monkeypatch.delenv("TQDM_DISABLE", raising=False)
    assert (bar_disabled(True), bar_disabled(False)) == (None, True)
    assert bar_shown(True) is False  # pytest's captured stderr is not a terminal
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True, raising=False)
    assert bar_shown(True) is True and bar_shown(False) is False
    monkeypatch.setenv("TQDM_DISABLE", "1")  # what --quiet sets
    assert bar_disabled(True) is True and bar_shown(True) is False


def test_the_checkpointed_encoding_bar_keeps_quiet(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
                                                   tmp_path: Path):
    import numpy as np

    from r2med_plugin.retrieval.dense import chunk_keys, encode_in_chunks

    monkeypatch.setenv("R2MED_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("R2MED_ENCODE_CHUNK_TEXTS", "2")  # three checkpointed chunks
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True, raising=False)  # as on a terminal
    texts = [f"text {index}" for index in range(6)]

    def encode(part: list[str]) -> np.ndarray:
        return np.ones((len(part), 2))

    for quiet, key in ((True, "quiet"), (False, "loud")):
        if quiet:
            monkeypatch.setenv("TQDM_DISABLE", "1")
        else:
            monkeypatch.delenv("TQDM_DISABLE", raising=False)
        assert encode_in_chunks(texts, chunk_keys(texts, key), encode).shape == (6, 2)
        shown = "encoding (checkpointed chunks)" in capsys.readouterr().err
        assert shown is not quiet
