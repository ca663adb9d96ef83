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

import csv
import html
import io
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

from r2med_plugin.catalog import list_tasks
from r2med_plugin.names import COUNT_DRIFT, SYNTHETIC_REVISION, DatasetRevision, ResultName

BENCHMARKS = ("r2med", "nano")
MAIN_METRIC = "ndcg_at_10"
NANO_EXTRA_COLUMNS = {
    "Hybrid": "hybrid_ndcg_at_10",
    "Cand. BM25": "candidates_bm25_ndcg_at_10",
    "Cand. dense": "candidates_dense_ndcg_at_10",
    "Cand. hybrid": "candidates_hybrid_ndcg_at_10_with_safeguard",
}
BUILTIN_LABEL = "mteb built-in R2MED*Retrieval"
LOCAL_LABEL = "generated locally"
SYNTHETIC_LABEL = "synthetic sample"
UNVERIFIED_SET = "pinned commits, unverified mirror files"
DRIFT_LABEL = "counts differ from the dataset card"
UNVERIFIED_DRIFT_SET = f"{UNVERIFIED_SET}, {DRIFT_LABEL}"
PINNED_DRIFT_SET = f"pinned commits, {DRIFT_LABEL}"
LOCAL_MIRROR_SET = "local-mirror-files"  # NanoR2MED mirror results with no commit recorded
BENCHMARK_TITLES = {"r2med": "R2MED", "nano": "NanoR2MED"}


@dataclass(frozen=True)
class ResultRecord:
    model: str
    revision: str
    task: str
    scores: dict
    date: float
    path: Path
    dataset_revision: str = ""
    candidates_only: bool = False
    count_drift: dict = field(default_factory=dict)  # counts that differed from the dataset card (--accept-drift)


@dataclass
class LeaderboardRow:
    llm: str
    retriever: str
    scores: dict[str, float]  # hub name -> nDCG@10 x 100
    source: str  # "yours" or "published"
    note: str = ""
    extras: dict[str, float] = field(default_factory=dict)
    task_extras: dict[str, dict[str, float]] = field(default_factory=dict)  # hub name -> column -> x100
    published_average: float | None = None  # the average as published (it may differ in the last digit)
    average: float | None = None
    missing: list[str] = field(default_factory=list)
    excluded: str = ""  # why the row is never ranked, whatever its scores (e.g. synthetic next to real rows)
    synthetic: bool = False
    count_drift: bool = False  # computed on data whose counts differ from the dataset card
    # r2med leaderboard --significance (r2med_plugin.reporting.leaderboard_significance)
    sources: dict[str, Path] = field(default_factory=dict)  # hub name -> the result file of that task's score
    interval: tuple[float, float] | None = None  # 95% interval of the average
    versus_best: str = ""  # "best", "tied", "below", or "-" (not tested: the reason is in significance)
    significance: str = ""  # a note under the table (the method, or why the row was not tested)

    @property
    def ranked(self) -> bool:
        return self.average is not None


def task_columns() -> list[str]:
    return [spec.hub_name for spec in list_tasks("r2med")]


def _task_index() -> dict[str, tuple[str, str, bool]]:
    """task name -> (benchmark, hub name, is mteb's built-in task)."""
    index = {}
    for spec in list_tasks():
        index[spec.name] = (spec.kind, spec.hub_name, False)
        if spec.mteb_builtin_task:
            index[spec.mteb_builtin_task] = ("r2med", spec.hub_name, True)
    return index


def read_result_folders(folders: Iterable[str | Path]) -> list[ResultRecord]:
    """Every MTEB TaskResult JSON under the folders (ResultCache layout: <model>/<revision>/<task>.json)."""
    records = []
    for folder in folders:
        folder = Path(folder)
        if not folder.is_dir():
            raise FileNotFoundError(f"{folder} is not a folder of MTEB results (expected results/<model>/<revision>/<task>.json)")
        for path in sorted(folder.rglob("*.json")):
            if path.name == "model_meta.json" or path.name.endswith("_predictions.json"):
                continue
            try:
                payload = json.loads(path.read_text(encoding="utf-8"))
            except (OSError, ValueError) as error:
                raise ValueError(f"{path}: not a readable result file ({error})") from error
            if not isinstance(payload, dict) or "task_name" not in payload or "scores" not in payload:
                continue
            task, scores = payload["task_name"], _main_split_scores(payload, path)
            candidates_only = payload.get("r2med_evaluation") == "candidates-only"
            if task.endswith(RERANKING_SUFFIX) and task.removesuffix(RERANKING_SUFFIX) in _nano_names():
                task, scores, candidates_only = task.removesuffix(RERANKING_SUFFIX), _reranking_as_candidates(scores), True
            records.append(
                ResultRecord(
                    model=_model_name(path), revision=path.parent.name, task=task,
                    scores=scores, date=float(payload.get("date") or path.stat().st_mtime), path=path,
                    dataset_revision=str(payload.get("dataset_revision") or ""), candidates_only=candidates_only,
                    count_drift=_recorded_drift(payload),
                )
            )
    return records


RERANKING_SUFFIX = "Reranking"


def _recorded_drift(payload: dict) -> dict:
    provenance = payload.get("r2med_provenance")
    drift = provenance.get("dataset_count_drift") if isinstance(provenance, dict) else None
    return drift if isinstance(drift, dict) else {}


def _nano_names() -> set[str]:
    return {spec.name for spec in list_tasks("nano")}


def _reranking_as_candidates(scores: dict) -> dict:
    """A NanoR2MED<Domain>Reranking result ranks the stored hybrid lists: its scores are the candidate-hybrid column."""
    return {f"candidates_hybrid_{key}": value for key, value in scores.items() if key.endswith("_safeguard")}


def _model_name(result_path: Path) -> str:
    meta = result_path.parent / "model_meta.json"
    if meta.is_file():
        try:
            name = json.loads(meta.read_text(encoding="utf-8")).get("name")
            if name:
                return str(name)
        except (OSError, ValueError):
            pass
    return result_path.parent.parent.name.replace("__", "/")


def _main_split_scores(payload: dict, path: Path) -> dict:
    splits = payload["scores"]
    entries = splits.get("test") or next(iter(splits.values()), [])
    for entry in entries:
        if entry.get("hf_subset", "default") == "default":
            return entry
    if entries:
        return entries[0]
    raise ValueError(f"{path}: the result holds no scores")


def split_model_name(model: str) -> tuple[str, str, str]:
    """(llm, retriever, note) for a model name (see r2med_plugin.names.ResultName): an expansion run's LLM and
    method, a reranked run's "Reranker | First stage" and depth, and the query prompt's label."""
    name = ResultName.parse(model)
    if name.reranked:
        return "", f"{name.retriever} | {name.first_stage}", f"rerank top {name.depth}"
    notes = [name.expansion.method] if name.expansion else []
    if name.prompt:
        notes.append("with instruction" if name.prompt == "instruction" else f"custom {name.prompt}")
    return (name.expansion.llm if name.expansion else ""), name.retriever, ", ".join(notes)


def _local_note(model: str) -> str:
    """ "generated locally @<folder id>" for an expansion from `r2med generate` (two folders, two rows), else ""."""
    expansion = ResultName.parse(model).expansion
    if expansion is None or not expansion.local:
        return ""
    return f"{LOCAL_LABEL} @{expansion.folder}" if expansion.folder else LOCAL_LABEL


@dataclass(frozen=True)
class _Group:
    """The results that may share a row: one model, one dataset revision set, one model revision, and one
    variant of the mirror files (results of one task on two different unverified files never share a row)."""

    model: str
    builtin: bool
    revisions: str
    model_revision: str
    variant: int = 0

    @property
    def family(self) -> tuple[str, bool, str]:
        return self.model, self.builtin, self.revisions


def _revision_set(record: ResultRecord, pinned: str | None, builtin: bool) -> str:
    """The revision set a result belongs to: "" for the pinned commits (and mteb's built-in tasks), else the commit."""
    revision = DatasetRevision.parse(record.dataset_revision)
    if revision.synthetic:
        return SYNTHETIC_REVISION
    if builtin or (pinned and record.dataset_revision in (pinned, "")):
        return ""
    drift = COUNT_DRIFT if revision.count_drift else ""
    if pinned and revision.commit == pinned:
        # the pins: proven, or not (a mirror without download records; each task its own fingerprint); data whose
        # counts drifted from the dataset card is a set apart
        if revision.unverified:
            return UNVERIFIED_DRIFT_SET if drift else UNVERIFIED_SET
        return PINNED_DRIFT_SET
    # NanoR2MED mirrors that prove no commit: each task is named by its own files, so the set is the commit
    # (or "local-mirror-files"); tasks of one set on two different files are told apart by grouped_records
    if revision.unverified:
        return revision.commit + "+unverified-files" + drift
    if revision.local:
        return LOCAL_MIRROR_SET + drift
    return record.dataset_revision


def _newest(per_task: dict[str, ResultRecord], hub: str, record: ResultRecord) -> None:
    current = per_task.get(hub)
    if current is None or record.date > current.date:
        per_task[hub] = record


def _task_extras(full: ResultRecord | None, candidates: ResultRecord | None) -> dict[str, float]:
    """The NanoR2MED extra columns of one task; a candidate column comes from the newer of the two results."""
    ordered = sorted((r for r in (full, candidates) if r is not None), key=lambda r: r.date, reverse=True)
    values = {}
    for column, key in NANO_EXTRA_COLUMNS.items():
        sources = [r for r in ordered if key in r.scores and not (column == "Hybrid" and r.candidates_only)]
        if sources:
            values[column] = 100 * float(sources[0].scores[key])
    return values


def _file_variants(members: Sequence[tuple[str, ResultRecord]]) -> list[list[tuple[str, ResultRecord]]]:
    """Split one group's (hub, record) pairs so that no variant holds one task on two dataset revisions.

    Newest first: variant 0 holds each task's newest files; a task's results on other files go to further
    variants (rows of their own, labelled with the files), never silently into the same row."""
    variants: list[tuple[dict[str, str], list[tuple[str, ResultRecord]]]] = []
    for hub, record in sorted(members, key=lambda pair: pair[1].date, reverse=True):
        for seen, chosen in variants:
            if seen.get(hub, record.dataset_revision) == record.dataset_revision:
                seen[hub] = record.dataset_revision
                chosen.append((hub, record))
                break
        else:
            variants.append(({hub: record.dataset_revision}, [(hub, record)]))
    return [chosen for _, chosen in variants]


@dataclass
class Grouping:
    """(full-corpus, candidate-only) results per row group -> hub name -> the newest record of that task,
    with the model revisions each kept group stands in for, and the tasks whose files differ between variants."""

    full: dict[_Group, dict[str, ResultRecord]]
    partial: dict[_Group, dict[str, ResultRecord]]
    superseded: dict[_Group, list[_Group]] = field(default_factory=dict)
    conflicting_files: dict[tuple[str, bool, str, str], set[str]] = field(default_factory=dict)

    def __iter__(self):  # (full, partial) = grouped_records(...) keeps working
        return iter((self.full, self.partial))


def grouped_records(records: Sequence[ResultRecord], benchmark: str = "r2med") -> Grouping:
    """(full-corpus, candidate-only) results per row group -> hub name -> the newest record of that task.

    A group is one model on one dataset revision set at one model revision (older revisions that a newer
    one fully covers are dropped, and the newer row says so), and one variant of the mirror files: the
    records of a group may share a row, no others.
    """
    if benchmark not in BENCHMARKS:
        raise ValueError(f"benchmark must be one of {BENCHMARKS}, got {benchmark!r}")
    index = _task_index()
    pins = {spec.name: spec.revision for spec in list_tasks()}
    buckets: dict[tuple[str, bool, str, str], list[tuple[str, ResultRecord]]] = {}
    for record in records:
        kind = index.get(record.task)
        if kind is None or kind[0] != benchmark:
            continue
        key = (record.model, kind[2], _revision_set(record, pins.get(record.task), kind[2]), record.revision)
        buckets.setdefault(key, []).append((kind[1], record))
    grouping = Grouping(full={}, partial={})
    for key, members in buckets.items():
        variants = _file_variants(members)
        if len(variants) > 1:
            revisions: dict[str, set[str]] = {}
            for hub, record in members:
                revisions.setdefault(hub, set()).add(record.dataset_revision)
            grouping.conflicting_files[key] = {hub for hub, found in revisions.items() if len(found) > 1}
        for variant, chosen in enumerate(variants):
            group = _Group(*key, variant=variant)
            grouping.full.setdefault(group, {})
            for hub, record in chosen:
                _newest((grouping.partial if record.candidates_only else grouping.full).setdefault(group, {}), hub, record)
    grouping.superseded = _drop_superseded(grouping.full, grouping.partial)
    return grouping


def _files_label(group: _Group, per_task: dict[str, ResultRecord], conflicting: set[str]) -> str:
    """ "Biology files c1f3a2b4": the mirror files of the tasks whose results exist on other files too."""
    parts = []
    for hub in sorted(conflicting & set(per_task)):
        revision = per_task[hub].dataset_revision
        marker = DatasetRevision.parse(revision).files or revision
        parts.append(f"{hub} files {marker[:8]}")
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
        several = len(real_sets.get((model, builtin), ())) > 1
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
            for column in NANO_EXTRA_COLUMNS:
                values = [columns[column] for columns in task_extras.values() if column in columns]
                if len(values) == len(task_columns()):
                    extras[column] = sum(values) / len(values)
        rows.append(
            LeaderboardRow(llm=llm, retriever=retriever, scores=scores, source="yours", note=note, extras=extras, task_extras=task_extras,
                           synthetic=revisions == SYNTHETIC_REVISION,
                           count_drift=revisions.endswith(COUNT_DRIFT) or revisions in (UNVERIFIED_DRIFT_SET, PINNED_DRIFT_SET),
                           sources={hub: record.path for hub, record in per_task.items() if MAIN_METRIC in record.scores})
        )
    return rows


def _weights_note(group: _Group, model_revisions: dict[tuple[str, bool, str], set[str]],
                  superseded: dict[_Group, list[_Group]]) -> str:
    """Which model revision a row shows, whenever the model has another one among the results."""
    hidden = sorted({older.model_revision for older in superseded.get(group, [])} - {group.model_revision})
    if hidden:
        return (f"model revision {group.model_revision} (newest; also found: {', '.join(hidden)}, "
                "not shown: this revision re-ran all of its tasks)")
    return f"model revision {group.model_revision}" if len(model_revisions.get(group.family, ())) > 1 else ""


def _drop_superseded(full: dict[_Group, dict[str, ResultRecord]], partial: dict[_Group, dict[str, ResultRecord]]
                     ) -> dict[_Group, list[_Group]]:
    """Newest wins between model revisions only as a whole: an older model revision is dropped when a newer
    revision of the same model holds every task it holds; otherwise the two stay separate rows. Returns, for
    each kept group, the groups it stands in for (its row says so)."""
    families: dict[tuple[str, bool, str], list[_Group]] = {}
    for group in full:
        families.setdefault(group.family, []).append(group)

    def covers(newer: _Group, older: _Group) -> bool:
        # full-corpus and candidate-only results are compared apart: candidate-only results never
        # stand in for an older revision's task scores; variants of one revision never stand in for each other
        return (newer.model_revision != older.model_revision and set(full[older]) <= set(full[newer])
                and set(partial.get(older, {})) <= set(partial.get(newer, {})))

    def newest(group: _Group) -> float:
        return max(record.date for record in [*full[group].values(), *partial.get(group, {}).values()])

    superseded: dict[_Group, list[_Group]] = {}
    for groups in families.values():
        ordered = sorted(groups, key=newest, reverse=True)
        for position, group in enumerate(ordered):
            keeper = next((newer for newer in ordered[:position] if newer in full and covers(newer, group)), None)
            if keeper is not None:
                superseded.setdefault(keeper, []).extend([group, *superseded.pop(group, [])])
                del full[group]
                partial.pop(group, None)
    return superseded


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


def published_rows() -> list[LeaderboardRow]:
    """The published R2MED leaderboard (shipped with the package)."""
    text = (resources.files("r2med_plugin") / "reporting" / "r2med_leaderboard.json").read_text(encoding="utf-8")
    return [
        LeaderboardRow(
            llm=row["llm"] or "", retriever=row["retriever"], scores=dict(row["scores"]), source="published",
            published_average=float(row["avg"]),
        )
        for row in json.loads(text)["rows"]
    ]


def published_reranker_rows() -> list[LeaderboardRow]:
    """The official reranker results (results/reranker/<reranker>/<retriever>/top_<k>/, shipped with the
    package): one "Reranker | First stage" row per reranker, first stage and depth, nDCG@10 x 100."""
    text = (resources.files("r2med_plugin") / "reporting" / "r2med_reranker_results.json").read_text(encoding="utf-8")
    facts = json.loads(text)
    models = facts["models"]
    grouped: dict[tuple[str, str, int], dict[str, float]] = {}
    for result in facts["results"]:
        key = (result["reranker_name"], result["retriever_name"], int(result["topk"]))
        grouped.setdefault(key, {})[result["dataset_name"]] = 100 * float(result["test"]["NDCG@10"])
    return [
        LeaderboardRow(
            llm="", retriever=f"{_short(models.get(reranker, reranker))} | {_short(models.get(retriever, retriever))}",
            scores=scores, source="published", note=f"rerank top {depth}",
        )
        for (reranker, retriever, depth), scores in grouped.items()
    ]


def _short(model: str) -> str:
    """The model's name without its hub organisation, as the leaderboard names models (NV-Embed-v2)."""
    return model.rsplit("/", 1)[-1]


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
    ranked = sorted((r for r in rows if r.ranked), key=lambda r: (-round(r.average, 2), r.source != "yours", r.llm, r.retriever))
    unranked = sorted((r for r in rows if not r.ranked), key=lambda r: (r.llm, r.retriever))
    return ranked + unranked


def build_leaderboard(
    folders: Iterable[str | Path], *, benchmark: str = "r2med", compare_published: bool = False
) -> list[LeaderboardRow]:
    return _build(read_result_folders(folders), benchmark, compare_published)


def build_leaderboards(
    folders: Iterable[str | Path], *, benchmark: str | None = None, compare_published: bool = False
) -> dict[str, list[LeaderboardRow]]:
    """Benchmark -> ranked rows; with ``benchmark=None``, every benchmark the folders hold (R2MED, NanoR2MED or both)."""
    records = read_result_folders(folders)
    if benchmark is not None:
        return {benchmark: _build(records, benchmark, compare_published)}
    present = [name for name in BENCHMARKS if user_rows(records, name)]
    if not present:
        raise ValueError(
            "no R2MED or NanoR2MED results found in the given folders; run `mteb run -t <task> -m <model>` or `r2med evaluate` first"
        )
    if compare_published and "r2med" not in present:
        raise ValueError("published rows exist for the full R2MED benchmark only, and the folders hold only NanoR2MED results")
    return {name: _build(records, name, compare_published and name == "r2med") for name in present}


def _build(records: Sequence[ResultRecord], benchmark: str, compare_published: bool) -> list[LeaderboardRow]:
    rows = user_rows(records, benchmark)
    if compare_published:
        if benchmark != "r2med":
            raise ValueError("published rows exist for the full R2MED benchmark only (use --benchmark r2med)")
        rows += published_rows() + published_reranker_rows()
    _keep_apart(rows)
    if not rows:
        raise ValueError(
            f"no {benchmark} results found in the given folders; run `mteb run -t <task> -m <model>` or `r2med evaluate` first"
        )
    return rank_rows(rows)


# --- rendering -------------------------------------------------------------------------------------


def _partial_extras(row: LeaderboardRow) -> dict[str, int]:
    """NanoR2MED extra column -> number of tasks holding it, for columns held by some tasks but not all
    (no average is shown for those: it would mix task sets)."""
    counts = {column: sum(column in values for values in row.task_extras.values()) for column in NANO_EXTRA_COLUMNS}
    return {column: count for column, count in counts.items() if count and column not in row.extras}


def _header(rows: Sequence[LeaderboardRow]) -> list[str]:
    extras = [c for c in NANO_EXTRA_COLUMNS if any(c in r.extras or c in _partial_extras(r) for r in rows)]
    tested = ["vs best"] if any(r.versus_best for r in rows) else []
    return ["Rank", "LLM", "Retriever", "Avg.", *tested, *task_columns(), *extras]


def table_cells(rows: Sequence[LeaderboardRow]) -> tuple[list[str], list[list[str]]]:
    header = _header(rows)
    body, rank = [], 0
    for row in rows:
        rank = rank + 1 if row.ranked else rank
        retriever = row.retriever + (f" ({row.note})" if row.note else "") + (" [published]" if row.source == "published" else "")
        cells = [str(rank) if row.ranked else "-", row.llm or "-", retriever, f"{row.average:.2f}" if row.ranked else "-"]
        if row.interval is not None and row.ranked:
            cells[-1] += f" [{row.interval[0]:.2f}, {row.interval[1]:.2f}]"
        if "vs best" in header:
            cells.append(row.versus_best or "-")
        cells += [f"{row.scores[c]:.2f}" if c in row.scores else "-" for c in task_columns()]
        cells += [f"{row.extras[c]:.2f}" if c in row.extras else "-" for c in header[len(cells):]]
        body.append(cells)
    return header, body


def row_label(row: LeaderboardRow) -> str:
    """"LLM | Retriever (notes)": the expansion method and revision notes keep otherwise equal rows apart."""
    name = f"{row.llm} | {row.retriever}" if row.llm else row.retriever
    return name + (f" ({row.note})" if row.note else "")


def notes(rows: Sequence[LeaderboardRow]) -> list[str]:
    lines = [
        f"{row_label(row)}: not ranked, " + (row.excluded if row.excluded else f"missing {', '.join(row.missing)}")
        for row in rows if not row.ranked
    ]
    for row in rows:
        partial = _partial_extras(row)
        if partial:
            held = "; ".join(f"{column} on {count} of {len(task_columns())} tasks" for column, count in partial.items())
            lines.append(f"{row_label(row)}: no average for {held} (averages need every task)")
    lines += [row.significance for row in rows if row.significance]
    return lines


def render_many(tables: dict[str, Sequence[LeaderboardRow]], fmt: str = "md") -> str:
    """One table as ``render`` gives it; several, each under its benchmark's title."""
    if len(tables) == 1:
        return render(next(iter(tables.values())), fmt)
    parts = []
    for benchmark, rows in tables.items():
        title = BENCHMARK_TITLES[benchmark]
        text = render(rows, fmt)
        if fmt == "md":
            parts.append(f"## {title}\n\n{text}")
        elif fmt == "csv":
            parts.append(f"{title}\n{text}")
        else:
            body = text.split("<body>\n", 1)[1].rsplit("</body>", 1)[0]
            parts.append(f"<h2>{html.escape(title)}</h2>\n{body}")
    if fmt == "html":
        return ("<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>R2MED leaderboard</title></head><body>\n"
                + "".join(parts) + "</body></html>\n")
    return "\n".join(parts)


def render(rows: Sequence[LeaderboardRow], fmt: str = "md") -> str:
    header, body = table_cells(rows)
    footnotes = notes(rows)
    if fmt == "md":
        lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
        lines += ["| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |" for cells in body]  # "Reranker | First stage"
        return "\n".join(lines + ([""] + [f"- {note}" for note in footnotes] if footnotes else [])) + "\n"
    if fmt == "csv":
        buffer = io.StringIO()
        writer = csv.writer(buffer, lineterminator="\n")
        writer.writerow(header)
        writer.writerows(body)
        return buffer.getvalue()
    if fmt == "html":
        head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
        rows_html = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in cells) + "</tr>" for cells in body)
        notes_html = "".join(f"<li>{html.escape(n)}</li>" for n in footnotes)
        return (
            "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>R2MED leaderboard</title></head><body>\n"
            f"<table border=\"1\"><thead><tr>{head}</tr></thead><tbody>{rows_html}</tbody></table>\n"
            + (f"<ul>{notes_html}</ul>\n" if notes_html else "") + "</body></html>\n"
        )
    raise ValueError(f"format must be md, csv or html, got {fmt!r}")
