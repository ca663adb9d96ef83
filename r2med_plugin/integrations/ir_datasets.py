"""ir_datasets datasets for R2MED and NanoR2MED, served through r2med_plugin's data API.

ids: ``r2med/<slug>``, ``r2med/<slug>/<method>/<llm>`` (released expansions), ``r2med/<slug>/local/<method>/<llm>``
(expansions from ``r2med generate``, added by ``register_local_expansion``), ``nano-r2med/<slug>``
and ``nano-r2med/<slug>/{bm25,dense,hybrid}`` (stored candidate lists as scoreddocs). Sub-datasets
share their parent's docs and qrels handlers, so nothing is stored twice and
``ir_datasets.docs_parent_id`` finds the parent. Counts are known before any download (from
task_metadata, through a metadata provider).

No `from __future__ import annotations` here: ir_datasets' exporters read the record types'
annotations at run time and need real types, not strings.
"""


import difflib
import logging
from functools import partial
from typing import Any, NamedTuple

import ir_datasets
from ir_datasets.datasets.base import Dataset
from ir_datasets.formats import BaseDocs, BaseQrels, BaseQueries, BaseScoredDocs, GenericDoc, GenericQuery, TrecQrel
from ir_datasets.indices import PickleLz4FullStore
from ir_datasets.util import home_path
from ir_datasets.util.metadata import MetadataComponent, MetadataProvider

from r2med_plugin.catalog import list_tasks
from r2med_plugin.data.expansions import list_expansions, load_expansions
from r2med_plugin.data.hub import data_dir_from_env
from r2med_plugin.data.loader import load_task
from r2med_plugin.errors import UnknownNameError, UserError
from r2med_plugin.identifiers import CANDIDATE_SUBSETS
from r2med_plugin.integrations._autoload import run_deferred
from r2med_plugin.integrations.compat import irds_registered
from r2med_plugin.types import TaskData, TaskSpec

logger = logging.getLogger(__name__)

ROOTS = {"r2med": "r2med", "nano": "nano-r2med"}
CANDIDATE_IDS = CANDIDATE_SUBSETS
NAMESPACE = "r2med"
PLUGIN_MARKER = "_r2med_plugin_dataset"


class R2MEDGarQuery(NamedTuple):
    query_id: str
    text: str
    hy_doc: str

    def default_text(self) -> str:
        return self.text


class R2MEDCandidate(NamedTuple):
    """One stored candidate: score is a descending rank value; safeguard marks candidate 101."""

    query_id: str
    doc_id: str
    score: float
    safeguard: bool


class _TaskSource:
    """Loads a task once, on first use, through r2med_plugin.load_task."""

    def __init__(self, spec: TaskSpec) -> None:
        self.spec = spec
        self._data: TaskData | None = None

    def data(self) -> TaskData:
        if self._data is None:
            self._data = load_task(self.spec.name)
        return self._data

    def loaded(self) -> TaskData | None:
        return self._data

    def counted(self) -> TaskData | None:
        """The data counts are read from: what is loaded, and a local mirror (read on first count: its counts
        may differ from the dataset card, and a count must not change once the data is iterated). From the
        hub (pinned revision) nothing is downloaded for a count: None, the dataset card's count answers."""
        mirror = data_dir_from_env(None)
        if self._data is None and mirror is not None and (mirror / self.spec.hub_repo).is_dir():
            return self.data()
        return self._data


class R2MEDDocs(BaseDocs):
    def __init__(self, source: _TaskSource) -> None:
        self.source = source

    def docs_iter(self):
        for doc_id, text in self.source.data().corpus.iter_rows():
            yield GenericDoc(doc_id, text)

    def docs_cls(self):
        return GenericDoc

    def docs_count(self):
        data = self.source.counted()
        return data.corpus.height if data is not None else None  # None: the metadata count answers

    def docs_store(self, field: str = "doc_id", options: Any = None):
        data = self.source.data()
        spec = self.source.spec
        # cache_revision: a mirror without a recorded commit is keyed by its files' fingerprint, never served stale
        path = home_path() / NAMESPACE / spec.hub_repo / data.cache_revision / f"{spec.configs['corpus']['split']}.pklz4"
        return PickleLz4FullStore(
            path=str(path), init_iter_fn=self.docs_iter, data_cls=GenericDoc, lookup_field=field,
            index_fields=["doc_id"], count_hint=lambda: data.corpus.height,
        )

    def docs_namespace(self):
        return NAMESPACE

    def docs_lang(self):
        return "en"


class R2MEDQueries(BaseQueries):
    def __init__(self, source: _TaskSource) -> None:
        self.source = source

    def queries_iter(self):
        for query_id, text in self.source.data().queries.iter_rows():
            yield GenericQuery(query_id, text)

    def queries_cls(self):
        return GenericQuery

    def queries_count(self):
        data = self.source.counted()
        return data.queries.height if data is not None else None

    def queries_namespace(self):
        return NAMESPACE

    def queries_lang(self):
        return "en"


class R2MEDGarQueries(R2MEDQueries):
    """The task's queries with one released LLM expansion each."""

    def __init__(self, source: _TaskSource, expansion: str) -> None:
        super().__init__(source)
        self._expansion = expansion

    def queries_iter(self):
        kept = set(self.source.data().queries["id"].to_list())
        frame = load_expansions(self.source.spec.name, self._expansion)
        for query_id, text, hy_doc in frame.select("id", "text", "hy_doc").iter_rows():
            if query_id in kept:
                yield R2MEDGarQuery(query_id, text, hy_doc)

    def queries_cls(self):
        return R2MEDGarQuery


class R2MEDQrels(BaseQrels):
    def __init__(self, source: _TaskSource) -> None:
        self.source = source

    def qrels_iter(self):
        for query_id, judged in self.source.data().qrels.items():
            for doc_id, relevance in judged.items():
                yield TrecQrel(query_id, doc_id, relevance, "0")

    def qrels_count(self):
        data = self.source.counted()
        return sum(len(judged) for judged in data.qrels.values()) if data is not None else None

    def qrels_defs(self):
        return {1: "relevant (a passage that helps answer the query)"}

    def qrels_cls(self):
        return TrecQrel


class R2MEDScoredDocs(BaseScoredDocs):
    def __init__(self, source: _TaskSource, key: str) -> None:
        self.source = source
        self._key = key

    def scoreddocs_iter(self):
        data = self.source.data()
        top_k = int(data.spec.candidate_profiles[self._key]["top_k"])
        for query_id, ids in data.candidates[self._key].items():
            for position, doc_id in enumerate(ids):
                yield R2MEDCandidate(query_id, doc_id, float(len(ids) - position), position >= top_k)

    def scoreddocs_cls(self):
        return R2MEDCandidate


class _PluginMarker:
    """Marks our datasets in the registry, so registration is idempotent and never overwrites others."""

    _r2med_plugin_dataset = True


class _Documentation:
    def __init__(self, spec: TaskSpec, pretty_name: str, extra: str = "") -> None:
        self._spec = spec
        self._pretty_name = pretty_name
        self._extra = extra

    def documentation(self) -> dict[str, Any]:
        return {
            "pretty_name": self._pretty_name,
            "desc": f"<p>{self._spec.description}{self._extra}</p>",
            "bibtex": self._spec.citation,
            "official_measures": ["nDCG@10"],
        }


def dataset_id(spec: TaskSpec) -> str:
    return f"{ROOTS[spec.kind]}/{spec.slug}"


def card_counts(spec: TaskSpec) -> dict[str, dict[str, int]]:
    """The dataset card's counts, except documents: the unique ids docs_iter yields where the real file is known to
    repeat ids (PMC-Treatment: 28,809 ids on 28,954 rows; the card counts rows)."""
    counts = spec.expected_counts
    documents = spec.real_file_facts.get("repeated_ids", {}).get("unique_ids", counts["documents"])
    return {"docs": {"count": documents}, "queries": {"count": counts["queries"]}, "qrels": {"count": counts["qrels"]}}


def _scoreddocs_count(spec: TaskSpec, key: str) -> int:
    profile = spec.candidate_profiles[key]
    return round(profile["candidate_count_mean"] * profile["query_count"])


def build_datasets() -> tuple[dict[str, Dataset], dict[str, dict]]:
    """Every dataset id -> Dataset, and the metadata (counts) our provider serves for them."""
    datasets: dict[str, Dataset] = {}
    metadata: dict[str, dict] = {}
    for spec in list_tasks():
        source = _TaskSource(spec)
        docs, queries, qrels = R2MEDDocs(source), R2MEDQueries(source), R2MEDQrels(source)
        parent = dataset_id(spec)
        datasets[parent] = Dataset(docs, queries, qrels, _Documentation(spec, spec.description.split(":")[0]))
        metadata[parent] = card_counts(spec)
        for expansion in list_expansions(spec.name) if spec.kind == "r2med" else []:
            child = f"{parent}/{expansion}"
            gar = R2MEDGarQueries(source, expansion)
            datasets[child] = Dataset(docs, gar, qrels, _Documentation(spec, f"{spec.description.split(':')[0]} + {expansion}", f" Queries with the released {expansion} expansion."))
            metadata[child] = {"docs": {"_ref": parent}, "qrels": {"_ref": parent}, "queries": {"_ref": parent}}
        for key in CANDIDATE_IDS if spec.kind == "nano" else []:
            child = f"{parent}/{key}"
            scored = R2MEDScoredDocs(source, key)
            datasets[child] = Dataset(docs, queries, qrels, scored, _Documentation(spec, f"{spec.description.split(':')[0]} {key} candidates", f" Scoreddocs: the stored {key} candidate list."))
            metadata[child] = {"docs": {"_ref": parent}, "queries": {"_ref": parent}, "qrels": {"_ref": parent},
                               "scoreddocs": {"count": _scoreddocs_count(spec, key)}}
    return datasets, metadata


NEAREST_IDS = 5


def unknown_id_message(root: str, known: list[str], dataset_id: str) -> str:
    """The nearest few ids (difflib), never the whole list of 168: that is what `ir_datasets list` is for."""
    ours = [k for k in known if k.startswith(root + "/")]
    nearest = difflib.get_close_matches(dataset_id.lower(), ours, n=NEAREST_IDS, cutoff=0.0)
    return (f"unknown {root} dataset id {dataset_id!r}. Nearest: {', '.join(nearest)}. "
            f"`ir_datasets list | grep {root}/` lists all {len(ours)}")


def _unknown_id(root: str, known: list[str], dataset_id: str, groups: tuple) -> Dataset:
    raise UnknownNameError(unknown_id_message(root, known, dataset_id))


def register() -> list[str]:
    """Add our datasets to ir_datasets' registry (idempotent; existing ids are never overwritten)."""
    registry = ir_datasets.registry
    registered = irds_registered()
    datasets, metadata = build_datasets()
    provider = MetadataProvider(lambda: metadata)
    added = []
    for name, dataset in datasets.items():
        existing = registered.get(name)
        if existing is not None:
            if not getattr(existing, PLUGIN_MARKER, False):
                logger.warning("ir_datasets already has a dataset %r; r2med-plugin leaves it in place", name)
            continue
        registry.register(name, Dataset(MetadataComponent(name, dataset, provider), dataset, _PluginMarker()))
        added.append(name)
    if added:
        known = list(datasets)
        for root in ROOTS.values():
            registry.register_pattern(rf"^{root}/.+$", partial(_unknown_id, root, known))
    return added


def register_local_expansion(folder: str, task: str) -> str:
    """Register expansions made by ``r2med generate`` as ``r2med/<slug>/local/<method>/<llm>@<folder id>``; returns the id.

    ``folder`` is ``<out>/<method>/<llm>`` (the task's file is ``<out>/<HubName>/<method>/<llm>/query_with_hydoc.jsonl``)
    or that task folder itself. The queries are ``R2MEDGarQuery`` records, like the released expansions';
    docs and qrels are the parent dataset's. The folder id (a hash of the ``<out>`` folder, as in the result
    names of ``r2med evaluate``) keeps two folders with the same method and LLM name apart; registering the
    same folder again re-reads it under the same id.
    """
    from r2med_plugin.catalog import get_task_spec
    from r2med_plugin.data.expansions import LOCAL_PREFIX, resolve_local_expansion

    spec = get_task_spec(task)
    if spec.kind != "r2med":
        raise UserError(f"{spec.name}: local expansions belong to the R2MED tasks (R2MED<Domain>), not NanoR2MED")
    local = resolve_local_expansion(spec, f"{LOCAL_PREFIX}{folder}")
    register()
    parent = dataset_id(spec)
    child = f"{parent}/local/{local.method}/{local.llm}@{local.folder_id}"
    registry, registered = ir_datasets.registry, irds_registered()
    existing = registered.get(child)
    if existing is not None:
        if not getattr(existing, PLUGIN_MARKER, False):
            raise UserError(f"ir_datasets already has a dataset {child!r} that r2med-plugin did not register; rename the LLM folder")
        del registered[child]
    parent_dataset = registered[parent]
    source = parent_dataset.queries_handler().source
    queries = R2MEDGarQueries(source, f"{LOCAL_PREFIX}{local.path.parent}")
    title = f"{spec.description.split(':')[0]} + {local.label}"
    dataset = Dataset(
        parent_dataset.docs_handler(), queries, parent_dataset.qrels_handler(),
        _Documentation(spec, title, f" Queries with the {local.method} expansion by {local.llm}, generated locally ({local.path})."),
    )
    _, metadata = build_datasets()
    lines = sum(1 for line in local.path.read_text(encoding="utf-8").splitlines() if line.strip())
    metadata[child] = {"docs": {"_ref": parent}, "qrels": {"_ref": parent}, "queries": {"count": lines}}
    provider = MetadataProvider(lambda: metadata)
    registry.register(child, Dataset(MetadataComponent(child, dataset, provider), dataset, _PluginMarker()))
    return child


# The last line: imported before its host, this module's entry point could not run when the host finished importing
# (this module was half-imported); it runs now, so any import order registers (r2med_plugin.integrations._autoload).
run_deferred(__name__)
