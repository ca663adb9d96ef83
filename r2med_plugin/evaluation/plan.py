"""How ``execute`` carries out an EvaluationRequest: its stages (first stage, optional reranker) and scorers.

Internal to ``r2med_plugin.evaluation.runner.execute``, the one entry (``execute(request, data=None)``); not part of the
public API. ``request_of``/``as_request`` turn ``evaluate_task``'s keyword arguments into the request.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from r2med_plugin.catalog import get_task_spec
from r2med_plugin.errors import UserError
from r2med_plugin.evaluation.first_stages import (
    BM25_RETRIEVERS,
    Bm25,
    Dense,
    FirstStage,
    SearchStage,
    StoredCandidates,
    as_first_stage,
)
from r2med_plugin.evaluation.request import EvaluationRequest, TaskArguments
from r2med_plugin.evaluation.reranker_stage import as_reranker
from r2med_plugin.evaluation.scorers import CandidateSubsets, FullCorpus, Hybrid, OfficialLayout, Reranked, Scorer
from r2med_plugin.evaluation.specs import (
    Bm25Spec,
    CrossEncoderSpec,
    FirstStageSpec,
    LlmRerankerSpec,
    ModelSpec,
    PrebuiltFirstStage,
    PrebuiltReranker,
    RerankerSpec,
    RunFileSpec,
)
from r2med_plugin.llm.reranker_kinds import is_llm_reranker_name
from r2med_plugin.models.protocols import PlainEncoder, as_encoder  # what a user's encoder needs (as_encoder adapts it)
from r2med_plugin.rules import SettingError
from r2med_plugin.types import TaskSpec


@dataclass(frozen=True)
class Plan:
    """What one evaluation of one task does. ``first_stage`` retrieves (``search``) or, with a ``reranker``,
    gives the run the reranker reranks (``ranked``); the scorers' numbers go into the result in order."""

    task: str
    first_stage: SearchStage | FirstStage
    scorers: tuple[Scorer, ...]
    top_k: int = 1000
    reranker: object | None = None  # a Reranker, a pair scorer, or a cross-encoder's name (loaded when the plan runs)
    rerank_depth: int = 10
    rerank_batch_size: int = 32
    expansion: str | None = None
    candidate_subsets: tuple[str, ...] = ()
    candidates_only: bool = False
    data_dir: str | os.PathLike | None = None
    accept_drift: bool | None = None
    show_progress: bool = True
    request: Mapping[str, Any] | None = field(default=None, compare=False)  # EvaluationRequest.recorded()

    @property
    def hybrid_with(self) -> str | None:
        """The BM25 a Hybrid scorer fuses the run with (recorded in the result), or None."""
        return next((scorer.partner for scorer in self.scorers if isinstance(scorer, Hybrid)), None)


DEFAULT_ARGUMENTS = TaskArguments()  # every argument at its default (frozen)


def as_request(task: str | EvaluationRequest, retriever: object, arguments: Mapping[str, Any] | TaskArguments,
               what: str = "evaluate_task") -> EvaluationRequest:
    """``task`` if it is an EvaluationRequest (then nothing else may be given: no argument, or every one at its
    default), else ``request_of`` the arguments (by keyword, or as ``TaskArguments``)."""
    if isinstance(task, EvaluationRequest):
        given = arguments != DEFAULT_ARGUMENTS if isinstance(arguments, TaskArguments) else bool(arguments)
        if retriever is not None or given:
            raise TypeError(f"{what}(request) takes the request alone: its settings are its own (dataclasses.replace "
                            "changes one)")
        return task
    return request_of(task, retriever, arguments if isinstance(arguments, TaskArguments) else TaskArguments.of(arguments, what))


def request_of(task: str, retriever: object = None, arguments: TaskArguments = DEFAULT_ARGUMENTS) -> EvaluationRequest:
    """``evaluate_task``'s arguments as an EvaluationRequest; objects (an encoder, a reranker) are kept as given."""
    given = arguments
    environment = partial(EvaluationRequest, data_dir=None if given.data_dir is None else os.fspath(given.data_dir),
                          accept_drift=given.accept_drift, show_progress=given.show_progress, bm25_workers=given.bm25_workers)
    if given.rerank is None:
        if given.first_stage is not None:
            raise UserError("first_stage is the input of a reranker: pass rerank=<cross-encoder> too")
        unused = [name for name in ("rerank_depth", "first_stage_name", "rerank_batch_size") if getattr(given, name) is not None]
        if unused:  # an option that would reach no code, as the CLI refuses it
            raise UserError(f"{unused[0]} configures a reranker (rerank=...), which is not given: drop it")
        return environment(task, _retriever_spec(retriever, given.query_prompt), scoring=given.scoring)
    if given.first_stage is None and retriever is None:
        raise UserError("reranking needs a first stage: pass first_stage= (BM25 name, encoder, run file) or a retriever")
    if given.first_stage is not None and retriever is not None and given.first_stage != retriever:
        raise UserError("give the first stage once: as first_stage= (or as the retriever), not both")
    source = given.first_stage if given.first_stage is not None else retriever
    return environment(task, _first_stage_spec(source, given.query_prompt), _reranker_spec(given),
                       scoring=given.scoring, first_stage_name=given.first_stage_name)


def _reranker_spec(given: TaskArguments) -> CrossEncoderSpec | LlmRerankerSpec | PrebuiltReranker:
    """What the Python API reranks with: a spec (its depth and batch size are its own), a name or an object."""
    rerank = given.rerank
    if isinstance(rerank, (CrossEncoderSpec, LlmRerankerSpec)):
        return rerank
    if is_llm_reranker_name(rerank):  # refused here, before any data loads: an LLM reranker needs its endpoint
        rerank = as_reranker(rerank)
    depth = 10 if given.rerank_depth is None else given.rerank_depth
    return PrebuiltReranker(rerank, depth=depth, batch_size=given.rerank_batch_size)


def _retriever_spec(retriever: object, query_prompt: str | None) -> Bm25Spec | ModelSpec | PrebuiltFirstStage:
    """What the Python API searches with: a BM25 name, a model's name (mteb's registry, sentence-transformers, a folder,
    minilm-packaged, openai:<model> needs its endpoint: a ModelSpec), an encoder object, or a spec naming one."""
    if isinstance(retriever, (Bm25Spec, ModelSpec)):
        if query_prompt:
            raise UserError("query_prompt applies to an encoder object; a ModelSpec sets instruction=True")
        return retriever
    if isinstance(retriever, str):
        if retriever not in BM25_RETRIEVERS:  # a model by name, as `r2med evaluate --retriever` takes it
            if query_prompt:
                raise SettingError(f"a query prompt ({{query_prompt}}) goes with an encoder object; {retriever} is a name: "
                                   f"pass r2med_plugin.load_encoder({retriever!r}) with it, or ModelSpec({retriever!r}, "
                                   "instruction=True) for the official instruction", field="query_prompt")
            return ModelSpec(retriever)
        if query_prompt:
            raise SettingError("a query prompt ({query_prompt}) applies to encoders only; "
                               f"{retriever} would ignore it: leave it out", field="query_prompt")
        return Bm25Spec(retriever)
    if not isinstance(retriever, (PlainEncoder, SearchStage)):
        raise TypeError("retriever must be a BM25 name, an encoder with name, revision and encode(texts, kind=...), or a "
                        "first stage with name, revision and search(data, depth)")
    return PrebuiltFirstStage(retriever, query_prompt)


def _first_stage_spec(value: object, query_prompt: str | None) -> FirstStageSpec:
    """What the Python API reranks: a BM25 name, a run file or folder, or an object (encoder, run dict, stage)."""
    if isinstance(value, (Bm25Spec, ModelSpec, RunFileSpec)):
        return value
    if isinstance(value, str) and value in BM25_RETRIEVERS:
        if query_prompt:
            raise SettingError("a query prompt ({query_prompt}) is for encoders; "
                               f"the {value} first stage would ignore it: leave it out", field="query_prompt")
        return Bm25Spec(value)
    if isinstance(value, (str, os.PathLike)):
        if query_prompt:
            raise SettingError("a query prompt ({query_prompt}) is for encoders; "
                               "a run file is read, not searched: leave it out", field="query_prompt")
        return RunFileSpec(os.fspath(value))
    if not isinstance(value, (PlainEncoder, FirstStage, Mapping)):
        raise TypeError(f"first_stage must be {sorted(BM25_RETRIEVERS)}, an encoder, a run file or folder, or a run dict; "
                        f"got {type(value).__name__}")
    return PrebuiltFirstStage(value, query_prompt)


def plan_of(request: EvaluationRequest) -> Plan:
    """The stages that carry ``request`` out; a model the request's specs name loads here, unless a front end loaded it
    once for several requests (``EvaluationRequest.with_loaded``)."""
    common = partial(Plan, data_dir=request.data_dir, accept_drift=request.accept_drift,
                     show_progress=request.show_progress, request=request.recorded())
    if request.reranker is not None:
        return _rerank_plan(request, request.reranker, common)
    scoring, expansion = request.scoring, request.scoring.expansion
    searched = _search_stage(request)
    stage: Bm25 | Dense | StoredCandidates | SearchStage = searched
    scorers: list[Scorer] = []
    if scoring.candidates_only:
        if not isinstance(searched, (Bm25, Dense)):
            raise SettingError(f"{{candidates_only}} scores the stored lists with BM25 or an encoder; {searched.name} "
                               "searches the corpus its own way: drop {candidates_only}", field="candidates_only")
        stage = StoredCandidates(searched, scoring.candidates)
    else:
        scorers.append(FullCorpus(scoring.top_k))
        if request.hybrid_partner:
            scorers.append(Hybrid(request.hybrid_partner, scoring.top_k, workers=request.bm25_workers))
    scorers.append(CandidateSubsets(scoring.candidates))
    if not scoring.candidates_only:
        scorers.append(OfficialLayout(stage if isinstance(stage, Bm25) else None))
    return common(task=request.task, first_stage=stage, scorers=tuple(scorers), top_k=scoring.top_k,
                  expansion=expansion, candidate_subsets=scoring.candidates, candidates_only=scoring.candidates_only)


def _query_prompt(request: EvaluationRequest) -> str | None:
    first = request.first_stage
    if isinstance(first, PrebuiltFirstStage):
        return first.query_prompt
    if isinstance(first, ModelSpec) and first.instruction:
        from r2med_plugin.evaluation.naming import official_query_prompt

        return official_query_prompt(get_task_spec(request.task))
    return None


def _first_stage_value(request: EvaluationRequest) -> object:
    first = request.first_stage
    if isinstance(first, Bm25Spec):
        return first.variant
    if isinstance(first, ModelSpec):
        return first.load(show_progress=request.show_progress)
    if isinstance(first, RunFileSpec):
        return first.path
    return first.value


def _search_stage(request: EvaluationRequest) -> Bm25 | Dense | SearchStage:
    value, expansion = _first_stage_value(request), request.scoring.expansion
    if isinstance(value, str):
        index = request.first_stage.loaded if isinstance(request.first_stage, Bm25Spec) else None
        return Bm25(value, expansion, request.data_dir, request.bm25_workers, index=index)
    if isinstance(value, (Bm25, Dense, StoredCandidates)):  # the package's own stage: its settings belong in the request
        raise UserError(f"{type(value).__name__}({value.name!r}) is one of the package's own first stages: give its name "
                        "(a BM25 name) or its encoder as the retriever, and its expansion and workers as expansion= and "
                        "bm25_workers=, so that the result is named and fused by them")
    if isinstance(value, SearchStage) and not isinstance(value, PlainEncoder):  # a first stage of the user's own
        if expansion is not None:
            raise SettingError(f"{{expansion}} is applied by the package's own BM25 and encoders; {value.name} searches "
                               "with its own queries: drop {expansion}", field="expansion")
        return value
    return Dense(as_encoder(value), _query_prompt(request), expansion, request.data_dir)


def _rerank_plan(request: EvaluationRequest, spec: RerankerSpec, common: Callable[..., Plan]) -> Plan:
    stage = as_first_stage(_first_stage_value(request), query_prompt=_query_prompt(request),
                           name=request.first_stage_name, bm25_workers=request.bm25_workers)
    loaded = spec.load()
    batch_size = None if isinstance(spec, LlmRerankerSpec) else spec.batch_size
    return common(task=request.task, first_stage=stage, scorers=(Reranked(),), top_k=request.scoring.top_k,
                  reranker=loaded, rerank_depth=spec.depth, rerank_batch_size=32 if batch_size is None else batch_size)


def extra_scorers(spec: TaskSpec) -> tuple[Scorer, ...]:
    """What every run of a task reports next to the model's own metrics (the mteb tasks' extra scores):
    hybrid with the task's BM25, and each stored candidate list (NanoR2MED)."""
    return Hybrid(spec.own_bm25, 1000), CandidateSubsets(tuple(spec.candidate_configs))
