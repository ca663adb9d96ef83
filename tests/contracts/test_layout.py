"""The test suite's layout: tests/<package>/test_<module>.py mirrors r2med_plugin/<package>/<module>.py, and
tests/contracts/ holds only rules that cross packages. No test file sits directly under tests/, every test folder is a
Python package (two test files of one basename in two folders cannot clash), and no test module is named after the
issue or review pass that added it: a test lives with the unit it tests."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import r2med_plugin

TESTS = Path(__file__).resolve().parents[1]
SOURCE = Path(r2med_plugin.__file__).parent
PACKAGES = {path.name for path in SOURCE.iterdir() if (path / "__init__.py").is_file()}
# Test folders not named after a package of r2med_plugin, and what they hold.
OTHER_FOLDERS = {
    "contracts": "rules across packages: layering, conventions, the CLI flag table, docs, golden outputs, public API, layout",
    "cli": "cli.py and its cli_*.py helpers",
    "toplevel": "the other top-level modules of r2med_plugin (catalog, io, metrics, names, quiet)",
    "support": "helpers shared by the tests (builders, loopback servers, strategies); no test files",
    "fixtures": "committed test data (golden outputs, Lucene vectors); no Python",
}
# The cross-cutting rules, one module each; a test of one unit belongs in that unit's folder instead.
CONTRACTS = {"test_architecture", "test_cli_flags", "test_conventions", "test_doc_examples", "test_docs", "test_errors",
             "test_golden_outputs", "test_layout", "test_moved_names", "test_public_api"}
# Words that name when or why a test was written, not what it tests.
HISTORY_WORDS = {"issue", "issues", "trust", "trustworthy", "pass", "passes", "frontier", "second", "third", "fourth",
                 "fifth", "trial", "trials", "regression", "regressions", "followup", "fixes", "review"}


def _test_files() -> list[Path]:
    return sorted(TESTS.rglob("test_*.py"))


def _folders() -> list[Path]:
    return sorted(path for path in TESTS.iterdir() if path.is_dir() and not path.name.startswith((".", "__")))


def history_words(stem: str) -> list[str]:
    """The words of a module name that name an issue or a review pass: listed words, and issue numbers (``43``,
    ``issue43``, ``pass4``); ``bm25`` is a name, not a number."""
    words = stem.removeprefix("test_").split("_")
    return [word for word in words if word in HISTORY_WORDS or word.isdigit() or re.fullmatch(r"(issue|pass|item)\d+", word)]


def test_no_test_file_sits_directly_under_tests():
    assert [path.name for path in _test_files() if path.parent == TESTS] == []


def test_every_test_folder_is_a_package_named_after_what_it_tests():
    folders = {path.parent for path in _test_files()}
    assert sorted(folder.relative_to(TESTS).as_posix() for folder in folders if not (folder / "__init__.py").is_file()) == []
    misplaced = [folder.relative_to(TESTS).as_posix() for folder in folders
                 if folder.parent != TESTS or folder.name not in PACKAGES | OTHER_FOLDERS.keys()]
    assert sorted(misplaced) == []


def test_each_test_folder_mirrors_a_package_and_each_package_has_one():
    names = {folder.name for folder in _folders()}
    assert sorted(names - PACKAGES - OTHER_FOLDERS.keys()) == []  # e.g. tests/data_package/ for r2med_plugin/data/
    assert sorted(PACKAGES - names) == []
    assert [path.name for path in (TESTS / "support").glob("test_*.py")] == []
    assert [path.name for path in (TESTS / "fixtures").rglob("*.py")] == []


def test_contracts_holds_only_cross_cutting_rules():
    assert sorted({path.stem for path in (TESTS / "contracts").glob("test_*.py")} - CONTRACTS) == []


def test_no_test_module_is_named_after_an_issue_or_a_pass():
    named = {path.relative_to(TESTS).as_posix(): history_words(path.stem) for path in TESTS.rglob("*.py")}
    assert {path: words for path, words in named.items() if words} == {}


def test_the_history_word_check_catches_the_names_it_is_for():
    flagged = ["test_trust_second_pass", "test_trustworthy_outputs", "test_sweep_trust", "test_llm_frontier",
               "test_issue_43", "test_fourth_pass", "test_issue43"]
    assert [stem for stem in flagged if not history_words(stem)] == []
    assert [stem for stem in ("test_bm25_oracle", "test_first_stages", "test_passage_cache", "test_compare")
            if history_words(stem)] == []


def test_slow_tests_are_marked_where_they_are_defined():
    """A list of names in a conftest.py would silently unmark a renamed test: no conftest.py adds markers to
    collected tests; a slow test carries ``@pytest.mark.slow`` (or its module ``pytestmark``)."""
    hooks = {}
    for conftest in sorted(TESTS.rglob("conftest.py")):
        tree = ast.parse(conftest.read_text(encoding="utf-8"))
        names = [node.name for node in ast.walk(tree) if isinstance(node, ast.FunctionDef)
                 and node.name in {"pytest_collection_modifyitems", "pytest_itemcollected"}]
        calls = [node.func.attr for node in ast.walk(tree)
                 if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "add_marker"]
        if names or calls:
            hooks[conftest.relative_to(TESTS).as_posix()] = names + calls
    assert hooks == {}
