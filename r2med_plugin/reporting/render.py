"""Rendering leaderboard rows: Markdown, CSV or HTML tables with their notes."""

from __future__ import annotations

import csv
import html
import io
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal

from r2med_plugin.errors import UserError
from r2med_plugin.reporting.rows import BENCHMARK_TITLES, EXTRA_LABELS, NANO_EXTRA_METRICS, LeaderboardRow, task_columns

_HTML_HEAD = "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>R2MED leaderboard</title></head><body>\n"
_HTML_TAIL = "</body></html>\n"


def _partial_extras(row: LeaderboardRow) -> dict[str, int]:
    """NanoR2MED extra column -> number of tasks holding it, for columns held by some tasks but not all
    (no average is shown for those: it would mix task sets)."""
    counts = {key: sum(key in values for values in row.task_extras.values()) for key in NANO_EXTRA_METRICS}
    return {key: count for key, count in counts.items() if count and key not in row.extras}


def _header(rows: Sequence[LeaderboardRow]) -> list[str]:
    extras = [EXTRA_LABELS[key] for key in _extra_keys(rows)]
    tested = ["vs best"] if any(r.versus_best not in (None, "", "-") for r in rows) else []
    return ["Rank", "LLM", "Retriever", "Avg.", *tested, *task_columns(), *extras]


def _extra_keys(rows: Sequence[LeaderboardRow]) -> list[str]:
    return [key for key in NANO_EXTRA_METRICS if any(key in r.extras or key in _partial_extras(r) for r in rows)]


@dataclass(frozen=True)
class TableLine:
    """One line of the leaderboard table: the row and its cells as every format shows them."""

    row: LeaderboardRow
    rank: int | None  # None: not ranked ("-")
    cells: tuple[str, ...]


@dataclass(frozen=True)
class Table:
    """The leaderboard table: what Markdown, CSV, the HTML table and the HTML page (reporting/leaderboard_page.py) show."""

    header: tuple[str, ...]
    lines: tuple[TableLine, ...]


def points(value: float) -> str:
    """nDCG x 100 with two decimals, rounded half up as written: 100 x mteb's 0.88525 is 88.53, where formatting the
    float (88.52499999999999) would print 88.52 and disagree with the per-query mean 0.885251 that compare prints."""
    return str(Decimal(repr(round(value, 9))).quantize(Decimal("0.01"), rounding=ROUND_HALF_UP))


def leaderboard_table(rows: Sequence[LeaderboardRow]) -> Table:
    header = _header(rows)
    lines, rank = [], 0
    for row in rows:
        rank = rank + 1 if row.ranked else rank
        retriever = row.retriever + (f" ({row.note})" if row.note else "") + (" [published]" if row.source == "published" else "")
        cells = [str(rank) if row.ranked else "-", row.llm or "-", retriever, points(row.average) if row.average is not None else "-"]
        if row.interval is not None and row.ranked:
            cells[-1] += f" [{points(row.interval[0])}, {points(row.interval[1])}]"
        if "vs best" in header:
            cells.append(row.versus_best or "-")
        cells += [points(row.scores[c]) + ("†" if c in row.overlap else "") if c in row.scores else "-" for c in task_columns()]
        cells += [points(row.extras[key]) if key in row.extras else "-" for key in _extra_keys(rows)]
        lines.append(TableLine(row=row, rank=rank if row.ranked else None, cells=tuple(cells)))
    return Table(header=tuple(header), lines=tuple(lines))


def table_cells(rows: Sequence[LeaderboardRow]) -> tuple[list[str], list[list[str]]]:
    table = leaderboard_table(rows)
    return list(table.header), [list(line.cells) for line in table.lines]


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
            held = "; ".join(f"{EXTRA_LABELS[key]}, found on {count} of {len(task_columns())} tasks only"
                             for key, count in partial.items())
            lines.append(f"{row_label(row)}: no average for {held} (averages need every task)")
    lines += [row.significance for row in rows if row.significance]
    lines += [row.audit_note for row in rows if row.audit_note]
    return lines


def partial_extras_table(rows: Sequence[LeaderboardRow]) -> list[str]:
    """Markdown lines: each task's value of the NanoR2MED columns that a row holds on some tasks but not all (its
    average is left out, so without this the values would show nowhere); none when every row is complete."""
    held = [(row, key) for row in rows for key in _partial_extras(row)]
    if not held:
        return []
    columns = task_columns()
    lines = ["", "Per task, where a row has no average (nDCG@10 x 100):", "",
             "| Retriever | Column | " + " | ".join(columns) + " |", "|" + "|".join("---" for _ in range(len(columns) + 2)) + "|"]
    for row, key in held:
        values = [points(row.task_extras[c][key]) if key in row.task_extras.get(c, {}) else "-" for c in columns]
        lines.append("| " + " | ".join([row_label(row).replace("|", "\\|"), EXTRA_LABELS[key], *values]) + " |")
    return lines


def _html_body(rows: Sequence[LeaderboardRow]) -> str:
    header, body = table_cells(rows)
    head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    rows_html = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in cells) + "</tr>" for cells in body)
    notes_html = "".join(f"<li>{html.escape(n)}</li>" for n in notes(rows))
    return (f"<table border=\"1\"><thead><tr>{head}</tr></thead><tbody>{rows_html}</tbody></table>\n"
            + (f"<ul>{notes_html}</ul>\n" if notes_html else ""))


def render_many(tables: Mapping[str, Sequence[LeaderboardRow]], fmt: str = "md") -> str:
    """One table as ``render`` gives it; several, each under its benchmark's title."""
    if len(tables) == 1:
        return render(next(iter(tables.values())), fmt)
    if fmt == "html":
        return _HTML_HEAD + "".join(f"<h2>{html.escape(BENCHMARK_TITLES[b])}</h2>\n{_html_body(rows)}" for b, rows in tables.items()) + _HTML_TAIL
    titled = {"md": "## {title}\n\n{text}", "csv": "{title}\n{text}"}
    if fmt not in titled:
        raise UserError(f"format must be md, csv or html, got {fmt!r}")
    return "\n".join(titled[fmt].format(title=BENCHMARK_TITLES[b], text=render(rows, fmt)) for b, rows in tables.items())


def render(rows: Sequence[LeaderboardRow], fmt: str = "md") -> str:
    if fmt == "html":
        return _HTML_HEAD + _html_body(rows) + _HTML_TAIL
    header, body = table_cells(rows)
    if fmt == "md":
        footnotes = notes(rows)
        lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
        lines += ["| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |" for cells in body]  # "Reranker | First stage"
        lines += [""] + [f"- {note}" for note in footnotes] if footnotes else []
        return "\n".join(lines + partial_extras_table(rows)) + "\n"
    if fmt == "csv":
        buffer = io.StringIO()
        writer = csv.writer(buffer, lineterminator="\n")
        writer.writerow(header)
        writer.writerows(body)
        return buffer.getvalue()
    raise UserError(f"format must be md, csv or html, got {fmt!r}")
