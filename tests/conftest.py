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


# Tests over ~3 s on 2 cores (pytest --durations): subprocesses, real models, mteb runs, statistics against ranx and
# PyTerrier. Marked slow here (besides the modules marked slow themselves) so `pytest -m "not slow"` is a fast loop.
SLOW_TESTS = (
    "test_doc_examples.py::test_every_example_of_the_page_runs",  # every docs page's examples: minutes in all
    "test_io.py::test_interrupted_write_leaves_no_result",
    "test_hub.py::test_transient_errors_are_retried",
    "test_mteb_integration.py::",
    "test_mteb_parity.py::",
    "test_sweep.py::test_two_cpu_processes_encode_like_one",
    "test_sweep.py::test_two_sweeps_into_one_cache_folder",
    "test_conventions.py::test_quiet_silences_library_bars_and_warnings",
    "test_conventions.py::test_candidates_only_equals_mteb_reranking_for_a_bi_encoder",
    "test_conventions.py::test_demo_script_keeps_a_complete_venv",
    "test_conventions.py::test_real_sigint_mid_run_exits_130_without_traceback_or_partial_file",
    "test_per_query.py::test_mteb_run_writes_the_sidecar_in_the_result_folder",
    "test_identity.py::test_hub_model_revision_is_the_commit_mteb_records",
    "test_identity.py::test_resaved_weights_give_a_new_revision_and_score",
    "test_identity.py::test_instruction_changes_the_score_and_files_apart",
    "test_compare.py::",
    "test_generation.py::test_faults_are_retried_and_every_query_lands_once",
    "test_lucene_exact.py::test_reproduces_every_committed_fuzz_vector",
    "test_spec.py::test_sweep_quiet_prints_no_library_progress",
    "llm/test_requests.py::test_a_request_failing_every_retry_stops_the_run_and_keeps_the_answers",
    "llm/test_requests.py::test_a_run_killed_with_sigkill_resumes_from_its_cached_answers",
    "test_embedding_endpoint.py::",
    "test_official_rerankers.py::",
    "models/test_registry.py::",
    "test_expansions.py::test_minilm_with_an_expansion_of_each_method",
    "test_descriptive_statistics.py::test_statistics_from_data_agree_with_the_loader",
    "test_descriptive_statistics.py::test_shipped_statistics_are_what_the_script_writes",
    "test_descriptive_statistics.py::test_script_rejects_unknown_task_names",
    "test_identity.py::test_the_packaged_minilm_alias_is_filed_under_its_hub_name_and_revision",
    "test_leaderboard_significance.py::test_rows_of_different_models_on_different_files_are_labelled",
)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if any(slow in item.nodeid for slow in SLOW_TESTS):
            item.add_marker(pytest.mark.slow)
