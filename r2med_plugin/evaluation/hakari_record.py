"""What a NanoR2MED result keeps for HAKARI-Bench: ``<Task>.hakari.json.xz`` (lzma JSON, written by
r2med_plugin.reporting.hakari_files) beside its MTEB result.

The MTEB result keeps mteb's keys and values (pytrec_eval's conventions). What HAKARI-Bench's result file needs
is computed at evaluation time, from the full-depth run, with HAKARI's conventions (``hakari_metrics``), and
kept here, so ``r2med export --venue hakari`` needs neither the data nor the model again:

- ``metrics``: the full-corpus ranking's metrics (``HAKARI_SIDECAR_METRICS``), keyed as HAKARI keys them;
- ``candidate_rankings``: per stored candidate list (HAKARI's config names: ``bm25``, ``harrier_oss_v1_270m``,
  ``reranking_hybrid``), the run re-ranking each query's whole list (HAKARI's rerank top-k: the longest list),
  with its metrics and, for ``reranking_hybrid``, the queries whose safeguard row (candidate 101) is a positive;
- ``top_rankings``: each ranking's top 100 per query, in HAKARI's ``artifacts.top_rankings`` row shape;
- ``qrels`` and ``query_ids``: the positives and every query counted (queries without qrels score 0);
- ``environment``: Python, platform and package versions of the run (HAKARI's ``environment``).

Format ``r2med-hakari/1`` (docs/reference/file-formats.md).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from r2med_plugin.evaluation.hakari_metrics import (
    HAKARI_SIDECAR_METRICS,
    candidate_rankings,
    candidate_top_k,
    hakari_metrics,
    metric_prefix,
    positive_ids,
    rankings_from_run,
)
from r2med_plugin.reporting.hakari_files import HAKARI_RECORD_FORMAT, keeps_own_order
from r2med_plugin.types import Run, TaskData

TOP_RANKING_DEPTH = 100  # HAKARI's TOP_RANKING_ARTIFACT_DEPTH
SAFEGUARD_LIST = "reranking_hybrid"


def score_name(retriever: str) -> str:
    """HAKARI's score name for a run of ``retriever``: its bm25s BM25 ``bm25_bm25s_okapi``, another BM25 its own
    name, an encoder ``cosine`` (our encoders rank by cosine)."""
    if keeps_own_order(retriever):
        return "bm25_bm25s_okapi"
    return retriever.replace(":", "_") if retriever.startswith("bm25") else "cosine"


ENVIRONMENT_PACKAGES = ("torch", "transformers", "sentence-transformers", "datasets", "numpy", "scipy", "bm25s", "nltk",
                        "mteb", "r2med-plugin")


def runtime_environment() -> dict:
    """Python, platform and package versions, in the shape of HAKARI's ``environment`` (plus ours)."""
    import importlib.metadata
    import platform
    import sys

    def version(package: str) -> str | None:
        try:
            return importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            return None

    return {"python": sys.version, "platform": platform.platform(),
            "package_versions": {package: version(package) for package in ENVIRONMENT_PACKAGES}}


def empty_documents(data: TaskData) -> list[str]:
    """Documents whose text is empty: HAKARI's loader leaves them out of the corpus."""
    return data.corpus.filter(data.corpus["text"] == "")["id"].to_list()


def hakari_record(data: TaskData, run: Run, retriever: str, subsets: Sequence[str] = ()) -> dict:
    """The sidecar's content for a full-corpus ``run`` of ``retriever`` on a NanoR2MED task (see module doc), with
    the candidate lists ``subsets`` ("bm25", "dense", "hybrid") re-ranked: the run must score their documents."""
    keep = keeps_own_order(retriever)
    dropped = empty_documents(data)
    query_ids = sorted(set(run) | set(data.qrels) | set(data.report.queries_without_qrels))
    qrels = {query_id: sorted(positive_ids(judged)) for query_id, judged in sorted(data.qrels.items())}
    name = score_name(retriever)
    full = rankings_from_run(run, keep_order=keep, dropped_documents=dropped)
    candidate_rankings: dict[str, dict] = {}
    top_rankings = [_top_ranking("retrieval", name, full)]
    record = {
        "format": HAKARI_RECORD_FORMAT, "task": data.name, "retriever": retriever, "score_name": name,
        "evaluator_name": metric_prefix(data.name, name).removesuffix(f"_{name}_"),
        "ranking_order": "as the run gave it (bm25s)" if keep else "score descending, ties by document id ascending",
        "query_ids": query_ids, "qrels": qrels, "environment": runtime_environment(),
        "metrics": hakari_metrics(full, qrels, metric_names=HAKARI_SIDECAR_METRICS, query_ids=query_ids,
                                  prefix=metric_prefix(data.name, name)),
        "candidate_rankings": candidate_rankings,
        "top_rankings": top_rankings,
    }
    if not retriever.startswith("bm25"):  # HAKARI re-ranks candidate lists with encoders, not with its BM25
        for key in subsets:
            lists = data.candidates[key]
            config = data.spec.candidate_configs[key]["config"]
            candidate_rankings[config], row = _candidate_entry(data, run, lists, config, name, query_ids, keep, dropped)
            top_rankings.append(row)
    return record


def _candidate_entry(data: TaskData, run: Run, lists: Mapping[str, Sequence[str]], config: str, name: str,
                     query_ids: list[str], keep: bool, dropped: list[str]) -> tuple[dict, dict]:
    top_k = candidate_top_k(lists)
    rerank_name = f"{name}_{config}_top{top_k}_rerank"
    ranked = candidate_rankings(run, lists, query_ids, keep_order=keep, dropped_documents=dropped)
    entry = {"top_k": top_k, "score_name": rerank_name,
             "metrics": hakari_metrics(ranked, data.qrels, metric_names=HAKARI_SIDECAR_METRICS, query_ids=query_ids,
                                       prefix=metric_prefix(data.name, rerank_name))}
    safeguard = safeguard_positives(lists, data.qrels) if config == SAFEGUARD_LIST else None
    if safeguard is not None:
        entry["safeguard_corpus_ids_by_query"] = safeguard
    return entry, _top_ranking("candidate_rerank", rerank_name, ranked, name, safeguard)


def safeguard_positives(lists: Mapping[str, Sequence[str]], qrels: Mapping[str, Mapping[str, int]],
                        top_k: int = 100) -> dict[str, str]:
    """Query id -> the safeguard row's document, where a list holds top_k + 1 ids, the last a positive and none
    of the first top_k (HAKARI's ``candidate_safeguard_metadata``)."""
    found = {}
    for query_id, ids in lists.items():
        ids = list(dict.fromkeys(ids))
        positives = positive_ids(qrels.get(query_id, {}))
        if len(ids) == top_k + 1 and ids[top_k] in positives and not positives.intersection(ids[:top_k]):
            found[query_id] = ids[top_k]
    return found


def _top_ranking(kind: str, score: str, rankings: Mapping[str, list[str]], distance: str | None = None,
                 safeguard: dict[str, str] | None = None) -> dict:
    base = score if distance is None else distance
    row: dict[str, Any] = {"name": "base", "ranking_kind": kind, "embedding_variant_name": None,
           "distance": "bm25" if base.startswith("bm25") else base, "score_name": score,
           "rankings": {query_id: ranked[:TOP_RANKING_DEPTH] for query_id, ranked in rankings.items()}}
    if safeguard is not None:
        row["safeguard_policy"] = "RRF top-100 plus optional safeguard positive at rank 101"
        row["safeguard_corpus_ids_by_query"] = safeguard
    return row


__all__ = ["empty_documents", "hakari_record", "runtime_environment", "safeguard_positives", "score_name"]
