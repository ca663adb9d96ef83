"""The test suite's layout (issue 31, part 4): tests/<package>/test_<module>.py, and tests/contracts/ for rules that
cross packages. No test file sits directly under tests/, and every test folder is a Python package, so two test files
of one basename in two folders cannot clash."""

from __future__ import annotations

from pathlib import Path

import r2med_plugin
from tests.conftest import SLOW_TESTS

TESTS = Path(__file__).resolve().parents[1]
PACKAGES = {path.name for path in Path(r2med_plugin.__file__).parent.iterdir() if (path / "__init__.py").is_file()}
# Test folders not named after a package of r2med_plugin, and what they hold.
OTHER_FOLDERS = {
    "contracts": "rules across packages: layering, conventions, the CLI flag table, golden outputs, public API, trust",
    "cli": "cli.py and its cli_*.py helpers",
    "toplevel": "the other top-level modules of r2med_plugin (catalog, io, metrics, identifiers)",
    "data_package": "r2med_plugin.data (tests/data holds the fixture files)",
}


def _test_files() -> list[Path]:
    return sorted(TESTS.rglob("test_*.py"))


def test_no_test_file_sits_directly_under_tests():
    assert [path.name for path in _test_files() if path.parent == TESTS] == []


def test_every_test_folder_is_a_package_named_after_what_it_tests():
    folders = {path.parent for path in _test_files()}
    assert sorted(folder.relative_to(TESTS).as_posix() for folder in folders if not (folder / "__init__.py").is_file()) == []
    misplaced = [folder.relative_to(TESTS).as_posix() for folder in folders
                 if folder.parent != TESTS or folder.name not in PACKAGES | OTHER_FOLDERS.keys()]
    assert sorted(misplaced) == []


def test_every_slow_entry_names_a_test_file_that_exists():
    names = {path.name for path in _test_files()}
    assert [entry for entry in SLOW_TESTS if entry.split("::", 1)[0] not in names] == []
