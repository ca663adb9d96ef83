"""MTEB tasks generated from the catalog, and their registration into mteb's registries.

Three families: ``R2MED<Domain>`` (full corpora), ``NanoR2MED<Domain>`` (10,000-document corpora)
and ``NanoR2MED<Domain>Reranking`` (the reranking_hybrid candidate lists through MTEB's
``top_ranked``, so cross-encoders work). Data comes from ``r2med_plugin.load_task``, so the local
mirror (``R2MED_DATA_DIR``) works under ``mteb run``.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

import datasets
import mteb
from mteb.abstasks.retrieval import AbsTaskRetrieval
from mteb.abstasks.task_metadata import TaskMetadata
from pydantic import PrivateAttr

from r2med_plugin.cache import cache_dir
from r2med_plugin.catalog import benchmark_description, get_task_spec, list_benchmarks, list_tasks
from r2med_plugin.data.loader import load_task
from r2med_plugin.evaluation.plan import extra_scorers
from r2med_plugin.integrations._autoload import run_deferred
from r2med_plugin.integrations.compat import mteb_dataloader, mteb_registries
from r2med_plugin.integrations.mteb_per_query import save_task_per_query
from r2med_plugin.evaluation.scorers import Retrieved, merged
from r2med_plugin.metrics import DEFAULT_K_VALUES, evaluate_run
from r2med_plugin.models.protocols import PairScorerBase
from r2med_plugin.retrieval.candidates import safeguard_split
from r2med_plugin.retrieval.ranking import truncate_run
from r2med_plugin.types import TaskSpec

logger = logging.getLogger(__name__)

K_VALUES = DEFAULT_K_VALUES  # mteb's cutoffs (1, 3, 5, 10, 20, 100, 1000) plus the official 25 and 50
RERANKING_SUFFIX = "Reranking"
RERANKING_CANDIDATES = "hybrid"
PAPER_URL = "https://arxiv.org/abs/2505.14558"
PLUGIN_MARKER = "__r2med_plugin__"

class R2MEDTaskMetadata(TaskMetadata):
    """TaskMetadata whose descriptive statistics live with this package, never in mteb's own folder.

    Statistics shipped in r2med_plugin/integrations/descriptive_stats/ (see README "Descriptive statistics")
    are read from there while the task's dataset revision is the one they were made for (the pinned commit;
    'main' for NanoR2MED). Statistics a user computes (``task.calculate_descriptive_statistics()``) go to the
    r2med_plugin cache folder, under the dataset revision loaded (a mirror's marked revision included), and
    are preferred once there; statistics of other data are never shown, and the shipped files are never
    overwritten.
    """

    _stats_target: str = PrivateAttr(default="read")

    @property
    def shipped_stat_path(self) -> Path:
        return Path(__file__).resolve().parent / "descriptive_stats" / f"{self.name}.json"

    @property
    def computed_stat_path(self) -> Path:
        revision = re.sub(r"[^A-Za-z0-9._+-]", "_", self._revision)
        return cache_dir() / "descriptive_stats" / revision / f"{self.name}.json"

    @property
    def _revision(self) -> str:
        return str(self.dataset.get("revision") or "main")

    @property
    def descriptive_stat_path(self) -> Path:
        computed = self.computed_stat_path
        if self._stats_target == "write" or computed.is_file():
            return computed
        shipped = self.shipped_stat_path
        if shipped.is_file() and _stats_revision(shipped) == self._revision:
            return shipped
        return computed


def _stats_revision(path: Path) -> str | None:
    """The dataset revision a shipped statistics file was made for (its provenance block)."""
    stats = json.loads(path.read_text(encoding="utf-8"))
    return next((split.get("provenance", {}).get("dataset_revision") for split in stats.values() if isinstance(split, dict)), None)


class R2MEDRetrievalTask(AbsTaskRetrieval):
    """Base of every generated task: loads through r2med_plugin and adds hit@k, hybrid and candidate scores.

    NanoR2MED retrieval tasks keep the model's scores for the whole 10,000-document corpus, so that
    ranking each stored candidate list needs no second encoding pass.
    """

    spec_name: ClassVar[str]
    candidate_key: ClassVar[str | None] = None
    k_values = K_VALUES
    __r2med_plugin__ = True

    def load_data(self, num_proc: int | None = None, **kwargs: Any) -> None:
        if self.data_loaded:
            return
        data = load_task(self.spec_name)
        self.task_data = data
        top_ranked = dict(data.candidates[self.candidate_key]) if self.candidate_key else None
        split = {
            "corpus": datasets.Dataset(data.corpus.to_arrow()),
            "queries": datasets.Dataset(data.queries.to_arrow()),
            "relevant_docs": {query_id: dict(judged) for query_id, judged in data.qrels.items()},
            "top_ranked": top_ranked,
        }
        self.dataset = {"default": {split_name: split for split_name in self.metadata.eval_splits}}
        if data.candidates and self.candidate_key is None:
            self._top_k = max(self._top_k, data.corpus.height)
        # Record the commit actually loaded (NanoR2MED has no pinned revision; a mirror may record one),
        # marked unverified when a mirror records no commit.
        self.metadata = self.metadata.model_copy(
            update={"dataset": {**self.metadata.dataset, "revision": data.result_revision}}
        )
        self.data_loaded = True

    def calculate_descriptive_statistics(self, overwrite_results: bool = False, num_proc: int | None = None) -> dict:
        """mteb's own computation, written to the cache folder under the revision loaded (never over the shipped files)."""
        if not overwrite_results and (existing := self.metadata.descriptive_stats) is not None:
            return existing
        self.load_data(num_proc=num_proc)
        self.metadata = self.metadata.model_copy()
        self.metadata._stats_target = "write"
        try:
            return super().calculate_descriptive_statistics(overwrite_results=True, num_proc=num_proc)
        finally:
            self.metadata._stats_target = "read"

    def task_specific_scores(
        self,
        scores: dict[str, dict[str, float]],
        qrels: Mapping[str, Mapping[str, int]],
        results: dict[str, dict[str, float]],
        hf_split: str,
        hf_subset: str,
    ) -> dict[str, float]:
        kept = truncate_run(results, max(self.k_values))
        own = evaluate_run(qrels, kept, self.k_values)
        scores_of_model = {f"hit_at_{k}": own[f"hit_at_{k}"] for k in self.k_values} | {"mrr": own["mrr"]}
        save_task_per_query(self, qrels, {"": kept}, kept)  # <Task>.per_query.parquet beside mteb's result
        # the model's run through the same scorers as `r2med evaluate` (hybrid with the task's BM25, candidate lists)
        extras = merged(extra_scorers(self.task_data.spec), Retrieved(self.task_data, results, top_k=1000))
        return scores_of_model | extras.metrics


class R2MEDRerankingTask(R2MEDRetrievalTask):
    """Ranks the stored reranking_hybrid lists; scores with and without the safeguard row (candidate 101)."""

    candidate_key = RERANKING_CANDIDATES

    def task_specific_scores(
        self,
        scores: dict[str, dict[str, float]],
        qrels: Mapping[str, Mapping[str, int]],
        results: dict[str, dict[str, float]],
        hf_split: str,
        hf_subset: str,
    ) -> dict[str, float]:
        candidates = self.task_data.candidates[self.candidate_key]
        top_k = int(self.task_data.spec.candidate_profiles[self.candidate_key]["top_k"])
        _, without = safeguard_split(results, candidates, top_k)  # mteb's results hold the whole lists already
        with_safeguard = evaluate_run(qrels, results, self.k_values)
        without_safeguard = evaluate_run(qrels, without, self.k_values)
        runs = {"": results, "_with_safeguard": results, "_without_safeguard": without}
        save_task_per_query(self, qrels, runs, results)  # <Task>.per_query.parquet beside mteb's result
        return {f"{key}_with_safeguard": value for key, value in with_safeguard.items()} | {
            f"{key}_without_safeguard": value for key, value in without_safeguard.items()
        }


def normalise_bibtex(entry: str) -> str:
    """One field per line, fields sorted, two-space indent: the form mteb's metadata checks expect."""
    match = re.match(r"\s*@(\w+)\s*\{\s*([^,\s]+)\s*,(.*)\}\s*$", entry, flags=re.DOTALL)
    if not match:
        raise ValueError(f"citation is not a single BibTeX entry: {entry[:80]!r}")
    kind, key, body = match.groups()
    fields = dict(
        (name.lower(), value.strip())
        for name, value in re.findall(r"(\w+)\s*=\s*(\{(?:[^{}]|\{[^{}]*\})*\}|\"[^\"]*\"|\w+)", body)
    )
    lines = [f"  {name} = {value}," for name, value in sorted(fields.items())]
    return "\n".join([f"@{kind.lower()}{{{key},", *lines, "}"])


def _builtin_facts(spec: TaskSpec) -> dict[str, Any]:
    """Dates, subtypes and annotation facts that mteb's own R2MED task records for the same data."""
    builtin_name = get_task_spec(f"R2MED{spec.domain}").mteb_builtin_task
    try:
        builtin = mteb.get_task(builtin_name).metadata
    except KeyError:
        return {"date": None, "task_subtypes": ["Article retrieval"], "annotations_creators": "LM-generated and reviewed"}
    return {
        "date": builtin.date,
        "task_subtypes": list(builtin.task_subtypes or []),
        "annotations_creators": builtin.annotations_creators,
    }


def task_metadata(spec: TaskSpec, *, reranking: bool = False) -> TaskMetadata:
    name = f"{spec.name}{RERANKING_SUFFIX}" if reranking else spec.name
    description = spec.description
    if reranking:
        description += " Reranking of the stored reranking_hybrid candidate lists (100 ids, plus a safeguard positive as candidate 101 where none is in the top 100)."
    return R2MEDTaskMetadata(
        name=name,
        description=description,
        reference=f"https://huggingface.co/datasets/{spec.hub_repo}",
        dataset={"path": spec.hub_repo, "revision": spec.revision or "main"},
        type="Reranking" if reranking else "Retrieval",
        category="t2t",
        modalities=["text"],
        eval_splits=["test"],
        eval_langs=["eng-Latn"],
        main_score="ndcg_at_10_with_safeguard" if reranking else "ndcg_at_10",
        domains=["Medical"],
        license=spec.license,
        dialect=[],
        sample_creation="found",
        bibtex_citation=normalise_bibtex(spec.citation),
        prompt={"query": spec.instruction},
        **_builtin_facts(spec),
    )


def build_task_classes() -> dict[str, type[R2MEDRetrievalTask]]:
    """One class per task name: R2MED<Domain>, NanoR2MED<Domain>, NanoR2MED<Domain>Reranking."""
    classes: dict[str, type[R2MEDRetrievalTask]] = {}
    for spec in list_tasks():
        classes[spec.name] = type(
            spec.name, (R2MEDRetrievalTask,), {"metadata": task_metadata(spec), "spec_name": spec.name, "__module__": __name__}
        )
        if spec.kind == "nano":
            name = f"{spec.name}{RERANKING_SUFFIX}"
            classes[name] = type(
                name, (R2MEDRerankingTask,), {"metadata": task_metadata(spec, reranking=True), "spec_name": spec.name, "__module__": __name__}
            )
    return classes


def check_registry_shape() -> tuple[dict, Any]:
    """mteb's task registry and benchmark builder (r2med_plugin.integrations.compat)."""
    _, registry, build_benchmarks = mteb_registries()
    return registry, build_benchmarks


def _owner(obj: Any) -> str:
    return "r2med-plugin" if getattr(obj, PLUGIN_MARKER, False) else f"mteb ({getattr(obj, '__module__', '?')})"


def register() -> list[str]:
    """Add the 24 tasks and the NanoR2MED / R2MED-Full benchmarks to mteb's registries (idempotent)."""
    tasks_module, registry, build_benchmarks = mteb_registries()
    classes = build_task_classes() if not _already_registered(registry) else {}
    for name, cls in classes.items():
        if name in registry and not getattr(registry[name], PLUGIN_MARKER, False):
            raise ValueError(
                f"task name {name!r} is defined by both {_owner(registry[name])} and r2med-plugin; "
                "uninstall one of them or report the clash to r2med-plugin"
            )
    new = {name: cls for name, cls in classes.items() if name not in registry}
    registry.update(new)
    tasks_module.TASK_LIST = tasks_module.TASK_LIST + tuple(new.values())
    _register_benchmarks(build_benchmarks())
    return sorted(new)


def _already_registered(registry: dict) -> bool:
    return all(spec.name in registry and getattr(registry[spec.name], PLUGIN_MARKER, False) for spec in list_tasks())


def _register_benchmarks(benchmarks: dict) -> None:
    for name, task_names in list_benchmarks().items():
        existing = benchmarks.get(name)
        if existing is not None:
            if not getattr(existing, PLUGIN_MARKER, False):
                raise ValueError(f"benchmark name {name!r} is defined by both mteb and r2med-plugin")
            continue
        benchmark = mteb.Benchmark(
            name=name,
            tasks=mteb.get_tasks(tasks=task_names),
            description=benchmark_description(name),
            reference=PAPER_URL,
            citation=normalise_bibtex(get_task_spec(task_names[0]).citation),
        )
        object.__setattr__(benchmark, PLUGIN_MARKER, True)
        benchmarks[name] = benchmark


class MtebPairScorer(PairScorerBase):
    """Any mteb cross-encoder (``predict(inputs1, inputs2, *, task_metadata, ...)`` on DataLoaders) as the
    ``predict(pairs) -> scores`` scorer of the reranker mode, fed as mteb feeds a reranking task.

    ``evaluate_task("R2MEDBiology", rerank=MtebPairScorer(mteb.get_model(name), "R2MEDBiology"), first_stage=...)``.
    The scores are what the model's predict returns (for a CrossEncoderWrapper: after its activation).
    """

    def __init__(self, model: Any, task: str = "R2MEDBiology", *, batch_size: int = 32) -> None:
        if not hasattr(model, "predict"):
            raise TypeError(f"{type(model).__name__} has no predict(); it is not an mteb cross-encoder")
        meta = getattr(model, "mteb_model_meta", None)
        self.model = model
        self.name = getattr(meta, "name", None) or type(model).__name__
        self.revision = getattr(meta, "revision", None) or "unknown"
        self.task_metadata = mteb.get_task(task).metadata
        self.batch_size = batch_size

    def for_task(self, task: str) -> "MtebPairScorer":
        """The same model, fed with ``task``'s metadata (its prompts); the reranker mode binds each task's own."""
        import copy

        bound = copy.copy(self)
        bound.task_metadata = mteb.get_task(task).metadata
        return bound

    def predict(self, pairs: list[tuple[str, str]]) -> Any:
        import numpy as np
        from mteb.types import PromptType

        def loader(texts: tuple[str, ...], kind: PromptType) -> Any:
            rows = datasets.Dataset.from_dict({"id": [str(index) for index in range(len(texts))], "text": list(texts)})
            return mteb_dataloader(rows, task_metadata=self.task_metadata, prompt_type=kind, batch_size=self.batch_size)

        queries, documents = zip(*pairs) if pairs else ((), ())
        scores = self.model.predict(
            loader(queries, PromptType.query), loader(documents, PromptType.document), task_metadata=self.task_metadata,
            hf_split="test", hf_subset="default", show_progress_bar=False,
        )
        return np.asarray(scores, dtype=np.float64)


# The last line: imported before its host, this module's entry point could not run when the host finished importing
# (this module was half-imported); it runs now, so any import order registers (r2med_plugin.integrations._autoload).
run_deferred(__name__)
