"""Which result records may share a leaderboard row: one model, one dataset revision set, one model
revision and one set of mirror files. Older model revisions a newer one fully covers are dropped (and the
newer row says so); results of one task on two sets of files go to rows of their own."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from r2med_plugin.catalog import list_tasks
from r2med_plugin.errors import UserError
from r2med_plugin.identifiers import COUNT_DRIFT, SYNTHETIC_REVISION, DatasetRevision
from r2med_plugin.reporting.result_files import ResultRecord
from r2med_plugin.reporting.rows import BENCHMARKS

SYNTHETIC_LABEL = "synthetic sample"
UNVERIFIED_SET = "pinned commits, unverified mirror files"
DRIFT_LABEL = "counts differ from the dataset card"
UNVERIFIED_DRIFT_SET = f"{UNVERIFIED_SET}, {DRIFT_LABEL}"
PINNED_DRIFT_SET = f"pinned commits, {DRIFT_LABEL}"
LOCAL_MIRROR_SET = "local-mirror-files"  # NanoR2MED mirror results with no commit recorded


def data_label(entries: Iterable[Mapping]) -> str | None:
    """The leaderboard's words for the data a verdict stands on when it is not proven pinned data, from entries
    ``{"dataset_revision", "verified", "count_drift", ...}`` (a reproduction's ``data``); None when every entry is."""
    entries = list(entries)
    revisions = [DatasetRevision.parse(str(entry.get("dataset_revision") or "")) for entry in entries]
    words = []
    if any(revision.synthetic for revision in revisions):
        words.append(SYNTHETIC_LABEL)
    elif any(revision.local for revision in revisions):
        words.append(LOCAL_MIRROR_SET)
    elif any(entry.get("verified") is not True for entry in entries):
        words.append(UNVERIFIED_SET)
    if any(entry.get("count_drift") or revision.count_drift for entry, revision in zip(entries, revisions, strict=True)):
        words.append(DRIFT_LABEL)
    return ", ".join(words) or None


def task_index() -> dict[str, tuple[str, str, bool]]:
    """task name -> (benchmark, hub name, is mteb's built-in task)."""
    index: dict[str, tuple[str, str, bool]] = {}
    for spec in list_tasks():
        index[spec.name] = (spec.kind, spec.hub_name, False)
        if spec.mteb_builtin_task:
            index[spec.mteb_builtin_task] = ("r2med", spec.hub_name, True)
    return index


@dataclass(frozen=True)
class RowGroup:
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


def revision_set(record: ResultRecord, pinned: str | None, builtin: bool) -> str:
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


def _file_variants(members: Sequence[tuple[str, ResultRecord]]) -> list[list[tuple[str, ResultRecord]]]:
    """Split one group's (hub, record) pairs so that no variant holds one task on two sets of data (dataset
    revision and files read: an edited copy of the synthetic sample is other data under the same label).

    Newest first: variant 0 holds each task's newest files; a task's results on other files go to further
    variants (rows of their own, labelled with the files), never silently into the same row."""
    variants: list[tuple[dict[str, str], list[tuple[str, ResultRecord]]]] = []
    for hub, record in sorted(members, key=lambda pair: pair[1].date, reverse=True):
        for seen, chosen in variants:
            if seen.get(hub, record.judged_data) == record.judged_data:
                seen[hub] = record.judged_data
                chosen.append((hub, record))
                break
        else:
            variants.append(({hub: record.judged_data}, [(hub, record)]))
    return [chosen for _, chosen in variants]


@dataclass
class Grouping:
    """(full-corpus, candidate-only) results per row group -> hub name -> the newest record of that task,
    with the model revisions each kept group stands in for, and the tasks whose files differ between variants."""

    full: dict[RowGroup, dict[str, ResultRecord]]
    partial: dict[RowGroup, dict[str, ResultRecord]]
    superseded: dict[RowGroup, list[RowGroup]] = field(default_factory=dict)
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
        raise UserError(f"benchmark must be one of {BENCHMARKS}, got {benchmark!r}")
    index = task_index()
    pins = {spec.name: spec.revision for spec in list_tasks()}
    buckets: dict[tuple[str, bool, str, str], list[tuple[str, ResultRecord]]] = {}
    for record in records:
        kind = index.get(record.task)
        if kind is None or kind[0] != benchmark:
            continue
        key = (record.model, kind[2], revision_set(record, pins.get(record.task), kind[2]), record.revision)
        buckets.setdefault(key, []).append((kind[1], record))
    grouping = Grouping(full={}, partial={})
    for key, members in buckets.items():
        variants = _file_variants(members)
        if len(variants) > 1:
            revisions: dict[str, set[str]] = {}
            for hub, record in members:
                revisions.setdefault(hub, set()).add(record.judged_data)
            grouping.conflicting_files[key] = {hub for hub, found in revisions.items() if len(found) > 1}
        for variant, chosen in enumerate(variants):
            group = RowGroup(*key, variant=variant)
            grouping.full.setdefault(group, {})
            for hub, record in chosen:
                _newest((grouping.partial if record.candidates_only else grouping.full).setdefault(group, {}), hub, record)
    grouping.superseded = _drop_superseded(grouping.full, grouping.partial)
    return grouping


def _drop_superseded(full: dict[RowGroup, dict[str, ResultRecord]], partial: dict[RowGroup, dict[str, ResultRecord]]
                     ) -> dict[RowGroup, list[RowGroup]]:
    """Newest wins between model revisions only as a whole: an older model revision is dropped when a newer
    revision of the same model holds every task it holds; otherwise the two stay separate rows. Returns, for
    each kept group, the groups it stands in for (its row says so)."""
    families: dict[tuple[str, bool, str], list[RowGroup]] = {}
    for group in full:
        families.setdefault(group.family, []).append(group)

    def dates(group: RowGroup) -> list[float]:
        return [record.date for record in [*full[group].values(), *partial.get(group, {}).values()]]

    def covers(newer: RowGroup, older: RowGroup) -> bool:
        # full-corpus and candidate-only results are compared apart: candidate-only results never
        # stand in for an older revision's task scores; variants of one revision never stand in for each other.
        # A complete re-run: every result of the newer revision is newer than every result of the older one (one
        # task re-run of old weights never hides a newer complete run).
        return (newer.model_revision != older.model_revision and set(full[older]) <= set(full[newer])
                and set(partial.get(older, {})) <= set(partial.get(newer, {})) and min(dates(newer)) > max(dates(older)))

    def newest(group: RowGroup) -> float:
        return max(record.date for record in [*full[group].values(), *partial.get(group, {}).values()])

    superseded: dict[RowGroup, list[RowGroup]] = {}
    for groups in families.values():
        ordered = sorted(groups, key=newest, reverse=True)
        for position, group in enumerate(ordered):
            keeper = next((newer for newer in ordered[:position] if newer in full and covers(newer, group)), None)
            if keeper is not None:
                superseded.setdefault(keeper, []).extend([group, *superseded.pop(group, [])])
                del full[group]
                partial.pop(group, None)
    return superseded
