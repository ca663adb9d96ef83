"""Dense-retriever parity: the official R2MED code (src/ of R2MED/R2MED@62b7074, run unchanged) against
``--retriever official:<name>``, on tiny seeded random checkpoints (tests/support/tiny_official.py) and the
test suite's fixture mirror (tests/fixture_mirror.py).

    python benchmarks/official_dense_parity.py --official-src WORK/src [--beir-path DIR] [--task R2MEDBiology]

Part 1, embeddings (one process): each official class, built by the official ``init_model(name, path)`` with
``path`` a tiny folder and given the instructions ``eval_retrieval`` sets for the task (the four lines that do
so are restated in ``set_task_instructions``; they key instrcution.py by the task's internal name, e.g.
"Stack-Biology"), against ``load_encoder("official:<name>@<folder>").for_task(<task>)`` on the same texts:
queries, documents, and queries with a HyDE expansion (official: ``encode_queries`` of ``[query, hy_doc]``
pairs; ours: the mean of ``encode(query)`` and ``encode_expansions(hy_doc)``).

Part 2, result files (two processes): the official ``eval_retrieval(retriever_name, gar_method, gar_llm,
task_names=[<internal name>])`` in a subprocess, from ``<tmp>/official/src`` (a byte-for-byte copy of
--official-src) as cwd, with ``dataset/<internal name>`` a symlink to the mirror's ``R2MED/<hub name>`` and
``src/model_dir/<hub id>`` symlinks to the tiny folders; against ``r2med evaluate --retriever
official:<name>@<folder> --accept-drift --trec [--expansion <method>/<llm>]`` on the same mirror. The ``test``
dicts of the two JSON files are compared key for key (value and type); where they differ, the two rankings are
compared with the official scores (``diagnose``). CLS pooling on the tiny BERTs gives nearly one vector for every
text (all cosines within ~2e-6), so rankings there are decided by float32 rounding: bge and medcpt are run again on
``spread_bert`` copies (weights redrawn from N(0, 0.5)), marked ``*``.

Stand-ins (import and environment shims only; no official line is edited):

- ``gritlm``, ``tiktoken``, ``voyageai``: utils.py imports them at its top for other models; where they are not
  installed, empty modules (``gritlm.GritLM`` an empty class) are put in sys.modules (as in
  official_reranker_parity.py). Part 1 removes them again once utils.py is imported.
- ``mteb.abstasks.AbsTaskRetrieval.DRESModel``: eval_retrieval.py imports it from mteb 1.1.1, a path mteb 2.x
  lacks. It is only used for models without encode_queries/encode_corpus, which no official class is; the
  stand-in raises if ever called. Part 1 puts ``mteb``, ``mteb.abstasks`` and this module in sys.modules only
  while eval_retrieval.py is imported, then restores them (our side imports the real mteb); part 2 uses them in
  the official subprocess only.
- ``beir``: not one of our dependencies; part 2 needs BEIR 2.2.0 (``pip install --no-deps --target DIR
  beir==2.2.0``; it uses the installed pytrec_eval), given with --beir-path.
- CPU: CUDA is hidden (CUDA_VISIBLE_DEVICES=""; in the subprocess torch.cuda.is_available answers False,
  since eval_retrieval sets CUDA_VISIBLE_DEVICES='0,1,2,3' itself).
- InstructorModel.encode calls ``self.model.module.encode``, which exists only when the class wrapped its
  model in torch.nn.DataParallel, i.e. with more than one GPU (the authors' machine: four). Part 1 wraps
  ``official.model = torch.nn.DataParallel(official.model)`` after construction; part 2, which cannot reach
  the model before eval_retrieval uses it, makes ``torch.cuda.device_count`` answer 4 in the subprocess, so
  every class takes its multi-GPU branch as on that machine: DataParallel, which without CUDA only holds
  ``.module`` and calls it, and batch_size x 4.
- BEIR's ``EvaluateRetrieval.evaluate`` is wrapped in the subprocess to save the run it receives (eval_retrieval
  keeps runs only with its local ``save_top_k = False``); it then calls the original, unchanged.
- NVEmbedModel loads its tokenizer without trust_remote_code; transformers then asks on stdin whether to run
  the folder's code. The question is answered by an empty stdin (no), as in any non-interactive run: the
  tokenizer loads from tokenizer.json. NV is float16 in the official code (hard-coded): ours is compared at
  float16 (our default for nv, the same recipe) and, for information, at float32.

Not covered: grit (GritLM's own package and a Mistral checkpoint; both sides call the same ``GritLM.encode``),
openai and voyage (they need their endpoints).
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import importlib
import importlib.util
import io
import json
import os
import shutil
import subprocess
import sys
import tempfile
import types
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

os.environ["CUDA_VISIBLE_DEVICES"] = ""  # both sides on CPU, before torch is imported
for _offline in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE"):
    os.environ.setdefault(_offline, "1")

import numpy as np  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
TARGET = 1e-5
OPTIONAL_IMPORTS = {"gritlm": ["GritLM"], "tiktoken": [], "voyageai": []}
MTEB_PATH = ("mteb", "mteb.abstasks", "mteb.abstasks.AbsTaskRetrieval")
OFFICIAL_GPUS = 4  # eval_retrieval sets CUDA_VISIBLE_DEVICES='0,1,2,3'


@dataclass(frozen=True)
class Family:
    name: str  # the official retriever name (init_model, --retriever official:<name>)
    folder: str  # the tiny checkpoint (tests/support/tiny_official.py build_all key)
    hub_id: str  # model_path_dict's model_dir/<hub id>, for part 2's symlinks


FAMILIES = [
    Family("contriever", "bert", "facebook/contriever-msmarco"),
    Family("bge", "bert", "BAAI/bge-large-en-v1.5"),
    Family("medcpt", "medcpt-article", "ncbi/MedCPT-Article-Encoder"),
    Family("e5", "llama-pad", "intfloat/e5-mistral-7b-instruct"),
    Family("sfr", "llama-pad", "Salesforce/SFR-Embedding-Mistral"),
    Family("bmr-410m", "llama-bmr", "BMRetriever/BMRetriever-410M"),
    Family("bmr-2b", "llama-bmr", "BMRetriever/BMRetriever-2B"),
    Family("bmr-7b", "llama-bmr", "BMRetriever/BMRetriever-7B"),
    Family("inst-l", "instructor", "hkunlp/instructor-large"),
    Family("inst-xl", "instructor", "hkunlp/instructor-xl"),
    Family("nv", "nv", "nvidia/NV-Embed-v2"),
]
MEDCPT_QUERY_HUB_ID = "ncbi/MedCPT-Query-Encoder"
# CLS pooling on the tiny BERTs gives nearly the same vector for every text (all cosines within ~2e-6 of each
# other): part 2 runs these families again on spread_bert copies of their folders.
CLS_FAMILIES = {"bge": ("bert",), "medcpt": ("medcpt-query", "medcpt-article")}
NEAR_TIE = 1e-6  # official score gaps below this are float32 rounding (scores near 1 are resolved to ~6e-8)
FILE_RUN_DEFAULT = ["bge", "contriever", "e5", "bmr-410m", "medcpt", "inst-l"]


# --- data -----------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TaskData:
    task: str  # ours: R2MEDBiology
    hub_name: str  # the mirror folder: Biology
    internal: str  # the official code's name: Stack-Biology
    folder: Path
    doc_ids: list[str]
    documents: list[str]
    queries: list[str]
    hy_docs: list[str]


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def task_data(mirror: Path, task: str, expansion: str) -> TaskData:
    from r2med_plugin.catalog import get_task_spec

    spec = get_task_spec(task)
    folder = mirror / "R2MED" / spec.hub_name
    corpus = read_jsonl(folder / "corpus.jsonl")
    expanded = read_jsonl(folder / expansion / "query_with_hydoc.jsonl")
    return TaskData(task, spec.hub_name, spec.official_internal_name, folder, [row["id"] for row in corpus],
                    [row["text"] for row in corpus], [row["text"] for row in expanded], [row["hy_doc"] for row in expanded])


def build_fixtures(root: Path, task: str, expansion: str) -> tuple[Path, dict[str, Path], TaskData]:
    sys.path.insert(0, str(REPO))
    from tests.fixture_mirror import build_fixture_mirror
    from tests.support.tiny_official import build_all

    mirror = build_fixture_mirror(root / "mirror")
    data = task_data(mirror, task, expansion)
    folders = build_all(root / "tiny", data.documents + data.queries + data.hy_docs)
    return mirror, folders, data


# --- stand-ins ------------------------------------------------------------------------------------------------


def _empty_module(name: str, attributes: Sequence[str] = ()) -> types.ModuleType:
    module = types.ModuleType(name)
    for attribute in attributes:
        setattr(module, attribute, type(attribute, (), {}))
    return module


def _dres_model_stand_in() -> types.ModuleType:
    class DRESModel:  # mteb 1.1.1's wrapper for models without encode_queries/encode_corpus: never needed here
        def __init__(self, model, **kwargs):
            raise RuntimeError(f"stand-in DRESModel called for {type(model).__name__}: the official class lacks "
                               "encode_queries/encode_corpus")

    module = types.ModuleType("mteb.abstasks.AbsTaskRetrieval")
    module.DRESModel = DRESModel
    return module


def stand_in_modules() -> dict[str, types.ModuleType]:
    """Every stand-in module the official imports need here, by name."""
    modules = {name: _empty_module(name, attributes) for name, attributes in OPTIONAL_IMPORTS.items()
               if importlib.util.find_spec(name) is None}
    mteb, abstasks = _empty_module("mteb"), _empty_module("mteb.abstasks")
    mteb.__path__, abstasks.__path__ = [], []
    retrieval = _dres_model_stand_in()
    mteb.abstasks, abstasks.AbsTaskRetrieval = abstasks, retrieval
    return modules | {"mteb": mteb, "mteb.abstasks": abstasks, "mteb.abstasks.AbsTaskRetrieval": retrieval}


@contextlib.contextmanager
def temporarily(modules: dict[str, types.ModuleType]) -> Iterator[None]:
    """``modules`` in sys.modules for the duration; whatever was there before (or nothing) afterwards."""
    saved = {name: sys.modules.get(name) for name in modules}
    sys.modules.update(modules)
    try:
        yield
    finally:
        for name, module in saved.items():
            if module is None:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = module


def import_eval_retrieval(src: Path) -> types.ModuleType:
    """src/eval_retrieval.py (and through it utils.py, instrcution.py), unchanged, with the stand-ins in place
    only while it is imported."""
    before = set(sys.modules)
    sys.path.insert(0, str(src))
    try:
        with temporarily(stand_in_modules()):
            module = importlib.import_module("eval_retrieval")
    finally:
        sys.path.remove(str(src))
    for name in set(sys.modules) - before:  # utils, base, ... of src/: generic names, kept out of sys.modules
        if getattr(sys.modules[name], "__file__", None) and Path(sys.modules[name].__file__).parent == src:
            del sys.modules[name]
    return module


# --- part 1: embeddings -----------------------------------------------------------------------------------------


def set_task_instructions(model: object, name: str, internal: str, instructions: types.ModuleType) -> None:
    """What eval_retrieval does before each task (src/eval_retrieval.py, the lines after load_retrieval_data)."""
    if name in ["e5", "bmr-410m", "bmr-2b", "bmr-7b", "inst-l", "inst-xl", "grit", "sfr", "nv"]:
        model.query_instruction_for_retrieval = instructions.query_instruction[name][internal]
    if name in ["inst-l", "inst-xl"]:
        model.document_instruction_for_retrieval = instructions.doc_instruction[name][internal]


def official_model(official: types.ModuleType, name: str, path: str | list[str], data: TaskData, cache: Path) -> object:
    with contextlib.redirect_stdout(io.StringIO()), _no_stdin():
        model = official.init_model(name, path)
    set_task_instructions(model, name, data.internal, official)
    model.cache_path = str(cache / f"{name}.npy")  # encode_corpus saves there (eval_retrieval: output/doc_embs/...)
    if name in ("inst-l", "inst-xl"):
        import torch

        model.model = torch.nn.DataParallel(model.model)  # as on a multi-GPU machine: .module (see the docstring)
    return model


@contextlib.contextmanager
def _no_stdin() -> Iterator[None]:
    saved, sys.stdin = sys.stdin, io.StringIO("")
    try:
        yield
    finally:
        sys.stdin = saved


def official_embeddings(model: object, data: TaskData) -> dict[str, np.ndarray]:
    with contextlib.redirect_stdout(io.StringIO()):
        return {
            "query": np.asarray(model.encode_queries(data.queries)),
            "document": np.asarray(model.encode_corpus([{"text": text} for text in data.documents])),
            "expansion": np.asarray(model.encode_queries([[q, h] for q, h in zip(data.queries, data.hy_docs, strict=True)])),
        }


def our_embeddings(spec: str, data: TaskData, **options: object) -> dict[str, np.ndarray]:
    """Ours; the expansion row is the mean of the query's and the expansion's embeddings, taken in the encoder's
    ``expansion_mean_dtype``, as our Dense stage takes it (float16 for NV-Embed at float16, else float32)."""
    from r2med_plugin import load_encoder

    encoder = load_encoder(spec, show_progress=False, **options).for_task(data.task)
    queries = encoder.encode(data.queries, kind="query")
    expansions = encoder.encode_expansions(data.hy_docs)
    mean_dtype = np.dtype(encoder.expansion_mean_dtype)
    return {
        "query": queries,
        "document": encoder.encode(data.documents, kind="document"),
        "expansion": (queries.astype(mean_dtype) + expansions.astype(mean_dtype)) / mean_dtype.type(2),
    }


@dataclass(frozen=True)
class EmbeddingRow:
    label: str
    official_class: str
    differences: dict[str, float]  # query / document / expansion: max |ours - official|
    informative: bool = False  # a row shown for information (not held to the target)

    @property
    def worst(self) -> float:
        return max(self.differences.values())


def compare_embeddings(label: str, theirs: dict[str, np.ndarray], ours: dict[str, np.ndarray], official_class: str,
                       informative: bool = False) -> EmbeddingRow:
    differences = {}
    for kind, official_vectors in theirs.items():
        if official_vectors.shape != ours[kind].shape:
            raise AssertionError(f"{label} {kind}: shapes {official_vectors.shape} (official) vs {ours[kind].shape} (ours)")
        differences[kind] = float(np.abs(ours[kind].astype(np.float64) - official_vectors.astype(np.float64)).max())
    return EmbeddingRow(label, official_class, differences, informative)


def embedding_rows(official: types.ModuleType, folders: dict[str, Path], data: TaskData, cache: Path) -> list[EmbeddingRow]:
    rows = []
    for family in FAMILIES:
        folder = str(folders[family.folder])
        path: str | list[str] = [str(folders["medcpt-query"]), folder] if family.name == "medcpt" else folder
        model = official_model(official, family.name, path, data, cache)
        theirs = official_embeddings(model, data)
        weights = f"{folder}+{folder}" if family.name == "medcpt" else folder  # init_model: the article tower twice
        rows.append(compare_embeddings(family.name, theirs, our_embeddings(f"official:{family.name}@{weights}", data),
                                       type(model).__name__))
        if family.name == "nv":
            rows.append(compare_embeddings("nv, ours float32", theirs,
                                           our_embeddings(f"official:nv@{folder}", data, dtype="float32"),
                                           "NVEmbedModel (float16)", informative=True))
    rows.append(medcpt_two_towers(official, folders, data, cache))
    return rows


def medcpt_two_towers(official: types.ModuleType, folders: dict[str, Path], data: TaskData, cache: Path) -> EmbeddingRow:
    """BiEncoderModel built directly with two towers (init_model gives it the article tower twice)."""
    query, article = str(folders["medcpt-query"]), str(folders["medcpt-article"])
    with contextlib.redirect_stdout(io.StringIO()):
        model = official.BiEncoderModel(query_encoder_name_or_path=query, doc_encoder_name_or_path=article,
                                        max_length=512, batch_size=512)
    model.cache_path = str(cache / "medcpt-two-towers.npy")
    theirs = official_embeddings(model, data)
    return compare_embeddings("medcpt, two towers", theirs, our_embeddings(f"official:medcpt@{query}+{article}", data),
                              "BiEncoderModel (direct)")


def print_embedding_table(rows: list[EmbeddingRow], data: TaskData) -> bool:
    print(f"\nPart 1: embeddings, {data.task} ({data.internal}): {len(data.queries)} queries, {len(data.documents)} "
          f"documents, {len(data.hy_docs)} expansions; max |ours - official|, target {TARGET:g}")
    print(f"  {'family':<20} {'official class':<24} {'query':>10} {'document':>10} {'expansion':>10}  verdict")
    passed = True
    for row in rows:
        ok = row.worst <= TARGET
        passed &= ok or row.informative
        verdict = "info" if row.informative else ("ok" if ok else "DIFFERS")
        cells = " ".join(f"{row.differences[kind]:>10.3g}" for kind in ("query", "document", "expansion"))
        print(f"  {row.label:<20} {row.official_class:<24} {cells}  {verdict}")
    return passed


# --- part 2: result files ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class FileRun:
    name: str
    expansion: str  # "" or <method>/<llm>
    weights: str = ""  # a note on the checkpoint set, for the label

    @property
    def label(self) -> str:
        return f"{self.name}{self.weights} {self.expansion or '(base)'}"


def spread_bert(source: Path, destination: Path, seed: int, std: float = 0.5) -> Path:
    """``source`` (a tiny BERT) with every weight matrix redrawn from N(0, std): its CLS vectors then differ from
    text to text (the tiny BERTs' CLS vectors are nearly the same for every text, their cosines all ~1)."""
    import torch
    from transformers import AutoModel, AutoTokenizer

    model = AutoModel.from_pretrained(source)
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for parameter in model.parameters():
            if parameter.dim() >= 2:
                parameter.copy_(torch.randn(parameter.shape, generator=generator) * std)
    model.save_pretrained(destination)
    AutoTokenizer.from_pretrained(source).save_pretrained(destination)
    return destination


def lay_out_official(src: Path, work: Path, mirror: Path, folders: dict[str, Path], data: TaskData) -> Path:
    """<work>/src (a copy of the official src), dataset/<internal> and src/model_dir/<hub id> symlinks."""
    shutil.copytree(src, work / "src", ignore=shutil.ignore_patterns("__pycache__", "model_dir"))
    (work / "dataset").mkdir()
    (work / "dataset" / data.internal).symlink_to(mirror / "R2MED" / data.hub_name, target_is_directory=True)
    links = {family.hub_id: folders[family.folder] for family in FAMILIES}
    links[MEDCPT_QUERY_HUB_ID] = folders["medcpt-query"]
    for hub_id, folder in links.items():
        link = work / "src" / "model_dir" / hub_id
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(folder, target_is_directory=True)
    return work


def run_official(work: Path, runs: list[FileRun], data: TaskData, beir_path: Path | None, log: Path) -> None:
    """The official eval_retrieval for every run, in one subprocess (this script's --official-worker mode)."""
    env = dict(os.environ, R2MED_PLUGIN_NO_AUTOLOAD="1")
    if beir_path is not None:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(beir_path), env.get("PYTHONPATH")]))
    command = [sys.executable, str(Path(__file__).resolve()), "--official-worker", str(work), "--internal", data.internal,
               *[f"{run.name}:{run.expansion}" for run in runs]]
    with log.open("w") as out:
        done = subprocess.run(command, env=env, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    if done.returncode != 0:
        raise SystemExit(f"the official eval_retrieval failed (exit {done.returncode}); its log, {log}:\n"
                         + "\n".join(log.read_text(errors="replace").splitlines()[-30:]))


def official_worker(work: Path, internal: str, runs: list[str]) -> int:
    """In the subprocess: the stand-ins, then eval_retrieval unchanged, from <work>/src as cwd."""
    import torch

    sys.modules.update(stand_in_modules())
    torch.cuda.is_available = lambda: False  # CPU, whatever eval_retrieval sets CUDA_VISIBLE_DEVICES to
    torch.cuda.device_count = lambda: OFFICIAL_GPUS  # the authors' multi-GPU branch: DataParallel (see the docstring)
    os.chdir(work / "src")
    sys.path.insert(0, str(work / "src"))
    eval_retrieval = importlib.import_module("eval_retrieval")
    for run in runs:
        name, _, expansion = run.partition(":")
        method, _, llm = expansion.partition("/")
        with recording_runs(work / "runs" / f"{name}:{expansion.replace('/', '_')}.json"):
            eval_retrieval.eval_retrieval(retriever_name=name, gar_method=method, gar_llm=llm, task_names=[internal])
    return 0


@contextlib.contextmanager
def recording_runs(path: Path) -> Iterator[None]:
    """BEIR's EvaluateRetrieval.evaluate, wrapped to save the run it is given (the official code keeps it only
    with save_top_k, a local False): for the diagnosis of differing files. Scores and metrics are untouched."""
    from beir.retrieval.evaluation import EvaluateRetrieval

    original = EvaluateRetrieval.evaluate

    def evaluate(qrels, results, k_values, ignore_identical_ids=True):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(results), encoding="utf-8")
        return original(qrels, results, k_values, ignore_identical_ids=ignore_identical_ids)

    EvaluateRetrieval.evaluate = staticmethod(evaluate)
    try:
        yield
    finally:
        EvaluateRetrieval.evaluate = staticmethod(original)


def official_file(work: Path, run: FileRun, data: TaskData) -> Path:
    if run.expansion:
        method, llm = run.expansion.split("/")
        return work / "results" / "gar" / method / llm / run.name / f"{data.internal}.json"
    return work / "results" / "base retriever" / run.name / f"{data.internal}.json"


def our_file(run: FileRun, folders: dict[str, Path], mirror: Path, data: TaskData, out: Path, log: Path) -> tuple[Path, Path]:
    """(the official-layout JSON, the TREC run) of ``r2med evaluate``."""
    family = next(family for family in FAMILIES if family.name == run.name)
    folder = folders[family.folder]
    weights = f"{folder}+{folder}" if run.name == "medcpt" else str(folder)
    command = [sys.executable, "-m", "r2med_plugin.cli", "evaluate", "--task", data.task, "--retriever",
               f"official:{run.name}@{weights}", "--output", str(out), "--accept-drift", "--quiet", "--trec"]
    command += ["--expansion", run.expansion] if run.expansion else []
    with log.open("a") as sink:
        sink.write(f"\n$ {' '.join(command)}\n")
        sink.flush()
        done = subprocess.run(command, env=dict(os.environ, R2MED_DATA_DIR=str(mirror)), stdout=sink,
                              stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    found = sorted((out / "official").rglob(f"{data.task}.json")) + sorted((out / "runs").rglob(f"{data.task}.trec"))
    if done.returncode != 0 or len(found) != 2:
        raise SystemExit(f"r2med evaluate failed for {run.label} (exit {done.returncode}, files {found}); see {log}")
    return found[0], found[1]


def read_trec(path: Path) -> dict[str, list[str]]:
    """Each query's documents in rank order (the scores in the file are rounded: not used)."""
    ranked: dict[str, list[tuple[int, str]]] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        query_id, _, doc_id, rank, *_ = line.split()
        ranked.setdefault(query_id, []).append((int(rank), doc_id))
    return {query_id: [doc_id for _, doc_id in sorted(pairs)] for query_id, pairs in ranked.items()}


@dataclass(frozen=True)
class RunDiagnosis:
    spread: float  # the smallest, over queries, of (best - worst official score): ~0 means every document ties
    swapped_pairs: int  # document pairs ranked in opposite orders by the two runs
    largest_swapped_gap: float  # the largest official score gap between two such documents (0: none)
    float16_scores: bool  # every official score is a float16 value (BEIR's cos_sim keeps float16 embeddings' dtype)

    def __str__(self) -> str:
        if not self.swapped_pairs:
            return f"same ranking; official scores spread >= {self.spread:.2g} per query"
        return (f"{self.swapped_pairs} document pairs in opposite order, official score gap between them at most "
                f"{self.largest_swapped_gap:.2g} (float32 resolution ~6e-8 near 1.0); official scores spread >= "
                f"{self.spread:.2g} per query")


def diagnose(official_run: dict[str, dict[str, float]], our_ranking: dict[str, list[str]]) -> RunDiagnosis:
    """Where the two rankings disagree, and by how much the official scores separate the documents concerned."""
    spreads, swapped, largest = [], 0, 0.0
    for query_id, ours in our_ranking.items():
        scores = official_run.get(query_id, {})
        if not scores:
            continue
        spreads.append(max(scores.values()) - min(scores.values()))
        position = {doc_id: index for index, doc_id in enumerate(ours)}
        shared = [doc_id for doc_id in scores if doc_id in position]
        for index, first in enumerate(shared):
            for second in shared[index + 1:]:
                official_order = (scores[first], first) > (scores[second], second)  # pytrec_eval: score, then id desc
                if official_order != (position[first] < position[second]):
                    swapped += 1
                    largest = max(largest, abs(scores[first] - scores[second]))
    values = np.array([score for ranked in official_run.values() for score in ranked.values()], dtype=np.float64)
    float16 = bool(values.size) and bool(np.all(values.astype(np.float16).astype(np.float64) == values))
    return RunDiagnosis(min(spreads) if spreads else float("nan"), swapped, largest, float16)


@dataclass(frozen=True)
class FileRow:
    run: FileRun
    differences: list[str]  # one line per differing key of "test"
    keys: int
    ndcg_at_10: float
    other: list[str]  # differing top-level fields other than test/evaluation_time (informative)
    diagnosis: RunDiagnosis


def compare_files(run: FileRun, theirs_path: Path, ours_path: Path, diagnosis: RunDiagnosis) -> FileRow:
    theirs, ours = (json.loads(path.read_text(encoding="utf-8")) for path in (theirs_path, ours_path))
    differences = []
    for key in sorted(set(theirs["test"]) | set(ours["test"])):
        a, b = theirs["test"].get(key, "<missing>"), ours["test"].get(key, "<missing>")
        if a != b or type(a) is not type(b):
            differences.append(f"{key}: official {a!r} ({type(a).__name__}), ours {b!r} ({type(b).__name__})")
    other = [f"{key}: official {theirs.get(key)!r}, ours {ours.get(key)!r}" for key in ("dataset_name", "model_name")
             if theirs.get(key) != ours.get(key)]
    return FileRow(run, differences, len(theirs["test"]), theirs["test"].get("ndcg_at_10", float("nan")), other, diagnosis)


def file_rows(src: Path, root: Path, mirror: Path, folders: dict[str, Path], data: TaskData, runs: list[FileRun],
              beir_path: Path | None, tag: str = "") -> list[FileRow]:
    work = lay_out_official(src, root / f"official{tag}", mirror, folders, data)
    run_official(work, runs, data, beir_path, root / f"official{tag}.log")
    rows = []
    for index, run in enumerate(runs):
        ours, trec = our_file(run, folders, mirror, data, root / f"ours{tag}" / str(index), root / f"ours{tag}.log")
        recorded = work / "runs" / f"{run.name}:{run.expansion.replace('/', '_')}.json"
        diagnosis = diagnose(json.loads(recorded.read_text(encoding="utf-8")), read_trec(trec))
        rows.append(compare_files(run, official_file(work, run, data), ours, diagnosis))
    return rows


def print_file_table(rows: list[FileRow], data: TaskData) -> bool:
    print(f"\nPart 2: official JSON, eval_retrieval(task_names=['{data.internal}']) vs r2med evaluate --task {data.task}; "
          "the 'test' dicts key for key")
    print(f"  {'run':<28} {'keys':>4} {'ndcg_at_10':>10} {'spread':>8}  verdict   (spread: the official scores' range, "
          "smallest over queries)")
    for row in rows:
        verdict = "identical (values and types)" if not row.differences else f"{len(row.differences)} keys DIFFER"
        if row.differences and row.diagnosis.largest_swapped_gap < NEAR_TIE:
            verdict += f": float32 near-ties only (swapped documents' official scores within {NEAR_TIE:g})"
        if row.diagnosis.float16_scores:
            verdict += " (official scores: float16 values)"
        print(f"  {row.run.label:<28} {row.keys:>4} {row.ndcg_at_10:>10.5f} {row.diagnosis.spread:>8.2g}  {verdict}")
        for line in row.differences:
            print(f"      {line}")
        if row.differences or row.diagnosis.swapped_pairs:
            print(f"      runs: {row.diagnosis}")
    if any(row.run.weights for row in rows):
        print("  * again on spread_bert copies of the tiny BERTs (weights redrawn from N(0, 0.5)), whose CLS cosines are "
              "not all ~1")
    other = sorted({line.split(':')[0] for row in rows for line in row.other})
    if other:
        print(f"  (not compared: {', '.join(other)} - ours names the task by hub name and the model by its weights, "
              f"e.g. {rows[0].other})")
    return all(not row.differences or row.diagnosis.largest_swapped_gap < NEAR_TIE for row in rows)


# --- main -------------------------------------------------------------------------------------------------------


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--official-src", type=Path, help="the official repository's src folder (R2MED/R2MED@62b7074)")
    parser.add_argument("--beir-path", type=Path, help="a folder holding beir 2.2.0 (pip install --no-deps --target DIR beir==2.2.0)")
    parser.add_argument("--task", default="R2MEDBiology")
    parser.add_argument("--expansions", nargs="*", default=["hyde/gpt4", "hyde/qwq-32b"],
                        help="part 2's expansions (the first one is part 1's); qwq-32b is one of the official R1 LLMs")
    parser.add_argument("--file-runs", nargs="*", default=FILE_RUN_DEFAULT, help="part 2's retrievers ('all': every family)")
    parser.add_argument("--skip-files", action="store_true", help="part 1 only")
    parser.add_argument("--keep", type=Path, help="build everything under this folder and keep it (default: a temporary one)")
    parser.add_argument("--official-worker", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--internal", help=argparse.SUPPRESS)
    parser.add_argument("worker_runs", nargs="*", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.official_worker:
        return official_worker(args.official_worker, args.internal, args.worker_runs)
    if args.official_src is None:
        parser.error("--official-src is required")
    src = args.official_src.resolve()
    for name in ("utils.py", "eval_retrieval.py", "instrcution.py"):
        print(f"official src/{name} sha256 {hashlib.sha256((src / name).read_bytes()).hexdigest()[:16]}")
    with contextlib.ExitStack() as stack:
        root = args.keep or Path(stack.enter_context(tempfile.TemporaryDirectory()))
        root.mkdir(parents=True, exist_ok=True)
        mirror, folders, data = build_fixtures(root, args.task, args.expansions[0])
        official = import_eval_retrieval(src)
        (root / "doc_embs").mkdir(exist_ok=True)
        passed = print_embedding_table(embedding_rows(official, folders, data, root / "doc_embs"), data)
        if not args.skip_files:
            names = [family.name for family in FAMILIES] if args.file_runs == ["all"] else args.file_runs
            runs = [FileRun(name, expansion) for name in names for expansion in ["", *args.expansions]]
            rows = file_rows(src, root, mirror, folders, data, runs, args.beir_path)
            again = [name for name in names if name in CLS_FAMILIES]
            if again:  # on checkpoints whose CLS vectors are not all alike (see spread_bert)
                towers = sorted({tower for name in again for tower in CLS_FAMILIES[name]})
                spread = dict(folders, **{tower: spread_bert(folders[tower], root / "tiny" / f"{tower}-spread", seed)
                                          for seed, tower in enumerate(towers)})
                runs = [FileRun(name, expansion, "*") for name in again for expansion in ["", *args.expansions]]
                rows += file_rows(src, root, mirror, spread, data, runs, args.beir_path, tag="-spread")
            passed &= print_file_table(rows, data)
    print("\nall equal" if passed else "\nDIFFERENCES FOUND")
    return 0 if passed else 1


if __name__ == "__main__":
    raise SystemExit(main())
