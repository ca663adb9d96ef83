"""Descriptive statistics of the 24 MTEB tasks, in mteb's schema, with where every number comes from.

The files in ``descriptive_stats/`` (shipped in the wheel) are written by scripts/make_descriptive_stats.py
with the functions below, never by hand. A file is ``{"test": {<mteb's retrieval statistics>, "provenance":
{...}}}``: mteb reads ``num_samples`` (``TaskMetadata.n_samples``) and the statistics fields, and ignores
``provenance``. Three sources:

- ``from_data``: mteb's own computation (``task.calculate_descriptive_statistics``) on the data at the
  revision the task loads (the hub at the pinned revision, or a mirror through ``R2MED_DATA_DIR``). Every
  field is exact for that revision.
- ``from_mteb`` (``R2MED<Domain>``, where the data cannot be read): the statistics the installed mteb ships
  for its ``R2MED<Domain>Retrieval`` task, which loads the same repository at the same revision, with the
  counts the catalog records as wrong in them (``num_queries``, hence ``num_samples``) corrected.
- ``from_dataset_card`` (``NanoR2MED<Domain>`` and ``...Reranking``, where the data cannot be read): the
  counts, positives per query, candidate list lengths and mean text lengths of the dataset card (the task
  metadata); every field the card does not give is null and listed under ``provenance.unknown``.
"""

from __future__ import annotations

import copy
import datetime as _dt
import json
from importlib.metadata import version
from pathlib import Path
from typing import Any

import mteb
from mteb.types.statistics import (
    RelevantDocsStatistics,
    RetrievalDescriptiveStatistics,
    TextStatistics,
    TopRankedStatistics,
)

from r2med_plugin.catalog import get_task_spec
from r2med_plugin.integrations import mteb as integration
from r2med_plugin.types import TaskSpec

SHIPPED_DIR = Path(__file__).resolve().parent / "descriptive_stats"
SPLIT = "test"
PROVENANCE = "provenance"
GENERATED_BY = "scripts/make_descriptive_stats.py"
SOURCES = ("from_data", "from_mteb", "from_dataset_card")


def task_names() -> list[str]:
    """The 24 task names, in the plugin's registration order."""
    return list(integration.build_task_classes())


def spec_name(task_name: str) -> str:
    return task_name.removesuffix(integration.RERANKING_SUFFIX)


def _provenance(task_name: str, source: str, revision: str | None, today: str | None, **extra: Any) -> dict[str, Any]:
    spec = get_task_spec(spec_name(task_name))
    return {
        "source": source,
        "dataset": spec.hub_repo,
        "dataset_revision": revision,
        "mteb_version": version("mteb"),
        "generated": today or _dt.date.today().isoformat(),
        "generated_by": GENERATED_BY,
        **extra,
    }


def from_data(task_name: str, *, today: str | None = None) -> dict[str, Any]:
    """mteb's ``calculate_descriptive_statistics`` on the data the task loads (hub or R2MED_DATA_DIR mirror).

    The revision recorded is the one the task loaded (``result_revision``: a mirror that does not prove its
    commit is marked, so its statistics are never taken for the hub's)."""
    integration.register()
    task = mteb.get_task(task_name)
    computed = task.calculate_descriptive_statistics(overwrite_results=True)
    if set(computed) != {SPLIT}:
        raise ValueError(f"{task_name}: mteb computed statistics for splits {sorted(computed)}, expected only {SPLIT!r}")
    revision = str(task.metadata.dataset["revision"])
    note = "computed from the data by mteb's own code (task.calculate_descriptive_statistics); every field exact for this revision"
    return {SPLIT: {**computed[SPLIT], PROVENANCE: _provenance(task_name, "from_data", revision, today, note=note)}}


def _missing_schema_fields(stats: dict[str, Any]) -> list[str]:
    """Fields the installed mteb computes that ``stats`` (written by an older mteb) does not have."""
    missing = [key for key in sorted(RetrievalDescriptiveStatistics.__required_keys__) if key not in stats]
    relevant = stats.get("relevant_docs_statistics") or {}
    missing += [
        f"relevant_docs_statistics.{key}"
        for key in sorted(RelevantDocsStatistics.__required_keys__)
        if key not in relevant
    ]
    return missing


def _texts_counted(text_stats: dict[str, Any]) -> int:
    """How many texts mteb's text statistics describe: calculate_text_statistics sets average = total / count."""
    return round(text_stats["total_text_length"] / text_stats["average_text_length"])


def _builtin_stats(task_name: str, spec: TaskSpec) -> dict[str, Any]:
    """A copy of the test-split statistics mteb ships for ``spec``'s built-in task, refused unless they describe our
    revision and the dataset card's document and qrel counts."""
    if spec.kind != "r2med" or not spec.mteb_builtin_task:
        raise ValueError(f"{task_name}: mteb ships no statistics for this data; use from_data or from_dataset_card")
    builtin = mteb.get_task(spec.mteb_builtin_task).metadata
    if builtin.dataset["revision"] != spec.revision:
        raise ValueError(
            f"{task_name}: mteb's {spec.mteb_builtin_task} reads revision {builtin.dataset['revision']}, ours is "
            f"{spec.revision}; its statistics are not of our data: compute them from the data instead"
        )
    shipped = builtin.descriptive_stats
    if not shipped or SPLIT not in shipped:
        raise ValueError(f"{task_name}: mteb {version('mteb')} ships no statistics for {spec.mteb_builtin_task}")
    stats: dict[str, Any] = dict(copy.deepcopy(shipped[SPLIT]))  # a retrieval task's statistics
    expected = spec.expected_counts
    found = {"num_documents": stats["num_documents"], "num_relevant_docs": stats["relevant_docs_statistics"]["num_relevant_docs"]}
    wanted = {"num_documents": expected["documents"], "num_relevant_docs": expected["qrels"]}
    if found != wanted:
        raise ValueError(f"{task_name}: mteb's statistics count {found}, the dataset card {wanted}: not the same data")
    return stats


def _corrected_counts(stats: dict[str, Any], queries: int) -> list[str]:
    """Set ``num_queries`` to the card's count and ``num_samples`` to mteb's definition in ``stats``; what changed."""
    corrections = []
    if stats["num_queries"] != queries:
        corrections.append(
            f"num_queries: mteb ships {stats['num_queries']}; the dataset card and the loader count {queries} "
            "(the catalog records mteb's num_queries for R2MED as wrong); set to the card's count"
        )
        stats["num_queries"] = queries
    if stats["num_samples"] != stats["num_documents"] + stats["num_queries"]:
        corrections.append(
            f"num_samples: mteb ships {stats['num_samples']}; set to num_documents + num_queries "
            f"= {stats['num_documents'] + stats['num_queries']} (mteb's definition)"
        )
        stats["num_samples"] = stats["num_documents"] + stats["num_queries"]
    return corrections


def _text_statistics_caveats(stats: dict[str, Any]) -> list[str]:
    """The text statistics that describe another number of texts than the (corrected) counts, left as shipped."""
    caveats = []
    for part, count in (("documents", stats["num_documents"]), ("queries", stats["num_queries"])):
        counted = _texts_counted(stats[f"{part}_text_statistics"])
        if counted != count:
            caveats.append(
                f"{part}_text_statistics (and number_of_characters) describe {counted} texts "
                f"(total_text_length / average_text_length), not the {count} {part}: left as mteb ships them; "
                f"the text statistics of all {count} {part} are unknown until computed from the data"
            )
    return caveats


def from_mteb(task_name: str, *, today: str | None = None) -> dict[str, Any]:
    """The statistics mteb ships for its own task on the same repository and revision, corrected.

    Raises ValueError when mteb's task reads another revision, or when a count other than the known-wrong
    ``num_queries`` disagrees with the dataset card: then they are not statistics of our task's data."""
    spec = get_task_spec(task_name)
    stats = _builtin_stats(task_name, spec)
    corrections = _corrected_counts(stats, spec.expected_counts["queries"])
    caveats = _text_statistics_caveats(stats)
    exact = ["num_documents", "num_queries", "num_samples"]
    provenance = _provenance(
        task_name,
        "from_mteb",
        spec.revision,
        today,
        note=(
            f"mteb's own statistics for {spec.mteb_builtin_task} (mteb/descriptive_stats/Retrieval/"
            f"{spec.mteb_builtin_task}.json in the mteb of mteb_version), which loads {spec.hub_repo} at "
            "this same revision; the plugin's loader reads the same files (the task metadata's qrels count is mteb's "
            "num_relevant_docs). Regenerate from the data "
            f"(python {GENERATED_BY} --from-data) where the hub or a mirror is reachable"
        ),
        exact_from_dataset_card=exact,
        from_mteb=sorted(key for key in stats if key not in {"num_documents", "num_queries", "num_samples"}),
        corrections=corrections,
        caveats=caveats,
        absent_fields_of_this_mteb_schema=_missing_schema_fields(stats),
    )
    return {SPLIT: {**stats, PROVENANCE: provenance}}


def _fields(schema: Any) -> dict[str, None]:
    """The keys of one of mteb's statistics TypedDicts, in mteb's order, all null."""
    return {key: None for key in schema.__annotations__ if key in schema.__required_keys__}


def _text_stats_from_card(mean: float) -> dict[str, Any]:
    stats: dict[str, Any] = _fields(TextStatistics)
    stats["average_text_length"] = mean
    return stats


def _card_relevant_docs(task_name: str, spec: TaskSpec) -> dict[str, Any]:
    """mteb's relevant-docs statistics from the card: every NanoR2MED query has a positive (the card's minimum is 1)."""
    counts, positives = spec.expected_counts, spec.card_stats["positives_per_query"]
    queries, qrels = counts["queries"], counts["qrels"]
    if positives["min"] < 1:
        raise ValueError(f"{task_name}: the card lists queries without positives; mteb's average needs the data")
    average_positives = qrels / queries
    if abs(average_positives - positives["average"]) > 5e-6:
        raise ValueError(f"{task_name}: card average {positives['average']} disagrees with {qrels} / {queries}")
    relevant: dict[str, Any] = _fields(RelevantDocsStatistics)
    relevant.update(
        num_relevant_docs=qrels,
        min_relevant_docs_per_query=positives["min"],
        average_relevant_docs_per_query=average_positives,
        max_relevant_docs_per_query=positives["max"],
        queries_with_all_gold_black_or_white=0,  # mteb's value for a task without images
    )
    return relevant


def _card_top_ranked(task_name: str, spec: TaskSpec) -> dict[str, Any]:
    """mteb's top-ranked statistics of a reranking task: the reranking_hybrid lists of 100, or 101 with the safeguard row."""
    queries = spec.expected_counts["queries"]
    profile = spec.candidate_profiles[integration.RERANKING_CANDIDATES]
    long_rows = profile.get("rows_with_101_candidates", 0)
    if profile["query_count"] != queries or profile["candidate_count_min"] != profile["top_k"]:
        raise ValueError(f"{task_name}: the hybrid profile does not give every list's length")
    total = profile["top_k"] * queries + long_rows
    if abs(total / queries - profile["candidate_count_mean"]) > 5e-6:
        raise ValueError(f"{task_name}: hybrid list lengths disagree with the card's mean")
    top_ranked = _fields(TopRankedStatistics)
    top_ranked.update(
        num_top_ranked=total,
        min_top_ranked_per_query=profile["candidate_count_min"],
        average_top_ranked_per_query=total / queries,
        max_top_ranked_per_query=profile["candidate_count_max"],
    )
    return top_ranked


def _card_stats(spec: TaskSpec, relevant: dict[str, Any], top_ranked: dict[str, Any] | None) -> dict[str, Any]:
    """The card's numbers in mteb's retrieval statistics schema (refused when the installed mteb changed it)."""
    queries, documents = spec.expected_counts["queries"], spec.expected_counts["documents"]
    text_means = spec.card_stats["text_stats_chars"]
    stats: dict[str, Any] = {
        "num_samples": documents + queries,
        "num_queries": queries,
        "num_documents": documents,
        "number_of_characters": None,
        "documents_text_statistics": _text_stats_from_card(text_means["document_mean"]),
        "documents_image_statistics": None,
        "documents_audio_statistics": None,
        "documents_video_statistics": None,
        "queries_text_statistics": _text_stats_from_card(text_means["query_mean"]),
        "queries_image_statistics": None,
        "queries_audio_statistics": None,
        "queries_video_statistics": None,
        "relevant_docs_statistics": relevant,
        "top_ranked_statistics": top_ranked,
    }
    if set(stats) != RetrievalDescriptiveStatistics.__required_keys__:
        raise ValueError(f"mteb {version('mteb')} changed its retrieval statistics schema; update {__name__}")
    return stats


def _unknown_fields(stats: dict[str, Any], reranking: bool) -> list[str]:
    """The null fields the card does not give (image, audio and video statistics are null for a text task)."""
    unknown = [key for key, value in stats.items() if value is None and not key.endswith(("_image_statistics", "_audio_statistics", "_video_statistics"))]
    unknown += [
        f"{part}.{key}"
        for part in ("documents_text_statistics", "queries_text_statistics", "relevant_docs_statistics", "top_ranked_statistics")
        for key, value in (stats[part] or {}).items()
        if value is None
    ]
    if not reranking:
        unknown.remove("top_ranked_statistics")  # a retrieval task has no candidate lists: null is mteb's value
    return unknown


def from_dataset_card(task_name: str, *, today: str | None = None) -> dict[str, Any]:
    """What the NanoR2MED dataset card states, in mteb's schema; every other field null (unknown).

    Derived as mteb derives them: num_samples = documents + queries, average_relevant_docs_per_query =
    positives / queries (every NanoR2MED query has a positive: the card's minimum is 1), and for the
    reranking tasks the reranking_hybrid list lengths (100, or 101 with the safeguard row)."""
    spec = get_task_spec(spec_name(task_name))
    if spec.kind != "nano":
        raise ValueError(f"{task_name}: only NanoR2MED statistics are taken from the dataset card")
    reranking = task_name != spec.name
    relevant = _card_relevant_docs(task_name, spec)
    stats = _card_stats(spec, relevant, _card_top_ranked(task_name, spec) if reranking else None)
    provenance = _provenance(
        task_name,
        "from_dataset_card",
        spec.revision or "main",
        today,
        note=(
            f"the counts of the {spec.hub_repo} dataset card (task metadata: expected counts, positives per query, "
            "reranking_hybrid list lengths) in mteb's schema, no data read; NanoR2MED publishes no revision, so these "
            "are the card's numbers for 'main'. Fields the card does not give are null until computed from the data "
            f"(python {GENERATED_BY} --from-data, where the hub or a mirror is reachable)"
        ),
        exact_from_dataset_card=[
            "num_samples", "num_queries", "num_documents",
            "relevant_docs_statistics.num_relevant_docs", "relevant_docs_statistics.min_relevant_docs_per_query",
            "relevant_docs_statistics.average_relevant_docs_per_query", "relevant_docs_statistics.max_relevant_docs_per_query",
            *(["top_ranked_statistics"] if reranking else []),
        ],
        rounded_from_dataset_card=[
            "documents_text_statistics.average_text_length (card: 6 decimals)",
            "queries_text_statistics.average_text_length (card: 6 decimals)",
        ],
        unknown=_unknown_fields(stats, reranking),
    )
    return {SPLIT: {**stats, PROVENANCE: provenance}}


def without_data(task_name: str, *, today: str | None = None) -> dict[str, Any]:
    """The statistics shippable where the data cannot be read: mteb's (R2MED) or the dataset card's (NanoR2MED)."""
    kind = get_task_spec(spec_name(task_name)).kind
    return from_mteb(task_name, today=today) if kind == "r2med" else from_dataset_card(task_name, today=today)


def render(stats: dict[str, Any]) -> str:
    return json.dumps(stats, indent=4, ensure_ascii=False) + "\n"


def comparable(stats: dict[str, Any]) -> dict[str, Any]:
    """``stats`` without the date and mteb version they were made on, for checking that shipped files are
    what the script writes (a later mteb that ships the same R2MED statistics and schema writes the same)."""
    out = copy.deepcopy(stats)
    for split in out.values():
        split.get(PROVENANCE, {}).pop("generated", None)
        split.get(PROVENANCE, {}).pop("mteb_version", None)
    return out


def shipped(task_name: str) -> dict[str, Any] | None:
    path = SHIPPED_DIR / f"{task_name}.json"
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None
