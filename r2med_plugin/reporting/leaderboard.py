"""The R2MED leaderboard table from MTEB result folders, optionally among the published rows.

One row per model (an expansion run is its own "LLM | Retriever" row), the 8 tasks in the official
order as nDCG@10 x 100 and their average, two decimals. A row that lacks a task is shown but not
ranked on the average. mteb's built-in ``R2MED<Domain>Retrieval`` results form rows of their own,
labelled as such. The NanoR2MED table adds the averages of the hybrid and candidate-subset scores.

Results on different dataset revisions never share a row: a model gets one row per revision set
(R2MED: the pinned commits, or each other commit; NanoR2MED: each resolved commit). Results on the
shipped synthetic sample (``dataset_revision: synthetic-sample``) are never ranked next to real ones.
Candidate-only results (``r2med evaluate --candidates-only``) feed only the candidate columns.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import cast

from r2med_plugin.errors import UserError
from r2med_plugin.identifiers import COUNT_DRIFT, SYNTHETIC_REVISION, ResultName, judged_files
from r2med_plugin.models.official.naming import profile_of_result, published_row_of
from r2med_plugin.reporting.grouping import (
    DRIFT_LABEL,
    PINNED_DRIFT_SET,
    SYNTHETIC_LABEL,
    UNVERIFIED_DRIFT_SET,
    UNVERIFIED_SET,
    RowGroup,
    grouped_records,
)
from r2med_plugin.reporting.published import published_llm_names, published_reranker_rows, published_rows
from r2med_plugin.reporting.result_files import ResultRecord, read_result_folders
from r2med_plugin.reporting.rows import BENCHMARKS, MAIN_METRIC, NANO_EXTRA_METRICS, LeaderboardRow, task_columns
from r2med_plugin.rules import SettingError

BUILTIN_LABEL = "mteb built-in R2MED*Retrieval"


LOCAL_LABEL = "generated locally"


def split_model_name(model: str) -> tuple[str, str, str]:
    """(llm, retriever, note) for a model name (see r2med_plugin.identifiers.ResultName): an expansion run's LLM and
    method, a reranked run's "Reranker | First stage" and depth, and the query prompt's label."""
    name = ResultName.parse(model)
    if name.reranked:
        return "", f"{name.retriever} | {name.first_stage}", f"rerank top {name.depth}"
    labels = [name.expansion.method] if name.expansion else []
    if name.prompt:
        labels.append("with instruction" if name.prompt == "instruction" else f"custom {name.prompt}")
    return (name.expansion.llm if name.expansion else ""), name.retriever, ", ".join(labels)


def _local_note(model: str) -> str:
    """ "generated locally @<folder id>" for an expansion from `r2med generate` (two folders, two rows), else ""."""
    expansion = ResultName.parse(model).expansion
    if expansion is None or not expansion.local:
        return ""
    return f"{LOCAL_LABEL} @{expansion.folder}" if expansion.folder else LOCAL_LABEL


def _task_extras(full: ResultRecord | None, candidates: ResultRecord | None) -> dict[str, float]:
    """The NanoR2MED extra columns of one task; a candidate column comes from the newer of the two results."""
    ordered = sorted((r for r in (full, candidates) if r is not None), key=lambda r: r.date, reverse=True)
    values = {}
    for key in NANO_EXTRA_METRICS:
        sources = [r for r in ordered if key in r.scores and not (key.startswith("hybrid_") and r.candidates_only)]
        if sources:
            values[key] = 100 * float(sources[0].scores[key])
    return values


def _files_label(group: RowGroup, per_task: dict[str, ResultRecord], conflicting: set[str]) -> str:
    """ "Biology files c1f3a2b4": the mirror files of the tasks whose results exist on other files too."""
    parts = []
    for hub in sorted(conflicting & set(per_task)):
        parts.append(f"{hub} files {judged_files(per_task[hub].judged_data)}")
    return ", ".join(parts)


def user_rows(records: Sequence[ResultRecord], benchmark: str = "r2med") -> list[LeaderboardRow]:
    grouping = grouped_records(records, benchmark)
    full, partial = grouping.full, grouping.partial
    real_sets: dict[tuple[str, bool], set[str]] = {}
    model_revisions: dict[tuple[str, bool, str], set[str]] = {}
    for group in full:
        if group.revisions != SYNTHETIC_REVISION:
            real_sets.setdefault((group.model, group.builtin), set()).add(group.revisions)
        model_revisions.setdefault(group.family, set()).add(group.model_revision)
    rows = []
    for group, per_task in full.items():
        model, builtin, revisions = group.family
        llm, retriever, method = split_model_name(model)
        local = _local_note(model)
        # rows on other data are always said so when the table holds more than one revision set (any of our models;
        # mteb's built-in rows are labelled as such)
        ours = [found for (_, is_builtin), found in real_sets.items() if not is_builtin]
        several = len(set().union(*ours)) > 1 if ours else False
        unverified = revisions in (UNVERIFIED_SET, UNVERIFIED_DRIFT_SET, PINNED_DRIFT_SET)  # always named
        revision_note = f"dataset revision {revisions}" if revisions not in ("", SYNTHETIC_REVISION) and not unverified and several else ""
        revision_note = revisions if unverified else revision_note
        if revisions.endswith(COUNT_DRIFT) and not unverified:
            revision_note = ", ".join(part for part in (revision_note, DRIFT_LABEL) if part)
        conflicting = grouping.conflicting_files.get((model, builtin, revisions, group.model_revision), set())
        candidates = partial.get(group, {})
        files_note = _files_label(group, {**candidates, **per_task}, conflicting) if conflicting else ""
        note = ", ".join(part for part in (method, local, BUILTIN_LABEL if builtin else "", revision_note, files_note,
                                           _weights_note(group, model_revisions, grouping.superseded)) if part)
        scores = {hub: 100 * float(record.scores[MAIN_METRIC]) for hub, record in per_task.items() if MAIN_METRIC in record.scores}
        extras: dict[str, float] = {}
        task_extras: dict[str, dict[str, float]] = {}
        if benchmark == "nano":
            for hub in set(per_task) | set(candidates):
                task_extras[hub] = _task_extras(per_task.get(hub), candidates.get(hub))
            for key in NANO_EXTRA_METRICS:
                values = [columns[key] for columns in task_extras.values() if key in columns]
                if len(values) == len(task_columns()):
                    extras[key] = sum(values) / len(values)
        rows.append(
            LeaderboardRow(llm=llm, retriever=retriever, scores=scores, source="yours", note=note, extras=extras, task_extras=task_extras,
                           synthetic=revisions == SYNTHETIC_REVISION,
                           count_drift=revisions.endswith(COUNT_DRIFT) or revisions in (UNVERIFIED_DRIFT_SET, PINNED_DRIFT_SET),
                           revision_set=revisions,
                           task_revisions={hub: record.dataset_revision for hub, record in per_task.items()},
                           task_data={hub: record.judged_data for hub, record in per_task.items()},
                           expansion=_expansion_of(model), model=model, reranked=ResultName.parse(model).reranked,
                           sources={hub: record.path for hub, record in per_task.items() if MAIN_METRIC in record.scores})
        )
    return rows


def _weights_note(group: RowGroup, model_revisions: dict[tuple[str, bool, str], set[str]],
                  superseded: dict[RowGroup, list[RowGroup]]) -> str:
    """Which model revision a row shows, whenever the model has another one among the results."""
    hidden = sorted({older.model_revision for older in superseded.get(group, [])} - {group.model_revision})
    if hidden:
        return (f"model revision {group.model_revision} (newest; also found: {', '.join(hidden)}, "
                "not shown: this revision re-ran all of its tasks)")
    return f"model revision {group.model_revision}" if len(model_revisions.get(group.family, ())) > 1 else ""


def _expansion_of(model: str) -> str:
    expansion = ResultName.parse(model).expansion
    return expansion.format() if expansion else ""


def _label_other_files(rows: list[LeaderboardRow]) -> None:
    """Rows of different models whose results of one task come from different files (two mirrors without a commit
    record, an edited split) are labelled with those files: never shown side by side as if on the same data."""
    revisions: dict[tuple[str, str, str], set[str]] = {}  # (revision set, expansion, task) -> the data our rows hold
    ours = [row for row in rows if row.source == "yours" and BUILTIN_LABEL not in row.note]  # synthetic rows among theirs
    for row in ours:  # an expansion's file is part of its rows' data: rows are compared with rows of the same expansion
        for hub, judged in row.task_data.items():
            revisions.setdefault((row.revision_set, row.expansion, hub), set()).add(judged)
    for row in ours:
        differing = [hub for hub in sorted(row.task_data) if len(revisions[(row.revision_set, row.expansion, hub)]) > 1]
        labels = [f"{hub} files {judged_files(row.task_data[hub])}" for hub in differing if f"{hub} files " not in row.note]
        if labels:
            row.note = ", ".join(part for part in (row.note, *labels) if part)


def _keep_apart(rows: list[LeaderboardRow]) -> None:
    """Synthetic-sample rows are always labelled, and rows on data whose counts differ from the dataset card are
    noted; either kind is ranked only among rows of its own kind (the demo, a fixture), never next to rows on
    the dataset card's data, yours or published."""
    only_synthetic = all(row.synthetic for row in rows)
    only_drift = all(row.count_drift or row.synthetic for row in rows)
    for row in rows:
        if row.synthetic:
            row.note = ", ".join(part for part in (row.note, SYNTHETIC_LABEL) if part)
            if not only_synthetic:
                row.excluded = "synthetic sample (not R2MED data), never ranked next to real results"
        elif row.count_drift and not only_drift:
            row.excluded = "computed on data whose counts differ from the dataset card, never ranked next to results on it"


def _link_official_profiles(rows: list[LeaderboardRow]) -> None:
    """A row of an official profile on its official weights (``--retriever official:e5``, filed as
    ``intfloat/e5-mistral-7b-instruct+official-e5``), never excluded, names the published row it stands beside,
    with the published average and the difference, in its note; the published row names it back. Both stay ranked
    by their averages. Rows with an expansion are not linked (the published LLM labels are not ours)."""
    published = {row.retriever: row for row in rows if row.source == "published" and not row.llm}
    for row in rows:
        label = published_row_of(row.retriever) if row.source == "yours" and not row.llm and not row.excluded else None
        target = published.get(label) if label else None
        profile = profile_of_result(row.retriever)
        if target is None or target.published_average is None or profile is None:  # a published row has both
            continue
        average = sum(row.scores.get(column, 0.0) for column in task_columns()) / len(task_columns())
        beside = f"official:{profile.name} profile, published {label}: {target.published_average:.2f}"
        if not [column for column in task_columns() if column not in row.scores]:
            beside += f" ({average - target.published_average:+.2f})"
        row.note = ", ".join(part for part in (beside, row.note) if part)
        target.note = ", ".join(part for part in (target.note, f"official:{profile.name} run: {row.retriever}") if part)


def rank_rows(rows: Sequence[LeaderboardRow]) -> list[LeaderboardRow]:
    """Averages for complete rows; ranked rows by average (best first), then the incomplete ones."""
    columns = task_columns()
    for row in rows:
        row.missing = [column for column in columns if column not in row.scores]
        if row.excluded:
            row.average = None
        elif row.published_average is not None:
            row.average = row.published_average
        else:
            row.average = None if row.missing else sum(row.scores[c] for c in columns) / len(columns)
    from r2med_plugin.reporting.render import points

    ranked = sorted((r for r in rows if r.ranked),
                    key=lambda r: (-float(points(cast(float, r.average))), r.source != "yours", r.llm, r.retriever))
    unranked = sorted((r for r in rows if not r.ranked), key=lambda r: (r.llm, r.retriever))
    return ranked + unranked


def build_leaderboard(
    folders: Iterable[str | Path], *, benchmark: str = "r2med", compare_published: bool = False
) -> list[LeaderboardRow]:
    return _build(read_result_folders(folders), benchmark, compare_published)


def leaderboard_of(records: Sequence[ResultRecord], benchmark: str) -> list[LeaderboardRow]:
    """The ranked rows of ``records`` as ``r2med leaderboard`` shows them (synthetic and other-data rows labelled)."""
    return _build(records, benchmark, False)


def build_leaderboards(
    folders: Iterable[str | Path], *, benchmark: str | None = None, compare_published: bool = False
) -> dict[str, list[LeaderboardRow]]:
    """Benchmark -> ranked rows; with ``benchmark=None``, every benchmark the folders hold (R2MED, NanoR2MED or both)."""
    records = read_result_folders(folders)
    if benchmark is not None:
        return {benchmark: _build(records, benchmark, compare_published)}
    present = [name for name in BENCHMARKS if user_rows(records, name)]
    if not present:
        raise UserError(
            "no R2MED or NanoR2MED results found in the given folders; run `mteb run -t <task> -m <model>` or `r2med evaluate` first"
        )
    if compare_published and "r2med" not in present:
        raise UserError("published rows exist for the full R2MED benchmark only, and the folders hold only NanoR2MED results")
    return {name: _build(records, name, compare_published and name == "r2med") for name in present}


def published_leaderboard() -> list[LeaderboardRow]:
    """The published R2MED leaderboard alone: its rows and the official reranker results, ranked as
    ``build_leaderboard(..., compare_published=True)`` ranks them among yours."""
    return rank_rows(published_rows() + published_reranker_rows())


def _build(records: Sequence[ResultRecord], benchmark: str, compare_published: bool) -> list[LeaderboardRow]:
    rows = user_rows(records, benchmark)
    if compare_published:
        if benchmark != "r2med":
            raise SettingError("published rows exist for the full R2MED benchmark only (use {benchmark} r2med)", field="benchmark")
        rows += published_rows() + published_reranker_rows()
    _keep_apart(rows)
    if compare_published:
        _link_official_profiles(rows)
    _label_other_files(rows)
    if not rows:
        raise UserError(
            f"no {benchmark} results found in the given folders; run `mteb run -t <task> -m <model>` or `r2med evaluate` first"
        )
    ranked = rank_rows(rows)
    if compare_published:  # after ranking: the order stays what the expansion files' names give
        _name_published_llms(ranked)
    return ranked


def _name_published_llms(rows: list[LeaderboardRow]) -> None:
    """Your rows on a released expansion file that the published board names carry that name beside the file
    ("GPT4o (hyde/gpt4)"), so that a row and its published row read alike."""
    names = published_llm_names()
    for row in rows:
        if row.source == "yours" and row.expansion in names:
            row.llm = f"{names[row.expansion]} ({row.expansion})"


__all__ = [  # the leaderboard's own names; rows, grouping, rendering and result files live in their modules
    "BUILTIN_LABEL", "LOCAL_LABEL", "build_leaderboard", "build_leaderboards", "leaderboard_of",
    "published_leaderboard", "rank_rows", "split_model_name", "user_rows",
]
