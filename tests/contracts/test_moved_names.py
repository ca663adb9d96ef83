"""Issue 31, part 4: names that moved or were renamed still import from their old path, each with a
DeprecationWarning naming the old and the new path (r2med_plugin._moved); nothing of ours uses an old path."""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
from importlib import import_module
from pathlib import Path

import pytest

from r2med_plugin._moved import DEPRECATED, Moved

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "r2med_plugin"
# One old name -> its new path of each module that keeps old names (all of them are checked below).
SAMPLES = {
    "r2med_plugin.evaluation.metrics": ("evaluate_run", "r2med_plugin.metrics.evaluate_run"),
    "r2med_plugin.generation.client": ("complete", "r2med_plugin.llm.client.complete"),
    "r2med_plugin.evaluation.reranking": ("official_reranker_scores", "r2med_plugin.evaluation.official.official_reranker_scores"),
    "r2med_plugin.evaluation.runner": ("write_outputs", "r2med_plugin.evaluation.writers.write_outputs"),
    "r2med_plugin.names": ("ResultName", "r2med_plugin.identifiers.ResultName"),
    "r2med_plugin.reporting.official_files": ("OfficialLayout", "r2med_plugin.reporting.official_files.RerankerFileLayout"),
    "r2med_plugin.retrieval.rerank": ("top_ranked", "r2med_plugin.retrieval.rerank.top_document_ids"),
    "r2med_plugin.integrations.mteb_per_query": ("mteb_result_path", "r2med_plugin.integrations.mteb_per_query.running_result_path"),
    # issue 31, part 3: the models/ package
    "r2med_plugin.retrieval.dense": ("SentenceTransformerEncoder", "r2med_plugin.models.sentence_transformer.SentenceTransformerEncoder"),
    "r2med_plugin.retrieval.registry": ("resolve", "r2med_plugin.models.registry.resolve"),
    "r2med_plugin.retrieval.model_identity": ("model_revision", "r2med_plugin.models.identity.model_revision"),
    "r2med_plugin.retrieval.official_dense": ("load_official_encoder", "r2med_plugin.models.official.loading.load_official_encoder"),
    "r2med_plugin.integrations.embedding_endpoint": ("EndpointEncoder", "r2med_plugin.models.embedding_endpoint.EndpointEncoder"),
    "r2med_plugin.integrations.official_models": ("OfficialLoader", "r2med_plugin.models.official.loader.OfficialLoader"),
    "r2med_plugin.integrations.official_rerankers": ("OfficialReranker", "r2med_plugin.models.official.rerankers.OfficialReranker"),
    "r2med_plugin.evaluation.rerankers": ("Reranker", "r2med_plugin.models.protocols.Reranker"),
}


def _modules_with_old_names() -> list[str]:
    """Every module of the package that sets ``__getattr__ = Moved(...)``."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        if any(isinstance(node, ast.Assign) and [getattr(t, "id", None) for t in node.targets] == ["__getattr__"]
               and isinstance(node.value, ast.Call) and getattr(node.value.func, "id", None) == "Moved" for node in tree.body):
            found.append(".".join(path.relative_to(ROOT).with_suffix("").parts))
    return found


OLD_MODULES = _modules_with_old_names()


def _moved(module: str) -> Moved:
    getter = vars(import_module(module))["__getattr__"]
    assert isinstance(getter, Moved)
    return getter


def _old_paths() -> list[tuple[str, str, str]]:
    return [(module, name, target) for module in OLD_MODULES for name, target in sorted(_moved(module).targets.items())]


def test_every_module_with_old_names_is_sampled():
    assert sorted(OLD_MODULES) == sorted(SAMPLES)


def _resolve(path: str) -> object:
    module, _, name = path.rpartition(".")
    return getattr(import_module(module), name)


@pytest.mark.parametrize(("module", "name", "target"), _old_paths(), ids=lambda value: str(value).rpartition(".")[2])
def test_each_old_path_still_works_and_warns(module: str, name: str, target: str):
    expected = _resolve(target)
    with pytest.warns(DeprecationWarning, match=re.escape(f"{module}.{name} {DEPRECATED} {target} instead")):
        found = getattr(import_module(module), name)
    assert found is expected


@pytest.mark.parametrize("module", sorted(SAMPLES))
def test_an_old_import_statement_warns_at_the_importing_line(module: str):
    name, target = SAMPLES[module]
    with pytest.warns(DeprecationWarning) as caught:
        exec(f"from {module} import {name}", {})  # noqa: S102
    ours = [w for w in caught if DEPRECATED in str(w.message)]
    assert [str(w.message) for w in ours] == [f"{module}.{name} {DEPRECATED} {target} instead"]
    assert ours[0].filename == "<string>"  # the importing statement, not r2med_plugin/_moved.py


def test_old_paths_point_down_the_layers():
    from tests.contracts.test_architecture import _layer

    upward = [f"{module}.{name} -> {target}" for module, name, target in _old_paths()
              if _layer(target.rpartition(".")[0]) > _layer(module)]
    assert upward == []


def test_an_unknown_name_is_still_an_attribute_error():
    from r2med_plugin.evaluation import metrics

    with pytest.raises(AttributeError, match="has no attribute 'no_such_name'"):
        metrics.no_such_name  # noqa: B018
    assert not hasattr(metrics, "no_such_name")


def _python_files() -> list[Path]:
    roots = [PACKAGE, ROOT / "tests", ROOT / "benchmarks", ROOT / "scripts"]
    return [path for root in roots for path in root.rglob("*.py") if path.resolve() != Path(__file__).resolve()]


def _defines_anything(module: str) -> bool:
    """Whether ``module`` has code of its own, besides keeping old names (runner, reranking, official_files ...)."""
    source = Path(import_module(module).__file__).read_text(encoding="utf-8")
    return any(isinstance(node, (ast.FunctionDef, ast.ClassDef)) for node in ast.parse(source).body)


def test_nothing_of_ours_names_an_old_path():
    old = {(module, name) for module, name, _ in _old_paths()}
    shims = {module for module in OLD_MODULES if not _defines_anything(module)}
    found = []
    for path in _python_files():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module:
                found += [f"{path.name}: from {node.module} import {alias.name}" for alias in node.names
                          if (node.module, alias.name) in old or f"{node.module}.{alias.name}" in shims]
            elif isinstance(node, ast.Import):
                found += [f"{path.name}: import {alias.name}" for alias in node.names if alias.name in shims]
            elif isinstance(node, ast.Constant) and isinstance(node.value, str):  # monkeypatch targets
                found += [f"{path.name}: {node.value!r}" for module, name in old if node.value == f"{module}.{name}"]
    # README.md and the docs site's pages (issue 32 moved most of README's examples there)
    readme = "\n".join(path.read_text(encoding="utf-8") for path in [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))])
    found += [f"README.md or docs/: {line}" for line in re.findall(r"from (\S+) import ([^\n]+)", readme)
              if any((line[0], name.strip()) in old for name in line[1].split(","))]
    assert found == []


def test_importing_the_package_and_running_commands_warns_nothing_of_ours(mirror_env: Path, tmp_path: Path):
    code = (
        "import sys, r2med_plugin\n"
        "for name in r2med_plugin.__all__: getattr(r2med_plugin, name)\n"
        "from r2med_plugin.cli import main\n"
        f"out = {str(tmp_path / 'out')!r}\n"
        "codes = [main(['evaluate', '--task', 'NanoR2MEDBiology', '--retriever', 'bm25-lucene', '--hybrid', '--output', out, '--trec']),\n"
        "         main(['leaderboard', out]), main(['tasks', '--kind', 'nano'])]\n"
        "print(codes)\n"
    )
    # not --quiet, which ignores DeprecationWarnings; PYTHONWARNINGS also covers what the .pth autoload imports at start
    env = os.environ | {"PYTHONWARNINGS": "always::DeprecationWarning"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=env, cwd=ROOT)
    assert out.returncode == 0 and out.stdout.splitlines()[-1] == "[0, 0, 0]", out.stderr[-3000:]
    ours = [line for line in out.stderr.splitlines() if "DeprecationWarning" in line and ("r2med_plugin" in line or DEPRECATED in line)]
    assert ours == []


def test_every_dotted_reference_in_the_package_readme_and_docs_resolves():
    """Docstrings and comments point to modules that exist (three named r2med_plugin.evaluation.significance)."""
    import tomllib
    import warnings

    groups = set(tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["entry-points"])
    documents = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]  # README and the docs site (issue 32)
    texts = {str(path.relative_to(ROOT)): path.read_text(encoding="utf-8") for path in [*PACKAGE.rglob("*.py"), *documents]}
    references = {(name, found.rstrip(".")) for name, text in texts.items()
                  for found in re.findall(r"\br2med_plugin(?:\.[A-Za-z_]\w*)+", text)}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # an old path in a shim's docstring resolves too
        dangling = sorted(f"{name}: {reference}" for name, reference in references
                          if reference not in groups and not _resolves(reference))
    assert dangling == []


def _resolves(reference: str) -> bool:
    """Whether ``reference`` is a module, or an attribute path under the longest importable module prefix."""
    parts = reference.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            found = import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for attribute in parts[cut:]:
            if not hasattr(found, attribute):
                return False
            found = getattr(found, attribute)
        return True
    return False
