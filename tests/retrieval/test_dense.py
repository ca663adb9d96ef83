"""Dense encoding with its on-disk cache (r2med_plugin.retrieval.dense): chunks that survive a kill, and the chunk size
setting."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

_RESUMABLE_ENCODING = r"""
import json, os, signal, sys
import numpy as np
from r2med_plugin.models.hashing import HashingEncoder
from r2med_plugin.retrieval.dense import encode_cached_raw

class LoggedEncoder(HashingEncoder):
    '''Logs the first text of every call; with KILL_AT, SIGKILLs its own process as that call begins.'''
    calls = 0
    def encode(self, texts, *, kind):
        LoggedEncoder.calls += 1
        with open(os.environ["LOG"], "a") as log:
            log.write(texts[0] + "\n")
        if os.environ.get("KILL_AT") == str(LoggedEncoder.calls):
            os.kill(os.getpid(), signal.SIGKILL)
        return super().encode(texts, kind=kind)

texts = [f"passage {i} about gene {i % 7}" for i in range(45)] + ["passage 3 about gene 3"]  # a repeated text
vectors = encode_cached_raw(LoggedEncoder(dim=32), texts, kind="document", dataset_revision="rev")
np.save(os.environ["OUT"], vectors)
"""


def _encode_in_subprocess(tmp_path: Path, cache: Path, log: Path, out: Path, kill_at: str = "") -> int:
    import os
    import subprocess
    import sys

    env = {**os.environ, "R2MED_CACHE_DIR": str(cache), "R2MED_ENCODE_CHUNK_TEXTS": "10", "LOG": str(log),
           "OUT": str(out), "KILL_AT": kill_at}
    return subprocess.run([sys.executable, "-c", _RESUMABLE_ENCODING], env=env, cwd=tmp_path, timeout=300).returncode


def test_a_local_encoding_killed_with_sigkill_resumes_at_the_chunk_it_had_not_finished(tmp_path: Path):
    """Ctrl-C at 10% of MedXpertQA-Exam and the rerun started again from batch 0 of 1,919: local encoders now store
    each chunk as it is encoded (keyed as their embeddings are), so a SIGKILLed run resumes at the first unfinished
    chunk, the result equals an uninterrupted run's, and the chunks are removed once the whole array is stored."""
    import signal

    cache, log = tmp_path / "cache", tmp_path / "calls.log"
    assert _encode_in_subprocess(tmp_path, cache, log, tmp_path / "killed.npy", kill_at="3") == -signal.SIGKILL
    assert log.read_text().splitlines() == ["passage 0 about gene 0", "passage 10 about gene 3", "passage 20 about gene 6"]
    assert len(list((cache / "embedding-chunks").glob("*.npy"))) == 2  # chunks 1 and 2 were kept; chunk 3 was lost
    log.unlink()
    assert _encode_in_subprocess(tmp_path, cache, log, tmp_path / "resumed.npy") == 0
    assert log.read_text().splitlines() == ["passage 20 about gene 6", "passage 30 about gene 2", "passage 40 about gene 5"]
    assert not list((cache / "embedding-chunks").glob("*.npy"))
    fresh_log = tmp_path / "fresh.log"
    assert _encode_in_subprocess(tmp_path, tmp_path / "fresh-cache", fresh_log, tmp_path / "fresh.npy") == 0
    assert len(fresh_log.read_text().splitlines()) == 5  # 45 distinct texts in chunks of 10
    resumed, fresh = np.load(tmp_path / "resumed.npy"), np.load(tmp_path / "fresh.npy")
    assert resumed.shape == (46, 32) and np.array_equal(resumed, fresh) and np.array_equal(resumed[45], resumed[3])


def test_the_chunk_size_setting_is_checked(monkeypatch: pytest.MonkeyPatch):
    from r2med_plugin.retrieval.dense import encode_chunk_size

    monkeypatch.setenv("R2MED_ENCODE_CHUNK_TEXTS", "0")
    with pytest.raises(ValueError, match=r"R2MED_ENCODE_CHUNK_TEXTS='0'.*positive number of texts.*default 4096"):
        encode_chunk_size()
    monkeypatch.setenv("R2MED_ENCODE_CHUNK_TEXTS", "")
    assert encode_chunk_size() == 4096
