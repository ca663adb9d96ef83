"""``r2med leaderboard --significance``: intervals on the averages, and which rows tie with the best.

For each of your complete rows whose results carry per-query files (r2med_plugin.reporting.per_query):

- the average (nDCG@10 x 100 over the benchmark's 8 tasks) gets a 95% BCa bootstrap interval, queries
  resampled within each task (r2med_plugin.significance.stratified_interval);
- the best such row is compared with every other by a paired randomization test of the difference of
  the averages (sign flips of the per-query differences, each query weighted 1 / (8 x its task's queries)),
  Holm-corrected over the rows compared; a row whose difference is not significant is marked ``tied``,
  the others ``below``. A note under the table names the test, the correction, the seed and alpha;
- each such row is also tested against the nearest such row above it (``versus_above``: the same test,
  one p-value per pair of neighbours, corrected over the pairs): ``tied`` = not separable from the row
  above. The HTML page (``leaderboard --html``) shows this column; the terminal table does not.

Published rows have no per-query scores: they are shown as before, untested. Rows whose files lack
per-query scores, or whose queries differ from the best row's, are marked ``-`` with the reason.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

import numpy as np

from r2med_plugin import significance as sig
from r2med_plugin.reporting.per_query import per_query_path, read_per_query
from r2med_plugin.reporting.render import row_label
from r2med_plugin.reporting.rows import MAIN_METRIC, LeaderboardRow, task_columns


def _row_values(row: LeaderboardRow, metric: str) -> tuple[dict[str, dict[str, float]] | None, str]:
    """hub -> query id -> metric x 100 for every task of the row, or (None, why not)."""
    values: dict[str, dict[str, float]] = {}
    for hub in task_columns():
        result = row.sources.get(hub)
        if result is None:
            return None, f"no {hub} result"
        path = per_query_path(result)
        if not path.is_file():
            return None, f"no per-query file {path} (evaluate again to write it)"
        frame = read_per_query(path).frame
        chosen = frame.filter(frame["metric"] == metric)
        if chosen.height == 0:
            return None, f"{path} holds no {metric}"
        values[hub] = {q: 100.0 * v for q, v in zip(chosen["query_id"].to_list(), chosen["value"].to_list(), strict=True)}
    return values, ""


def add_significance(
    rows: Sequence[LeaderboardRow],
    *,
    alpha: float = sig.DEFAULT_ALPHA,
    correction: str = sig.DEFAULT_CORRECTION,
    seed: int = sig.DEFAULT_SEED,
    permutations: int = sig.DEFAULT_PERMUTATIONS,
    metric: str = MAIN_METRIC,
) -> list[LeaderboardRow]:
    """Copies of ``rows`` (order kept) with interval, versus_best, versus_above and significance set; the inputs
    are not changed."""
    sig.check_correction(correction)
    alpha = sig.check_alpha(alpha)
    permutations = sig.check_permutations(permutations)
    out = [dataclasses.replace(row) for row in rows]
    data = _tested_rows(out, metric=metric, permutations=permutations, seed=seed)
    if not data:  # say why --significance added nothing, rather than nothing at all
        yours = [row for row in out if row.source == "yours"]
        if yours and not any(row.significance for row in yours):
            yours[0].significance = ("--significance: no interval and no test, as no row of yours is ranked in this "
                                     "table (the notes above say why each is not)")
        return out
    _versus_best(out, data, metric=metric, alpha=alpha, correction=correction, seed=seed, permutations=permutations)
    _versus_above(out, data, alpha=alpha, correction=correction, seed=seed, permutations=permutations)
    return out


def _tested_rows(out: list[LeaderboardRow], *, metric: str, permutations: int, seed: int) -> dict[int, dict[str, dict[str, float]]]:
    """Index -> per-query values of each of your ranked rows with per-query files (their intervals set); the others
    are marked ``-`` with the reason."""
    data: dict[int, dict[str, dict[str, float]]] = {}
    for index, row in enumerate(out):
        if row.source != "yours":
            continue
        if not row.ranked:
            row.versus_best = "-"
            continue
        values, why = _row_values(row, metric)
        if values is None:
            row.versus_best = "-"
            row.significance = f"{row_label(row)}: not tested, {why}"
            continue
        data[index] = values
        row.interval = sig.stratified_interval([list(v.values()) for v in values.values()], resamples=permutations, seed=seed)
    return data


def _unpaired(row: LeaderboardRow, values: dict[str, dict[str, float]], reference: LeaderboardRow,
              reference_values: dict[str, dict[str, float]]) -> str:
    """Why ``row``'s per-query scores cannot be paired with ``reference``'s, as the notes say it; "" when they can."""
    other_data = [hub for hub, judged in row.task_data.items()
                  if reference.task_data.get(hub, judged) != judged and row.expansion == reference.expansion]
    if row.revision_set != reference.revision_set or other_data:
        return (f"not tested against {row_label(reference)}: computed on other data "
                f"({', '.join(other_data) or row.revision_set or 'pinned commits'})")
    hub = next((h for h in values if set(values[h]) != set(reference_values[h])), None)
    return f"not tested, its {hub} queries differ from those of {row_label(reference)} (other data)" if hub else ""


def _paired(values: dict[str, dict[str, float]], reference_values: dict[str, dict[str, float]]) -> tuple[np.ndarray, np.ndarray]:
    """Per-query differences from the reference (task by task, queries sorted) and the weights that make their
    weighted sum the difference of the averages over the tasks."""
    order = [(hub, q) for hub in task_columns() for q in sorted(reference_values[hub])]
    diffs = np.array([values[hub][q] - reference_values[hub][q] for hub, q in order])
    weights = np.array([1.0 / (len(task_columns()) * len(reference_values[hub])) for hub, _ in order])
    return diffs, weights


def _correction_text(correction: str, count: int, noun: str, tail: str) -> str:
    """ "Holm correction over the 3 rows compared", or "no correction"."""
    if correction == "none":
        return "no correction"
    return f"{correction.capitalize()} correction over the {count} {noun}{'' if count == 1 else 's'} {tail}"


def _versus_best(out: list[LeaderboardRow], data: dict[int, dict[str, dict[str, float]]], *, metric: str, alpha: float,
                 correction: str, seed: int, permutations: int) -> None:
    best_index = max(data, key=lambda i: (out[i].average, -i))
    best = out[best_index]
    best.versus_best = "best"
    tested: list[int] = []
    diffs: list[np.ndarray] = []
    weights: np.ndarray | None = None
    for index, values in data.items():
        if index == best_index:
            continue
        why = _unpaired(out[index], values, best, data[best_index])
        if why:
            out[index].versus_best = "-"
            out[index].significance = f"{row_label(out[index])}: {why}"
            continue
        difference, weights = _paired(values, data[best_index])
        diffs.append(difference)
        tested.append(index)
    if tested:
        p = sig.randomization_p_values(np.vstack(diffs), permutations=permutations, seed=seed, weights=weights)
        _, rejected = sig.corrected(p, correction, alpha)
        for index, reject in zip(tested, rejected, strict=True):
            out[index].versus_best = "below" if reject else "tied"
    interval_text = (f"Avg. [95% CI]: BCa bootstrap of the average, queries resampled within each task ({permutations} "
                     f"resamples, seed {seed}).")
    if not tested:  # nothing to compare the best with: no "vs best" column, and the reason instead of a test
        best.versus_best = "-"
        best.significance = (f"{interval_text} vs best: not tested, {row_label(best)} is the only row of yours with "
                             "per-query scores on these data (published rows have none)")
        return
    top = next((row for row in out if row.ranked), None)
    published_best = (f" The top row, {row_label(top)}, is published and has no per-query scores: ties are judged against the "
                      "best of your rows." if top is not None and top.source == "published" else "")
    best.significance = (
        f"{interval_text} vs best: paired randomization test of the difference in average {metric} x 100 from {row_label(best)} "
        f"(sign flips of per-query differences, {permutations} permutations, seed {seed}), "
        f"{_correction_text(correction, len(tested), 'row', 'compared')}, alpha {alpha}; "
        f"tied = not significantly different from the best.{published_best}"
    )


def _versus_above(out: list[LeaderboardRow], data: dict[int, dict[str, dict[str, float]]], *, alpha: float, correction: str,
                  seed: int, permutations: int) -> None:
    """Each tested row against the nearest tested row above it (the same paired test as vs best, one p-value per
    pair, corrected over the pairs): ``tied`` = not separable from the row above."""
    order = sorted(data)  # the table's order
    if len(order) < 2:  # no neighbours to compare
        return
    pairs: list[tuple[int, int]] = []
    p_values: list[float] = []
    for upper, lower in zip(order, order[1:], strict=False):
        why = _unpaired(out[lower], data[lower], out[upper], data[upper])
        if why:
            out[lower].versus_above, out[lower].above_detail = "-", why
            continue
        difference, weights = _paired(data[lower], data[upper])
        p_values.extend(sig.randomization_p_values(difference, permutations=permutations, seed=seed, weights=weights))
        pairs.append((upper, lower))
    adjusted, rejected = sig.corrected(p_values, correction, alpha)
    for (upper, lower), p, reject in zip(pairs, adjusted, rejected, strict=True):
        out[lower].versus_above = "below" if reject else "tied"
        out[lower].above_detail = f"against {row_label(out[upper])}: p = {p:.4f}" + ("" if correction == "none" else f" ({correction})")
    out[order[0]].adjacent_note = (
        f"vs above: each of your tested rows against the nearest tested row above it, the same paired randomization test "
        f"({permutations} permutations, seed {seed}), {_correction_text(correction, len(pairs), 'pair', 'of neighbours')}, "
        f"alpha {alpha}; tied = not separable from the row above."
    )


def significance_for_tables(tables: Mapping[str, Sequence[LeaderboardRow]], **options) -> dict[str, list[LeaderboardRow]]:
    """add_significance for each benchmark's table (what ``r2med leaderboard --significance`` runs)."""
    return {benchmark: add_significance(rows, **options) for benchmark, rows in tables.items()}

