"""``r2med compare``: paired significance tests of models against a baseline, over per-query scores.

Input: result folders (MTEB ResultCache layout) whose results of R2MED / NanoR2MED tasks carry the
per-query sidecar ``<Task>.per_query.parquet`` (r2med_plugin.reporting.per_query). For one metric, each
model is compared with the baseline query by query:

- per task, and pooled over every evaluated query of a benchmark's tasks (876 queries for R2MED);
- wins / ties / losses, the mean difference with its 95% BCa bootstrap interval, Cohen's d_z, and a
  two-sided p-value (randomization, t-test or Wilcoxon; r2med_plugin.significance) corrected
  for multiple comparisons (Holm, Bonferroni or none) over the models compared with the baseline in that
  task (or that pooled row), as PyTerrier's ``Experiment(baseline=..., correction=...)`` does;
- the randomization test and the bootstrap use ``seed``; the report states it.

Scores and differences are shown x 100 (points) in Markdown and HTML, unscaled in CSV.
"""

from __future__ import annotations

import csv
import difflib
import html
import io
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path

import numpy as np
import polars as pl

from r2med_plugin import significance as sig
from r2med_plugin.catalog import list_tasks
from r2med_plugin.errors import UserError
from r2med_plugin.identifiers import ResultName, described_data, judged_data
from r2med_plugin.reporting.per_query import Sidecar, per_query_path, read_per_query
from r2med_plugin.reporting.result_files import ResultRecord, read_result_folders
from r2med_plugin.rules import SettingError

DEFAULT_METRIC = "ndcg_at_10"
FORMATS = ("md", "csv", "html")
RERANKING_SUFFIX = "Reranking"
BENCHMARK_NAMES = {"r2med": "R2MED", "nano": "NanoR2MED"}


# --- loading ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ModelTask:
    """One model's per-query values of one metric on one task."""

    model: str  # the label (model name, with @revision where a model has several)
    task: str
    query_ids: tuple[str, ...]
    values: np.ndarray
    path: Path  # the sidecar the values come from
    dataset_revision: str = ""  # what the values were judged on: the revision and the files read (judged_data)


@dataclass(frozen=True)
class PerQueryScores:
    """Per-query values of one metric: model label -> task -> ModelTask, with every sidecar read."""

    metric: str
    models: tuple[str, ...]
    tasks: tuple[str, ...]
    table: Mapping[str, Mapping[str, ModelTask]]
    sidecars: Mapping[tuple[str, str], tuple[Sidecar, ...]] = field(default_factory=dict)  # (label, task) -> files
    notes: tuple[str, ...] = ()  # results left out (they lack the metric)

    def get(self, model: str, task: str) -> ModelTask | None:
        return self.table.get(model, {}).get(task)


def our_task_names() -> list[str]:
    """Task names whose results carry per-query sidecars, in catalog order (Reranking after its task)."""
    names = []
    for spec in list_tasks():
        names.append(spec.name)
        if spec.kind == "nano":
            names.append(spec.name + RERANKING_SUFFIX)
    return names


def task_benchmark(task: str) -> str:
    """"r2med" or "nano" for one of our task names."""
    base = task.removesuffix(RERANKING_SUFFIX)
    return next(spec.kind for spec in list_tasks() if spec.name == base)


def _labels(keys: Iterable[tuple[str, str]]) -> dict[tuple[str, str], str]:
    """(model, revision) -> label: the model name, with "@revision" when the folders hold several revisions of it."""
    keys = sorted(set(keys))
    revisions: dict[str, int] = {}
    for model, _ in keys:
        revisions[model] = revisions.get(model, 0) + 1
    return {(model, revision): model if revisions[model] == 1 else f"{model}@{revision}" for model, revision in keys}


def load_sidecars(folders: Sequence[str | Path]) -> dict[tuple[str, str], tuple[Sidecar, ...]]:
    """(model label, task) -> the sidecars of that model's results of that task (full-corpus and candidates-only).

    Every MTEB result of one of our tasks must have its sidecar: a missing one raises ValueError naming it."""
    if not folders:
        raise UserError("give at least one result folder (RESULTS...)")
    known = set(our_task_names())
    records = [record for record in read_result_folders(folders) if record.path.stem in known]
    if not records:
        raise UserError(
            f"no results of R2MED or NanoR2MED tasks under {', '.join(map(str, folders))}; evaluate first "
            "(r2med evaluate --task ... --output DIR, or mteb run), then pass DIR"
        )
    labels = _labels((record.model, record.revision) for record in records)
    found: dict[tuple[str, str], list[Sidecar]] = {}
    for record in records:
        path = per_query_path(record.path)
        if not path.is_file():
            raise UserError(
                f"{record.path}: its per-query file {path.name} is missing. Results written before per-query files existed "
                "(or copied without them) cannot be compared: evaluate that model again (r2med evaluate ... --output, "
                "a sweep, or mteb run with r2med-plugin installed), or leave its folder out"
            )
        found.setdefault((labels[(record.model, record.revision)], record.path.stem), []).append(
            _with_judged_data(read_per_query(path), record))
    return {key: tuple(files) for key, files in found.items()}


def _with_judged_data(sidecar: Sidecar, record: ResultRecord) -> Sidecar:
    """The sidecar with ``paired_data`` (what a paired test pairs by) filled in where an earlier release wrote none:
    its paired revision plus the files fingerprint its result file records (not for a released expansion's result,
    whose recorded fingerprint also covers the expansion's file, which a paired test does not judge)."""
    if sidecar.info.get("paired_data"):
        return sidecar
    revision = str(sidecar.info.get("paired_revision") or sidecar.info.get("dataset_revision") or record.dataset_revision)
    expansion = ResultName.parse(record.model).expansion
    files = record.files_fingerprint if expansion is None or expansion.local else ""
    return replace(sidecar, info={**sidecar.info, "paired_data": judged_data(revision, files, record.revision_verified)})


def _metric_values(sidecars: Sequence[Sidecar], metric: str, label: str, task: str) -> tuple[pl.DataFrame, Sidecar] | None:
    holding = [sidecar for sidecar in sidecars if (sidecar.frame["metric"] == metric).any()]
    if len(holding) > 1:
        raise UserError(
            f"{label} has two {task} results with {metric}: {holding[0].path} and {holding[1].path} (two folders, or two "
            "dataset revisions); pass only one of them"
        )
    if not holding:
        return None
    frame = holding[0].frame.filter(pl.col("metric") == metric)
    if frame["query_id"].n_unique() != frame.height:
        raise UserError(f"{holding[0].path}: query ids repeat for {metric}; the file is broken, write it again")
    return frame, holding[0]


def load_scores(folders: Sequence[str | Path], metric: str = DEFAULT_METRIC) -> PerQueryScores:
    """Per-query values of ``metric`` for every model and task in ``folders``.

    A metric that no result holds, or that some result of a task lacks while others hold it, raises
    ValueError naming the file and the metrics it has."""
    if not metric:
        raise SettingError("{metric} is empty; e.g. {metric} ndcg_at_10", field="metric")
    sidecars = load_sidecars(folders)
    table: dict[str, dict[str, ModelTask]] = {}
    missing: list[Sidecar] = []
    for (label, task), files in sidecars.items():
        chosen = _metric_values(files, metric, label, task)
        if chosen is None:
            missing.append(files[0])
            continue
        frame, sidecar = chosen
        table.setdefault(label, {})[task] = ModelTask(
            model=label, task=task, query_ids=tuple(frame["query_id"].to_list()), values=frame["value"].to_numpy().copy(),
            path=sidecar.path,  # a paired test pairs runs scored on the same judged data (an expansion's file aside)
            dataset_revision=str(sidecar.info.get("paired_data") or ""),
        )
    if not table:
        sidecar = missing[0]
        available = sidecar.metrics
        close = difflib.get_close_matches(metric, available, n=3)
        hint = f"; did you mean {' or '.join(close)}?" if close else "."
        raise SettingError(
            f"{sidecar.path}: no per-query values of {metric!r}{hint} It holds: {', '.join(available)}; choose one with "
            "{metric}", field="metric")
    notes = tuple(f"{sidecar.path}: no per-query values of {metric}; left out" for sidecar in missing)
    order = {name: index for index, name in enumerate(our_task_names())}
    tasks = tuple(sorted({task for tasks in table.values() for task in tasks}, key=order.__getitem__))
    return PerQueryScores(metric=metric, models=tuple(sorted(table)), tasks=tasks, table=table, sidecars=sidecars, notes=notes)


def aligned(scores: PerQueryScores, model: str, baseline: str, task: str) -> tuple[tuple[str, ...], np.ndarray, np.ndarray]:
    """(query ids, model values, baseline values) in one query order; different query sets raise ValueError."""
    ours, theirs = scores.get(model, task), scores.get(baseline, task)
    if ours is None or theirs is None:
        raise UserError(f"{task}: {model if ours is None else baseline} has no {scores.metric} result")
    other_data = data_difference(scores, model, baseline, task)
    if other_data:
        raise UserError(f"{other_data}. Evaluate both on the same data, or compare them in separate runs")
    if set(ours.query_ids) != set(theirs.query_ids):
        only_ours = sorted(set(ours.query_ids) - set(theirs.query_ids))
        only_theirs = sorted(set(theirs.query_ids) - set(ours.query_ids))
        example = f"{only_ours[0]!r} only in {ours.path}" if only_ours else f"{only_theirs[0]!r} only in {theirs.path}"
        raise UserError(
            f"{task}: {model} was evaluated on {len(ours.query_ids)} queries ({ours.path}), {baseline} on "
            f"{len(theirs.query_ids)} ({theirs.path}); {len(only_ours) + len(only_theirs)} differ (e.g. {example}). "
            "Paired tests need the same queries: evaluate both on the same data (same dataset revision and mirror)"
        )
    position = {query_id: index for index, query_id in enumerate(theirs.query_ids)}
    order = np.array([position[query_id] for query_id in ours.query_ids], dtype=np.int64)
    return ours.query_ids, ours.values.copy(), theirs.values[order]


def data_difference(scores: PerQueryScores, model: str, baseline: str, task: str) -> str | None:
    """Why ``model``'s and ``baseline``'s results of ``task`` cannot be paired, when they were judged on other data (other
    revisions or files, both named with their result files); None when both hold the same data or either is unknown."""
    ours, theirs = scores.get(model, task), scores.get(baseline, task)
    if ours is None or theirs is None or not ours.dataset_revision or not theirs.dataset_revision:
        return None
    if ours.dataset_revision == theirs.dataset_revision:
        return None
    return (f"{task}: {model} was evaluated on {described_data(ours.dataset_revision)} ({ours.path}), {baseline} on "
            f"{described_data(theirs.dataset_revision)} ({theirs.path}): other data (other qrels or texts), so a paired test "
            "means nothing")


def resolve_model(scores: PerQueryScores, name: str, what: str = "baseline") -> str:
    """The label of ``name`` (a label, or a model name held at one revision); ``what``: the setting that gave it."""
    if name in scores.models:
        return name
    matches = [label for label in scores.models if label.split("@", 1)[0] == name]
    if len(matches) == 1:
        return matches[0]
    if len(matches) > 1:
        raise SettingError(f"{{{what}}} {name!r} has several revisions here: {', '.join(matches)}; name one of them", field=what)
    close = difflib.get_close_matches(name, scores.models, n=3, cutoff=0.5)
    hint = f" Did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
    lacking = {label for label, _ in scores.sidecars if label == name or label.split("@", 1)[0] == name} - set(scores.models)
    if lacking:
        raise SettingError(f"{{{what}}} {name!r} has results here but none with per-query {scores.metric} (a run shallower "
                           "than the metric's depth, e.g. {top_k} 10 for recall_at_100, has none); choose another {metric}, "
                           f"or evaluate {name} again with a deeper {{top_k}}", field=what)
    raise SettingError(f"{{{what}}} {name!r} is not among the models in the folders ({', '.join(scores.models)}).{hint}",
                       field=what)


def default_baseline(scores: PerQueryScores) -> str:
    """The model holding the most tasks, then the best mean over them (macro average)."""
    def key(model: str) -> tuple[int, float, str]:
        tasks = scores.table[model]
        return (len(tasks), float(np.mean([mt.values.mean() for mt in tasks.values()])), model)

    return max(scores.models, key=key)


# --- comparisons -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Comparison:
    scope: str  # a task name, or "all <benchmark> tasks" (pooled)
    pooled: bool
    model: str
    baseline: str
    n: int
    mean: float
    baseline_mean: float
    delta: float
    ci_low: float
    ci_high: float
    effect_size: float
    wins: int
    ties: int
    losses: int
    p_value: float
    p_adjusted: float
    significant: bool
    excluded: tuple[str, ...] = ()  # a pooled row: the tasks left out because the model's data differ from the baseline's

    @property
    def label(self) -> str:
        """The scope as the table shows it: a pooled row names the tasks it leaves out."""
        return f"{self.scope} (without {', '.join(self.excluded)}: other data)" if self.excluded else self.scope


@dataclass(frozen=True)
class ComparisonReport:
    metric: str
    baseline: str
    test: str
    correction: str
    alpha: float
    seed: int
    permutations: int
    comparisons: tuple[Comparison, ...]
    models: tuple[str, ...]
    notes: tuple[str, ...] = ()
    confidence: float = sig.CONFIDENCE

    def method_lines(self) -> list[str]:
        test = {
            "randomization": f"two-sided paired randomization test (sign flips, {self.permutations} permutations, seed {self.seed})",
            "t-test": "two-sided paired t-test (scipy.stats.ttest_rel)",
            "wilcoxon": "two-sided Wilcoxon signed-rank test (scipy.stats.wilcoxon, zero differences dropped)",
        }[self.test]
        correction = ("no correction for multiple comparisons" if self.correction == "none" else
                      f"{self.correction.capitalize()} correction over the models compared with the baseline in each row group")
        return [
            f"metric: {self.metric}; baseline: {self.baseline}; differences are model - baseline",
            f"test: {test}; {correction}; alpha {self.alpha}",
            f"intervals: {round(self.confidence * 100)}% BCa bootstrap of the mean difference ({self.permutations} resamples, "
            f"seed {self.seed}); effect size: Cohen's d_z (mean difference / SD of the differences)",
        ]


def _scope_comparisons(
    scope: str, pooled: bool, baseline: str, pairs: Sequence[tuple[str, np.ndarray, np.ndarray]], *, test: str, correction: str,
    alpha: float, seed: int, permutations: int,
) -> list[Comparison]:
    """One row group: each (model, model values, baseline values) of one scope, tested and corrected together."""
    if not pairs:
        return []
    comparisons: list[Comparison] = []
    by_length: dict[int, list[int]] = {}
    for index, (_, values, _) in enumerate(pairs):
        by_length.setdefault(len(values), []).append(index)
    p = np.empty(len(pairs))
    intervals = np.empty((len(pairs), 2))
    for indices in by_length.values():  # one matrix per query count: every model at once
        diffs = np.vstack([pairs[i][1] - pairs[i][2] for i in indices])
        if test == "t-test" and diffs.shape[1] < 2:
            raise SettingError(f"{scope}: a t-test needs at least two queries; use {{test}} randomization", field="test")
        p[indices] = sig.p_values(diffs, test, permutations=permutations, seed=seed)
        intervals[indices] = sig.bootstrap_intervals(diffs, resamples=permutations, seed=seed)
    adjusted, rejected = sig.corrected(p, correction, alpha)
    for index, (model, values, base) in enumerate(pairs):
        diff = values - base
        (wins, ties, losses), = sig.win_tie_loss(diff)
        comparisons.append(Comparison(
            scope=scope, pooled=pooled, model=model, baseline=baseline, n=len(values), mean=float(values.mean()),
            baseline_mean=float(base.mean()), delta=float(diff.mean()), ci_low=float(intervals[index, 0]),
            ci_high=float(intervals[index, 1]), effect_size=float(sig.effect_sizes(diff)[0]), wins=int(wins), ties=int(ties),
            losses=int(losses), p_value=float(p[index]), p_adjusted=float(adjusted[index]), significant=bool(rejected[index]),
        ))
    return comparisons


def compare_scores(
    scores: PerQueryScores,
    *,
    baseline: str | None = None,
    test: str = sig.DEFAULT_TEST,
    correction: str = sig.DEFAULT_CORRECTION,
    alpha: float = sig.DEFAULT_ALPHA,
    seed: int = sig.DEFAULT_SEED,
    permutations: int = sig.DEFAULT_PERMUTATIONS,
    show_progress: bool = False,
) -> ComparisonReport:
    """Every model against ``baseline`` (default: default_baseline) per task and pooled per benchmark."""
    sig.check_test(test)
    sig.check_correction(correction)
    alpha = sig.check_alpha(alpha)
    permutations = sig.check_permutations(permutations)
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise UserError(f"seed (--seed) must be a non-negative integer, got {seed!r}")
    if len(scores.models) < 2:
        only = scores.models[0] if scores.models else "none"
        raise UserError(f"compare needs at least two models with {scores.metric} results; the folders hold only {only}: "
                        "add the result folder of another model")
    base = resolve_model(scores, baseline) if baseline is not None else default_baseline(scores)
    scope_comparisons = partial(_scope_comparisons, test=test, correction=correction, alpha=alpha, seed=seed, permutations=permutations)
    paired = _paired_by_task(scores, base, show_progress)
    if not paired.by_task and paired.left_out:  # every task of every model is on other data than the baseline's
        raise UserError(f"{paired.left_out[0][2]}. Nothing else is left to compare: evaluate both on the same data")
    comparisons: list[Comparison] = []
    for task, pairs in paired.by_task.items():
        comparisons += scope_comparisons(task, False, base, pairs)
    for benchmark, per_model in paired.pooled.items():
        pairs = [(model, np.concatenate([v for v, _ in chunks]), np.concatenate([b for _, b in chunks]))
                 for model, chunks in per_model.items()]
        pooled = scope_comparisons(f"all {BENCHMARK_NAMES[benchmark]} tasks", True, base, pairs)
        comparisons += [replace(c, excluded=tuple(task for task, model, _ in paired.left_out if model == c.model
                                                  and task_benchmark(task) == benchmark)) for c in pooled]
    notes = [*scores.notes, *paired.notes]
    notes += small_sample_notes(comparisons, test, alpha)
    return ComparisonReport(metric=scores.metric, baseline=base, test=test, correction=correction, alpha=alpha, seed=int(seed),
                            permutations=permutations, comparisons=tuple(comparisons), models=scores.models, notes=tuple(notes))


@dataclass(frozen=True)
class _Paired:
    """Each task's (model, values, baseline values) in one query order, the same chunks per benchmark for the pooled
    rows, the (task, model, reason) left out because the model's data differ from the baseline's, and the notes."""

    by_task: dict[str, list[tuple[str, np.ndarray, np.ndarray]]]
    pooled: dict[str, dict[str, list[tuple[np.ndarray, np.ndarray]]]]
    left_out: list[tuple[str, str, str]]
    notes: list[str]


def _paired_by_task(scores: PerQueryScores, base: str, show_progress: bool) -> _Paired:
    """Pair every other model's per-query values with the baseline's, task by task. A task whose data differ from the
    baseline's is left out for that model (said in a note, and in its pooled row); the other tasks are compared."""
    paired = _Paired({}, {}, [], [])
    missing: dict[str, list[str]] = {}
    tasks: Iterable[str] = scores.tasks
    if show_progress:
        from tqdm.auto import tqdm

        from r2med_plugin.quiet import bar_disabled

        tasks = tqdm(tasks, desc="compare", unit="task", disable=bar_disabled(show_progress))
    for task in tasks:
        if scores.get(base, task) is None:
            paired.notes.append(f"{task}: the baseline {base} has no result; not compared")
            continue
        for model in (model for model in scores.models if model != base):
            if scores.get(model, task) is None:
                missing.setdefault(model, []).append(task)
                continue
            other_data = data_difference(scores, model, base, task)
            if other_data:
                paired.left_out.append((task, model, other_data))
                paired.notes.append(f"{other_data}; {task} is left out for {model}, and its pooled row excludes it")
                continue
            _, values, base_values = aligned(scores, model, base, task)
            paired.by_task.setdefault(task, []).append((model, values, base_values))
            paired.pooled.setdefault(task_benchmark(task), {}).setdefault(model, []).append((values, base_values))
    compared = {model for rows in paired.by_task.values() for model, _, _ in rows}
    for model, tasks_missing in missing.items():
        rest = ("its pooled row covers the other tasks" if model in compared else
                f"no task holds both it and the baseline {base}, so it is not compared")
        paired.notes.append(f"{model}: no result for {', '.join(tasks_missing)}; {rest}")
    return paired


INTERVAL_AND_TEST = (
    "why an interval and a test can disagree: the interval is a bootstrap of the queries at hand (it resamples them, "
    "so on few queries it cannot be wider than the spread they show, and it runs too narrow), the test asks how often "
    "the differences, their signs flipped at random, give a mean as large; on few queries they can disagree, and the "
    "test's p is the one that says whether the difference could be chance")


def small_sample_notes(comparisons: Sequence[Comparison], test: str, alpha: float) -> list[str]:
    """Notes where few non-zero differences put a floor on p at or above alpha (no result could be significant), and
    where a row's interval and its test disagree (one excludes 0, the other is not significant, or the reverse)."""
    notes = []
    for c in comparisons:
        floor = sig.smallest_p_value(test, c.wins + c.losses)
        if floor is not None and floor >= alpha:
            k = c.wins + c.losses
            notes.append(f"{c.scope}, {c.model}: {k} of {c.n} differences are not 0; a {test} test on {k} differences cannot "
                         f"give p below 2/2^{k} = {floor:.4f}, so it cannot be significant at alpha {alpha}, whatever they are: "
                         "evaluate more queries, or read the difference as a description, not a finding")
    disagree = [c for c in comparisons if (c.ci_low > 0 or c.ci_high < 0) != c.significant and not math.isnan(c.ci_low)]
    if disagree:
        rows = "; ".join(f"{c.scope}, {c.model}" for c in disagree)
        notes.append(f"the interval excludes 0 where the test is not significant, or the reverse ({rows}); {INTERVAL_AND_TEST}")
    return notes


def compare_results(folders: Sequence[str | Path], *, metric: str = DEFAULT_METRIC, **options) -> ComparisonReport:
    """load_scores + compare_scores: what ``r2med compare`` runs."""
    return compare_scores(load_scores(folders, metric), **options)


# --- rendering -------------------------------------------------------------------------------------

HEADER = ["Task", "Model", "n", "Model mean", "Baseline mean", "Diff.", "95% CI", "d_z", "W/T/L", "p", "p adj.", "Sig."]
CSV_HEADER = ["task", "model", "baseline", "n", "model_mean", "baseline_mean", "diff", "ci_low", "ci_high", "effect_size_dz",
              "wins", "ties", "losses", "p_value", "p_adjusted", "significant", "test", "correction", "alpha", "seed", "permutations"]


def _points(value: float) -> str:
    return "-" if math.isnan(value) else f"{100 * value:+.2f}" if value else "0.00"


def _p(value: float) -> str:
    return f"{value:.4f}" if value >= 1e-4 else f"{value:.1e}"


def report_cells(report: ComparisonReport) -> list[list[str]]:
    rows = []
    for c in report.comparisons:
        rows.append([
            c.label, c.model, str(c.n), f"{100 * c.mean:.2f}", f"{100 * c.baseline_mean:.2f}", _points(c.delta),
            f"[{_points(c.ci_low)}, {_points(c.ci_high)}]", "-" if math.isnan(c.effect_size) else f"{c.effect_size:+.2f}",
            f"{c.wins}/{c.ties}/{c.losses}", _p(c.p_value), _p(c.p_adjusted), "yes" if c.significant else "no",
        ])
    return rows


def render_report(report: ComparisonReport, fmt: str = "md") -> str:
    """The comparison table in Markdown, CSV or HTML, with the method and the seed stated."""
    if fmt not in FORMATS:
        raise UserError(f"format (--format) must be one of {', '.join(FORMATS)}, got {fmt!r}")
    if fmt == "csv":
        buffer = io.StringIO()
        writer = csv.writer(buffer, lineterminator="\n")
        writer.writerow(CSV_HEADER)
        for c in report.comparisons:
            writer.writerow([c.label, c.model, c.baseline, c.n, repr(c.mean), repr(c.baseline_mean), repr(c.delta), repr(c.ci_low),
                             repr(c.ci_high), repr(c.effect_size), c.wins, c.ties, c.losses, repr(c.p_value), repr(c.p_adjusted),
                             c.significant, report.test, report.correction, report.alpha, report.seed, report.permutations])
        return buffer.getvalue()
    lines = report.method_lines()
    scale = f"{report.metric} x 100 (differences in points)"
    if fmt == "md":
        out = [f"- {line}" for line in lines] + [f"- scores: {scale}", ""]
        out += ["| " + " | ".join(HEADER) + " |", "|" + "|".join("---" for _ in HEADER) + "|"]
        out += ["| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |" for cells in report_cells(report)]
        out += [""] + [f"- {note}" for note in report.notes] if report.notes else []
        return "\n".join(out) + "\n"
    head = "".join(f"<th>{html.escape(h)}</th>" for h in HEADER)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in cells) + "</tr>" for cells in report_cells(report))
    items = "".join(f"<li>{html.escape(line)}</li>" for line in [*lines, f"scores: {scale}"])
    notes = "".join(f"<li>{html.escape(note)}</li>" for note in report.notes)
    return ("<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>r2med compare</title></head><body>\n"
            f"<ul>{items}</ul>\n<table border=\"1\"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>\n"
            + (f"<ul>{notes}</ul>\n" if notes else "") + "</body></html>\n")


def plot_report(report: ComparisonReport, path: str | Path) -> Path:
    """Per-task (and pooled) differences from the baseline with their intervals, one marker per model."""
    from r2med_plugin.reporting.plots import PLOT_SUFFIXES, pyplot, save_figure

    if Path(path).suffix.lower() not in PLOT_SUFFIXES:
        raise SettingError(f"{{path}} {path}: the chart is written as {' or '.join(PLOT_SUFFIXES)}; name the file e.g. "
                           "compare.png", field="path", flags={"path": "--plot"})
    plt = pyplot()
    scopes = list(dict.fromkeys(c.scope for c in report.comparisons))
    models = [m for m in report.models if m != report.baseline]
    if not scopes:
        raise UserError("nothing to plot: no comparison was made")
    height = max(3.0, 0.45 * len(scopes) * max(1, min(len(models), 6)) / 2 + 1.5)
    figure, axis = plt.subplots(figsize=(9, height))
    step = 0.8 / max(1, len(models))
    for index, model in enumerate(models):
        rows = [(scopes.index(c.scope), c) for c in report.comparisons if c.model == model]
        if not rows:
            continue
        y = np.array([position for position, _ in rows]) + (index - (len(models) - 1) / 2) * step
        x = np.array([100 * c.delta for _, c in rows])
        errors = np.array([[100 * (c.delta - c.ci_low) for _, c in rows], [100 * (c.ci_high - c.delta) for _, c in rows]])
        filled = [c.significant for _, c in rows]
        color = f"C{index % 10}"
        axis.errorbar(x, y, xerr=errors, fmt="none", capsize=2, linewidth=1, ecolor=color)
        axis.scatter(x, y, marker="o", s=24, color=color, label=model,
                     facecolors=[color if f else "white" for f in filled], edgecolors=color, zorder=3)
    axis.axvline(0.0, color="black", linewidth=0.8)
    axis.set_yticks(range(len(scopes)), scopes)
    axis.invert_yaxis()
    axis.set_xlabel(f"{report.metric} x 100: model - {report.baseline} (95% CI; filled = significant)")
    axis.set_title(f"r2med compare ({report.test}, {report.correction}, alpha {report.alpha}, seed {report.seed})", fontsize=9)
    axis.legend(fontsize=7, loc="best")
    try:
        return save_figure(figure, Path(path))
    finally:
        plt.close(figure)
