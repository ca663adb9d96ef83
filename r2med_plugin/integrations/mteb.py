"""MTEB tasks generated from the catalog, and their registration into mteb's registries.

Three families: ``R2MED<Domain>`` (full corpora), ``NanoR2MED<Domain>`` (10,000-document corpora)
and ``NanoR2MED<Domain>Reranking`` (the reranking_hybrid candidate lists through MTEB's
``top_ranked``, so cross-encoders work). Data comes from ``r2med_plugin.load_task``, so the local
mirror (``R2MED_DATA_DIR``) works under ``mteb run``.

This module runs inside every ``import mteb`` (the autoload hook calls ``register``), so registering is cheap:
the task classes are made from the task names alone, each one's metadata is built when mteb first reads it
(r2med_plugin.integrations.mteb_metadata), the loaders, metrics and scorers are imported when a task loads or
scores, and the two benchmarks join mteb's benchmark registry when mteb builds it (benchmarks/startup.py measures
what ``import mteb`` costs with and without the hook).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from importlib import import_module
from typing import TYPE_CHECKING, Any, ClassVar

import mteb
from mteb.abstasks.retrieval import AbsTaskRetrieval

from r2med_plugin.catalog import benchmark_description, get_task_spec, list_benchmarks, task_kinds
from r2med_plugin.errors import UserError
from r2med_plugin.integrations._autoload import run_deferred
from r2med_plugin.integrations.compat import mteb_registries, wrap_benchmark_registry

if TYPE_CHECKING:
    from mteb.abstasks.retrieval_dataset_loaders import RetrievalSplitData
    from mteb.abstasks.task_metadata import TaskMetadata

logger = logging.getLogger(__name__)

# mteb's cutoffs (1, 3, 5, 10, 20, 100, 1000) plus the official 25 and 50: r2med_plugin.metrics.DEFAULT_K_VALUES, written
# out so that registering does not import the metrics (tests/integrations/test_mteb_integration.py checks they agree)
K_VALUES = (1, 3, 5, 10, 20, 25, 50, 100, 1000)
HYBRID_WITH_KEY = "r2med_hybrid_with"  # the BM25 the hybrid_* scores fused with
RERANKING_SUFFIX = "Reranking"
RERANKING_CANDIDATES = "hybrid"
PAPER_URL = "https://arxiv.org/abs/2505.14558"
PLUGIN_MARKER = "__r2med_plugin__"


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
        import datasets

        from r2med_plugin.data.loader import load_task

        data = load_task(self.spec_name)
        self.task_data = data
        top_ranked = dict(data.candidates[self.candidate_key]) if self.candidate_key else None
        split: RetrievalSplitData = {
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
        from r2med_plugin.integrations.mteb_metadata import R2MEDTaskMetadata

        metadata = self.metadata.model_copy()
        if not isinstance(metadata, R2MEDTaskMetadata):
            raise TypeError(f"{type(self).__name__}.metadata is a {type(metadata).__name__}, not the R2MEDTaskMetadata "
                            "the catalog builds")
        self.metadata = metadata
        metadata._stats_target = "write"
        try:
            return super().calculate_descriptive_statistics(overwrite_results=True, num_proc=num_proc)
        finally:
            metadata._stats_target = "read"

    # mteb declares float scores and writes every value it is given: r2med_hybrid_with is a name
    def task_specific_scores(  # type: ignore[override]
        self,
        scores: dict[str, dict[str, float]],
        qrels: Mapping[str, Mapping[str, int]],
        results: dict[str, dict[str, float]],
        hf_split: str,
        hf_subset: str,
    ) -> dict[str, float | str]:
        from r2med_plugin.evaluation.plan import extra_scorers
        from r2med_plugin.evaluation.scorers import Retrieved, merged
        from r2med_plugin.integrations.mteb_per_query import save_task_per_query
        from r2med_plugin.metrics import evaluate_run
        from r2med_plugin.retrieval.ranking import truncate_run

        kept = truncate_run(results, max(self.k_values))
        own = evaluate_run(qrels, kept, self.k_values)
        scores_of_model = {f"hit_at_{k}": own[f"hit_at_{k}"] for k in self.k_values} | {"mrr": own["mrr"]}
        save_task_per_query(self, qrels, {"": kept}, kept)  # <Task>.per_query.parquet beside mteb's result
        # the model's run through the same scorers as `r2med evaluate` (hybrid with the task's BM25, candidate lists)
        extras = merged(extra_scorers(self.task_data.spec), Retrieved(self.task_data, results, top_k=1000))
        # which BM25 hybrid_* fused with, as `r2med evaluate` records it (mteb's file keeps it beside the scores)
        return scores_of_model | extras.metrics | {HYBRID_WITH_KEY: self.task_data.spec.own_bm25}


class R2MEDRerankingTask(R2MEDRetrievalTask):
    """Ranks the stored reranking_hybrid lists; scores with and without the safeguard row (candidate 101)."""

    candidate_key = RERANKING_CANDIDATES

    # mteb's own return type (every score a float): the retrieval class above adds a name
    def task_specific_scores(  # type: ignore[override]
        self,
        scores: dict[str, dict[str, float]],
        qrels: Mapping[str, Mapping[str, int]],
        results: dict[str, dict[str, float]],
        hf_split: str,
        hf_subset: str,
    ) -> dict[str, float]:
        from r2med_plugin.integrations.mteb_per_query import save_task_per_query
        from r2med_plugin.metrics import evaluate_run
        from r2med_plugin.retrieval.candidates import safeguard_split

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


class LazyTaskMetadata:
    """A task class's ``metadata``, built from the catalog the first time mteb (or anyone) reads it, then kept.

    Registering runs inside every ``import mteb``; building the 24 TaskMetadata objects (the catalog's TaskSpecs,
    pydantic validation, the BibTeX, mteb's own R2MED facts) is left to the first ``mteb.get_task(s)`` that reads them.
    """

    def __init__(self, name: str, spec_name: str, *, reranking: bool) -> None:
        self.name = name
        self.spec_name = spec_name
        self.reranking = reranking
        self._built: TaskMetadata | None = None

    def __get__(self, instance: Any, owner: type | None = None) -> TaskMetadata:
        if self._built is None:
            from r2med_plugin.integrations.mteb_metadata import task_metadata

            self._built = task_metadata(get_task_spec(self.spec_name), self.name, reranking=self.reranking)
        return self._built


def build_task_classes() -> dict[str, type[R2MEDRetrievalTask]]:
    """One class per task name: R2MED<Domain>, NanoR2MED<Domain>, NanoR2MED<Domain>Reranking (metadata built on first
    read)."""
    classes: dict[str, type[R2MEDRetrievalTask]] = {}
    for spec_name, kind in task_kinds().items():
        variants = [(spec_name, R2MEDRetrievalTask, False)]
        if kind == "nano":
            variants.append((f"{spec_name}{RERANKING_SUFFIX}", R2MEDRerankingTask, True))
        for name, base, reranking in variants:
            namespace = {"metadata": LazyTaskMetadata(name, spec_name, reranking=reranking), "spec_name": spec_name, "__module__": __name__}
            classes[name] = type(name, (base,), namespace)
    return classes


def check_registry_shape() -> tuple[dict, Any]:
    """mteb's task registry and benchmark builder (r2med_plugin.integrations.compat)."""
    _, registry, build_benchmarks = mteb_registries()
    return registry, build_benchmarks


def _owner(obj: Any) -> str:
    return "r2med-plugin" if getattr(obj, PLUGIN_MARKER, False) else f"mteb ({getattr(obj, '__module__', '?')})"


def register() -> list[str]:
    """Add the 24 tasks to mteb's task registry now, and the NanoR2MED / R2MED-Full benchmarks to its benchmark
    registry when mteb builds it (at once if it is built already); idempotent. Returns the task names newly added."""
    tasks_module, registry, _ = mteb_registries()
    classes = build_task_classes() if not _already_registered(registry) else {}
    for name in classes:
        if name in registry and not getattr(registry[name], PLUGIN_MARKER, False):
            raise UserError(
                f"task name {name!r} is defined by both {_owner(registry[name])} and r2med-plugin; "
                "uninstall one of them or report the clash to r2med-plugin"
            )
    new = {name: cls for name, cls in classes.items() if name not in registry}
    registry.update(new)
    tasks_module.TASK_LIST = tasks_module.TASK_LIST + tuple(new.values())
    # mteb builds its benchmark registry on first use (~0.5 s: it imports and builds every mteb benchmark); ours join
    # it then, so that `import mteb` does not pay for it
    wrap_benchmark_registry("r2med-plugin", register_benchmarks)
    return sorted(new)


def _already_registered(registry: dict) -> bool:
    return all(name in registry and getattr(registry[name], PLUGIN_MARKER, False) for name in task_kinds())


def register_benchmarks(benchmarks: dict) -> None:
    """Add NanoR2MED and R2MED-Full to mteb's benchmark registry ``benchmarks`` (idempotent); a name mteb already
    uses is an error naming both packages."""
    from r2med_plugin.integrations.mteb_metadata import normalise_bibtex

    for name, task_names in list_benchmarks().items():
        existing = benchmarks.get(name)
        if existing is not None:
            if not getattr(existing, PLUGIN_MARKER, False):
                raise UserError(f"benchmark name {name!r} is defined by both mteb and r2med-plugin; "
                                "uninstall one of them or report the clash to r2med-plugin")
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


# Names that live in modules imported on first use (not by every `import mteb`), still reachable from here.
_ELSEWHERE = {
    "MtebPairScorer": "r2med_plugin.integrations.mteb_pair_scorer",
    "R2MEDTaskMetadata": "r2med_plugin.integrations.mteb_metadata",
    "normalise_bibtex": "r2med_plugin.integrations.mteb_metadata",
    "task_metadata": "r2med_plugin.integrations.mteb_metadata",
}


def __getattr__(name: str) -> Any:
    if name in _ELSEWHERE:
        return getattr(import_module(_ELSEWHERE[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# The last line: imported before its host, this module's entry point could not run when the host finished importing
# (this module was half-imported); it runs now, so any import order registers (r2med_plugin.integrations._autoload).
run_deferred(__name__)
