"""Charts of leaderboard rows (matplotlib, PNG or SVG by the file's extension)."""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

from r2med_plugin.errors import UserError
from r2med_plugin.optional_dependencies import import_extra, require_extra
from r2med_plugin.reporting.render import row_label
from r2med_plugin.reporting.rows import LeaderboardRow, task_columns
from r2med_plugin.rules import SettingError

_COLORS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f"]
NEEDS_MATPLOTLIB = "drawing a chart (--plot, r2med demo, r2med_plugin.reporting.plots)"
DEFAULT_USER_ROWS = 6  # rows of yours in a default R2MED chart; the rest are named as dropped, never silently


def _label(row: LeaderboardRow) -> str:
    return row_label(row) + (" (published)" if row.source == "published" else "")


def yours_real_first(rows: Sequence[LeaderboardRow]) -> list[LeaderboardRow]:
    """Your rows in table order, those on the shipped synthetic sample last (a folder that mixes the demo's results
    with real ones would otherwise draw the demo's first)."""
    mine = [row for row in rows if row.source == "yours"]
    return [row for row in mine if not row.synthetic] + [row for row in mine if row.synthetic]


def default_selection(rows: Sequence[LeaderboardRow], published_count: int = 2) -> list[LeaderboardRow]:
    """The user's first rows, plus the best published row and the published plain BM25 row."""
    mine = yours_real_first(rows)[:DEFAULT_USER_ROWS]
    published = [row for row in rows if row.source == "published"]
    chosen = published[:1] + [row for row in published if row.retriever == "BM25" and not row.llm][:1]
    unique = [row for index, row in enumerate(chosen) if all(row is not other for other in chosen[:index])]
    return mine + unique[:published_count]


PLOT_SUFFIXES = (".png", ".svg")


def save_figure(figure, path: Path) -> Path:
    path = Path(path)
    if path.suffix.lower() not in PLOT_SUFFIXES:
        raise UserError(f"plot file must end in .png or .svg, got {path.name!r}")
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=130, bbox_inches="tight")
    return path


@dataclass(frozen=True)
class _Series:
    name: str
    values: list[float]
    labels: list[str]
    hatch: str | None = None


def require_matplotlib(extra: str | None = None) -> None:
    """MissingExtraError (naming the ``plots`` extra, or ``extra``) unless matplotlib is installed; checked before any work."""
    require_extra("matplotlib", NEEDS_MATPLOTLIB, extra)


def pyplot() -> ModuleType:
    """matplotlib.pyplot on the Agg backend (files only, no window), or MissingExtraError naming the ``plots`` extra."""
    import_extra("matplotlib", NEEDS_MATPLOTLIB).use("Agg")
    return importlib.import_module("matplotlib.pyplot")


def _grouped_bars(columns: list[str], series: Sequence[_Series], title: str, path: str | Path) -> Path:
    """One group of bars per column, one bar per series, the value printed on each bar, legend below."""
    plt = pyplot()
    width = 0.8 / len(series)
    figure, axis = plt.subplots(figsize=(max(10, 1.6 * len(columns)), 5.2))
    for index, item in enumerate(series):
        positions = [c + (index - (len(series) - 1) / 2) * width for c in range(len(columns))]
        bars = axis.bar(positions, item.values, width, label=item.name, color=_COLORS[index % len(_COLORS)],
                        hatch=item.hatch, edgecolor="white")
        axis.bar_label(bars, labels=item.labels, fontsize=7, rotation=90, padding=2)
    axis.set_xticks(range(len(columns)), columns, rotation=20, ha="right")
    axis.set_ylabel("nDCG@10 x 100")
    axis.set_title(title)
    axis.set_ylim(0, max((v for item in series for v in item.values), default=1.0) * 1.25 + 1)
    axis.legend(loc="upper center", bbox_to_anchor=(0.5, -0.18), ncol=min(3, len(series)), frameon=False)
    axis.spines[["top", "right"]].set_visible(False)
    try:
        return save_figure(figure, Path(path))
    finally:
        plt.close(figure)


def plot_tasks(rows: Sequence[LeaderboardRow], path: str | Path, title: str = "R2MED nDCG@10 x 100") -> Path:
    """Grouped bars: one group per task (official order), one bar per row; published rows hatched."""
    if not rows:
        raise UserError("no rows to plot")
    columns = task_columns()
    series = [
        _Series(
            name=_label(row),
            values=[row.scores.get(column, 0.0) for column in columns],
            labels=[f"{row.scores[column]:.1f}" if column in row.scores else "n/a" for column in columns],
            hatch="//" if row.source == "published" else None,
        )
        for row in rows
    ]
    return _grouped_bars(columns, series, title, path)


def plot_nano(row: LeaderboardRow, path: str | Path, title: str | None = None) -> Path:
    """For one model on NanoR2MED: full corpus vs candidate subset (hybrid list) vs hybrid fusion, per task."""
    columns = [c for c in task_columns() if c in row.scores or row.task_extras.get(c)]
    if not columns:
        raise UserError(f"{row_label(row)} has no NanoR2MED scores to plot")
    values = {
        "full corpus": [row.scores.get(c) for c in columns],
        "candidate subset (hybrid list)": [row.task_extras.get(c, {}).get("candidates_hybrid_ndcg_at_10_with_safeguard") for c in columns],
        "hybrid fusion (model + BM25)": [row.task_extras.get(c, {}).get("hybrid_ndcg_at_10") for c in columns],
    }
    # A score that was never computed is drawn as an empty slot labelled n/a, never as a bar labelled 0.0.
    series = [
        _Series(name, [v or 0.0 for v in numbers], [f"{v:.1f}" if v is not None else "n/a" for v in numbers])
        for name, numbers in values.items()
    ]
    return _grouped_bars(columns, series, title or f"NanoR2MED: {row_label(row)}", path)


def select_rows(rows: Sequence[LeaderboardRow], selection: Sequence[str]) -> list[LeaderboardRow]:
    """Rows by 'all', by row number as printed (1 = the table's first row) or by label ('LLM | Retriever (notes)')."""
    if list(selection) == ["all"]:
        return list(rows)
    labels = {_label(row): row for row in rows} | {row_label(row): row for row in rows}
    chosen = []
    for item in selection:
        if item.isdigit() and 1 <= int(item) <= len(rows):
            chosen.append(rows[int(item) - 1])
        elif item in labels:
            chosen.append(labels[item])
        else:
            known = "; ".join(f"{number}: {_label(row)}" for number, row in enumerate(rows, start=1))
            raise SettingError(f"{{selection}}: no row {item!r}; give 'all', row numbers or labels: {known}", field="selection",
                               flags={"selection": "--plot-rows"})
    return [row for index, row in enumerate(chosen) if all(row is not other for other in chosen[:index])]


def plot_leaderboard(
    rows: Sequence[LeaderboardRow], path: str | Path, *, benchmark: str = "r2med", selection: Sequence[str] | None = None
) -> tuple[Path, list[str]]:
    """The chart of a leaderboard table; returns the file and the labels of the rows left out (never silently).

    Default: R2MED, your first 6 rows against the best published row and the published BM25; NanoR2MED,
    your first row (full corpus vs candidate subset vs hybrid). ``selection`` picks rows (see select_rows);
    several NanoR2MED rows are drawn side by side on full-corpus nDCG@10.
    """
    if selection:
        chosen = select_rows(rows, selection)
    elif benchmark == "nano":
        chosen = yours_real_first(rows)[:1]
    else:
        chosen = default_selection(rows)
    dropped = [_label(row) for row in rows if row.source == "yours" and all(row is not other for other in chosen)]
    if benchmark == "nano":
        if len(chosen) == 1:
            return plot_nano(chosen[0], path), dropped
        return plot_tasks(chosen, path, title="NanoR2MED nDCG@10 x 100 (full corpus)"), dropped
    return plot_tasks(chosen, path), dropped
