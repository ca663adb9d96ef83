"""`r2med reproduce`: the official BM25 on the R2MED tasks against the published row, and the
NanoR2MED stored candidate lists against their task_metadata profiles.

The expected values are data: by default the published BM25 row of the R2MED leaderboard (shipped in
reporting/r2med_leaderboard.json) and the candidate profiles of task_metadata/; a JSON file can
replace either part::

    {"bm25_ndcg_at_10": {"Biology": 19.19, ...},          # nDCG@10 x 100, by hub name or task name
     "candidate_profiles": {"NanoR2MEDBiology": {"bm25": {"ndcg_at_10": 0.345, ...}, ...}}}
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from r2med_plugin.catalog import get_task_spec, list_tasks
from r2med_plugin.errors import MissingFileError, UserError

DEFAULT_TOLERANCE = 0.1  # nDCG@10 points (x100)
# An --expected file written before 0.2.0 names the pooled recall recall_at_100: it is read as the pooled one.
RENAMED_PROFILE_METRICS = {"recall_at_100": "pooled_recall_at_100"}
PROFILE_TOLERANCE = 1e-6  # the profiles are stored with 6 to 10 decimals
_NOT_METRICS = ("config", "top_k")


@dataclass(frozen=True)
class Bm25Row:
    task: str
    published: float
    ours: float

    @property
    def difference(self) -> float:
        return round(self.ours - self.published, 2)

    def passed(self, tolerance: float) -> bool:
        return abs(self.difference) <= tolerance + 1e-9


@dataclass(frozen=True)
class ProfileRow:
    task: str
    subset: str
    metric: str
    expected: float
    ours: float

    @property
    def passed(self) -> bool:
        return abs(self.ours - self.expected) <= PROFILE_TOLERANCE


@dataclass(frozen=True)
class StoredListCoverage:
    """How much of a NanoR2MED task's stored ``bm25`` list one BM25 reproduces (informational, never PASS/FAIL)."""

    task: str
    retriever: str
    depth: int  # the stored list's length (500 on the hub)
    mean_overlap: float  # per query: |our top depth ∩ stored top depth| / |stored|, averaged
    identical_lists: int  # queries whose top ``depth`` equals the stored list, ids and order
    queries: int


@dataclass
class ReproduceReport:
    tolerance: float
    bm25: list[Bm25Row] = field(default_factory=list)
    profiles: list[ProfileRow] = field(default_factory=list)
    coverage: list[StoredListCoverage] = field(default_factory=list)
    source: str = "the published BM25 row and task_metadata"  # where the expected values came from
    data: dict[str, dict] = field(default_factory=dict)  # task name -> what its verdicts stand on (naming.data_entry)

    @property
    def passed(self) -> bool:
        return all(row.passed(self.tolerance) for row in self.bm25) and all(row.passed for row in self.profiles)

    def data_note(self, tasks: Iterable[str]) -> str:
        """" (data: <the leaderboard's words>)" when a verdict on ``tasks`` stands on data that is not proven pinned
        data, else ""."""
        from r2med_plugin.reporting.grouping import data_label

        label = data_label(self.data[task] for task in tasks if task in self.data)
        return f" (data: {label})" if label else ""


def published_bm25() -> dict[str, float]:
    """The published BM25 nDCG@10 x 100 per R2MED task (the leaderboard row without an LLM)."""
    from r2med_plugin.reporting.published import published_table

    (row,) = [r for r in published_table()["rows"] if r["llm"] is None and r["retriever"] == "BM25"]
    return _by_task_name(row["scores"], "the published leaderboard")


def expected_profiles() -> dict[str, dict[str, dict[str, float]]]:
    """task_metadata's candidate-list profiles of every NanoR2MED task."""
    return {spec.name: {key: dict(profile) for key, profile in spec.candidate_profiles.items()} for spec in list_tasks("nano")}


def expected_source(path: str | os.PathLike) -> str:
    """Where each part of the expected values came from: the file for the parts it holds, the shipped defaults for
    the others (a file of BM25 values only still checks the candidate profiles, against task_metadata)."""
    payload = json.loads(Path(path).read_text(encoding="utf-8"))
    if {"bm25_ndcg_at_10", "candidate_profiles"} <= set(payload):
        return str(path)
    bm25 = str(path) if "bm25_ndcg_at_10" in payload else "the published BM25 row"
    profiles = str(path) if "candidate_profiles" in payload else "task_metadata (not in the file)"
    return f"BM25 from {bm25}; candidate profiles from {profiles}"


def load_expected(path: str | os.PathLike | None) -> tuple[dict[str, float], dict[str, dict[str, dict[str, float]]]]:
    """(BM25 nDCG@10 x 100 per task, candidate profiles per Nano task) from ``path``, defaults where absent."""
    if path is None:
        return published_bm25(), expected_profiles()
    try:
        payload = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise UserError(f"{path}: cannot read the expected values ({error}); see `r2med reproduce --help` for the format") from error
    unknown = set(payload) - {"bm25_ndcg_at_10", "candidate_profiles"}
    if not isinstance(payload, dict) or unknown:
        raise UserError(f"{path}: expected a JSON object with 'bm25_ndcg_at_10' and/or 'candidate_profiles', found keys {sorted(unknown)}")
    bm25 = _by_task_name(payload["bm25_ndcg_at_10"], str(path)) if "bm25_ndcg_at_10" in payload else published_bm25()
    profiles = payload.get("candidate_profiles", expected_profiles())
    for task in profiles:
        if get_task_spec(task).kind != "nano":
            raise UserError(f"{path}: candidate profiles exist for NanoR2MED tasks only, not {task!r}")
    return bm25, profiles


def _by_task_name(scores: Mapping[str, Any], origin: str) -> dict[str, float]:
    by_hub = {spec.hub_name: spec.name for spec in list_tasks("r2med")}
    out = {}
    for name, value in scores.items():
        task = by_hub.get(name, name)
        if get_task_spec(task).kind != "r2med":
            raise UserError(f"{origin}: {name!r} is not an R2MED task (BM25 values are for the 8 R2MED tasks)")
        out[task] = float(value)
    return out


def reproduce(
    *,
    expected: str | os.PathLike | None = None,
    data_dir: str | os.PathLike | None = None,
    accept_drift: bool | None = None,
    tolerance: float = DEFAULT_TOLERANCE,
    nano: bool = True,
    output: str | os.PathLike | None = None,
    show_progress: bool = True,
) -> ReproduceReport:
    """Run the official BM25 on each task of the expected table and profile the Nano candidate lists."""
    from r2med_plugin.data.loader import load_task
    from r2med_plugin.evaluation.naming import data_entry
    from r2med_plugin.evaluation.runner import evaluate_task
    from r2med_plugin.evaluation.writers import write_outputs
    from r2med_plugin.retrieval.candidates import candidate_profile

    bm25, profiles = load_expected(expected)
    report = ReproduceReport(tolerance=tolerance)
    if expected is not None:
        report.source = expected_source(expected)
    for task, subsets in profiles.items() if nano else ():  # first: seconds, where the BM25 runs take minutes
        try:
            data = load_task(task, data_dir=data_dir, accept_drift=accept_drift)
        except FileNotFoundError as error:
            raise MissingFileError(f"{error}; to check the 8 R2MED tasks' BM25 alone, add --skip-nano") from None
        report.data[task] = data_entry(data)
        for subset, profile in subsets.items():
            if subset not in data.candidates:
                raise UserError(f"{task}: no stored candidate list {subset!r}; the lists are {sorted(data.candidates)}")
            top_k = profile.get("top_k")
            ours = candidate_profile(data.candidates[subset], data.qrels, top_k=None if top_k is None else int(top_k))
            for metric, value in profile.items():
                metric = RENAMED_PROFILE_METRICS.get(metric, metric)
                if metric in _NOT_METRICS:
                    continue
                if metric not in ours:
                    raise UserError(f"{task}/{subset}: unknown profile metric {metric!r}; known: {sorted(ours)}")
                report.profiles.append(ProfileRow(task, subset, metric, float(value), float(ours[metric])))
        if "bm25" in data.candidates:
            report.coverage.extend(stored_bm25_coverage(data, show_progress=show_progress))
    for task, published in bm25.items():
        result = evaluate_task(task, "bm25-lucene", data_dir=data_dir, accept_drift=accept_drift, show_progress=show_progress)
        if output is not None:
            write_outputs(result, output)
        report.data[task] = data_entry(result.data)
        if result.official is None:
            raise ValueError(f"{task}: bm25-lucene's result holds no official scores")
        report.bm25.append(Bm25Row(task, published, round(result.official["ndcg_at_10"] * 100, 2)))
    return report


def render_report(report: ReproduceReport) -> str:
    """The BM25 table (published, ours, difference, PASS/FAIL) and the candidate-profile check."""
    lines = [
        f"Official BM25 (bm25-lucene) nDCG@10 x 100 vs the expected values (PASS within {report.tolerance:g} points)",
        f"expected values: {report.source}",
        f"{'task':<28} {'expected':>9} {'ours':>9} {'diff':>7}  result",
    ]
    for row in report.bm25:
        lines.append(f"{row.task:<28} {row.published:>9.2f} {row.ours:>9.2f} {row.difference:>+7.2f}  "
                     f"{'PASS' if row.passed(report.tolerance) else 'FAIL'}{report.data_note([row.task])}")
    unchecked = [spec.name for spec in list_tasks("r2med") if spec.name not in {row.task for row in report.bm25}]
    if unchecked:  # a partial expected table checks only its tasks: say so, never a silent "all PASS"
        lines.append(f"not checked ({len(unchecked)} of 8 R2MED tasks have no expected value): {', '.join(unchecked)}")
    if report.profiles:
        failed = [row for row in report.profiles if not row.passed]
        lines.append("")
        lines.append(f"NanoR2MED stored candidate profiles: {len(report.profiles) - len(failed)}/{len(report.profiles)} values "
                     f"match the expected profiles{report.data_note({row.task for row in report.profiles})}")
        for profile in failed:
            lines.append(f"  FAIL {profile.task} {profile.subset} {profile.metric}: expected {profile.expected:.10g}, "
                         f"ours {profile.ours:.10g}")
    if report.coverage:
        lines.append("")
        lines.extend(render_coverage(report.coverage))
    lines.append("")
    if not report.passed:
        lines.append("MISMATCH: at least one check failed")
    else:
        lines.append("all checks PASS" + (f" ({len(report.bm25)} of 8 BM25 tasks checked)" if unchecked else "")
                     + report.data_note(report.data))
    return "\n".join(lines) + "\n"


COVERAGE_RETRIEVERS = ("bm25-hakari", "bm25-hakari:regex", "bm25-hakari:english_regex", "bm25-hakari:english_porter",
                       "bm25-hakari:stemmer", "bm25-hakari:whitespace", "bm25-robertson")


def stored_bm25_coverage(data, *, show_progress: bool = False) -> list[StoredListCoverage]:
    """For each BM25 of ``COVERAGE_RETRIEVERS``: how much of the task's stored ``bm25`` list its own top ranks
    reproduce. Which tokenizer HAKARI-Bench built the hub's lists with is not written anywhere we can read; its
    English auto-selection picks english_porter_stop (bm25-hakari) and its later dataset script defaults to regex:
    the real files settle it, and this measures it."""
    from r2med_plugin.identifiers import BM25_VARIANTS
    from r2med_plugin.retrieval.bm25_cache import bm25_run

    stored = {query_id: ids for query_id, ids in data.candidates["bm25"].items() if ids}
    depth = max((len(ids) for ids in stored.values()), default=0)
    rows = []
    for retriever in COVERAGE_RETRIEVERS if depth else ():
        run = bm25_run(data, BM25_VARIANTS[retriever], top_k=depth, show_progress=show_progress)
        overlaps, identical = [], 0
        for query_id, ids in stored.items():
            ours = list(run.get(query_id, {}))[:len(ids)] if retriever.startswith("bm25-hakari") else _pytrec_order(run.get(query_id, {}))[:len(ids)]
            overlaps.append(len(set(ours) & set(ids)) / len(set(ids)))
            identical += ours == list(ids)
        rows.append(StoredListCoverage(data.name, retriever, depth, sum(overlaps) / len(overlaps), identical, len(overlaps)))
    return rows


def _pytrec_order(ranked: Mapping[str, float]) -> list[str]:
    return [doc_id for doc_id, _ in sorted(ranked.items(), key=lambda item: (item[1], item[0]), reverse=True)]


def render_coverage(rows: list[StoredListCoverage]) -> list[str]:
    lines = ["NanoR2MED stored bm25 lists: how much each BM25 reproduces (mean share of each stored list in our top of "
             "the same length; lists identical in ids and order) — which tokenizer built the hub's lists is measured here",
             f"{'task':<28} {'retriever':<28} {'overlap':>8} {'identical':>12}"]
    for row in rows:
        lines.append(f"{row.task:<28} {row.retriever:<28} {row.mean_overlap:>8.4f} {row.identical_lists:>5} / {row.queries:<5}")
    return lines
