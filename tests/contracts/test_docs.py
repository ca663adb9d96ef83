"""The docs site. Its generated pages equal what the package generates, and it builds strictly."""

from __future__ import annotations

import importlib
import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from r2med_plugin.evaluation.runner import evaluate_task
from r2med_plugin.evaluation.writers import write_outputs

ROOT = Path(__file__).resolve().parents[2]
IN_CI = os.environ.get("CI") == "true"


def _run_script(name: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    return subprocess.run([sys.executable, str(ROOT / "scripts" / name), *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)


def test_cli_reference_is_what_the_parser_generates():
    result = _run_script("generate_cli_reference.py", "--check")
    assert result.returncode == 0, result.stdout + result.stderr


def test_cli_reference_lists_every_subcommand_and_option():
    import argparse

    from r2med_plugin.cli import build_parser

    page = (ROOT / "docs" / "reference" / "cli.md").read_text(encoding="utf-8")
    parser = build_parser()
    subparsers = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    for name, subparser in subparsers.choices.items():
        assert f"## `r2med {name}`" in page
        for action in subparser._actions:
            if action.help == argparse.SUPPRESS or isinstance(action, argparse._HelpAction):
                continue
            for option in action.option_strings:
                assert f"**`{option}" in page or f", {option}" in page, (name, option)


def test_cli_reference_check_fails_on_drift(tmp_path, monkeypatch):
    """--check must exit 1 when the committed page differs; run it against a changed copy of the page."""
    spec = importlib.util.spec_from_file_location("generate_cli_reference", ROOT / "scripts" / "generate_cli_reference.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    stale = tmp_path / "cli.md"
    stale.write_text(module.OUTPUT.read_text(encoding="utf-8").replace("--top-k", "--top-n"), encoding="utf-8")
    monkeypatch.setattr(module, "OUTPUT", stale)
    monkeypatch.setattr(module, "ROOT", tmp_path)
    assert module.main(["--check"]) == 1
    assert module.main([]) == 0
    assert module.main(["--check"]) == 0


def _mkdocs_available() -> bool:
    return all(importlib.util.find_spec(name) is not None for name in ("mkdocs", "material", "mkdocstrings", "mkdocstrings_handlers"))


def test_mkdocs_build_strict_passes_without_warning(tmp_path):
    if not _mkdocs_available():
        message = ("mkdocs, mkdocs-material and mkdocstrings[python] are not installed in this interpreter: "
                   "pip install -e '.[docs]' (the test extra has them too)")
        if IN_CI:
            pytest.fail(message + "; CI installs the test extra, so this is an install problem")
        pytest.skip(message)
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    result = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(tmp_path / "site")],
                            cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    assert "WARNING" not in output, output
    assert (tmp_path / "site" / "reference" / "cli" / "index.html").is_file()


def test_task_pages_are_what_the_package_data_generates():
    result = _run_script("generate_task_pages.py", "--check")
    assert result.returncode == 0, result.stdout + result.stderr


def test_task_pages_hold_the_catalog_and_the_published_scores():
    from r2med_plugin.catalog import list_tasks
    from r2med_plugin.reporting.published import published_reranker_rows, published_rows

    pages = ROOT / "docs" / "tasks"
    index = (pages / "index.md").read_text(encoding="utf-8")
    nav = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    for spec in list_tasks():
        page = (pages / f"{spec.name}.md").read_text(encoding="utf-8")
        assert f"]({spec.name}.md)" in index and f"tasks/{spec.name}.md" in nav
        assert f"`{spec.hub_repo}`" in page and f"{spec.expected_counts['queries']:,} |" in page
        if spec.revision:
            assert f"`{spec.revision}`" in page
        for name, entry in spec.published_files.items():
            assert f"| `{name}` | {entry['bytes']:,} | `{entry['sha256']}` |" in page
        for subset, profile in spec.candidate_profiles.items():
            assert f"| `{subset}` | `{profile['config']}` | {profile['top_k']} |" in page
        if spec.kind == "r2med":
            for row in [*published_rows(), *published_reranker_rows()]:
                if spec.hub_name in row.scores:
                    assert f"| {row.retriever} |" in page.replace("&#124;", "|")
                    assert f"| {row.scores[spec.hub_name]:.2f} |" in page


def test_task_pages_check_fails_on_a_stale_or_extra_page(tmp_path, monkeypatch):
    spec = importlib.util.spec_from_file_location("generate_task_pages", ROOT / "scripts" / "generate_task_pages.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    monkeypatch.setattr(module, "OUTPUT", tmp_path)
    assert module.main([]) == 0 and module.main(["--check"]) == 0
    page = tmp_path / "R2MEDBiology.md"
    page.write_text(page.read_text(encoding="utf-8").replace("103", "104"), encoding="utf-8")
    assert module.main(["--check"]) == 1
    assert module.main([]) == 0
    (tmp_path / "R2MEDGone.md").write_text("# gone\n", encoding="utf-8")
    assert module.main(["--check"]) == 1
    assert module.main([]) == 0 and not (tmp_path / "R2MEDGone.md").exists()


def test_api_reference_is_what_all_generates_and_names_every_public_name():
    import r2med_plugin

    result = _run_script("generate_api_reference.py", "--check")
    assert result.returncode == 0, result.stdout + result.stderr
    page = (ROOT / "docs" / "reference" / "api.md").read_text(encoding="utf-8")
    entries = [line.removeprefix("::: ") for line in page.splitlines() if line.startswith("::: ")]
    assert sorted(entry.rsplit(".", 1)[1] for entry in entries) == sorted(n for n in r2med_plugin.__all__ if n != "__version__")
    for entry in entries:  # each entry names the object the package re-exports under that name
        module, name = entry.rsplit(".", 1)
        assert getattr(importlib.import_module(module), name) is getattr(r2med_plugin, name), entry


def test_every_dotted_reference_in_the_package_readme_and_docs_resolves():
    """Docstrings, comments, README and the docs site name modules and objects that exist (no path of a moved name)."""
    import tomllib

    package = ROOT / "r2med_plugin"
    groups = set(tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["entry-points"])
    documents = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    texts = {str(path.relative_to(ROOT)): path.read_text(encoding="utf-8") for path in [*package.rglob("*.py"), *documents]}
    references = {(name, found.rstrip(".")) for name, text in texts.items()
                  for found in re.findall(r"\br2med_plugin(?:\.[A-Za-z_]\w*)+", text)}
    dangling = sorted(f"{name}: {reference}" for name, reference in references
                      if reference not in groups and not _resolves(reference))
    assert dangling == []


def test_every_entry_point_names_an_object_that_exists():
    import tomllib

    groups = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["entry-points"]
    targets = [target for group in groups.values() for target in group.values()]
    targets += tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["scripts"].values()
    assert targets and [target for target in targets if not _resolves(target.replace(":", "."))] == []


def _resolves(reference: str) -> bool:
    """Whether ``reference`` is a module, or an attribute path under the longest importable module prefix."""
    parts = reference.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            found = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for attribute in parts[cut:]:
            if not hasattr(found, attribute):
                return False
            found = getattr(found, attribute)
        return True
    return False


def test_readme_result_paths_match_what_is_written(mirror_env: Path, tmp_path: Path):
    root = Path(__file__).resolve().parents[2]
    # the result paths moved from README.md to the docs site's file-format reference: both are read
    readme = "\n".join((root / name).read_text(encoding="utf-8") for name in ("README.md", "docs/reference/file-formats.md"))
    result = evaluate_task("NanoR2MEDBiology", "bm25-robertson", candidates=["hybrid"], show_progress=False)
    written = write_outputs(result, tmp_path / "DIR", trec=True)
    only = evaluate_task("NanoR2MEDBiology", "bm25-robertson", candidates=["hybrid"], candidates_only=True, show_progress=False)
    written_only = write_outputs(only, tmp_path / "DIR", trec=True)
    documented = {
        "mteb": "DIR/results/<model>/<revision>/<Task>.json",
        "official": "DIR/official/<model>/<revision>/<Task>.json",
        "trec": "DIR/runs/<model>/<revision>/<Task>.trec",
    }
    for kind, pattern in documented.items():
        assert f"`{pattern}`" in readme
        actual = written[kind].relative_to(tmp_path).as_posix()
        assert actual == pattern.replace("<model>", "bm25-robertson").replace("<revision>", result.model_revision).replace(
            "<Task>", "NanoR2MEDBiology")
    assert "`DIR/candidates-only/<model>/<revision>/<Task>.json`" in readme
    assert written_only["mteb"].relative_to(tmp_path).as_posix() == f"DIR/candidates-only/bm25-robertson/{only.model_revision}/NanoR2MEDBiology.json"
    assert "`runs/<model>/<revision>/<Task>.candidates-only.trec`" in readme
    assert written_only["trec"].name == "NanoR2MEDBiology.candidates-only.trec"
    assert "`results/<model>/<revision>/<Task>.json`, readable" not in readme  # the old, wrong claim
