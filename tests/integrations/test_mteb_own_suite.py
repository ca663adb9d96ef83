"""mteb's own task tests, run unchanged against the installed plugin (not copied into this repository).

The sdist of the installed mteb version comes from the package index (`pip download mteb==<version>
--no-binary :all: --no-deps`, cached under ~/.cache/r2med-plugin-tests/mteb-sdist/<version>/); every test
file in it that loops over all tasks or benchmarks runs in a subprocess twice: with the plugin, and with
it switched off (R2MED_PLUGIN_NO_AUTOLOAD=1). With the plugin, no test may fail that passes without it.
No network to the package index: the download fails, and so does this test (it never skips).

mteb's tests/test_tasks/test_metadata.py (test_all_metadata_is_filled_and_valid) is not in the sdist;
tests/integrations/test_descriptive_statistics.py checks the same for each of our tasks.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import xml.etree.ElementTree as ET
from importlib.metadata import version
from pathlib import Path

import mteb
import pytest

pytestmark = pytest.mark.slow

MTEB_VERSION = version("mteb")
CACHE = Path(os.environ.get("R2MED_MTEB_SDIST_CACHE") or Path.home() / ".cache" / "r2med-plugin-tests" / "mteb-sdist")
# A test file that walks every registered task or benchmark is one our 24 tasks and 2 benchmarks can break.
LOOPS_OVER_ALL_TASKS = re.compile(r"\bget_tasks\(|\bget_benchmarks\(|\bTASK_LIST\b|\b_TASKS_REGISTRY\b")
OUR_TASK = "NanoR2MEDBiology"


def _download_and_extract(target: Path) -> None:
    CACHE.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=CACHE) as scratch:
        command = [
            sys.executable, "-m", "pip", "download", f"mteb=={MTEB_VERSION}",
            "--no-binary", ":all:", "--no-deps", "--disable-pip-version-check", "-d", scratch,
        ]
        run = subprocess.run(command, capture_output=True, text=True, timeout=600)
        archives = sorted(Path(scratch).glob(f"mteb-{MTEB_VERSION}.tar.gz"))
        assert run.returncode == 0 and archives, (
            f"could not download the mteb {MTEB_VERSION} sdist from the package index (needed to run mteb's own "
            f"tests): {' '.join(command)}\n{run.stdout[-2000:]}\n{run.stderr[-3000:]}"
        )
        unpacked = Path(scratch) / "unpacked"
        prefix = f"mteb-{MTEB_VERSION}/"
        with tarfile.open(archives[0]) as archive:
            # Only the tests and pytest's configuration: never mteb's source, so the installed mteb is tested.
            members = [
                member for member in archive.getmembers()
                if member.name.startswith(f"{prefix}tests/") or member.name == f"{prefix}pyproject.toml"
            ]
            archive.extractall(unpacked, members=members, filter="data")
        shutil.copy2(archives[0], unpacked / prefix / archives[0].name)
        if not target.exists():
            os.replace(unpacked / prefix, target)


@pytest.fixture(scope="module")
def mteb_sdist() -> Path:
    target = CACHE / MTEB_VERSION
    if not (target / "tests").is_dir():
        _download_and_extract(target)
    assert not (target / "mteb").exists(), f"{target} holds mteb's source; delete it to re-extract"
    return target


def task_test_files(root: Path) -> list[str]:
    return sorted(
        path.relative_to(root).as_posix()
        for path in (root / "tests").rglob("test_*.py")
        if LOOPS_OVER_ALL_TASKS.search(path.read_text(encoding="utf-8"))
    )


def _env(plugin: bool) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if not key.startswith(("R2MED_PLUGIN_NO_AUTOLOAD", "R2MED_DATA_DIR", "PYTEST_"))}
    env.update(HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    if not plugin:
        env["R2MED_PLUGIN_NO_AUTOLOAD"] = "1"
    return env


def _which_mteb(root: Path, plugin: bool) -> tuple[str, bool]:
    code = (
        "import importlib, mteb; registry = importlib.import_module('mteb.get_tasks')._TASKS_REGISTRY; "
        f"print(mteb.__file__); print({OUR_TASK!r} in registry)"
    )
    run = subprocess.run([sys.executable, "-c", code], cwd=root, env=_env(plugin), capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    location, registered = run.stdout.split()[-2:]
    return location, registered == "True"


def run_mteb_tests(root: Path, files: list[str], *, plugin: bool, report: Path) -> dict[str, str]:
    """Run mteb's test files in a subprocess; {test id: passed | failed | error | skipped}."""
    command = [
        sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-o", "addopts=",
        f"--junitxml={report}", *files,
    ]
    run = subprocess.run(command, cwd=root, env=_env(plugin), capture_output=True, text=True, timeout=900)
    assert report.is_file(), f"mteb's tests did not run ({run.returncode}):\n{run.stdout[-3000:]}\n{run.stderr[-3000:]}"
    outcomes = {}
    for case in ET.parse(report).getroot().iter("testcase"):
        test_id = f"{case.get('classname')}::{case.get('name')}"
        kinds = [child.tag for child in case if child.tag in {"failure", "error", "skipped"}]
        outcomes[test_id] = {"failure": "failed", "error": "error", "skipped": "skipped"}.get(kinds[0], "passed") if kinds else "passed"
    assert outcomes, run.stdout[-3000:]
    return outcomes


def test_the_sdist_task_tests(mteb_sdist: Path):
    files = task_test_files(mteb_sdist)
    assert "tests/test_get_tasks.py" in files and "tests/test_filter_tasks.py" in files, files


def test_mteb_task_tests_pass_with_the_plugin(mteb_sdist: Path, tmp_path: Path):
    files = task_test_files(mteb_sdist)
    installed = mteb.__file__
    assert _which_mteb(mteb_sdist, plugin=True) == (installed, True)  # the installed mteb, with our tasks
    assert _which_mteb(mteb_sdist, plugin=False) == (installed, False)
    with_plugin = run_mteb_tests(mteb_sdist, files, plugin=True, report=tmp_path / "on.xml")
    without = run_mteb_tests(mteb_sdist, files, plugin=False, report=tmp_path / "off.xml")
    assert set(with_plugin) == set(without)
    broken = sorted(test for test, outcome in with_plugin.items() if outcome in {"failed", "error"} and without[test] == "passed")
    assert not broken, f"mteb {MTEB_VERSION}'s own tests that fail only with the plugin: {broken}"
    passed = sum(outcome == "passed" for outcome in with_plugin.values())
    assert passed > 100 and with_plugin["tests.test_get_tasks::test_no_duplicate_citations_with_different_ids"] == "passed"
