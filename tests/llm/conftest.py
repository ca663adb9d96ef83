"""Fixtures of the LLM tests."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture()
def own_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Answers cached in this test's folder only (the session cache would answer another test's prompts)."""
    path = tmp_path / "cache"
    monkeypatch.setenv("R2MED_CACHE_DIR", str(path))
    return path
