"""Writers: a result's files. Each writer writes one kind of file and returns {kind: path}.

- :func:`write_mteb` — the MTEB TaskResult JSON (ResultCache layout), or ``candidates-only/`` for a
  candidate-only result;
- :func:`write_official` — the official R2MED JSON and its ``.metadata.json`` (full-corpus results), or the
  official reranker JSON;
- :func:`write_trec` — the TREC run (and a reranked result's first-stage run beside it);
- :func:`write_reasoning` — a reasoning reranker's traces, beside the MTEB result.

``write_outputs`` runs them in that order. Files are filed by model and model revision, as MTEB's
``results/<model>/<revision>/`` is, so another revision never overwrites them.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

from r2med_plugin.evaluation.naming import dataset_count_drift, result_model_name
from r2med_plugin.evaluation.per_query import write_result_per_query
from r2med_plugin.evaluation.result import TaskRunResult
from r2med_plugin.identifiers import is_hakari_bm25
from r2med_plugin.io import write_json_atomic, write_text_atomic
from r2med_plugin.models.official.naming import official_reranker_name
from r2med_plugin.reporting.export import TREC_DEPTH, model_folder_name, trec_tag, write_mteb_result, write_trec_run
from r2med_plugin.reporting.hakari_files import hakari_record_path, write_hakari_record
from r2med_plugin.reporting.official_files import (
    official_model_name,
    official_reranker_results,
    write_official_reranker_results,
    write_official_results,
)
from r2med_plugin.types import TaskData
from r2med_plugin.version import __version__

logger = logging.getLogger(__name__)


def provenance(result: TaskRunResult) -> dict[str, object]:
    """What a result file records about how it was produced, beyond the scores."""
    if result.rerank is not None:
        info = result.rerank
        return {
            "reranker": info.reranker, "reranker_revision": info.reranker_revision, "first_stage": info.first_stage,
            "first_stage_revision": info.first_stage_revision, "rerank_depth": info.depth, "dataset_revision": result.dataset_revision,
            "dataset_revision_verified": result.dataset_revision_verified, "dataset_source": result.data.source,
            "dataset_files_fingerprint": result.data.files_fingerprint,
            "dataset_count_drift": dataset_count_drift(result.data), "dataset_rows": dataset_rows(result.data),
        } | ({"rerank_usage": info.usage} if info.usage is not None else {}) | placed_on(result) | recorded_request(result)
    return {
        "model_name": result_model_name(result),
        "model_revision": result.model_revision,
        "query_prompt": result.query_prompt,
        **({"instructions": result.instructions} if result.instructions is not None else {}),
        "top_k": len(max(result.run.values(), key=len, default={})) if not result.candidates_only else None,
        "dataset_revision": result.dataset_revision,
        "dataset_revision_verified": result.dataset_revision_verified,
        "dataset_revision_recorded": result.data.result_revision,
        "dataset_source": result.data.source,
        "dataset_files_fingerprint": result.data.files_fingerprint,
        "dataset_count_drift": dataset_count_drift(result.data),
        "dataset_rows": dataset_rows(result.data),
        **local_expansion_file(result),
        "r2med_plugin_version": __version__,
        **placed_on(result),
        **recorded_request(result),
    }


def placed_on(result: TaskRunResult) -> dict[str, str]:
    """``device``: where a model the package loaded ran (``cpu``, ``cuda:0``, a pool's ``cpu,cpu``); nothing for BM25,
    run files, endpoints and a user's own objects, so their files stay as they were."""
    return {"device": result.device} if result.device is not None else {}


def recorded_request(result: TaskRunResult) -> dict[str, object]:
    """The request that produced the result (``EvaluationRequest.to_dict``), which ``r2med export --venue hakari``
    turns into the command line; nothing for a result of Python objects (they do not serialise)."""
    return {"request": result.request} if result.request is not None else {}


def local_expansion_file(result: TaskRunResult) -> dict[str, str]:
    """A local expansion's texts for this task, as the SHA-256 of its file: the result's name (``@`` a hash of the
    folder's path) stays when the texts are edited, so what was searched is recorded here."""
    from r2med_plugin.data.expansions import ExpansionName, resolve_local_expansion
    from r2med_plugin.data.fingerprint import file_sha256

    if result.expansion is None or not ExpansionName(result.expansion).is_local:
        return {}
    return {"expansion_file_sha256": file_sha256(resolve_local_expansion(result.data.spec, result.expansion).path)}


def dataset_rows(data: TaskData) -> dict[str, int]:
    """The corpus file's rows and the unique ids ranked: they differ where rows repeat an id (DESIGN.md §3)."""
    report = data.report
    return {"corpus_rows": report.corpus_rows, "unique_document_ids": report.unique_document_ids,
            "repeated_document_rows": report.repeated_document_rows, "near_empty_documents": len(report.near_empty_documents)}


def filed_name(result: TaskRunResult) -> str:
    """The model name a result is filed under (a reranked result: "<reranker>|<first stage>|top_<k>")."""
    return result.retriever if result.rerank is not None else result_model_name(result)


def write_mteb(result: TaskRunResult, output: Path) -> dict[str, Path]:
    extra = {"r2med_hybrid_with": result.hybrid_with} if result.hybrid_with else {}
    path = write_mteb_result(
        output, spec=result.data.spec, task_name=result.task, model_name=filed_name(result),
        model_revision=result.model_revision, dataset_revision=result.data.result_revision, scores=result.scores,
        main_score=result.main_score, evaluation_time=result.evaluation_time, provenance=provenance(result),
        candidates_only=result.candidates_only, extra_fields=extra,
    )
    return {"mteb": path}


def write_reasoning(result: TaskRunResult, mteb_path: Path) -> dict[str, Path]:
    """An LLM reranker's traces beside the MTEB result: a reasoning reranker's (one JSON line per query and passage:
    score, answer, reasoning) and a listwise reasoning model's (one per window) as ``<Task>.reasoning.jsonl``, a
    groupwise reranker's answers (one per group) as ``<Task>.groupwise.jsonl``; nothing for other results."""
    if result.rerank is None or not result.rerank.traces:
        return {}
    from r2med_plugin.llm.reranker_kinds import trace_order

    traces, name = result.rerank.traces, result.rerank.traces_name
    text = "".join(json.dumps(trace, ensure_ascii=False) + "\n" for trace in sorted(traces, key=trace_order))
    return {name: write_text_atomic(mteb_path.with_name(f"{result.task}.{name}.jsonl"), text)}


def write_hakari(result: TaskRunResult, mteb_path: Path) -> dict[str, Path]:
    """A NanoR2MED result's HAKARI record (``<Task>.hakari.json.xz``), which ``r2med export --venue hakari`` reads;
    an earlier run's record that this result does not replace goes (it would describe another run)."""
    stale = hakari_record_path(mteb_path)
    if result.hakari is None:
        if stale.is_file():
            stale.unlink()
        return {}
    return {"hakari": write_hakari_record(result.hakari, mteb_path)}


def write_official(result: TaskRunResult, output: Path) -> dict[str, Path]:
    """The official JSON of the result's layout (none for a candidate-only or too shallow dense run)."""
    if result.rerank is not None:
        info = result.rerank
        official_name = official_reranker_name(info.reranker)
        # filed by the full name: the same weights through another recipe (mteb's, official:) never share a folder
        folder = (output / "official" / "reranker" / model_folder_name(info.reranker) / model_folder_name(info.first_stage)
                  / f"top_{info.depth}" / result.model_revision)
        payload = official_reranker_results(
            info.official_scores, dataset_name=result.data.spec.hub_name, reranker=official_name, top_k=info.depth,
            evaluation_time=result.evaluation_time,
        )
        return {"official": write_official_reranker_results(folder / f"{result.task}.json", payload)}
    folder = output / "official" / model_folder_name(result_model_name(result)) / result.model_revision
    if result.official is None:
        _remove_stale_official(folder, result.task)
        return {}
    return {
        "official": write_official_results(
            folder / f"{result.task}.json", dataset_name=result.data.spec.hub_name,
            model_name=official_model_name(result.retriever), scores=result.official, evaluation_time=result.evaluation_time,
        ),
        # The official file keeps the official code's keys; how it was produced goes beside it.
        "official_metadata": write_json_atomic(folder / f"{result.task}.metadata.json", provenance(result)),
    }


def _remove_stale_official(folder: Path, task: str) -> None:
    """An official file of this model, revision and task from an earlier run (e.g. --top-k 1000) would sit beside
    a result it does not belong to (this run writes none): it goes."""
    stale = [path for path in (folder / f"{task}.json", folder / f"{task}.metadata.json") if path.is_file()]
    for path in stale:
        path.unlink()
    if stale:
        logger.warning("%s: removed the official file of an earlier run of this model and revision; this run writes none "
                       "(its run is shallower than the official file needs)", stale[0])


def write_trec(result: TaskRunResult, output: Path, depth: int = TREC_DEPTH) -> dict[str, Path]:
    name = filed_name(result)
    runs = output / "runs" / model_folder_name(name) / result.model_revision
    if result.rerank is not None:
        tag = model_folder_name(result.retriever)
        return {
            "trec": write_trec_run(runs / f"{result.task}.trec", result.run, tag),
            "trec_first_stage": write_trec_run(runs / f"{result.task}.first_stage.trec", result.rerank.first_stage_run,
                                               model_folder_name(result.rerank.first_stage),
                                               keep_order=is_hakari_bm25(result.rerank.first_stage)),
        }
    file_name = f"{result.task}.candidates-only.trec" if result.candidates_only else f"{result.task}.trec"
    keep_order = is_hakari_bm25(result.retriever) and not result.candidates_only
    return {"trec": write_trec_run(runs / file_name, result.run, trec_tag(name), depth=depth, keep_order=keep_order)}


def write_outputs(
    result: TaskRunResult, output_dir: str | os.PathLike, *, trec: bool = False, trec_depth: int = TREC_DEPTH
) -> dict[str, Path]:
    """MTEB-format result, the official R2MED JSON (when official scores exist) and optionally a TREC run.

    A candidate-only result goes to ``candidates-only/`` (and its run to ``<Task>.candidates-only.trec``),
    never where a full-corpus result of the same model is read or written. A reranked result writes the
    official reranker JSON, and with ``trec`` its first stage's run beside its own.
    """
    output = Path(output_dir)
    paths = write_mteb(result, output)
    paths["per_query"] = write_result_per_query(result, paths["mteb"])  # beside it: <Task>.per_query.parquet
    paths |= write_reasoning(result, paths["mteb"])  # beside it too: <Task>.reasoning.jsonl (reasoning rerankers)
    paths |= write_hakari(result, paths["mteb"])  # beside it: <Task>.hakari.json.xz (NanoR2MED)
    paths |= write_official(result, output)
    if trec:
        paths |= write_trec(result, output, trec_depth)
    else:
        _warn_about_stale_runs(result, output)
    return paths


def _warn_about_stale_runs(result: TaskRunResult, output: Path) -> None:
    """A TREC run of this model, revision and task from an earlier run stays (this one writes none): say so."""
    runs = output / "runs" / model_folder_name(filed_name(result)) / result.model_revision
    stale = [path for path in runs.glob(f"{result.task}*.trec") if path.is_file()]
    if stale:
        logger.warning("%s: a TREC run of an earlier run of this model and revision; this result (written without --trec) "
                       "may differ from it: write it again with --trec, or remove it", stale[0])
