"""Shared test setup: fully offline, data from the fixture mirror through R2MED_DATA_DIR."""

from __future__ import annotations

import os
import shutil
import sys
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
def own_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A cache folder of this test only (LLM answers: the session cache would answer another test's prompts)."""
    path = tmp_path / "cache"
    monkeypatch.setenv("R2MED_CACHE_DIR", str(path))
    return path


@pytest.fixture()
def mirror_copy(fixture_mirror: Path, tmp_path: Path) -> Path:
    """A private copy of the mirror that a test may break."""
    target = tmp_path / "mirror"
    shutil.copytree(fixture_mirror, target)
    return target


@pytest.fixture()
def mirror_copy_env(mirror_copy: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """R2MED_DATA_DIR set to the private copy of the mirror (drift accepted): a test edits it and loads from it."""
    monkeypatch.setenv("R2MED_DATA_DIR", str(mirror_copy))
    monkeypatch.setenv("R2MED_ACCEPT_DRIFT", "1")
    return mirror_copy


@pytest.fixture(scope="session")
def built_wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The package's wheel, built once per test session (every wheel test reads this one)."""
    import subprocess
    import sys

    out = tmp_path_factory.mktemp("dist")
    root = Path(__file__).resolve().parent.parent
    subprocess.run([sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", str(out), str(root)],
                   check=True, capture_output=True)
    return next(out.glob("r2med_plugin-*.whl"))


@pytest.fixture(scope="session")
def fresh_python(built_wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh virtual environment with the wheel installed (the test environment's packages importable, its
    .pth files not run), once per session."""
    import subprocess
    import sys
    import sysconfig

    root = tmp_path_factory.mktemp("fresh")
    subprocess.run([sys.executable, "-m", "venv", str(root / "venv")], check=True)
    python = root / "venv" / "bin" / "python"
    site = Path(subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               check=True, capture_output=True, text=True).stdout.strip())
    (site / "zz_test_dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    subprocess.run([python, "-m", "pip", "install", "--quiet", "--no-deps", "--no-index", str(built_wheel)], check=True)
    return python


@pytest.fixture(scope="session")
def demo_run(fresh_python: Path, tmp_path_factory: pytest.TempPathFactory):
    """`r2med demo --quiet` from the installed wheel, run once per session: (completed process, output folder)."""
    import subprocess

    folder = tmp_path_factory.mktemp("demo")
    env = {key: value for key, value in os.environ.items() if not key.startswith(("R2MED_", "PYTHONPATH"))}
    env.update(HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1", TRANSFORMERS_OFFLINE="1", TOKENIZERS_PARALLELISM="false")
    out = subprocess.run([str(fresh_python), "-m", "r2med_plugin.cli", "demo", "--out", str(folder / "demo"), "--quiet"],
                         env=env, cwd=folder, capture_output=True, text=True, timeout=600)
    return out, folder / "demo"


@pytest.fixture(autouse=True)
def registered_llm_kinds_restored():
    """A kind a test or a page's example registers (``register_llm_reranker``) is gone after it: its settings would
    otherwise be flags, sweep keys and refusals in every later test of the session."""
    from r2med_plugin.llm_settings import KIND_SETTINGS

    before = dict(KIND_SETTINGS)
    yield
    module = sys.modules.get("r2med_plugin.llm.reranker_kinds")
    if module is not None:
        for name in [name for name in module.LLM_RERANKER_KINDS if name.removeprefix("llm-") not in before]:
            del module.LLM_RERANKER_KINDS[name]
    KIND_SETTINGS.clear()
    KIND_SETTINGS.update(before)
