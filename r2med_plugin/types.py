"""Exchange types shared by every module (plain dicts, as in pytrec_eval, ranx and MTEB)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    import numpy as np
    import polars as pl

Qrels = dict[str, dict[str, int]]
Run = dict[str, dict[str, float]]
Candidates = dict[str, list[str]]
TaskKind = Literal["r2med", "nano"]

COUNT_DRIFT = "+count-drift"  # dataset revision marker of data whose counts differ from the dataset card (r2med_plugin.identifiers)


def freeze(value: Any) -> Any:
    """Read-only view of nested JSON-like data (dicts become mapping proxies, lists tuples)."""
    if isinstance(value, Mapping):
        return MappingProxyType({key: freeze(item) for key, item in value.items()})
    if isinstance(value, (list, tuple)):
        return tuple(freeze(item) for item in value)
    return value


@dataclass(frozen=True)
class TaskSpec:
    """One task as described by its task_metadata/<name>.json file."""

    name: str
    kind: TaskKind
    domain: str
    hub_name: str
    slug: str
    official_order: int
    hub_repo: str
    revision: str | None
    data_format: Literal["jsonl", "parquet"]
    configs: Mapping[str, Mapping[str, str]]
    candidate_configs: Mapping[str, Mapping[str, str]]
    gar_configs: Mapping[str, tuple[str, ...]]
    reasoning_llms: tuple[str, ...]
    expected_counts: Mapping[str, int]
    instruction: str
    official_internal_name: str
    mteb_builtin_task: str | None
    description: str
    license: str
    citation: str
    paper_stats: Mapping[str, float]
    candidate_profiles: Mapping[str, Mapping[str, Any]]
    # NanoR2MED: the dataset card's positives per query and mean text lengths in characters (empty for R2MED);
    # the shipped descriptive statistics use them where the data cannot be read.
    card_stats: Mapping[str, Mapping[str, Any]]
    source: str
    hybrid_construction: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))
    # R2MED: size and SHA-256 of the hub files at ``revision`` where they were published (file name -> {bytes,
    # sha256}), and what others measured on the real files (reference/r2med_real_files.json); empty for NanoR2MED.
    published_files: Mapping[str, Mapping[str, Any]] = field(default_factory=lambda: MappingProxyType({}))
    real_file_facts: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))

    @property
    def own_bm25(self) -> str:
        """The task's own BM25, the one its hybrid_* fuses with: bm25-lucene (the official R2MED BM25) for R2MED,
        bm25-hakari (HAKARI-Bench's BM25, which built and scores NanoR2MED) for NanoR2MED. The one place this rule
        is written."""
        return "bm25-hakari" if self.kind == "nano" else "bm25-lucene"

    @property
    def hub_org(self) -> str:
        return self.hub_repo.split("/", 1)[0]

    @property
    def hub_repo_name(self) -> str:
        return self.hub_repo.split("/", 1)[1]


@dataclass(frozen=True)
class LoadReport(Mapping[str, Any]):
    """What loading a task found, beyond the data (readable by attribute; by key as the mapping of earlier releases)."""

    found_counts: Mapping[str, int] = field(default_factory=dict)
    count_drift: Mapping[str, Mapping[str, int]] = field(default_factory=dict)  # counts that differ from the dataset card
    queries_without_positives: list[str] = field(default_factory=list)
    queries_without_qrels: list[str] = field(default_factory=list)  # dropped, as MTEB drops them
    query_ids_in_corpus: list[str] = field(default_factory=list)
    unknown_candidate_ids: Mapping[str, int] = field(default_factory=dict)
    synthetic_sample: bool = False
    revision_verified: bool = True
    files_fingerprint: str | None = None
    expansion_file: str | None = None  # a released expansion's file, when a result also read it
    # the result revision of the task's own files (queries, qrels, corpus) when an expansion file joined them: runs
    # with and without that expansion are scored on the same judged queries, so a paired test may pair them
    base_result_revision: str | None = None
    base_judged_data: str | None = None  # likewise, what those files are judged as (revision and their fingerprint)
    # The corpus file's rows, as the dataset card counts them, and what folding repeated ids left (DESIGN.md §3):
    corpus_rows: int = 0
    unique_document_ids: int = 0
    repeated_document_rows: int = 0  # rows repeating an earlier row's id, with identical text
    repeated_document_ids: Mapping[str, int] = field(default_factory=dict)  # id -> rows holding it (2 or more)
    repeated_query_ids: Mapping[str, int] = field(default_factory=dict)
    rows_repeating_an_earlier_text: int = 0  # corpus rows whose text equals an earlier row's, under any id
    near_empty_documents: list[str] = field(default_factory=list)  # at most one character of text: no tokens
    unverified_files: Mapping[str, str] = field(default_factory=dict)  # file -> why it is not proven the revision's

    def __getitem__(self, key: str) -> Any:
        if key not in self.__dataclass_fields__:
            raise KeyError(key)
        return getattr(self, key)

    def __iter__(self):
        return iter(self.__dataclass_fields__)

    def __len__(self) -> int:
        return len(self.__dataclass_fields__)


@dataclass(frozen=True)
class TaskData:
    """A loaded task: corpus and queries as polars frames with columns ``id`` and ``text``."""

    spec: TaskSpec
    corpus: pl.DataFrame
    queries: pl.DataFrame
    qrels: Qrels
    candidates: dict[str, Candidates]
    revision: str
    source: str
    report: LoadReport = field(default_factory=LoadReport)
    revision_verified: bool = True  # False: a local mirror that does not prove its commit (no download record, or edited)
    files_fingerprint: str | None = None  # content hash of the mirror files read; None for hub snapshots

    @property
    def name(self) -> str:
        return self.spec.name

    def document_row_counts(self) -> np.ndarray | None:
        """Rows of the corpus file per document of ``corpus`` (same order), or None when every id is on one row.
        The official BM25 counts every row in its statistics (N, document frequencies, average length)."""
        repeated = self.report.repeated_document_ids
        if not repeated:
            return None
        import numpy as np

        counts = np.ones(self.corpus.height, dtype=np.int64)
        position = {doc_id: index for index, doc_id in enumerate(self.corpus["id"].to_list())}
        for doc_id, rows in repeated.items():
            counts[position[doc_id]] = rows
        return counts

    @property
    def result_revision(self) -> str:
        """The dataset revision result files record: ``revision``, marked ``+unverified-files-<fingerprint>``
        (of the files this task reads, so editing one task's files moves that task's results only) when a local
        mirror does not prove the commit it names, and ``+count-drift`` when its counts differ from the
        dataset card (evaluated with accept_drift): every result file says so, an ``mteb run`` one too."""
        from r2med_plugin.identifiers import DatasetRevision

        if self.report.synthetic_sample:
            return self.revision
        marker = self.files_fingerprint
        unproven = not (self.revision_verified or marker is None or marker in self.revision)
        return DatasetRevision(self.revision, marker if unproven else None, bool(self.report.count_drift)).format()

    @property
    def paired_revision(self) -> str:
        """The revision a paired test compares (``r2med compare``, ``inspect``): that of the queries, qrels and corpus,
        without a released expansion's file, which changes what is searched, not what is judged."""
        return self.report.base_result_revision or self.result_revision

    @property
    def judged_data(self) -> str:
        """What results of this data are compared by (r2med_plugin.identifiers.judged_data): the result revision,
        plus the fingerprint of the files read when that revision neither proves nor names them (the synthetic sample,
        an edited copy of it): two results are on the same data only when these are equal."""
        from r2med_plugin.identifiers import judged_data

        return judged_data(self.result_revision, self.files_fingerprint, self.revision_verified)

    @property
    def paired_judged_data(self) -> str:
        """``judged_data`` of the queries, qrels and corpus, without a released expansion's file (as ``paired_revision``)."""
        return self.report.base_judged_data or self.judged_data

    @property
    def cache_revision(self) -> str:
        """What derived caches (docstore, BM25 runs, embeddings) are keyed by: the commit of a hub snapshot,
        else the revision plus the fingerprint of the files actually read, so an edited mirror is never stale."""
        if self.files_fingerprint is None or self.files_fingerprint in self.revision:
            return self.revision
        return f"{self.revision}-files-{self.files_fingerprint}"
