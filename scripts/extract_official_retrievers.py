"""Extract the official R2MED dense retriever profiles into r2med_plugin/models/official/profiles.json.

A profile is what the official code configures for one ``--retriever_name`` of ``src/run.py``: the checkpoint
(``model_path_dict`` of ``src/eval_retrieval.py``), the model class of ``src/utils.py`` with the arguments
``init_model`` gives it (merged over the class's own defaults), and the query and document instructions that
``eval_retrieval`` sets for each task (from ``src/instrcution.py``). Nothing is retyped: this script runs the
official ``init_model`` and ``eval_retrieval`` themselves, unchanged, from a git checkout of R2MED/R2MED, with
recording stand-ins for the model classes (utils.py imports GPU-only packages) and for the two functions that
would read data and encode (``load_retrieval_data``, ``retrieval_by_dense``). The defaults of each class are read
from utils.py's source (its ``__init__`` signature).

``eval_retrieval`` looks instructions up by the task name it is given, and instrcution.py keys them by the
internal names (Stack-Biology, PMC-Treat, ...), so it is called with those (task_metadata's
``official_internal_name``); run.py's public names (Biology, PMC-Treatment, ...) raise KeyError there for
every instructed model.

Usage:
    python scripts/extract_official_retrievers.py --git-dir /path/to/R2MED/.git [--commit SHA]
"""

from __future__ import annotations

import ast
import contextlib
import json
import os
import sys
import tempfile
import types
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from extract_official_prompts import git_show, source_arguments  # noqa: E402 - the scripts' shared git helpers

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "r2med_plugin" / "models" / "official" / "profiles.json"
CLASSES = ("FlagDRESModel", "InstructorModel", "BiEncoderModel", "HighScaleModel", "GritModel", "NVEmbedModel",
           "RetrievalOPENAI")
MODEL_DIR = "model_dir/"
# The retriever's row label in the published leaderboard (reference/r2med_leaderboard.json): a join key,
# checked against that file below.
PUBLISHED_ROWS = {
    "contriever": "Contriever", "medcpt": "MedCPT", "inst-l": "InstructOR-L", "inst-xl": "InstructOR-XL",
    "bmr-410m": "BMRETRIEVER-410M", "bmr-2b": "BMRetriever-2B", "bmr-7b": "BMRetriever-7B", "bge": "BGE-Large-en-v1.5",
    "e5": "E5-mistral-7b-instruct", "grit": "GritLM-7B", "sfr": "SFR-Embedding-Mistral", "nv": "NV-Embed-v2",
    "openai": "Text-embedding-3-large", "voyage": "Voyage-3",
}  # the official code's local copies of hub repositories: model_dir/<hub id>


def class_defaults(utils_source: str) -> dict[str, dict[str, object]]:
    """Each model class's ``__init__`` keyword defaults, read from src/utils.py."""
    defaults: dict[str, dict[str, object]] = {}
    for node in ast.parse(utils_source).body:
        if isinstance(node, ast.ClassDef) and node.name in CLASSES:
            init = next(item for item in node.body if isinstance(item, ast.FunctionDef) and item.name == "__init__")
            arguments = init.args.args[1:]
            values = init.args.defaults
            offset = len(arguments) - len(values)
            defaults[node.name] = {arg.arg: ast.literal_eval(values[index - offset])
                                   for index, arg in enumerate(arguments) if index >= offset}
    missing = set(CLASSES) - set(defaults)
    if missing:
        raise SystemExit(f"src/utils.py has no class {sorted(missing)}")
    return defaults


def recording_utils(defaults: dict[str, dict[str, object]]) -> types.ModuleType:
    """A stand-in ``utils`` module: each class records its arguments (over its defaults) and keeps them as attributes."""
    module = types.ModuleType("utils")

    def make(class_name: str) -> type:
        def __init__(self, **kwargs):
            unknown = set(kwargs) - set(defaults[class_name])
            if unknown:
                raise SystemExit(f"init_model passes {sorted(unknown)} to {class_name}, which takes no such argument")
            self.recorded_class = class_name
            self.recorded_arguments = {**defaults[class_name], **kwargs}
            for key, value in self.recorded_arguments.items():
                setattr(self, key, value)
        return type(class_name, (), {"__init__": __init__, "encode_queries": lambda self, *a, **k: None,
                                     "encode_corpus": lambda self, *a, **k: None})

    for class_name in CLASSES:
        setattr(module, class_name, make(class_name))
    return module


def load_official_modules(git_dir: str, commit: str, defaults: dict[str, dict[str, object]]) -> types.ModuleType:
    """src/eval_retrieval.py, unchanged, over the real instrcution.py and example.py and stand-ins for the rest."""
    stand_ins = {"utils": recording_utils(defaults)}
    mteb_parts = ["mteb", "mteb.abstasks", "mteb.abstasks.AbsTaskRetrieval"]
    for name in mteb_parts:
        stand_ins[name] = types.ModuleType(name)
    stand_ins["mteb.abstasks.AbsTaskRetrieval"].DRESModel = type("DRESModel", (), {})
    base = types.ModuleType("base")
    base_source = git_show(git_dir, commit, "src/base.py")
    tree = ast.parse(base_source)  # only the names eval_retrieval imports: r1_model_list (data) and two functions
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "r1_model_list" for t in node.targets):
            base.r1_model_list = ast.literal_eval(node.value)
    base.split_response_for_r1 = lambda llm, text: text
    base.writejson_bench = lambda data, path: None
    stand_ins["base"] = base
    for name in ("example", "instrcution"):
        module = types.ModuleType(name)
        sys.modules[name] = module
        exec(compile(git_show(git_dir, commit, f"src/{name}.py"), f"src/{name}.py", "exec"), module.__dict__)  # noqa: S102
    sys.modules.update(stand_ins)
    module = types.ModuleType("eval_retrieval")
    exec(compile(git_show(git_dir, commit, "src/eval_retrieval.py"), "src/eval_retrieval.py", "exec"), module.__dict__)  # noqa: S102
    return module


def internal_task_names() -> dict[str, str]:
    """{official internal name: public task name} of the eight R2MED tasks (task_metadata/)."""
    names = {}
    for path in sorted((ROOT / "task_metadata").glob("R2MED*.json")):
        spec = json.loads(path.read_text(encoding="utf-8"))
        if spec.get("kind") == "r2med":
            names[spec["official_internal_name"]] = spec["hub_name"]
    if len(names) != 8:
        raise SystemExit(f"task_metadata/ names {len(names)} R2MED tasks, expected 8")
    return names


def model_path_dict(source: str) -> dict[str, object]:
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "model_path_dict" for t in node.targets):
            return ast.literal_eval(node.value)
    raise SystemExit("src/eval_retrieval.py has no model_path_dict")


def hub_id(path: object) -> object:
    if isinstance(path, list):
        return [hub_id(item) for item in path]
    return str(path).removeprefix(MODEL_DIR)


def profiles(git_dir: str, commit: str) -> dict[str, dict[str, object]]:
    defaults = class_defaults(git_show(git_dir, commit, "src/utils.py"))
    official = load_official_modules(git_dir, commit, defaults)
    paths = model_path_dict(git_show(git_dir, commit, "src/eval_retrieval.py"))
    tasks = internal_task_names()
    seen: dict[str, dict[str, dict[str, object]]] = {}

    def record(queries=None, corpus=None, relevant_docs=None, model=None, **kwargs):
        seen.setdefault(model.recorded_name, {})[model.recorded_task] = {
            "query_instruction": model.query_instruction_for_retrieval,
            "document_instruction": model.document_instruction_for_retrieval,
        }
        return {"ndcg_at_10": 0.0}, {}

    result: dict[str, dict[str, object]] = {}
    with tempfile.TemporaryDirectory() as work, _chdir(Path(work) / "src"), _kept_environment():
        official.retrieval_by_dense = record
        for name, path in paths.items():
            created = official.init_model(name, path)
            arguments = dict(created.recorded_arguments)
            for internal in tasks:
                original_init = official.init_model

                def init_and_tag(retriever_name, model_path, _task=internal, _init=original_init):
                    model = _init(retriever_name, model_path)
                    model.recorded_name, model.recorded_task = retriever_name, _task
                    return model

                official.init_model = init_and_tag
                official.load_retrieval_data = lambda *args, _task=internal, **kwargs: ({}, {_task: "q"}, {})
                try:
                    official.eval_retrieval(retriever_name=name, task_names=[internal])
                finally:
                    official.init_model = original_init
            per_task = seen.pop(name)
            query = {tasks[internal]: per_task[internal]["query_instruction"] for internal in tasks}
            document = {tasks[internal]: per_task[internal]["document_instruction"] for internal in tasks}
            arguments.pop("query_instruction_for_retrieval", None)
            arguments.pop("document_instruction_for_retrieval", None)
            for key in ("model_name_or_path", "query_encoder_name_or_path", "doc_encoder_name_or_path"):
                if key in arguments:
                    arguments[key] = hub_id(arguments[key])
            result[name] = {
                "class": created.recorded_class,
                "checkpoint": hub_id(path),
                "arguments": {key: value for key, value in sorted(arguments.items()) if not key.endswith("cache_path")},
                "query_instruction": _collapse(query),
                "document_instruction": _collapse(document),
                "published_row": published_row(name),
            }
    return result


def published_row(name: str) -> str:
    leaderboard = json.loads((ROOT / "reference" / "r2med_leaderboard.json").read_text(encoding="utf-8"))
    labels = {row["retriever"] for row in leaderboard["rows"] if not row["llm"]}
    if PUBLISHED_ROWS.get(name) not in labels:
        raise SystemExit(f"the retriever {name!r} has no row in the published leaderboard (PUBLISHED_ROWS: {PUBLISHED_ROWS.get(name)!r})")
    return PUBLISHED_ROWS[name]


def _collapse(per_task: dict[str, object]) -> object:
    """One value when every task has the same (None, or one string), else the per-task table."""
    values = list(per_task.values())
    return values[0] if all(value == values[0] for value in values) else dict(per_task)


@contextlib.contextmanager
def _chdir(path: Path):
    path.mkdir(parents=True, exist_ok=True)
    before = os.getcwd()
    os.chdir(path)
    try:
        yield
    finally:
        os.chdir(before)


@contextlib.contextmanager
def _kept_environment():
    before = dict(os.environ)
    try:
        with contextlib.redirect_stdout(open(os.devnull, "w")):  # noqa: SIM115 - the official code prints progress
            yield
    finally:
        os.environ.clear()
        os.environ.update(before)


def main() -> int:
    args, commit = source_arguments(__doc__.splitlines()[0], OUT)
    payload = {
        "source": {
            "repository": "https://github.com/R2MED/R2MED",
            "commit": commit,
            "checkpoints": "src/eval_retrieval.py model_path_dict (model_dir/<hub id> read as the hub id)",
            "classes": "src/eval_retrieval.py init_model: the src/utils.py class and its arguments, over the class defaults",
            "instructions": ("src/eval_retrieval.py eval_retrieval: the query/document instructions it sets per task "
                             "(src/instrcution.py), keyed here by public task name (hub name)"),
            "extracted_by": "scripts/extract_official_retrievers.py (never edit this file by hand)",
        },
        "profiles": profiles(args.git_dir, commit),
    }
    Path(args.out).write_text(json.dumps(payload, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"wrote {args.out} from R2MED/R2MED@{commit} ({len(payload['profiles'])} profiles)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
