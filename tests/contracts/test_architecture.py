"""The package's shape: layers import downwards only, no module imports one that imports it back,
the core never imports a host library, and evaluate_task stays a thin builder over the plan."""

from __future__ import annotations

import ast
from pathlib import Path

import r2med_plugin

PACKAGE = Path(r2med_plugin.__file__).parent
# Lower numbers are lower layers; a module may import its own layer or lower ones.
LAYERS = {
    "version": 0, "types": 0, "io": 0, "errors": 0, "rules": 0, "quiet": 0, "identifiers": 0, "optional_dependencies": 0, "significance": 1, "llm_settings": 1, "request_options": 0, "cache": 1, "catalog": 1, "metrics": 1,
    "data": 2, "endpoints": 2, "models": 3, "retrieval": 3, "llm": 3, "reporting": 4, "audit": 4, "evaluation": 5,
    "integrations": 6, "generation": 6, "sweep": 7, "cli": 8, "": 9,
}
HOST_LIBRARIES = ("mteb", "ir_datasets")


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_module(name: str) -> bool:
    path = PACKAGE.parent / name.replace(".", "/")
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def _imports() -> dict[str, set[str]]:
    """module -> the r2med_plugin modules it imports (anywhere in it, lazily or not)."""
    graph: dict[str, set[str]] = {}
    for path in PACKAGE.rglob("*.py"):
        name, found = _module_name(path), set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("r2med_plugin"):
                for alias in node.names:  # "from pkg import module" imports the module; anything else, the package
                    candidate = f"{node.module}.{alias.name}"
                    found.add(candidate if _is_module(candidate) else node.module)
            elif isinstance(node, ast.Import):
                found |= {alias.name for alias in node.names if alias.name.startswith("r2med_plugin")}
        graph[name] = found - {name}
    return graph


def _layer(module: str) -> int:
    parts = module.split(".")
    return LAYERS[parts[1] if len(parts) > 1 else ""]


def _host_imports(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        names = [node.module or ""] if isinstance(node, ast.ImportFrom) else [a.name for a in node.names] if isinstance(node, ast.Import) else []
        found |= {name for name in names if name.split(".")[0] in HOST_LIBRARIES}
    return found


def test_no_module_imports_from_a_layer_above_it():
    upward = sorted(f"{module} -> {target}" for module, targets in _imports().items() for target in targets
                    if _layer(target) > _layer(module) and not module.endswith("__init__"))
    assert upward == []


def test_no_module_imports_one_that_imports_it_back():
    graph = _imports()
    packages = {name for name in graph if (PACKAGE.parent / name.replace(".", "/") / "__init__.py").is_file()}

    def reaches(start: str, goal: str) -> bool:
        seen, stack = set(), [start]
        while stack:
            current = stack.pop()
            for target in graph.get(current, ()):
                if target == goal:
                    return True
                if target not in seen and target not in packages:  # a package's re-exports are not a cycle of its modules
                    seen.add(target)
                    stack.append(target)
        return False

    cycles = sorted(f"{module} <-> {target}" for module, targets in graph.items() for target in targets
                    if module not in packages and target not in packages and reaches(target, module))
    assert cycles == []


def test_the_core_never_imports_a_host_library():
    core = [path for path in PACKAGE.rglob("*.py") if "integrations" not in path.relative_to(PACKAGE).parts]
    assert {str(path.relative_to(PACKAGE)): _host_imports(path) for path in core if _host_imports(path)} == {}


def test_evaluate_task_is_a_thin_builder():
    from r2med_plugin.evaluation import runner

    tree = ast.parse(Path(runner.__file__).read_text(encoding="utf-8"))
    (function,) = [node for node in tree.body if isinstance(node, ast.FunctionDef) and node.name == "evaluate_task"]
    assert function.end_lineno - function.lineno + 1 < 40


def test_the_architecture_page_toy_first_stage_runs(mirror_env: Path, tmp_path: Path, monkeypatch, capsys):
    import json
    import re

    # the Architecture section moved from README.md to the docs site's page; its one block is the toy
    page = (PACKAGE.parent / "docs" / "explanation" / "architecture.md").read_text(encoding="utf-8")
    section = page.split("# Architecture", 1)[1]
    (code,) = re.findall(r"```python\n(.*?)```", section, flags=re.S)
    assert len(code.strip().splitlines()) < 30
    monkeypatch.chdir(tmp_path)
    exec(compile(code, "docs/explanation/architecture.md", "exec"), {})
    printed = capsys.readouterr().out.split()
    written = json.loads((tmp_path / "toy-results/results/shortest-first/v1/NanoR2MEDBiology.json").read_text())
    scores = written["scores"]["test"][0]
    assert [float(value) for value in printed] == [scores["ndcg_at_10"], scores["hybrid_ndcg_at_10"]]
    assert written["r2med_provenance"]["model_name"] == "shortest-first" and written["r2med_hybrid_with"] == "bm25-hakari"


def test_no_module_imports_a_private_name_of_another():
    roots = [PACKAGE, PACKAGE.parent / "tests", PACKAGE.parent / "benchmarks", PACKAGE.parent / "scripts"]
    found = []
    for root in roots:
        for path in root.rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("r2med_plugin"):
                    found += [f"{path.name}: {node.module}.{alias.name}" for alias in node.names
                              if alias.name.startswith("_") and not alias.name.startswith("__")]
    assert found == []


# --- the models/ package ------------------------------------------------------------------------------------

# Members our encoders, rerankers, recipes and loaders declare (r2med_plugin.models.protocols, registry.ModelLoader):
# code reads them from the model, never asks with getattr/hasattr whether it has one.
DECLARED_MEMBERS = {"for_task", "query_prompt", "cache_identity", "encode_expansions", "expansion_mean_dtype",
                    "instructions", "last_report", "close", "output_dtype", "endpoint_options", "unclaimed_hint",
                    # and our own result, data and LLM reranker types
                    "estimate_cost", "spec", "dataset_revision_verified", "hybrid_with", "rerank", "usage", "data"}
# Where probing stays legitimate: the adapters of a user's (third-party) object, read once at the boundary.
ADAPTERS = {"models/protocols.py"}  # a loader is a ModelLoader when registered (models/registry.py probes none)
NOT_A_MODEL = {("cli/__init__.py", "query_prompt"), ("cli/evaluate.py", "query_prompt"), ("cli/evaluate_run.py", "query_prompt")}  # a result's field, not a model's member


def test_models_sit_below_retrieval_and_llm_and_the_endpoint_client_below_both():
    graph = _imports()
    models = {module: targets for module, targets in graph.items() if module.startswith("r2med_plugin.models")}
    assert sorted(f"{module} -> {target}" for module, targets in models.items() for target in targets
                  if target.startswith(("r2med_plugin.retrieval", "r2med_plugin.llm"))) == []
    # the OpenAI-compatible client and the extra request body are below both families that send requests
    endpoint_users = {module for module, targets in graph.items() if any(t.startswith("r2med_plugin.endpoints") for t in targets)}
    assert "r2med_plugin.models.embedding_endpoint" in endpoint_users and "r2med_plugin.llm.requests" in endpoint_users
    assert sorted(f"{module} -> {target}" for module, targets in graph.items() if module.startswith("r2med_plugin.endpoints")
                  for target in targets if not target.startswith(("r2med_plugin.endpoints", "r2med_plugin.errors",
                                                                  "r2med_plugin.rules"))) == []
    assert sorted(f"{module} -> {target}" for module, targets in graph.items() if module.startswith("r2med_plugin.retrieval")
                  for target in targets if target.startswith("r2med_plugin.llm")) == []


def test_the_mteb_family_stays_in_integrations():
    """Every module of models/ is core: none imports mteb or ir_datasets (test_the_core_never_imports_a_host_library),
    and the mteb-backed family is integrations/mteb_models.py."""
    assert (PACKAGE / "integrations" / "mteb_models.py").is_file()
    assert {path.name for path in (PACKAGE / "models").rglob("*.py") if _host_imports(path)} == set()


def test_no_code_probes_a_models_declared_members():
    found = []
    for path in PACKAGE.rglob("*.py"):
        relative = path.relative_to(PACKAGE).as_posix()
        if relative in ADAPTERS:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("getattr", "hasattr")
                    and len(node.args) >= 2 and isinstance(node.args[1], ast.Constant)
                    and node.args[1].value in DECLARED_MEMBERS and (relative, node.args[1].value) not in NOT_A_MODEL):
                found.append(f"{relative}:{node.lineno} {node.func.id}(..., {node.args[1].value!r})")
    assert found == []


def test_signatures_are_inspected_only_on_third_party_objects():
    """inspect.signature reads a user's encode (protocols.AdaptedEncoder) or a library's predict (cross_encoder); the
    sweep spec reads evaluate_task's own parameters."""
    found = {path.relative_to(PACKAGE).as_posix() for path in PACKAGE.rglob("*.py")
             if "inspect.signature(" in path.read_text(encoding="utf-8")}
    assert sorted(found - {"models/cross_encoder.py", "models/protocols.py", "sweep/spec.py"}) == []


# --- short functions, no moved-name shims ------------------------------------------------------------------

MAX_FUNCTION_LINES = 60


def test_no_function_is_over_60_lines():
    """Measured as Python's ast gives a function: from its ``def`` line to its last line (methods and nested ones too)."""
    long = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.end_lineno - node.lineno + 1 > MAX_FUNCTION_LINES:
                long.append(f"{path.relative_to(PACKAGE).as_posix()}:{node.lineno} {node.name} ({node.end_lineno - node.lineno + 1} lines)")
    assert long == []


def test_no_moved_name_shim_anywhere():
    """Names that moved are imported from their home: no ``Moved`` redirect, no ``_moved`` module, and no module-level
    ``__getattr__`` besides the two lazy re-exports that keep ``import r2med_plugin`` and mteb's import cheap."""
    roots = [PACKAGE, PACKAGE.parent / "tests", PACKAGE.parent / "benchmarks", PACKAGE.parent / "scripts"]
    found, getters = [], []
    for path in [file for root in roots for file in sorted(root.rglob("*.py"))]:
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if (isinstance(node, ast.Name) and node.id == "Moved") or (isinstance(node, ast.alias) and "_moved" in node.name):
                found.append(f"{path.relative_to(PACKAGE.parent).as_posix()}:{node.lineno}")
            elif isinstance(node, ast.ImportFrom) and (node.module or "").endswith("_moved"):
                found.append(f"{path.relative_to(PACKAGE.parent).as_posix()}:{node.lineno}")
        if path.is_relative_to(PACKAGE):
            getters += [_module_name(path) for node in tree.body
                        if isinstance(node, (ast.FunctionDef, ast.Assign)) and "__getattr__" in _defined_names(node)]
    assert found == [] and not (PACKAGE / "_moved.py").exists()
    assert sorted(getters) == ["r2med_plugin", "r2med_plugin.integrations.mteb"]


def _defined_names(node: ast.stmt) -> list[str]:
    if isinstance(node, ast.FunctionDef):
        return [node.name]
    return [target.id for target in node.targets if isinstance(target, ast.Name)]
