"""One task x one retriever -> scores (model, hybrid, candidate subsets), run and result files."""

from __future__ import annotations

import difflib
import hashlib
import logging
import os
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import polars as pl

from r2med_plugin.version import __version__
from r2med_plugin.catalog import get_task_spec, unknown_name_message
from r2med_plugin.data.expansions import expansion_label, is_local, llm_name, load_expansions, parse_expansion, reasoning_llms_for
from r2med_plugin.data.loader import load_task
from r2med_plugin.evaluation.extras import bm25_run, bm25_variant_for, candidate_scores, hybrid_scores
from r2med_plugin.metrics import MIN_TOP_K, evaluate_run
from r2med_plugin.evaluation.official import (
    BM25_DEPTH,
    DENSE_K_VALUES,
    official_bm25_run,
    official_bm25_scores,
    official_dense_scores,
    official_model_name,
    write_json_atomic,
    write_official_results,
)
from r2med_plugin.reporting.export import TREC_DEPTH, model_folder_name, trec_tag, write_mteb_result, write_trec_run
from r2med_plugin.retrieval.candidates import restrict_run
from r2med_plugin.retrieval.dense import E5_TEMPLATE, Encoder, dense_search, effective_prompt, score_candidates
from r2med_plugin.retrieval.expansion import bm25_query, dense_query, expansion_text
from r2med_plugin.retrieval.ranking import truncate_run
from r2med_plugin.types import Run, TaskData

if TYPE_CHECKING:
    from r2med_plugin.evaluation.reranking import RerankInfo

logger = logging.getLogger(__name__)
BM25_RETRIEVERS = {"bm25-lucene": "lucene", "bm25-robertson": "robertson"}
CANDIDATE_SUBSETS = ("bm25", "dense", "hybrid")


@dataclass(frozen=True)
class TaskRunResult:
    task: str
    retriever: str
    expansion: str | None
    model_revision: str
    dataset_revision: str
    scores: dict[str, float]
    main_score: str
    run: Run
    evaluation_time: float
    data: TaskData
    rerank: RerankInfo | None = None  # set in the reranker mode (evaluate_task(..., rerank=...))
    official: dict[str, float] | None = None  # the official R2MED scores (layout official_layout)
    official_layout: str | None = None  # "bm25" or "dense"
    query_prompt: str | None = None  # the prompt the encoder got for queries (None: none; BM25: always None)
    dataset_revision_verified: bool = True  # False: a local mirror that does not prove its commit
    candidates_only: bool = False
    hybrid_with: str | None = None  # the BM25 fused with the model's run for hybrid_* (None: no hybrid)


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
    hybrid: bool = False,
) -> None:
    """Every check of ``evaluate_task``'s arguments that needs no data: run it for all tasks before the first."""
    spec = get_task_spec(task)
    if hybrid and candidates_only:
        raise ValueError("hybrid scores fuse full-corpus runs, which candidates_only skips: drop one of the two")
    unknown = [name for name in candidates if name not in CANDIDATE_SUBSETS]
    if unknown:
        raise ValueError(f"unknown candidate subset(s) {unknown}; choose from {list(CANDIDATE_SUBSETS)}")
    if candidates and not spec.candidate_profiles:
        raise ValueError(f"{spec.name} has no stored candidate lists; candidate subsets (--candidates) exist for the "
                         f"NanoR2MED tasks only: run {spec.name} in a command without --candidates")
    if candidates_only and not candidates:
        raise ValueError("candidates_only (--candidates-only) needs at least one candidate subset (--candidates bm25, dense or hybrid)")
    if expansion is None:
        return
    if candidates:
        raise ValueError("expansions apply to the R2MED tasks, candidate subsets to NanoR2MED: use one or the other")
    if ":" in expansion:  # a locally generated expansion ("local:..."): checked where it is read
        return
    known = [f"{method}/{llm_name(split)}" for method, splits in spec.gar_configs.items() for split in splits]
    if not known:
        raise ValueError(f"{spec.name} has no released expansions; they exist for the R2MED tasks")
    if expansion != "all" and expansion not in known:
        raise KeyError(unknown_name_message("expansion", expansion, [*known, "all"]))


_CUTOFF = re.compile(r"_at_(\d+)$")


def within_depth(scores: dict[str, float], top_k: int) -> dict[str, float]:
    """Drop metrics at cutoffs deeper than the run (with top_k=100, "recall_at_1000" would equal recall_at_100)."""
    return {key: value for key, value in scores.items() if not ((m := _CUTOFF.search(key)) and int(m.group(1)) > top_k)}


def _check_subsets(data: TaskData, candidates: Sequence[str]) -> list[str]:
    unknown = [name for name in candidates if name not in CANDIDATE_SUBSETS]
    if unknown:
        raise ValueError(f"unknown candidate subset(s) {unknown}; choose from {list(CANDIDATE_SUBSETS)}")
    if candidates and not data.candidates:
        raise ValueError(f"{data.name} has no stored candidate lists; candidate subsets exist for the NanoR2MED tasks only")
    return list(dict.fromkeys(candidates))


def hybrid_partner(data: TaskData, retriever: str | Encoder, expansion: str | None = None) -> str:
    """The BM25 that ``hybrid_*`` fuses with: the task's BM25, or the other variant for that same BM25.

    Fusing a BM25 run with itself would reproduce the plain run (hybrid == plain); an expanded BM25
    run differs from the plain-query BM25, so it keeps the task's variant.
    """
    own = f"bm25-{bm25_variant_for(data)}"
    if retriever == own and expansion is None:
        return next(name for name in BM25_RETRIEVERS if name != own)
    return own


def _hybrid(data: TaskData, run: Run, partner: str, show_progress: bool) -> dict[str, float]:
    return hybrid_scores(data, run, bm25_run(data, BM25_RETRIEVERS[partner], show_progress=show_progress))


def _model_run(data: TaskData, retriever: str | Encoder, depth: int, query_prompt: str | None, show_progress: bool) -> Run:
    if isinstance(retriever, str):
        return bm25_run(data, BM25_RETRIEVERS[retriever], top_k=depth, show_progress=show_progress)
    return dense_search(retriever, data.corpus, data.queries, dataset_revision=data.revision, query_prompt=query_prompt, top_k=depth)


def _expanded_queries(data: TaskData, expansion: str, data_dir: str | os.PathLike | None) -> tuple[str, bool, list[str], list[str]]:
    """(method, whether the LLM reasons, query texts, extracted expansion texts) for the task's
    evaluated queries, in order."""
    frame = load_expansions(data.name, expansion, data_dir=data_dir)
    by_id = dict(zip(frame["id"].to_list(), frame["hy_doc"].to_list()))
    query_ids, texts = data.queries["id"].to_list(), data.queries["text"].to_list()
    missing = [query_id for query_id in query_ids if query_id not in by_id]
    if missing:
        hint = "; finish it by running the same r2med generate command again" if is_local(expansion) else ""
        raise ValueError(f"the {expansion} expansion of {data.name} lacks {len(missing)} evaluated queries (e.g. {missing[0]!r}){hint}")
    method, llm = parse_expansion(data.spec, expansion) if is_local(expansion) else expansion.split("/", 1)
    reasoning_llms = reasoning_llms_for(data.spec, expansion)
    expansions = [expansion_text(by_id[query_id], llm, reasoning_llms) for query_id in query_ids]
    return method, llm in reasoning_llms, texts, expansions


def _bm25_queries(data: TaskData, expansion: str | None, data_dir: str | os.PathLike | None) -> pl.DataFrame:
    """The query texts BM25 searches with: the task's, or combined with an expansion by the official rule."""
    if expansion is None:
        return data.queries
    method, reasoning, texts, expansions = _expanded_queries(data, expansion, data_dir)
    combined = [bm25_query(method, t, e, reasoning=reasoning) for t, e in zip(texts, expansions)]
    return data.queries.with_columns(text=pl.Series(combined, dtype=pl.Utf8))


def _expansion_run(
    data: TaskData, retriever: str | Encoder, expansion: str, top_k: int, query_prompt: str | None,
    data_dir: str | os.PathLike | None, show_progress: bool,
) -> Run:
    if isinstance(retriever, str):
        queries = _bm25_queries(data, expansion, data_dir)
        return bm25_run(data, BM25_RETRIEVERS[retriever], top_k=top_k, queries=queries, show_progress=show_progress)
    method, reasoning, texts, expansions = _expanded_queries(data, expansion, data_dir)
    single = [dense_query(method, t, e, reasoning=reasoning) for t, e in zip(texts, expansions)]
    if single and single[0] is not None:
        queries = data.queries.with_columns(text=pl.Series(single, dtype=pl.Utf8))
        return dense_search(retriever, data.corpus, queries, dataset_revision=data.revision, query_prompt=query_prompt, top_k=top_k)
    return dense_search(
        retriever, data.corpus, data.queries, dataset_revision=data.revision, query_prompt=query_prompt, top_k=top_k, mix_with=expansions
    )


def evaluate_task(
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
    rerank_depth: int = 10,
    first_stage_name: str | None = None,
    rerank_batch_size: int = 32,
) -> TaskRunResult:
    """Evaluate ``retriever`` ("bm25-lucene", "bm25-robertson" or an encoder) on ``task``.

    Full-corpus scores (main: ndcg_at_10), plus ``hybrid_*`` (RRF with the task's BM25) when ``hybrid``,
    plus ``candidates_<subset>_*`` for each requested stored list. With ``candidates_only`` an encoder
    encodes just the union of the candidate documents and the full-corpus scores are skipped.
    ``expansion`` ("method/llm", R2MED tasks) combines each query with a released LLM expansion by the
    official rules (see r2med_plugin.retrieval.expansion); "local:<folder>/<method>/<llm>" uses one made
    by ``r2med generate`` (r2med_plugin.generation) the same way.

    ``rerank`` (a cross-encoder, or its name or folder) switches to the official reranker mode: the top
    ``rerank_depth`` documents of ``first_stage`` (default: ``retriever``; else a BM25 name, an encoder,
    a TREC or topk_docs run file or folder, or a run dict) are reranked and only they are scored; the
    first stage's own scores come as ``first_stage_*`` (see r2med_plugin.evaluation.reranking).
    """
    if rerank is not None:
        return _evaluate_reranked(
            task, retriever, rerank, first_stage, depth=rerank_depth, first_stage_name=first_stage_name,
            batch_size=rerank_batch_size, hybrid=hybrid, candidates=candidates, expansion=expansion, data_dir=data_dir,
            accept_drift=accept_drift, query_prompt=query_prompt, show_progress=show_progress,
        )
    if first_stage is not None:
        raise ValueError("first_stage is the input of a reranker: pass rerank=<cross-encoder> too")
    if isinstance(retriever, str) and retriever not in BM25_RETRIEVERS:
        raise ValueError(f"unknown retriever {retriever!r}: use one of {sorted(BM25_RETRIEVERS)} or an encoder")
    if hybrid and candidates_only:
        raise ValueError("hybrid scores fuse full-corpus runs, which candidates_only skips: drop one of the two")
    if top_k < MIN_TOP_K:
        raise ValueError(f"top_k (--top-k) must be at least {MIN_TOP_K}: the main score is ndcg_at_10; got {top_k}")
    if not isinstance(retriever, str) and not isinstance(retriever, Encoder):
        raise TypeError("retriever must be a BM25 name or an encoder with name, revision and encode(texts, kind=...)")
    if isinstance(retriever, str) and query_prompt:
        raise ValueError(f"a query prompt (--instruction) applies to encoders only; {retriever} would ignore it: leave it out")
    started = time.perf_counter()
    data = load_task(task, data_dir=data_dir, accept_drift=accept_drift)
    subsets = _check_subsets(data, candidates)
    if expansion is not None:
        parse_expansion(data.spec, expansion)
        if subsets:
            raise ValueError("expansions apply to the R2MED tasks, candidate subsets to NanoR2MED: use one or the other")
    if candidates_only and not subsets:
        raise ValueError("candidates_only needs at least one candidate subset (bm25, dense or hybrid)")
    scores: dict[str, float] = {}
    partner = hybrid_partner(data, retriever, expansion) if hybrid and not candidates_only else None
    if candidates_only and not isinstance(retriever, str):
        union = {q: [d for key in subsets for d in data.candidates[key].get(q, [])] for q in data.qrels}
        run = score_candidates(retriever, data.corpus, data.queries, union, dataset_revision=data.revision, query_prompt=query_prompt)
    elif expansion is not None:
        run = _expansion_run(data, retriever, expansion, top_k, query_prompt, data_dir, show_progress)
        scores |= within_depth(evaluate_run(data.qrels, run), top_k)
        if hybrid:
            scores |= _hybrid(data, run, partner, show_progress)
    else:
        depth = data.corpus.height if subsets else top_k
        run = _model_run(data, retriever, depth, query_prompt, show_progress)
        if not candidates_only:
            scores |= within_depth(evaluate_run(data.qrels, truncate_run(run, top_k)), top_k)
            if hybrid:
                scores |= _hybrid(data, truncate_run(run, top_k), partner, show_progress)
    scores |= candidate_scores(data, run, subsets)
    official, layout = (None, None)
    if not candidates_only:
        official, layout = _official(data, retriever, run, expansion, data_dir, show_progress)
    if candidates_only:
        first = subsets[0]
        main = f"candidates_{first}_ndcg_at_10" + ("_with_safeguard" if first == "hybrid" else "")
    else:
        main = "ndcg_at_10"
    return TaskRunResult(
        task=data.name,
        retriever=retriever if isinstance(retriever, str) else retriever.name,
        expansion=expansion,
        model_revision=f"r2med-plugin-{__version__}" if isinstance(retriever, str) else retriever.revision,
        dataset_revision=data.revision,
        scores=scores,
        main_score=main,
        run=_saved_run(data, run, subsets, top_k, candidates_only=candidates_only, expansion=expansion),
        evaluation_time=time.perf_counter() - started,
        data=data,
        official=official,
        official_layout=layout,
        query_prompt=None if isinstance(retriever, str) else effective_prompt(retriever, "query", query_prompt),
        dataset_revision_verified=data.revision_verified,
        candidates_only=candidates_only,
        hybrid_with=partner,
    )


def _saved_run(data: TaskData, run: Run, subsets: Sequence[str], top_k: int, *, candidates_only: bool, expansion: str | None) -> Run:
    """The run a result keeps (and --trec writes): a candidates-only run holds the candidates only, also
    for BM25, whose ranking covers the whole corpus."""
    if candidates_only:
        union = {q: list(dict.fromkeys(d for key in subsets for d in data.candidates[key].get(q, []))) for q in data.qrels}
        return restrict_run(run, union)
    return run if expansion else truncate_run(run, top_k)


def _evaluate_reranked(task: str, retriever, rerank, first_stage, *, hybrid, candidates, expansion, data_dir, accept_drift, **options) -> TaskRunResult:
    from r2med_plugin.evaluation.reranking import evaluate_reranked

    if hybrid or candidates or expansion is not None:
        raise ValueError("reranking takes one first stage: drop hybrid, candidates and expansion (rerank their run file instead)")
    if first_stage is None and retriever is None:
        raise ValueError("reranking needs a first stage: pass first_stage= (BM25 name, encoder, run file) or a retriever")
    if first_stage is not None and retriever is not None and first_stage != retriever:
        raise ValueError("give the first stage once: as first_stage= (or as the retriever), not both")
    started = time.perf_counter()
    data = load_task(task, data_dir=data_dir, accept_drift=accept_drift)
    return evaluate_reranked(data, rerank, first_stage if first_stage is not None else retriever, started=started, **options)


def _official(
    data: TaskData, retriever: str | Encoder, run: Run, expansion: str | None,
    data_dir: str | os.PathLike | None, show_progress: bool,
) -> tuple[dict[str, float] | None, str | None]:
    """The official R2MED scores of the full-corpus ``run``: BM25 layout for BM25, dense layout for encoders."""
    if not isinstance(retriever, str):
        depth = min(max(DENSE_K_VALUES), data.corpus.height - 1)
        if any(len(ranked) < depth for ranked in run.values()):
            logger.warning("%s: the run is shallower than %d documents: no official R2MED file (raise --top-k)", data.name, depth)
            return None, None
        return official_dense_scores(data.qrels, run), "dense"
    official_run = official_bm25_run(run, data.corpus["id"].to_list(), BM25_DEPTH)
    if official_run is None:  # a tie at rank 100 reaches past the run's depth: rank again with corpus-order ties
        queries = _bm25_queries(data, expansion, data_dir)
        official_run = bm25_run(
            data, BM25_RETRIEVERS[retriever], top_k=BM25_DEPTH, queries=queries, show_progress=show_progress, ties="corpus"
        )
    return official_bm25_scores(data.qrels, official_run), "bm25"


def official_query_prompt(spec_or_data: object) -> str:
    """The official instruction prompt of a task ("Instruct: <instruction>\nQuery: "), what --instruction uses."""
    spec = getattr(spec_or_data, "spec", spec_or_data)
    return E5_TEMPLATE.format(instruction=spec.instruction)


def prompt_suffix(result: TaskRunResult) -> str:
    """"+instruction" for the task's official prompt, "+prompt-<hash>" for any other, "" for none.

    An empty prompt is not "none": it switches off a model's built-in query prompt, so it is filed apart."""
    if result.query_prompt is None:
        return ""
    if result.query_prompt == official_query_prompt(result.data):
        return "+instruction"
    return "+prompt-" + hashlib.sha256(result.query_prompt.encode("utf-8")).hexdigest()[:8]


def result_model_name(result: TaskRunResult) -> str:
    """The model name results are filed under: the retriever, prefixed by the expansion ("hyde/o3-mini+bm25-lucene")
    and suffixed by the query prompt ("+instruction"), so runs with and without a prompt never overwrite each other."""
    if result.expansion and is_local(result.expansion):  # "local/hyde/my-llm+bm25-lucene"
        name = f"{expansion_label(result.data.spec, result.expansion)}+{result.retriever}"
    else:
        name = f"{result.expansion}+{result.retriever}" if result.expansion else result.retriever
    return name + prompt_suffix(result)


def dataset_count_drift(data: TaskData) -> dict[str, dict[str, int]]:
    """How the data's counts differ from the dataset card's (evaluated with --accept-drift); {} when they match."""
    return {} if data.report.get("synthetic_sample") else dict(data.report.get("count_drift") or {})


def provenance(result: TaskRunResult) -> dict[str, object]:
    """What a result file records about how it was produced, beyond the scores."""
    return {
        "model_name": result_model_name(result),
        "model_revision": result.model_revision,
        "query_prompt": result.query_prompt,
        "top_k": len(max(result.run.values(), key=len, default={})) if not result.candidates_only else None,
        "dataset_revision": result.dataset_revision,
        "dataset_revision_verified": result.dataset_revision_verified,
        "dataset_revision_recorded": result.data.result_revision,
        "dataset_source": result.data.source,
        "dataset_files_fingerprint": result.data.files_fingerprint,
        "dataset_count_drift": dataset_count_drift(result.data),
        "r2med_plugin_version": __version__,
    }


def write_outputs(
    result: TaskRunResult, output_dir: str | os.PathLike, *, trec: bool = False, trec_depth: int = TREC_DEPTH
) -> dict[str, Path]:
    """MTEB-format result, the official R2MED JSON (when full-corpus scores exist) and optionally a TREC run.

    A candidate-only result goes to ``candidates-only/`` (and its run to ``<Task>.candidates-only.trec``),
    never where a full-corpus result of the same model is read or written.
    """
    if result.rerank is not None:
        from r2med_plugin.evaluation.reranking import write_reranked_outputs

        return write_reranked_outputs(result, output_dir, trec=trec)
    output = Path(output_dir)
    model_name = result_model_name(result)
    # official/ and runs/ mirror MTEB's results/<model>/<revision>/: another revision never overwrites them
    filed_as = Path(model_folder_name(model_name)) / result.model_revision
    extra = {"r2med_hybrid_with": result.hybrid_with} if result.hybrid_with else {}
    paths = {
        "mteb": write_mteb_result(
            output, spec=result.data.spec, task_name=result.task, model_name=model_name,
            model_revision=result.model_revision, dataset_revision=result.data.result_revision, scores=result.scores,
            main_score=result.main_score, evaluation_time=result.evaluation_time, provenance=provenance(result),
            candidates_only=result.candidates_only, extra_fields=extra,
        )
    }
    if result.official is not None:
        paths["official"] = write_official_results(
            output / "official" / filed_as / f"{result.task}.json",
            dataset_name=result.data.spec.hub_name, model_name=official_model_name(result.retriever), scores=result.official,
            evaluation_time=result.evaluation_time,
        )
        # The official file keeps the official code's keys; how it was produced goes beside it.
        paths["official_metadata"] = write_json_atomic(
            output / "official" / filed_as / f"{result.task}.metadata.json", provenance(result)
        )
    if trec:
        name = f"{result.task}.candidates-only.trec" if result.candidates_only else f"{result.task}.trec"
        paths["trec"] = write_trec_run(
            output / "runs" / filed_as / name, result.run, trec_tag(model_name), depth=trec_depth
        )
    return paths


def rerank_candidates(
    model_or_retriever: str | Encoder,
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
    (subset,) = _check_subsets(data, [subset])
    lists = {query_id: ids for query_id, ids in data.candidates[subset].items() if query_id in data.qrels}
    if isinstance(model_or_retriever, str):
        if model_or_retriever not in BM25_RETRIEVERS:
            raise ValueError(f"unknown retriever {model_or_retriever!r}: use one of {sorted(BM25_RETRIEVERS)} or an encoder")
        full = bm25_run(data, BM25_RETRIEVERS[model_or_retriever], top_k=data.corpus.height, show_progress=False)
        return restrict_run(full, lists)
    return score_candidates(model_or_retriever, data.corpus, data.queries, lists, dataset_revision=data.revision, query_prompt=query_prompt)
