"""One task x one configuration -> scores, run and result files: ``execute(request, data=None)`` is the one entry; it
plans the request's stages (r2med_plugin.evaluation.plan, internal) and carries them out. ``evaluate_task`` states a
request by keyword arguments and executes it.

    first stage (BM25 | encoder | stored candidates | run file)  ->  [reranker]  ->  scorers  ->  TaskRunResult
    TaskRunResult  ->  writers (MTEB JSON, official JSON, TREC run)          (write_outputs)
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from r2med_plugin.data.expansions import check_local_expansion_data, expansion_texts, parse_expansion, with_expansion_files
from r2med_plugin.data.loader import load_task
from r2med_plugin.data.runs import check_run_ids
from r2med_plugin.errors import UserError
from r2med_plugin.evaluation.first_stages import (
    OFFICIAL_TOPK_DOCS_DEPTH,
    Bm25,
    Dense,
    FirstStage,
    Named,
    RankedRun,
    RunFile,
    SearchStage,
    StoredCandidates,
)
from r2med_plugin.evaluation.hakari_record import hakari_record
from r2med_plugin.evaluation.naming import reranked_model_name, reranked_revision
from r2med_plugin.evaluation.plan import Plan, as_request, plan_of
from r2med_plugin.evaluation.request import EvaluationRequest, Scoring, TaskArguments
from r2med_plugin.evaluation.reranker_stage import as_reranker
from r2med_plugin.evaluation.result import RerankInfo, TaskRunResult
from r2med_plugin.evaluation.scorers import Retrieved, merged
from r2med_plugin.identifiers import is_hakari_bm25
from r2med_plugin.models.placement import device_of
from r2med_plugin.models.protocols import PlainEncoder, Reranker, as_encoder
from r2med_plugin.retrieval.candidates import restrict_run
from r2med_plugin.retrieval.dense import score_candidates
from r2med_plugin.retrieval.ranking import head_of_run, truncate_run
from r2med_plugin.retrieval.rerank import top_document_ids
from r2med_plugin.types import Run, TaskData

logger = logging.getLogger(__name__)

__all__ = ["TaskRunResult", "evaluate_task", "execute", "score_candidate_lists"]


def evaluate_task(
    task: str | EvaluationRequest,
    retriever: str | PlainEncoder | None = None,
    *,
    hybrid: bool = False,
    candidates: Sequence[str] = (),
    candidates_only: bool = False,
    data_dir: str | os.PathLike | None = None,
    accept_drift: bool | None = None,
    top_k: int = 1000,
    query_prompt: str | None = None,
    expansion: str | None = None,
    show_progress: bool = True,
    rerank: object | None = None,
    first_stage: object | None = None,
    rerank_depth: int | None = None,
    first_stage_name: str | None = None,
    rerank_batch_size: int | None = None,
    bm25_workers: int | None = None,
) -> TaskRunResult:
    """Evaluate ``retriever`` (a BM25 name, a model's name as ``--retriever`` takes it, or an encoder) on ``task``, or run an
    EvaluationRequest (``evaluate_task(request)``, with no other argument). The keyword arguments are ``TaskArguments``' fields:
    full-corpus scores (main: ndcg_at_10, run ``top_k`` deep), ``hybrid_*`` (RRF with the task's BM25) when
    ``hybrid``, ``candidates_<subset>_*`` per stored list (``candidates``; ``candidates_only``: the lists only, an
    encoder encodes just their union). ``expansion`` ("method/llm", "all", or "local:<folder>/<method>/<llm>" from
    ``r2med generate``) combines the queries with an LLM expansion by the official rules; ``query_prompt`` prefixes an
    encoder's queries. ``rerank`` (a cross-encoder or its name) switches to the official reranker mode: the top
    ``rerank_depth`` of ``first_stage`` (default ``retriever``; also a run file or folder, or a run dict) are reranked
    (``rerank_batch_size`` pairs at a time) and scored, the first stage's own scores as ``first_stage_*``, named
    ``first_stage_name``. ``bm25_workers``: processes for bm25-lucene's corpus analysis (default: all cores).
    ``data_dir``, ``accept_drift`` and ``show_progress`` say where the data lives and how the run shows. Builds the
    EvaluationRequest (every error that needs no data is raised while it is built) and executes it."""
    arguments = TaskArguments(
        hybrid=hybrid, candidates=candidates, candidates_only=candidates_only, data_dir=data_dir, accept_drift=accept_drift,
        top_k=top_k, query_prompt=query_prompt, expansion=expansion, show_progress=show_progress, rerank=rerank,
        first_stage=first_stage, rerank_depth=rerank_depth, first_stage_name=first_stage_name,
        rerank_batch_size=rerank_batch_size, bm25_workers=bm25_workers,
    )
    return execute(as_request(task, retriever, arguments))


def execute(request: EvaluationRequest, data: TaskData | None = None) -> TaskRunResult:
    """Run ``request``: its task's data loads (unless ``data`` is that task, loaded and checked, e.g. by
    ``validate_inputs``), its first stage retrieves, its reranker reranks, and the result is scored. Writing the result
    is ``write_outputs``'s (the request's ``outputs`` say where)."""
    if not isinstance(request, EvaluationRequest):
        raise TypeError(f"execute takes an EvaluationRequest, got {type(request).__name__} (evaluate_task takes a task "
                        "name and keyword arguments)")
    return _run(plan_of(request), data)


def _run(plan: Plan, data: TaskData | None) -> TaskRunResult:
    started = time.perf_counter()
    if data is None:
        data = load_task(plan.task, data_dir=plan.data_dir, accept_drift=plan.accept_drift)
    if plan.reranker is not None:
        return _reranked(plan, data, started)
    _check_against_data(plan, data)
    if plan.expansion is not None:  # a released expansion's file is part of the data the result vouches for
        data = with_expansion_files(data, plan.expansion, plan.data_dir)
    stage = plan.first_stage
    if not isinstance(stage, SearchStage) or (plan.candidates_only and not isinstance(stage, StoredCandidates)):
        raise TypeError(f"a plan without a reranker searches (name, revision, search(data, depth)), and with candidates_only "
                        f"ranks StoredCandidates; its first stage is a {type(stage).__name__}")
    depth = data.corpus.height if plan.candidate_subsets else plan.top_k
    run = stage.search(data, depth, show_progress=plan.show_progress)
    scores = merged(plan.scorers, Retrieved(data, run, plan.top_k, plan.show_progress))
    if plan.candidates_only and isinstance(stage, StoredCandidates):  # the plan ranks the stored lists only
        first = plan.candidate_subsets[0]
        main, saved = f"candidates_{first}_ndcg_at_10" + ("_with_safeguard" if first == "hybrid" else ""), stage.saved_run(data, run)
    else:
        main, saved = "ndcg_at_10", _saved_run(stage, run, plan.top_k)
    ranker = stage.retriever if isinstance(stage, StoredCandidates) else stage  # it ranks with its retriever
    return TaskRunResult(
        task=data.name, retriever=stage.name, expansion=plan.expansion, model_revision=stage.revision,
        dataset_revision=data.revision, scores=scores.metrics, main_score=main, run=saved,
        evaluation_time=time.perf_counter() - started, data=data, official=scores.official, official_layout=scores.layout,
        query_prompt=ranker.effective_query_prompt if isinstance(ranker, Dense) else None, official_run=scores.official_run,
        dataset_revision_verified=data.revision_verified, candidates_only=plan.candidates_only, hybrid_with=plan.hybrid_with,
        instructions=_own_instructions(ranker, data.name), hakari=_hakari(plan, data, run, stage.name),
        request=_recorded(plan), device=_placed_on(plan, "first_stage", ranker.encoder if isinstance(ranker, Dense) else None),
    )


KEPT_DATA_BYTES = 128 * 2**20  # validated tables kept for the run beyond the first task's; the rest are read again


@dataclass(frozen=True)
class TaskInputs:
    """What one evaluation reads besides its model: its task's files (where they live), an expansion file, the stored
    candidate lists it scores, and a run file it reranks. Built from a request (``of_request``,
    which loads no model), so that ``r2med evaluate``, a sweep and the matrix check their input before any work."""

    task: str
    data_dir: str | None = None
    accept_drift: bool | None = None
    expansion: str | None = None
    candidate_subsets: tuple[str, ...] = ()
    reranked: bool = False
    run_file: RunFile | None = None

    @property
    def key(self) -> tuple:
        """What identifies the task's data: one load serves every evaluation with the same key."""
        return self.task, self.data_dir, self.accept_drift

    @classmethod
    def of_request(cls, request: EvaluationRequest) -> TaskInputs:
        from r2med_plugin.evaluation.specs import RunFileSpec

        first = request.first_stage
        run_file = RunFile(Path(first.path)) if isinstance(first, RunFileSpec) else None
        return cls(request.task, request.data_dir, request.accept_drift, request.scoring.expansion,
                   request.scoring.candidates, request.reranker is not None, run_file)


def validate_inputs(requests: Sequence[EvaluationRequest], *, keep_bytes: int = KEPT_DATA_BYTES) -> list[TaskData | None]:
    """Read and check, before any request runs, every task's files and every expansion file the requests read, so that
    bad input stops a multi-task run before its first result is written (each error names the file and row or query).
    Returns, per request, the validated data for ``execute(request, data)``, or None where it was dropped to bound
    memory (that request reads its task again): the first task's data is always kept, the others' while their tables
    together take at most ``keep_bytes``."""
    inputs = [TaskInputs.of_request(request) for request in requests]
    loaded = _validated(inputs, keep_bytes, keep_first=True)
    return [loaded[item.key] for item in inputs]


def check_inputs(inputs: Sequence[TaskInputs]) -> None:
    """``validate_inputs`` for runs that read their data themselves (a sweep's jobs, the matrix): every task's files
    and expansion files checked, one task in memory at a time, nothing kept."""
    _validated(inputs, 0, keep_first=False)


def _validated(inputs: Sequence[TaskInputs], keep_bytes: int, *, keep_first: bool) -> dict[tuple, TaskData | None]:
    """key -> the task's validated data, or None where it is not kept (see validate_inputs)."""
    loaded: dict[tuple, TaskData | None] = {}
    kept_bytes = 0.0
    for item in inputs:
        if item.key in loaded:
            continue
        data = load_task(item.task, data_dir=item.data_dir, accept_drift=item.accept_drift)
        for same in (other for other in inputs if other.key == item.key):
            _check_inputs(same, data)
        size = data.corpus.estimated_size() + data.queries.estimated_size()
        first = keep_first and not loaded
        keep = first or kept_bytes + size <= keep_bytes
        kept_bytes += size if keep and not first else 0
        loaded[item.key] = data if keep else None
    return loaded


def _check_inputs(inputs: TaskInputs, data: TaskData) -> None:
    """What ``execute`` would refuse about an evaluation's data, found before any evaluation runs: the data-dependent
    settings, an expansion file that cannot be read or lacks an evaluated query, a run file naming unknown ids."""
    if inputs.reranked:
        if inputs.run_file is not None:
            _check_run(data, inputs.run_file.ranked(data, OFFICIAL_TOPK_DOCS_DEPTH, show_progress=False))
        return
    _check_against_data(inputs, data)
    if inputs.expansion is not None:
        expansion_texts(data, inputs.expansion, inputs.data_dir)
def _recorded(plan: Plan) -> dict | None:
    return dict(plan.request) if plan.request is not None else None


def _placed_on(plan: Plan, part: str, model: object | None) -> str | None:
    """Where a model the package loaded (a request's ModelSpec or CrossEncoderSpec) ran; None for BM25, run files,
    endpoints and a user's own objects, whose results then stay as they were."""
    recorded = (plan.request or {}).get(part)
    if model is None or not isinstance(recorded, dict) or recorded.get("kind") not in ("model", "cross_encoder"):
        return None
    return device_of(model)


def _saved_run(stage: object, run: Run, top_k: int) -> Run:
    """The run a result keeps: its top_k in pytrec_eval's order, or, for bm25-hakari, in bm25s's own ranking order."""
    if isinstance(stage, Bm25) and is_hakari_bm25(stage.retriever):
        return head_of_run(run, top_k)
    return truncate_run(run, top_k)


def _hakari(plan: Plan, data: TaskData, run: Run, retriever: str) -> dict | None:
    """A NanoR2MED full-corpus run's record for HAKARI-Bench (evaluation/hakari_record.py); None for others."""
    if plan.candidates_only or data.spec.kind != "nano":
        return None
    return hakari_record(data, run, retriever, plan.candidate_subsets)


def _own_instructions(ranker: object, task: str) -> dict[str, str | None] | None:
    """The instructions an encoder applies itself (an official profile's, for this task), to be recorded; else None."""
    if not isinstance(ranker, Dense):
        return None
    instructions = ranker.encoder.for_task(task).instructions()
    return dict(instructions) if instructions is not None else None


def _check_against_data(plan: Plan | TaskInputs, data: TaskData) -> None:
    if plan.candidate_subsets and not data.candidates:
        raise UserError(f"{data.name} has no stored candidate lists; candidate subsets exist for the NanoR2MED tasks only")
    if plan.expansion is not None:
        parse_expansion(data.spec, plan.expansion)
        check_local_expansion_data(data, plan.expansion)
        if plan.candidate_subsets:
            raise UserError("expansions apply to the R2MED tasks, candidate subsets to NanoR2MED: use one or the other")


@dataclass(frozen=True)
class RerankInputs:
    """What a plan's reranker reranks: the first stage's run (``stage``, checked: ``run``) and the texts of its
    queries and of the documents within the rerank depth."""

    reranker: Reranker
    stage: RankedRun
    run: Run
    queries: dict[str, str]
    documents: dict[str, str]
    depth: int


def rerank_inputs(plan: Plan, data: TaskData) -> RerankInputs:
    """The reranker of a reranking plan, bound to the task, and what it reranks (the first stage runs here)."""
    reranker = as_reranker(plan.reranker, batch_size=plan.rerank_batch_size).for_task(data.name)
    depth = plan.rerank_depth
    own = _computed_here(plan.first_stage)
    fetched = max(depth, OFFICIAL_TOPK_DOCS_DEPTH, plan.top_k if isinstance(own, Dense) else 0)
    if not isinstance(plan.first_stage, FirstStage):
        raise TypeError(f"a reranker reranks a first stage with ranked(data, depth); a {type(plan.first_stage).__name__} "
                        "has none")
    stage = plan.first_stage.ranked(data, fetched, show_progress=plan.show_progress)
    run = _checked(data, stage)
    documents = {doc_id for doc_ids in top_document_ids(run, depth).values() for doc_id in doc_ids}
    return RerankInputs(reranker, stage, run, _texts(data.queries, set(run)), _texts(data.corpus, documents), depth)


def _reranked(plan: Plan, data: TaskData, started: float) -> TaskRunResult:
    """The official reranker mode: the first stage's top ``rerank_depth`` reranked; only they are scored."""
    inputs = rerank_inputs(plan, data)
    reranker, stage, run, depth, own = inputs.reranker, inputs.stage, inputs.run, inputs.depth, _computed_here(plan.first_stage)
    reranked = reranker.rerank(run, inputs.queries, inputs.documents, depth=depth, show_progress=plan.show_progress)
    first, first_depth = _first_stage_scored(plan, data, own, run)
    scores = merged(plan.scorers, Retrieved(data, first, first_depth, plan.show_progress, reranked=reranked, rerank_depth=depth))
    report = reranker.last_report  # an LLM reranker's usage and traces (None: none)
    if scores.official is None:
        raise ValueError("a reranking plan scores with Reranked, which makes the official reranker scores")
    return TaskRunResult(
        task=data.name, retriever=reranked_model_name(reranker.name, stage.name, depth), expansion=None,
        model_revision=reranked_revision(reranker.revision, stage.revision), dataset_revision=data.revision,
        scores=scores.metrics, main_score="ndcg_at_10", run=reranked, evaluation_time=time.perf_counter() - started,
        data=data, dataset_revision_verified=data.revision_verified, request=_recorded(plan),
        device=_placed_on(plan, "reranker", plan.reranker),
        rerank=RerankInfo(reranker=reranker.name, first_stage=stage.name, depth=depth, official_scores=scores.official,
                          first_stage_run=first, reranker_revision=reranker.revision, first_stage_revision=stage.revision,
                          usage=None if report is None else report.usage,
                          traces=None if report is None else report.traces,
                          traces_name="reasoning" if report is None else report.traces_name),
    )


def _computed_here(stage: object) -> Bm25 | Dense | None:
    """The BM25 or encoder behind a first stage that this package computes (a run file or dict: None)."""
    while isinstance(stage, Named):
        stage = stage.stage
    return stage if isinstance(stage, (Bm25, Dense)) else None


def _first_stage_scored(plan: Plan, data: TaskData, own: Bm25 | Dense | None, run: Run) -> tuple[Run, int]:
    """The run ``first_stage_*`` is computed on, and its depth: a first stage computed here, as its own result
    reports it (top ``plan.top_k``, default 1000: ``first_stage_mrr`` equals the first stage's own ``mrr``);
    a run file or dict, as given (its depth: the longest list). BM25 ranks again with the own result's tie
    order (by document id) where the reranker took the official corpus order (same scores, cached)."""
    if own is None:
        return run, max((len(ranked) for ranked in run.values()), default=plan.rerank_depth)
    if isinstance(own, Bm25):
        run = {query_id: ranked for query_id, ranked in own.search(data, plan.top_k, show_progress=plan.show_progress).items()
               if query_id in run}
    return truncate_run(run, plan.top_k), plan.top_k


def _checked(data: TaskData, stage: RankedRun) -> Run:
    """The first stage's run for the evaluated queries; unknown ids are errors naming the file and line."""
    evaluated = _check_run(data, stage)
    missing = [query_id for query_id in data.qrels if not stage.run.get(query_id)]
    if missing:
        logger.warning(
            "%s: %d of %d queries are not in the first stage (e.g. %r): the official scores average over the others, "
            "the MTEB scores count them as 0", data.name, len(missing), len(data.qrels), missing[0],
        )
    return {query_id: ranked for query_id, ranked in stage.run.items() if query_id in evaluated}


def _check_run(data: TaskData, stage: RankedRun) -> set[str]:
    """Refuse a run naming a query or document the task lacks (the file and line named); the evaluated query ids."""
    dropped = set(data.report.queries_without_positives)
    evaluated = set(data.queries["id"].to_list())
    check_run_ids(stage.run, evaluated | dropped, set(data.corpus["id"].to_list()), source=stage.source, task=data.name)
    return evaluated


def _texts(frame: pl.DataFrame, ids: set[str]) -> dict[str, str]:
    """id -> text for ``ids`` only (a corpus of 60k documents, of which the top k are needed)."""
    chosen = frame.filter(pl.col("id").is_in(list(ids)))
    return dict(zip(chosen["id"].to_list(), chosen["text"].to_list(), strict=True))


def score_candidate_lists(
    model_or_retriever: str | PlainEncoder,
    task: str | TaskData,
    subset: str,
    *,
    query_prompt: str | None = None,
    data_dir: str | os.PathLike | None = None,
) -> Run:
    """Scores of each query's stored candidates (subset bm25, dense or hybrid) by a model or a BM25.

    An encoder encodes only the union of the candidate documents, never the whole corpus.
    """
    data = task if isinstance(task, TaskData) else load_task(task, data_dir=data_dir)
    Scoring(candidates=(subset,))  # an unknown subset is refused here
    if not data.candidates:
        raise UserError(f"{data.name} has no stored candidate lists; candidate subsets exist for the NanoR2MED tasks only")
    lists = {query_id: ids for query_id, ids in data.candidates[subset].items() if query_id in data.qrels}
    if isinstance(model_or_retriever, str):
        full = Bm25(model_or_retriever).search(data, data.corpus.height, show_progress=False)
        return restrict_run(full, lists)
    return score_candidates(as_encoder(model_or_retriever).for_task(data.name), data.corpus, data.queries, lists, dataset_revision=data.revision, query_prompt=query_prompt)


