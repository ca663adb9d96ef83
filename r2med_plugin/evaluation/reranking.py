"""The official ``eval_reranker`` mode: first stage -> cross-encoder rerank of its top k -> scores -> files.

What the official code (R2MED/R2MED ``src/eval_reranker.py``) does, and what this module repeats:

- the first stage is a ``topk_docs`` file (the top 100 of a retriever, best first); its own scores
  (the "Before Reranker" print) are computed on the whole file;
- each query's first k documents (k = 10 or 100) are scored by the cross-encoder and only those k
  form the reranked run: nothing below rank k is evaluated;
- pytrec_eval at 1, 10, 25, 50, 100 (ndcg_cut, map_cut, recall, P) plus recip_rank, each mean taken
  over the queries pytrec_eval returns (run queries that have qrels), rounded to 5 decimals;
- the result JSON: dataset_name, model_name (the reranker's short name), topk, evaluation_time
  ("0.26 minutes") and the scores under "test", keys sorted, indented by 2.

Here the first stage is also any retriever this package runs (its top ``max(100, k)``, as the
official topk_docs files keep 100), a TREC run or an in-memory run.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import polars as pl

from r2med_plugin.version import __version__
from r2med_plugin.data.runs import RUN_FILE_SUFFIXES, check_run_ids, rank_by_score, read_run_file
from r2med_plugin.metrics import evaluate_run, official_means
from r2med_plugin.io import write_json_atomic
from r2med_plugin.retrieval.rerank import (
    official_reranker_name,
    rerank_run,
    reranker_name,
    reranker_revision,
    top_ranked,
)
from r2med_plugin.types import Run, TaskData

if TYPE_CHECKING:
    from r2med_plugin.evaluation.runner import TaskRunResult

logger = logging.getLogger(__name__)

OFFICIAL_RERANKER_K_VALUES = (1, 10, 25, 50, 100)
OFFICIAL_TOPK_DOCS_DEPTH = 100  # the official save_topk_docs keeps each query's top 100
FIRST_STAGE_PREFIX = "first_stage_"
# The key names of the published results/reranker files (an earlier eval_reranker.py) for ours.
PUBLISHED_KEY_NAMES = {"ndcg_at": "NDCG@", "map_at": "MAP@", "recall_at": "Recall@", "precision_at": "P@"}
OfficialLayout = Literal["code", "published"]


@dataclass(frozen=True)
class FirstStage:
    name: str
    run: Run  # each query's documents in ranking order (dict order)
    source: Path | None = None  # the run file, when read from one
    revision: str = ""  # what produced the run: the encoder's revision, the plugin version for BM25, a run's digest


@dataclass(frozen=True)
class RerankInfo:
    reranker: str
    first_stage: str
    depth: int
    official_scores: dict[str, float]  # unrounded official means (see official_reranker_scores)
    first_stage_run: Run
    reranker_revision: str = ""
    first_stage_revision: str = ""


def reranked_model_name(reranker: str, first_stage: str, depth: int) -> str:
    """The name a reranked result is filed under; never equal to the first stage's own name."""
    return f"{reranker}|{first_stage}|top_{depth}"


# --- official metrics and file ---------------------------------------------------------------------


def official_reranker_scores(
    qrels: Mapping[str, Mapping[str, int]], run: Mapping[str, Mapping[str, float]], k_values=OFFICIAL_RERANKER_K_VALUES
) -> dict[str, float]:
    """Means (unrounded) over the run's queries that have qrels, as the official evaluator takes them.

    Keys: ndcg_at_k, map_at_k, recall_at_k, precision_at_k for each k, and mrr. Unlike
    evaluate_run, a query of the qrels that is missing from the run is not counted at all.
    """
    ranked = {q: docs for q, docs in run.items() if docs}  # a query the first stage left empty is not evaluated
    return official_means(qrels, ranked, k_values, with_mrr=True, decimals=None)


def official_reranker_results(
    scores: Mapping[str, float],
    *,
    dataset_name: str,
    reranker: str,
    top_k: int,
    evaluation_time: float,
    retriever: str | None = None,
    layout: OfficialLayout = "code",
) -> dict:
    """The official reranker JSON as a dict (keys sorted, scores rounded to 5 decimals).

    ``layout="code"`` is what src/eval_reranker.py writes (model_name, ndcg_at_10 ...);
    ``layout="published"`` is the layout of the published results/reranker files (reranker_name,
    retriever_name, NDCG@10 ... MRR), for a side-by-side diff.
    """
    if not dataset_name or not reranker:
        raise ValueError("dataset_name and reranker must be non-empty strings")
    minutes = round(float(evaluation_time) / 60, 2)
    test = {key: round(float(value), 5) for key, value in scores.items()}
    payload: dict = {"dataset_name": dataset_name, "evaluation_time": f"{minutes} minutes", "topk": int(top_k)}
    if layout == "code":
        payload |= {"model_name": reranker, "test": test}
    elif layout == "published":
        if not retriever:
            raise ValueError("the published layout names the first stage: pass retriever=")
        payload |= {"reranker_name": reranker, "retriever_name": retriever, "test": {_published_key(k): v for k, v in test.items()}}
    else:
        raise ValueError(f"layout must be 'code' or 'published', got {layout!r}")
    return _sorted(payload)


def write_official_reranker_results(path: str | os.PathLike, payload: Mapping) -> Path:
    """Write the JSON as the official code does (indent 2, sorted keys, no final newline), atomically."""
    return write_json_atomic(path, payload, sort_keys=True, trailing_newline=False, ensure_ascii=True)


def published_to_ours(test: Mapping[str, float]) -> dict[str, float]:
    """Published result keys (NDCG@10, MRR, ...) renamed to ours (ndcg_at_10, mrr, ...)."""
    reverse = {theirs: ours for ours, theirs in PUBLISHED_KEY_NAMES.items()}
    renamed = {}
    for key, value in test.items():
        if key == "MRR":
            renamed["mrr"] = value
            continue
        prefix, _, k = key.partition("@")
        if f"{prefix}@" not in reverse or not k.isdigit():
            raise ValueError(f"unknown published metric {key!r}")
        renamed[f"{reverse[prefix + '@']}_{k}"] = value
    return renamed


def _published_key(key: str) -> str:
    if key == "mrr":
        return "MRR"
    prefix, _, k = key.rpartition("_")
    return f"{PUBLISHED_KEY_NAMES[prefix]}{k}"


def _sorted(value: object) -> object:
    return {key: _sorted(value[key]) for key in sorted(value)} if isinstance(value, dict) else value


# --- the first stage -------------------------------------------------------------------------------


def resolve_first_stage(
    data: TaskData,
    first_stage: object,
    *,
    depth: int,
    query_prompt: str | None = None,
    name: str | None = None,
    show_progress: bool = True,
) -> FirstStage:
    """The first stage's ranked run for ``data``: a BM25 name, an encoder, a run file or folder, or a run dict."""
    from r2med_plugin.evaluation.extras import bm25_run
    from r2med_plugin.evaluation.runner import BM25_RETRIEVERS, _model_run
    from r2med_plugin.retrieval.dense import Encoder, effective_prompt

    retriever_depth = max(depth, OFFICIAL_TOPK_DOCS_DEPTH)
    if isinstance(first_stage, str) and first_stage in BM25_RETRIEVERS:
        if query_prompt:
            raise ValueError(f"a query prompt (--instruction) is for encoders; the {first_stage} first stage would ignore it: leave it out")
        # The official topk_docs come from eval_BM25's stable sort: tied documents stay in corpus order,
        # and the run keeps that order (not re-sorted by id), so the reranked top k is the official one.
        run = bm25_run(data, BM25_RETRIEVERS[first_stage], top_k=retriever_depth, show_progress=show_progress, ties="corpus")
        return FirstStage(name or first_stage, {query_id: dict(ranked) for query_id, ranked in run.items()},
                          revision=f"r2med-plugin-{__version__}")
    if isinstance(first_stage, Encoder):
        run = _model_run(data, first_stage, retriever_depth, query_prompt, show_progress)
        return FirstStage(name or first_stage.name + _prompt_suffix(data, effective_prompt(first_stage, "query", query_prompt)),
                          _ranked(run, retriever_depth), revision=first_stage.revision)
    if isinstance(first_stage, Mapping):
        run = {str(q): rank_by_score({str(d): float(s) for d, s in docs.items()}) for q, docs in first_stage.items()}
        return FirstStage(name or "run", run, revision=_run_digest(run))
    if isinstance(first_stage, (str, os.PathLike)):
        path = run_file_for(data, Path(first_stage))
        return FirstStage(name or _run_file_label(data, path, Path(first_stage)), read_run_file(path), path,
                          revision=_run_files_digest(Path(first_stage)))
    raise TypeError(
        f"first_stage must be {sorted(BM25_RETRIEVERS)}, an encoder, a run file or folder, or a run dict; got {type(first_stage).__name__}"
    )


def _run_digest(run: Run) -> str:
    """An in-memory run's identity: its queries, documents, order and scores."""
    canonical = json.dumps([[query_id, list(ranked.items())] for query_id, ranked in sorted(run.items())])
    return "run-" + hashlib.sha256(canonical.encode("utf-8")).hexdigest()[:12]


def _run_files_digest(given: Path) -> str:
    """A run file's identity (its bytes), or a run folder's: the names and bytes of all its run files, so
    every task reranked from one folder (official ``topk_docs/<retriever>/``) shares one revision."""
    files = sorted(p for p in given.iterdir() if p.is_file() and p.suffix in RUN_FILE_SUFFIXES) if given.is_dir() else [given]
    digest = hashlib.sha256()
    for path in files:
        digest.update(f"{path.name}\0{hashlib.sha256(path.read_bytes()).hexdigest()}\n".encode())
    return "run-" + digest.hexdigest()[:12]


def reranked_revision(reranker_revision: str, first_stage_revision: str) -> str:
    """The model revision a reranked result is filed under: the reranker's, then the first stage's (short).

    Two first stages of one name (two revisions of an encoder, two run files in folders of one name)
    never overwrite each other's reranked results."""
    short = first_stage_revision
    if not re.fullmatch(r"[\w.+-]{1,24}", short):
        short = hashlib.sha256(first_stage_revision.encode("utf-8")).hexdigest()[:12]
    return f"{reranker_revision}+first-stage-{short}"


def run_file_for(data: TaskData, path: Path) -> Path:
    """``path`` itself, or in a folder the run file named after the task (R2MEDBiology.trec, Biology.jsonl, ...)."""
    return task_run_file(path, data.name, data.spec.hub_name)


def task_run_file(path: Path, task: str, hub_name: str) -> Path:
    """``path`` itself, or in a folder the run file of ``task`` (named after the task or its hub name)."""
    if path.is_file():
        return path
    if path.is_dir():
        for stem in (task, hub_name):
            for suffix in RUN_FILE_SUFFIXES:
                if (path / f"{stem}{suffix}").is_file():
                    return path / f"{stem}{suffix}"
        raise FileNotFoundError(f"{path}: no run file for {task} in this folder (looked for {task} or {hub_name} "
                                f"with {', '.join(RUN_FILE_SUFFIXES)}); add it, or leave {task} out of --task")
    raise FileNotFoundError(
        f"{path}: no such run file or folder; the first stage is bm25-lucene, bm25-robertson, a model, a TREC run or a topk_docs .jsonl"
    )


def _prompt_suffix(data: TaskData, prompt: str | None) -> str:
    """The encoder first stage's prompt in its name ("+instruction", "+prompt-<hash>"), as results name it."""
    from r2med_plugin.evaluation.runner import official_query_prompt

    if prompt is None:
        return ""
    if prompt == official_query_prompt(data):
        return "+instruction"
    return "+prompt-" + hashlib.sha256(prompt.encode("utf-8")).hexdigest()[:8]


def _run_file_label(data: TaskData, path: Path, given: Path) -> str:
    """A run folder is named after the retriever (official: topk_docs/<retriever>/<Task>.jsonl)."""
    if given.is_dir() or path.stem in {data.name, data.spec.hub_name, data.spec.slug}:
        return path.parent.name or "run"
    return path.stem


def _ranked(run: Mapping[str, Mapping[str, float]], depth: int) -> Run:
    return {query_id: dict(list(rank_by_score(ranked).items())[:depth]) for query_id, ranked in run.items()}


def _checked(data: TaskData, stage: FirstStage) -> Run:
    """The first stage's run for the evaluated queries; unknown ids are errors naming the file and line."""
    dropped = set(data.report.get("queries_without_positives", ()))
    evaluated = set(data.queries["id"].to_list())
    check_run_ids(stage.run, evaluated | dropped, set(data.corpus["id"].to_list()), source=stage.source, task=data.name)
    missing = [query_id for query_id in data.qrels if not stage.run.get(query_id)]
    if missing:
        logger.warning(
            "%s: %d of %d queries are not in the first stage (e.g. %r): the official scores average over the others, "
            "the MTEB scores count them as 0", data.name, len(missing), len(data.qrels), missing[0],
        )
    return {query_id: ranked for query_id, ranked in stage.run.items() if query_id in evaluated}


# --- the mode --------------------------------------------------------------------------------------


def evaluate_reranked(
    data: TaskData,
    reranker: object,
    first_stage: object,
    *,
    depth: int = 10,
    batch_size: int = 32,
    query_prompt: str | None = None,
    first_stage_name: str | None = None,
    show_progress: bool = True,
    started: float | None = None,
) -> TaskRunResult:
    """Rerank the top ``depth`` of ``first_stage`` on ``data`` with ``reranker`` (see the module docstring)."""
    from r2med_plugin.evaluation.runner import TaskRunResult, within_depth
    from r2med_plugin.retrieval.rerank import _check_depth

    started = time.perf_counter() if started is None else started
    _check_depth(depth)
    reranker = _loaded(reranker, batch_size)
    stage = resolve_first_stage(data, first_stage, depth=depth, query_prompt=query_prompt, name=first_stage_name, show_progress=show_progress)
    run = _checked(data, stage)
    documents = {doc_id for doc_ids in top_ranked(run, depth).values() for doc_id in doc_ids}
    reranked = rerank_run(run, _texts(data.queries, set(run)), _texts(data.corpus, documents), reranker,
                          depth=depth, batch_size=batch_size, show_progress=show_progress)
    # No metric deeper than what was ranked: recall_at_1000 of a top-10 rerank would repeat recall_at_10.
    first_depth = max((len(ranked) for ranked in run.values()), default=depth)
    scores = within_depth(evaluate_run(data.qrels, reranked), max(depth, 1))
    scores |= {FIRST_STAGE_PREFIX + key: value for key, value in within_depth(evaluate_run(data.qrels, run), first_depth).items()}
    name, revision = reranker_name(reranker), reranker_revision(reranker)
    return TaskRunResult(
        task=data.name,
        retriever=reranked_model_name(name, stage.name, depth),
        expansion=None,
        model_revision=reranked_revision(revision, stage.revision),
        dataset_revision=data.revision,
        scores=scores,
        main_score="ndcg_at_10",
        run=reranked,
        evaluation_time=time.perf_counter() - started,
        data=data,
        dataset_revision_verified=data.revision_verified,
        rerank=RerankInfo(
            reranker=name, first_stage=stage.name, depth=depth,
            official_scores=official_reranker_scores(data.qrels, reranked), first_stage_run=run,
            reranker_revision=revision, first_stage_revision=stage.revision,
        ),
    )


def _loaded(reranker: object, batch_size: int) -> object:
    if isinstance(reranker, (str, os.PathLike)):
        from r2med_plugin.retrieval.rerank import SentenceTransformerCrossEncoder

        return SentenceTransformerCrossEncoder(str(reranker), batch_size=batch_size)
    return reranker


def _texts(frame: pl.DataFrame, ids: set[str]) -> dict[str, str]:
    """id -> text for ``ids`` only (a corpus of 60k documents, of which the top k are needed)."""
    chosen = frame.filter(pl.col("id").is_in(list(ids)))
    return dict(zip(chosen["id"].to_list(), chosen["text"].to_list()))


def write_reranked_outputs(result: TaskRunResult, output_dir: str | os.PathLike, *, trec: bool = False) -> dict[str, Path]:
    """MTEB-format result (reranked and first_stage_* scores), the official reranker JSON, optionally TREC runs."""
    from r2med_plugin.evaluation.runner import dataset_count_drift
    from r2med_plugin.reporting.export import model_folder_name, write_mteb_result, write_trec_run

    info: RerankInfo = result.rerank
    output = Path(output_dir)
    paths = {
        "mteb": write_mteb_result(
            output, spec=result.data.spec, task_name=result.task, model_name=result.retriever,
            model_revision=result.model_revision, dataset_revision=result.data.result_revision, scores=result.scores,
            main_score=result.main_score, evaluation_time=result.evaluation_time,
            provenance={
                "reranker": info.reranker, "reranker_revision": info.reranker_revision, "first_stage": info.first_stage,
                "first_stage_revision": info.first_stage_revision, "rerank_depth": info.depth, "dataset_revision": result.dataset_revision,
                "dataset_revision_verified": result.dataset_revision_verified, "dataset_source": result.data.source,
                "dataset_count_drift": dataset_count_drift(result.data),
            },
        )
    }
    official_name = official_reranker_name(info.reranker)
    folder = (output / "official" / "reranker" / model_folder_name(official_name) / model_folder_name(info.first_stage)
              / f"top_{info.depth}" / result.model_revision)
    payload = official_reranker_results(
        info.official_scores, dataset_name=result.data.spec.hub_name, reranker=official_name, top_k=info.depth,
        evaluation_time=result.evaluation_time,
    )
    paths["official"] = write_official_reranker_results(folder / f"{result.task}.json", payload)
    if trec:
        tag = model_folder_name(result.retriever)
        runs = output / "runs" / tag / result.model_revision
        paths["trec"] = write_trec_run(runs / f"{result.task}.trec", result.run, tag)
        paths["trec_first_stage"] = write_trec_run(
            runs / f"{result.task}.first_stage.trec", info.first_stage_run, model_folder_name(info.first_stage)
        )
    return paths
