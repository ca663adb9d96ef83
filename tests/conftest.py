"""Shared test setup: fully offline, data from the fixture mirror through R2MED_DATA_DIR."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

# The hub is unreachable here and in CI: never let a test wait on it.
for _switch in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE"):
    os.environ[_switch] = "1"
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from tests.fixture_mirror import build_fixture_mirror  # noqa: E402


@pytest.fixture(scope="session", autouse=True)
def private_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """BM25 runs and embeddings are cached in a folder of this test session, never in ~/.cache."""
    path = tmp_path_factory.mktemp("r2med-cache")
    os.environ["R2MED_CACHE_DIR"] = str(path)
    return path


@pytest.fixture(scope="session")
def fixture_mirror(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A read-only-by-convention mirror of all 16 tasks; copy it before corrupting anything."""
    return build_fixture_mirror(tmp_path_factory.mktemp("mirror"))


@pytest.fixture()
def mirror_env(fixture_mirror: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """R2MED_DATA_DIR set to the fixture mirror; fixture counts are tiny, so count drift is accepted."""
    monkeypatch.setenv("R2MED_DATA_DIR", str(fixture_mirror))
    monkeypatch.setenv("R2MED_ACCEPT_DRIFT", "1")
    return fixture_mirror


@pytest.fixture()
def mirror_copy(fixture_mirror: Path, tmp_path: Path) -> Path:
    """A private copy of the mirror that a test may break."""
    target = tmp_path / "mirror"
    shutil.copytree(fixture_mirror, target)
    return target
