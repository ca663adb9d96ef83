"""Charts of leaderboard rows (matplotlib, PNG or SVG by the file's extension)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from r2med_plugin.reporting.leaderboard import LeaderboardRow, task_columns

_COLORS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f"]


def _label(row: LeaderboardRow) -> str:
    name = f"{row.llm} | {row.retriever}" if row.llm else row.retriever
    return name + (" (published)" if row.source == "published" else "")


def default_selection(rows: Sequence[LeaderboardRow], published_count: int = 2) -> list[LeaderboardRow]:
    """The user's rows, plus the best published row and the published plain BM25 row."""
    mine = [row for row in rows if row.source == "yours"][:6]
    published = [row for row in rows if row.source == "published"]
    chosen = published[:1] + [row for row in published if row.retriever == "BM25" and not row.llm][:1]
    unique = [row for index, row in enumerate(chosen) if all(row is not other for other in chosen[:index])]
    return mine + unique[:published_count]


def _save(figure, path: Path) -> Path:
    path = Path(path)
    if path.suffix.lower() not in (".png", ".svg"):
        raise ValueError(f"plot file must end in .png or .svg, got {path.name!r}")
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=130, bbox_inches="tight")
    return path


@dataclass(frozen=True)
class _Series:
    name: str
    values: list[float]
    labels: list[str]
    hatch: str | None = None


def _grouped_bars(columns: list[str], series: Sequence[_Series], title: str, path: str | Path) -> Path:
    """One group of bars per column, one bar per series, the value printed on each bar, legend below."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

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
        return _save(figure, Path(path))
    finally:
        plt.close(figure)


def plot_tasks(rows: Sequence[LeaderboardRow], path: str | Path, title: str = "R2MED nDCG@10 x 100") -> Path:
    """Grouped bars: one group per task (official order), one bar per row; published rows hatched."""
    if not rows:
        raise ValueError("no rows to plot")
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
    columns = [c for c in task_columns() if c in row.scores]
    if not columns:
        raise ValueError(f"{row.retriever} has no NanoR2MED scores to plot")
    values = {
        "full corpus": [row.scores[c] for c in columns],
        "candidate subset (hybrid list)": [row.task_extras.get(c, {}).get("Cand. hybrid", 0.0) for c in columns],
        "hybrid fusion (model + BM25)": [row.task_extras.get(c, {}).get("Hybrid", 0.0) for c in columns],
    }
    series = [_Series(name, numbers, [f"{v:.1f}" for v in numbers]) for name, numbers in values.items()]
    return _grouped_bars(columns, series, title or f"NanoR2MED: {row.retriever}", path)
