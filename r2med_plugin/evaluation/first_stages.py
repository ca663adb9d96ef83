"""First stages: what turns a task's queries into a ranked run.

Each stage is a small frozen object with one job. ``search(data, depth)`` gives the full-corpus run
that scorers read (BM25, an encoder, either with a query expansion, or an encoder scoring the stored
candidate lists only); ``ranked(data, depth)`` gives the first stage a reranker reranks, in ranking
order (also a run file, a folder of run files, or an in-memory run). A new kind of first stage is a
new class with these methods; the runner does not change.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import polars as pl

from r2med_plugin.data.expansions import ExpansionName, expansion_texts, parse_expansion, reasoning_llms_for
from r2med_plugin.data.runs import RUN_FILE_SUFFIXES, rank_by_score, read_run_file
from r2med_plugin.errors import MissingFileError, UserError
from r2med_plugin.evaluation.naming import prompt_label
from r2med_plugin.identifiers import BM25_VARIANTS, TieOrder
from r2med_plugin.models.protocols import Encoder, as_encoder, is_encoder
from r2med_plugin.retrieval.bm25 import bm25_search
from r2med_plugin.retrieval.bm25_cache import bm25_run
from r2med_plugin.retrieval.candidates import restrict_run
from r2med_plugin.retrieval.dense import dense_search, effective_prompt, score_candidates
from r2med_plugin.retrieval.expansion import bm25_query, dense_query, expansion_text
from r2med_plugin.rules import SettingError, SettingFileError
from r2med_plugin.types import Run, TaskData
from r2med_plugin.version import __version__

BM25_RETRIEVERS = BM25_VARIANTS  # name -> variant
OFFICIAL_TOPK_DOCS_DEPTH = 100  # the official save_topk_docs keeps each query's top 100


@dataclass(frozen=True)
class RankedRun:
    """A first stage's run for one task, each query's documents in ranking order (dict order)."""

    name: str
    run: Run
    source: Path | None = None  # the run file, when read from one
    revision: str = ""  # what produced the run: the encoder's revision, the plugin version for BM25, a run's digest


@runtime_checkable
class FirstStage(Protocol):
    """Anything a reranker can rerank: ``ranked(data, depth)`` gives each query's documents, best first."""

    def ranked(self, data: TaskData, depth: int, *, show_progress: bool = True) -> RankedRun: ...


@runtime_checkable
class SearchStage(Protocol):
    """A first stage that searches the task's corpus (``search(data, depth)``: each query's top ``depth``), filed under
    its ``name`` and ``revision``: BM25, an encoder, stored candidates, or a toy of your own."""

    @property
    def name(self) -> str: ...

    @property
    def revision(self) -> str: ...

    def search(self, data: TaskData, depth: int, *, show_progress: bool = True) -> Run: ...


# --- query expansions --------------------------------------------------------------------------------


def expanded_queries(data: TaskData, expansion: str, data_dir: str | os.PathLike | None) -> tuple[str, bool, list[str], list[str]]:
    """(method, whether the LLM reasons, query texts, extracted expansion texts) for the task's evaluated queries."""
    expansion = ExpansionName(expansion)
    by_id = expansion_texts(data, expansion, data_dir)
    query_ids, texts = data.queries["id"].to_list(), data.queries["text"].to_list()
    method, llm = parse_expansion(data.spec, expansion) if expansion.is_local else (expansion.method, expansion.llm)
    reasoning_llms = reasoning_llms_for(data.spec, expansion)
    expansions = [expansion_text(by_id[query_id], llm, reasoning_llms) for query_id in query_ids]
    return method, llm in reasoning_llms, texts, expansions


def bm25_queries(data: TaskData, expansion: str | None, data_dir: str | os.PathLike | None) -> pl.DataFrame:
    """The query texts BM25 searches with: the task's, or combined with an expansion by the official rule."""
    if expansion is None:
        return data.queries
    method, reasoning, texts, expansions = expanded_queries(data, expansion, data_dir)
    combined = [bm25_query(method, t, e, reasoning=reasoning) for t, e in zip(texts, expansions, strict=True)]
    return data.queries.with_columns(text=pl.Series(combined, dtype=pl.Utf8))


# --- the stages --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Bm25:
    """bm25-lucene (the official R2MED BM25), bm25-hakari[:<tokenizer>] (HAKARI-Bench's, NanoR2MED's own) or bm25-robertson
    (bm25s's own tokenizer), on the task's queries or an expansion of them."""

    retriever: str
    expansion: str | None = None
    data_dir: str | os.PathLike | None = None
    workers: int | None = None  # bm25-lucene's corpus analysis processes (default: all cores); never changes a score
    index: Any = field(default=None, compare=False, repr=False)  # a bm25-lucene index of the task built once (the matrix)

    def __post_init__(self) -> None:
        if self.retriever not in BM25_RETRIEVERS:
            raise UserError(f"unknown retriever {self.retriever!r}: use one of {sorted(BM25_RETRIEVERS)} or an encoder")

    @property
    def name(self) -> str:
        return self.retriever

    @property
    def variant(self) -> str:
        return BM25_RETRIEVERS[self.retriever]

    @property
    def revision(self) -> str:
        return f"r2med-plugin-{__version__}"

    def search(self, data: TaskData, depth: int, *, show_progress: bool = True, ties: TieOrder = "doc_id") -> Run:
        queries = bm25_queries(data, self.expansion, self.data_dir)
        if self.index is not None:
            # not the on-disk run cache: the matrix keeps its own state per (row, task), and writing 14 runs per task
            # there would cost more than computing them from the shared index
            return bm25_search(data.corpus, queries, variant=self.variant, top_k=depth, show_progress=show_progress,
                               ties=ties, index=self.index)
        return bm25_run(data, self.variant, top_k=depth, queries=queries, show_progress=show_progress, ties=ties,
                        workers=self.workers)

    def ranked(self, data: TaskData, depth: int, *, show_progress: bool = True) -> RankedRun:
        # The official topk_docs come from eval_BM25's stable sort: tied documents stay in corpus order,
        # and the run keeps that order (not re-sorted by id), so the reranked top k is the official one.
        run = self.search(data, depth, show_progress=show_progress, ties="corpus")
        return RankedRun(self.name, {query_id: dict(ranked) for query_id, ranked in run.items()}, revision=self.revision)


@dataclass(frozen=True)
class Dense:
    """An encoder's cosine top-k over the whole corpus; with an expansion, combined by the official rules. A user's
    encoder (name, revision, encode) is adapted here, once (``as_encoder``)."""

    encoder: Encoder
    query_prompt: str | None = None
    expansion: str | None = None
    data_dir: str | os.PathLike | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "encoder", as_encoder(self.encoder))

    @property
    def name(self) -> str:
        return self.encoder.name

    @property
    def revision(self) -> str:
        return self.encoder.revision

    @property
    def effective_query_prompt(self) -> str | None:
        return effective_prompt(self.encoder, "query", self.query_prompt)

    def search(self, data: TaskData, depth: int, *, show_progress: bool = True) -> Run:
        search = partial(dense_search, dataset_revision=data.revision, query_prompt=self.query_prompt, top_k=depth)
        encoder = self.encoder.for_task(data.name)  # an encoder whose prompts depend on the task (mteb's)
        if self.expansion is None:
            return search(encoder, data.corpus, data.queries)
        method, reasoning, texts, expansions = expanded_queries(data, self.expansion, self.data_dir)
        single = [dense_query(method, t, e, reasoning=reasoning) for t, e in zip(texts, expansions, strict=True)]
        if single and single[0] is not None:
            queries = data.queries.with_columns(text=pl.Series(single, dtype=pl.Utf8))
            return search(encoder, data.corpus, queries)
        return search(encoder, data.corpus, data.queries, mix_with=expansions)

    def ranked(self, data: TaskData, depth: int, *, show_progress: bool = True) -> RankedRun:
        run = self.search(data, depth, show_progress=show_progress)
        name = self.name + prompt_label(data, self.effective_query_prompt)
        ranked = {query_id: dict(list(rank_by_score(docs).items())[:depth]) for query_id, docs in run.items()}
        return RankedRun(name, ranked, revision=self.revision)


@dataclass(frozen=True)
class StoredCandidates:
    """A retriever ranking only each query's stored candidates (NanoR2MED ``--candidates-only``): an encoder
    encodes just the union of the lists; BM25 ranks the corpus, from which the lists are then taken."""

    retriever: Bm25 | Dense
    subsets: tuple[str, ...]

    @property
    def name(self) -> str:
        return self.retriever.name

    @property
    def revision(self) -> str:
        return self.retriever.revision

    def search(self, data: TaskData, depth: int, *, show_progress: bool = True) -> Run:
        if isinstance(self.retriever, Bm25):
            return self.retriever.search(data, data.corpus.height, show_progress=show_progress)
        union = {q: [d for key in self.subsets for d in data.candidates[key].get(q, [])] for q in data.qrels}
        encoder = self.retriever.encoder.for_task(data.name)
        return score_candidates(encoder, data.corpus, data.queries, union, dataset_revision=data.revision,
                                query_prompt=self.retriever.query_prompt)

    def saved_run(self, data: TaskData, run: Run) -> Run:
        """The run a result keeps: the candidates only, also for BM25, whose ranking covers the whole corpus."""
        union = {q: list(dict.fromkeys(d for key in self.subsets for d in data.candidates[key].get(q, []))) for q in data.qrels}
        return restrict_run(run, union)


@dataclass(frozen=True)
class RunFile:
    """A TREC run or official topk_docs JSONL file, or a folder holding one per task (<Task> or <HubName>)."""

    path: Path
    name: str | None = None

    def ranked(self, data: TaskData, depth: int, *, show_progress: bool = True) -> RankedRun:
        path = task_run_file(self.path, data.name, data.spec.hub_name)
        return RankedRun(self.name or _run_file_label(data, path, self.path), read_run_file(path), path,
                         revision=run_files_digest(self.path))


@dataclass(frozen=True)
class RunDict:
    """An in-memory run (query id -> document id -> score), ranked by score."""

    run: Mapping[str, Mapping[str, float]] = field(hash=False)
    name: str | None = None

    def ranked(self, data: TaskData, depth: int, *, show_progress: bool = True) -> RankedRun:
        run = {str(q): rank_by_score({str(d): float(s) for d, s in docs.items()}) for q, docs in self.run.items()}
        return RankedRun(self.name or "run", run, revision=run_digest(run))


@dataclass(frozen=True)
class Named:
    """Another first stage under a name of the user's choosing (``first_stage_name``)."""

    stage: FirstStage
    name: str

    def ranked(self, data: TaskData, depth: int, *, show_progress: bool = True) -> RankedRun:
        ranked = self.stage.ranked(data, depth, show_progress=show_progress)
        return RankedRun(self.name, ranked.run, ranked.source, ranked.revision)


def as_first_stage(value: object, *, query_prompt: str | None = None, name: str | None = None,
                   bm25_workers: int | None = None) -> FirstStage:
    """A first stage from what a user gives: a BM25 name, an encoder, a run file or folder, a run dict, or a stage."""
    if isinstance(value, str) and value in BM25_RETRIEVERS:
        if query_prompt:
            raise SettingError("a query prompt ({query_prompt}) is for encoders; "
                               f"the {value} first stage would ignore it: leave it out", field="query_prompt")
        stage: FirstStage = Bm25(value, workers=bm25_workers)
    elif is_encoder(value):
        stage = Dense(as_encoder(value), query_prompt)
    elif isinstance(value, FirstStage):
        stage = value
    elif isinstance(value, Mapping):
        stage = RunDict(value)
    elif isinstance(value, (str, os.PathLike)):
        stage = RunFile(Path(value))
    else:
        raise TypeError(
            f"first_stage must be {sorted(BM25_RETRIEVERS)}, an encoder, a run file or folder, or a run dict; got {type(value).__name__}"
        )
    return Named(stage, name) if name else stage


# --- run files and digests -----------------------------------------------------------------------------


def run_digest(run: Run) -> str:
    """An in-memory run's identity: its queries, documents, order and scores."""
    canonical = json.dumps([[query_id, list(ranked.items())] for query_id, ranked in sorted(run.items())])
    return "run-" + hashlib.sha256(canonical.encode("utf-8")).hexdigest()[:12]


def run_files_digest(given: Path) -> str:
    """A run file's identity (its bytes), or a run folder's: the names and bytes of all its run files, so
    every task reranked from one folder (official ``topk_docs/<retriever>/``) shares one revision."""
    files = sorted(p for p in given.iterdir() if p.is_file() and p.suffix in RUN_FILE_SUFFIXES) if given.is_dir() else [given]
    digest = hashlib.sha256()
    for path in files:
        digest.update(f"{path.name}\0{hashlib.sha256(path.read_bytes()).hexdigest()}\n".encode())
    return "run-" + digest.hexdigest()[:12]


def task_run_file(path: Path, task: str, hub_name: str) -> Path:
    """``path`` itself, or in a folder the run file of ``task`` (named after the task or its hub name)."""
    if path.is_file():
        return path
    if path.is_dir():
        for stem in (task, hub_name):
            for suffix in RUN_FILE_SUFFIXES:
                if (path / f"{stem}{suffix}").is_file():
                    return path / f"{stem}{suffix}"
        raise SettingFileError(f"{path}: no run file for {task} in this folder (looked for {task} or {hub_name} "
                               f"with {', '.join(RUN_FILE_SUFFIXES)}); add it, or leave {task} out of {{task}}",
                               field="first_stage")
    raise MissingFileError(
        f"{path}: no such run file or folder; the first stage is bm25-lucene, bm25-hakari, bm25-robertson, a model, a TREC run or a topk_docs .jsonl"
    )


def _run_file_label(data: TaskData, path: Path, given: Path) -> str:
    """A run folder is named after the retriever (official: topk_docs/<retriever>/<Task>.jsonl)."""
    if given.is_dir() or path.stem in {data.name, data.spec.hub_name, data.spec.slug}:
        return path.parent.name or "run"
    return path.stem
