"""An evaluation plan: the task, the first stage, an optional reranker and the scorers, built and checked once.

``build_plan`` takes what ``evaluate_task`` takes (the CLI, ``r2med sweep``, ``r2med reproduce`` and the
Python API all come through it) and refuses every request that needs no data to be found wrong, before
the first task loads. ``r2med_plugin.evaluation.runner.execute`` carries a plan out.
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from r2med_plugin.catalog import get_task_spec
from r2med_plugin.evaluation.first_stages import (
    BM25_RETRIEVERS,
    Bm25,
    Dense,
    FirstStage,
    StoredCandidates,
    as_first_stage,
)
from r2med_plugin.evaluation.request import Scoring, scoring_of
from r2med_plugin.evaluation.rerankers import as_reranker
from r2med_plugin.evaluation.scorers import CandidateSubsets, FullCorpus, Hybrid, OfficialLayout, Reranked, Scorer
from r2med_plugin.llm.rerankers import is_llm_reranker_name
from r2med_plugin.metrics import check_rerank_depth
from r2med_plugin.models.protocols import PlainEncoder as Encoder  # what a user's encoder needs (as_encoder)
from r2med_plugin.types import TaskSpec


@dataclass(frozen=True)
class EvaluationPlan:
    """What one evaluation of one task does. ``first_stage`` retrieves (``search``) or, with a ``reranker``,
    gives the run the reranker reranks (``ranked``); the scorers' numbers go into the result in order."""

    task: str
    first_stage: Bm25 | Dense | StoredCandidates | FirstStage
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

    @property
    def hybrid_with(self) -> str | None:
        """The BM25 a Hybrid scorer fuses the run with (recorded in the result), or None."""
        return next((scorer.partner for scorer in self.scorers if isinstance(scorer, Hybrid)), None)


def check_retriever_name(name: str) -> None:
    """Refuse a near-miss BM25 name ("bm25", "BM25-lucene") before anything tries to load it as a model.

    A model folder or a hub name ("org/name") passes; loading it is the encoder's job.
    """
    if name in BM25_RETRIEVERS or "/" in name or Path(name).exists():
        return
    lowered = name.lower()
    close = difflib.get_close_matches(lowered, list(BM25_RETRIEVERS), n=2, cutoff=0.6)
    if "bm25" in lowered or close:
        guess = close or list(BM25_RETRIEVERS)
        raise ValueError(
            f"unknown retriever {name!r}. Did you mean {' or '.join(repr(g) for g in guess)}? The BM25 retrievers are "
            "'bm25-lucene' (the official R2MED BM25: Lucene analyzer, k1=0.9, b=0.4) and 'bm25-robertson' "
            "(bm25s, k1=1.5, b=0.75: how NanoR2MED's stored bm25 lists were built); anything else is loaded as a model"
        )


def check_arguments(
    task: str, *, candidates: Sequence[str] = (), candidates_only: bool = False, expansion: str | None = None,
    hybrid: bool = False, top_k: int = 1000,
) -> Scoring:
    """Every check of ``evaluate_task``'s arguments that needs no data (``Scoring`` owns them): run it for all tasks
    before the first. Returns the checked scoring settings."""
    scoring = scoring_of(top_k=top_k, hybrid=hybrid, candidates=candidates, candidates_only=candidates_only,
                         expansion=expansion)
    scoring.check_task(get_task_spec(task))
    return scoring


def hybrid_partner(spec: TaskSpec, retriever: str | Encoder, expansion: str | None = None) -> str:
    """The BM25 that ``hybrid_*`` fuses with: the task's BM25, or the other variant for that same BM25.

    Fusing a BM25 run with itself would reproduce the plain run (hybrid == plain); an expanded BM25
    run differs from the plain-query BM25, so it keeps the task's variant.
    """
    own = spec.own_bm25
    if retriever == own and expansion is None:
        return next(name for name in BM25_RETRIEVERS if name != own)
    return own


def build_plan(
    task: str,
    retriever: str | Encoder | None = None,
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
) -> EvaluationPlan:
    """The plan ``evaluate_task`` runs (see there); every error that needs no data is raised here."""
    common = dict(data_dir=data_dir, accept_drift=accept_drift, show_progress=show_progress)
    if bm25_workers is not None:
        from r2med_plugin.retrieval.analyzed import resolve_workers

        resolve_workers(bm25_workers)  # a bad value is refused before any work
    if rerank is not None:
        plan = _rerank_plan(task, retriever, rerank, first_stage, query_prompt=query_prompt,
                            depth=10 if rerank_depth is None else rerank_depth, name=first_stage_name,
                            batch_size=32 if rerank_batch_size is None else rerank_batch_size, hybrid=hybrid,
                            candidates=candidates, expansion=expansion, workers=bm25_workers, top_k=top_k, **common)
        return _refuse_unused_workers(plan, bm25_workers)
    if first_stage is not None:
        raise ValueError("first_stage is the input of a reranker: pass rerank=<cross-encoder> too")
    given = {"rerank_depth": rerank_depth, "first_stage_name": first_stage_name, "rerank_batch_size": rerank_batch_size}
    unused = [name for name, value in given.items() if value is not None]
    if unused:  # an option that would reach no code, as the CLI refuses it
        raise ValueError(f"{unused[0]} configures a reranker (rerank=...), which is not given: drop it")
    stage = _retriever_stage(retriever, query_prompt, expansion, data_dir, bm25_workers)
    subsets = check_arguments(task, candidates=candidates, candidates_only=candidates_only, expansion=expansion,
                              hybrid=hybrid, top_k=top_k).candidates
    spec = get_task_spec(task)
    partner = hybrid_partner(spec, retriever, expansion) if hybrid and not candidates_only else None
    scorers: list[Scorer] = []
    if candidates_only:
        stage = StoredCandidates(stage, subsets)
    else:
        scorers.append(FullCorpus(top_k))
        if partner:
            scorers.append(Hybrid(partner, top_k, workers=bm25_workers))
    scorers.append(CandidateSubsets(subsets))
    if not candidates_only:
        scorers.append(OfficialLayout(stage if isinstance(stage, Bm25) else None))
    plan = EvaluationPlan(task=task, first_stage=stage, scorers=tuple(scorers), top_k=top_k, expansion=expansion,
                          candidate_subsets=subsets, candidates_only=candidates_only, **common)
    return _refuse_unused_workers(plan, bm25_workers)


def _refuse_unused_workers(plan: EvaluationPlan, workers: int | None) -> EvaluationPlan:
    """bm25_workers parallelises bm25-lucene's corpus analysis: refused when the plan runs no bm25-lucene."""
    stage = plan.first_stage.retriever if isinstance(plan.first_stage, StoredCandidates) else plan.first_stage
    lucene = (isinstance(stage, Bm25) and stage.variant == "lucene") or any(
        isinstance(scorer, Hybrid) and scorer.partner == "bm25-lucene" for scorer in plan.scorers)
    if workers is not None and not lucene:
        raise ValueError("bm25_workers (--workers) sets the processes of bm25-lucene's corpus analysis, and this plan runs "
                         "no bm25-lucene: drop it")
    return plan


def _retriever_stage(retriever: object, query_prompt: str | None, expansion: str | None,
                     data_dir: str | os.PathLike | None, workers: int | None) -> Bm25 | Dense:
    if isinstance(retriever, str):
        if retriever not in BM25_RETRIEVERS:
            raise ValueError(f"unknown retriever {retriever!r}: use one of {sorted(BM25_RETRIEVERS)} or an encoder "
                             f"(a model by name: r2med_plugin.load_encoder({retriever!r}))")
        if query_prompt:
            raise ValueError(f"a query prompt (--instruction) applies to encoders only; {retriever} would ignore it: leave it out")
        return Bm25(retriever, expansion, data_dir, workers)
    if not isinstance(retriever, Encoder):
        raise TypeError("retriever must be a BM25 name or an encoder with name, revision and encode(texts, kind=...)")
    return Dense(retriever, query_prompt, expansion, data_dir)


def _rerank_plan(task: str, retriever, rerank, first_stage, *, query_prompt, depth, name, batch_size, hybrid, candidates,
                 expansion, workers, top_k, **common) -> EvaluationPlan:
    from r2med_plugin.retrieval.rerank import check_depth

    if hybrid or candidates or expansion is not None:
        raise ValueError("reranking takes one first stage: drop hybrid, candidates and expansion (rerank their run file instead)")
    if first_stage is None and retriever is None:
        raise ValueError("reranking needs a first stage: pass first_stage= (BM25 name, encoder, run file) or a retriever")
    if first_stage is not None and retriever is not None and first_stage != retriever:
        raise ValueError("give the first stage once: as first_stage= (or as the retriever), not both")
    get_task_spec(task)
    scoring_of(top_k=top_k)  # the depth of the first stage's own result, where first_stage_* is scored
    check_depth(depth)
    check_rerank_depth(depth)
    stage = as_first_stage(first_stage if first_stage is not None else retriever, query_prompt=query_prompt, name=name,
                           bm25_workers=workers)
    if is_llm_reranker_name(rerank):  # refused here, before any data loads: an LLM reranker needs its endpoint
        rerank = as_reranker(rerank)
    return EvaluationPlan(task=task, first_stage=stage, scorers=(Reranked(),), top_k=top_k, reranker=rerank, rerank_depth=depth,
                          rerank_batch_size=batch_size, **common)


def extra_scorers(spec: TaskSpec) -> tuple[Scorer, ...]:
    """What every run of a task reports next to the model's own metrics (the mteb tasks' extra scores):
    hybrid with the task's BM25, and each stored candidate list (NanoR2MED)."""
    return Hybrid(spec.own_bm25, 1000), CandidateSubsets(tuple(spec.candidate_configs))
