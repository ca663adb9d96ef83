"""``r2med leaderboard --html DIR``: the leaderboard as one static page, ``DIR/index.html``.

The page is built from the table the terminal prints (``render.leaderboard_table``: the same rows, the
same cell strings), so its numbers are the terminal's. Everything it needs is inline: CSS, a small
vanilla script (sorting, filters) and SVG charts drawn here, so it opens from ``file://`` with no
server and no network. Per row it adds what a terminal cannot show: the model family, whether an LLM
expansion or a reranker is involved (the filters), ``vs above`` marks from the significance test
(``leaderboard_significance``), and relative links to the row's result files, their per-query sidecars
and ``model_meta.json`` (or, for a published row, where it was published).

A folder is written only when it is new, empty, or holds nothing but an earlier page: any other file
in it is refused, never overwritten.
"""

from __future__ import annotations

import html
import json
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from urllib.parse import quote

from r2med_plugin.errors import UserError
from r2med_plugin.identifiers import BM25_NAMES, ResultName
from r2med_plugin.io import write_text_atomic
from r2med_plugin.models.official.naming import profile_of_result
from r2med_plugin.reporting.per_query import per_query_path
from r2med_plugin.reporting.published import published_sources
from r2med_plugin.reporting.render import Table, TableLine, leaderboard_table, notes
from r2med_plugin.reporting.rows import BENCHMARK_TITLES, LeaderboardRow, task_columns
from r2med_plugin.rules import SettingError
from r2med_plugin.version import __version__

PAGE_FILE = "index.html"
GENERATOR = "r2med-plugin leaderboard page"  # the <meta name="generator"> that marks a folder as an earlier page
EXTRA_COLUMNS = ("vs above", "Files")  # the page's columns beyond the terminal table's
_NUMBER = re.compile(r"^-?\d+(?:\.\d+)?")
_ALL_NUMBERS = re.compile(r"-?\d+(?:\.\d+)?")
_INTERVAL = re.compile(r"\[(-?\d+(?:\.\d+)?), (-?\d+(?:\.\d+)?)\]")
_LLM_RERANKER = re.compile(r"\((?:listwise|pointwise|reasoning) @")
FAMILIES = ("BM25", "dense encoder", "official profile", "embedding endpoint", "cross-encoder reranker", "LLM reranker")


@dataclass(frozen=True)
class Link:
    text: str
    href: str
    title: str = ""


def model_family(row: LeaderboardRow) -> str:
    """Which kind of model a row ranks with (FAMILIES): a reranked row by its reranker, any other by its retriever."""
    name = ResultName.parse(row.model) if row.model else None
    if row.reranked:
        reranker = name.retriever if name is not None else row.retriever
        return "LLM reranker" if _LLM_RERANKER.search(reranker) else "cross-encoder reranker"
    retriever = name.retriever if name is not None else row.retriever
    if retriever in BM25_NAMES or retriever == "BM25":
        return "BM25"
    if profile_of_result(retriever) is not None:
        return "official profile"
    if "@" in retriever:  # <model>@<host-port>: an openai: embedding endpoint
        return "embedding endpoint"
    return "dense encoder"


HTML = {"folder": "--html"}  # the page's folder is `r2med leaderboard --html`


def check_page_folder(folder: str | os.PathLike) -> Path:
    """``folder`` if a page may be written there (new, empty, or an earlier page alone); else a ValueError naming it."""
    path = Path(folder)
    if path.exists() and not path.is_dir():
        raise SettingError(f"{{folder}} {path}: this is a file; give a folder for the page (it writes {PAGE_FILE} there)",
                           field="folder", flags=HTML)
    if not path.is_dir():
        return path
    others = sorted(entry.name for entry in path.iterdir() if entry.name != PAGE_FILE)
    page = path / PAGE_FILE
    if others or (page.exists() and not _is_earlier_page(page)):
        found = ", ".join(others or [PAGE_FILE])
        raise SettingError(f"{{folder}} {path}: the folder holds files that are not an earlier leaderboard page ({found}); "
                           "give a new or empty folder, or the folder of an earlier `r2med leaderboard --html` page",
                           field="folder", flags=HTML)
    return path


def _is_earlier_page(page: Path) -> bool:
    try:
        head = page.read_text(encoding="utf-8", errors="replace")[:2000]
    except OSError:
        return False
    return f'<meta name="generator" content="{GENERATOR}' in head


def write_leaderboard_page(tables: Mapping[str, Sequence[LeaderboardRow]], folder: str | os.PathLike, *,
                           title: str = "R2MED leaderboard", matrix: Mapping | str | os.PathLike | None = None) -> Path:
    """Write ``folder/index.html`` for the benchmark -> rows tables (what ``build_leaderboards`` returns, with
    ``add_significance`` applied or not), and a section for a reproduction matrix (``r2med reproduce --matrix
    --json``'s payload, or its file) when given; the path of the page."""
    path = check_page_folder(folder)
    if not tables:
        raise UserError("no leaderboard table to write: build one with build_leaderboards(...) first")
    page = page_html(tables, folder=path, title=title)
    if matrix is not None and not isinstance(matrix, Mapping):
        matrix = _read_matrix(matrix)
    if matrix is not None:  # the section at the end, and a link to it at the top
        page = page.replace("<script>", matrix_section(matrix) + "<script>", 1)
        page = page.replace("</h1>\n", f"</h1>\n{MATRIX_LINK}\n", 1)
    return write_text_atomic(path / PAGE_FILE, page)


MATRIX_LINK = ('<p class="meta"><a href="#reproduction-matrix">Reproduction matrix</a>: each published row recomputed '
               "here, below the tables.</p>")


def _read_matrix(path: str | os.PathLike) -> Mapping:
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise SettingError(f"{{matrix}} {path}: cannot read it ({error}); write it with `r2med reproduce --matrix --json FILE`",
                           field="matrix") from error


def matrix_section(matrix: Mapping) -> str:
    """The reproduction matrix as a table: each published row, published and our average, delta, status (with the
    leaderboard's words for the data it stands on when that is not proven pinned data), command."""
    rows = matrix.get("rows") if isinstance(matrix, Mapping) else None
    if not isinstance(rows, list):
        raise UserError('the matrix file must hold {"rows": [...]} as `r2med reproduce --matrix --json FILE` writes it')
    lines = ['<section id="reproduction-matrix"><h2>Reproduction matrix</h2>',
             '<p class="meta">Each published row, its command, and our number where it was recomputed '
             "(<code>r2med reproduce --matrix</code>; nDCG@10 x 100, average over the 8 tasks).</p>",
             "<table><thead><tr><th>LLM</th><th>Retriever</th><th>published</th><th>ours</th><th>delta</th>"
             "<th>status</th><th>command</th></tr></thead><tbody>"]
    for row in rows:
        ours, delta = row.get("ours") or {}, row.get("delta") or {}
        cells = [row.get("llm") or "None", row["retriever"], f"{row['published']['avg']:.2f}",
                 f"{ours['avg']:.2f}" if "avg" in ours else "", f"{delta['avg']:+.2f}" if "avg" in delta else "",
                 row["status"] + (f" (data: {row['data_label']})" if row.get("data_label") else "")]
        lines.append("<tr>" + "".join(f"<td>{html.escape(str(cell))}</td>" for cell in cells)
                     + f"<td><code>{html.escape(row['command'])}</code></td></tr>")
    return "\n".join(lines) + "\n</tbody></table></section>\n"


def write_published_page(folder: str | os.PathLike) -> Path:
    """The published R2MED leaderboard alone (and the official reranker results), as a page in ``folder``."""
    from r2med_plugin.reporting.leaderboard import published_leaderboard

    return write_leaderboard_page({"r2med": published_leaderboard()}, folder, title="R2MED leaderboard (published)")


def page_html(tables: Mapping[str, Sequence[LeaderboardRow]], *, folder: str | os.PathLike, title: str) -> str:
    """The whole page; links are relative to ``folder``, where the page is meant to be."""
    built = {benchmark: leaderboard_table(rows) for benchmark, rows in tables.items()}
    sections = "".join(_section(benchmark, table, tables[benchmark], Path(folder)) for benchmark, table in built.items())
    return (
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
        f"<meta name=\"generator\" content=\"{GENERATOR} (r2med-plugin {html.escape(__version__)})\">\n"
        "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<link rel=\"icon\" href=\"data:,\">\n"
        f"<title>{html.escape(title)}</title>\n<style>{_asset('leaderboard_page.css')}</style>\n</head>\n<body>\n"
        f"<h1>{html.escape(title)}</h1>\n<p class=\"meta\">nDCG@10 x 100 per task and their average, as "
        f"<code>r2med leaderboard</code> prints them (r2med-plugin {html.escape(__version__)}). Click a column's "
        "heading to sort by it.</p>\n"
        f"{_filters(built)}\n{sections}<script>{_asset('leaderboard_page.js')}</script>\n</body></html>\n"
    )


def _asset(name: str) -> str:
    return (resources.files("r2med_plugin") / "reporting" / "page_assets" / name).read_text(encoding="utf-8")


def _filters(tables: Mapping[str, Table]) -> str:
    families = sorted({model_family(line.row) for table in tables.values() for line in table.lines}, key=FAMILIES.index)
    choices = {
        "benchmark": ("Benchmark", [(name, BENCHMARK_TITLES[name]) for name in tables]),
        "family": ("Model family", [(family, family) for family in families]),
        "expansion": ("LLM expansion", [("with", "with"), ("without", "without")]),
        "reranked": ("Reranked", [("yes", "reranked"), ("no", "not reranked")]),
        "source": ("Rows", [("yours", "yours"), ("published", "published")]),
    }
    selects = "".join(
        f"<label>{label} <select id=\"filter-{key}\" data-filter=\"{key}\"><option value=\"\">all</option>"
        + "".join(f"<option value=\"{html.escape(value)}\">{html.escape(text)}</option>" for value, text in options)
        + "</select></label>\n"
        for key, (label, options) in choices.items()
    )
    return f"<form id=\"filters\" class=\"filters\">\n{selects}<span id=\"shown\" class=\"shown\"></span></form>"


def _section(benchmark: str, table: Table, rows: Sequence[LeaderboardRow], folder: Path) -> str:
    tested = any(row.versus_above for row in rows)
    header = list(table.header) + [column for column in EXTRA_COLUMNS if column != "vs above" or tested]
    heads = "".join(_heading(index, name, table) for index, name in enumerate(header))
    body = "".join(_line(benchmark, number, line, table.header, tested, folder) for number, line in enumerate(table.lines))
    lines = notes(rows) + [row.adjacent_note for row in rows if row.adjacent_note]
    notes_html = "".join(f"<li>{html.escape(note)}</li>" for note in lines)
    return (
        f"<section class=\"benchmark\" data-benchmark=\"{benchmark}\">\n<h2>{html.escape(BENCHMARK_TITLES[benchmark])}</h2>\n"
        f"<p class=\"offscreen\" role=\"status\" hidden></p>\n"
        f"<div class=\"scroll\"><table class=\"board\" id=\"board-{benchmark}\"><thead><tr>{heads}</tr></thead>\n"
        f"<tbody>{body}</tbody></table></div>\n" + (f"<ul class=\"notes\">{notes_html}</ul>\n" if notes_html else "")
        + _charts(benchmark, table) + "</section>\n"
    )


def _heading(index: int, name: str, table: Table) -> str:
    extra = name in EXTRA_COLUMNS and index >= len(table.header)
    numeric = not extra and _numeric_column(table, index)
    kind = "number" if numeric else "text"
    first = "ascending" if name == "Rank" or not numeric else "descending"
    classes = "extra" if extra else "column"
    return (f"<th class=\"{classes}\" data-col=\"{index}\" data-type=\"{kind}\" data-first=\"{first}\" scope=\"col\""
            f" data-name=\"{html.escape(name)}\" title=\"sort by {html.escape(name)}\">{html.escape(name)}</th>")


def _numeric_column(table: Table, index: int) -> bool:
    values = [line.cells[index] for line in table.lines if line.cells[index] != "-"]
    return bool(values) and all(_NUMBER.match(value) for value in values)


def _sort_value(text: str) -> str | None:
    """The number a cell shows ("33.50 [31.00, 35.00]" -> "33.50"), its text for a text cell, None for "-"."""
    if text == "-":
        return None
    number = _NUMBER.match(text)
    return number.group(0) if number else text.lower()


def row_id(benchmark: str, number: int) -> str:
    return f"{benchmark}-{number + 1}"


def _line(benchmark: str, number: int, line: TableLine, header: Sequence[str], tested: bool, folder: Path) -> str:
    row = line.row
    attributes = {
        "data-row": row_id(benchmark, number), "data-benchmark": benchmark, "data-source": row.source,
        "data-family": model_family(row), "data-expansion": "with" if row.llm else "without",
        "data-reranked": "yes" if row.reranked else "no",
    }
    cells = "".join(_cell(text, name) for text, name in zip(line.cells, header, strict=True))
    if tested:
        cells += _above_cell(row)
    cells += f"<td class=\"extra files\">{_links_html(row, folder)}</td>"
    attrs = " ".join(f"{key}=\"{html.escape(value)}\"" for key, value in attributes.items())
    return f"<tr {attrs} class=\"{row.source}\">{cells}</tr>\n"


def _cell(text: str, column: str) -> str:
    value = _sort_value(text)
    sort = "" if value is None else f" data-sort=\"{html.escape(value)}\""
    return f"<td data-column=\"{html.escape(column)}\"{sort}>{html.escape(text)}</td>"


def _above_cell(row: LeaderboardRow) -> str:
    shown = {"tied": "tied: not separable", "below": "below", "-": "-"}.get(row.versus_above, "")
    mark = f" class=\"extra above-{row.versus_above}\"" if row.versus_above in ("tied", "below") else " class=\"extra\""
    title = f" title=\"{html.escape(row.above_detail)}\"" if row.above_detail else ""
    sort = f" data-sort=\"{html.escape(row.versus_above)}\"" if row.versus_above else ""
    return f"<td data-column=\"vs above\"{mark}{title}{sort}>{html.escape(shown)}</td>"


def _links_html(row: LeaderboardRow, folder: Path) -> str:
    links = row_links(row, folder)
    if not links:
        return "-"
    items = "".join(
        f"<li><a href=\"{html.escape(link.href)}\"" + (f" title=\"{html.escape(link.title)}\"" if link.title else "")
        + f">{html.escape(link.text)}</a></li>" for link in links
    )
    label = "source" if row.source == "published" else f"{len(links)} files"
    return f"<details><summary>{label}</summary><ul>{items}</ul></details>"


def row_links(row: LeaderboardRow, folder: str | os.PathLike) -> list[Link]:
    """A row's result files (with their per-query sidecars and model_meta.json), relative to ``folder``; a published
    row's source."""
    if row.source == "published":
        sources = published_sources()
        return [Link("official reranker results", sources["reranker"])] if row.reranked and row.published_average is None else [
            Link("R2MED leaderboard", "https://r2med.github.io/", sources["leaderboard"])]
    links, metas = [], []
    for hub in task_columns():
        result = row.sources.get(hub)
        if result is None:
            continue
        revision = row.task_revisions.get(hub, "")
        links.append(Link(f"{hub}: {Path(result).name}", _relative(result, folder), f"dataset revision {revision}" if revision else ""))
        sidecar = per_query_path(result)
        if sidecar.is_file():
            links.append(Link(f"{hub}: per-query scores", _relative(sidecar, folder)))
        meta = Path(result).parent / "model_meta.json"
        if meta.is_file() and meta not in metas:
            metas.append(meta)
    return links + [Link(f"model_meta.json ({meta.parent.name})", _relative(meta, folder)) for meta in metas]


def _relative(target: str | os.PathLike, folder: str | os.PathLike) -> str:
    """A link from the page in ``folder`` to ``target``: relative where it can be, else a file:// address."""
    try:
        relative = os.path.relpath(Path(target).resolve(), Path(folder).resolve())
    except ValueError:  # another drive (Windows)
        return Path(target).resolve().as_uri()
    return quote(Path(relative).as_posix())


def _charts(benchmark: str, table: Table) -> str:
    columns = ["Avg.", *task_columns()]
    charts = "".join(_chart(benchmark, table, column) for column in columns if column in table.header)
    return f"<h3>Per task</h3>\n<div class=\"charts\">\n{charts}</div>\n"


def _chart(benchmark: str, table: Table, column: str) -> str:
    """One horizontal bar per row holding the column, best first; the bar's number is the table's cell."""
    index = table.header.index(column)
    bars = [(number, line) for number, line in enumerate(table.lines) if _NUMBER.match(line.cells[index])]
    bars.sort(key=lambda item: -_leading_number(item[1].cells[index]))
    top = max([float(number) for _, line in bars for number in _ALL_NUMBERS.findall(line.cells[index])] + [1.0])
    scale = 10.0 * -(-top // 10.0)
    body = "".join(_bar(benchmark, number, line, line.cells[index], scale, position) for position, (number, line) in enumerate(bars))
    label = "Average" if column == "Avg." else column
    height = 18 * len(bars) + 6
    return (f"<figure class=\"chart\" data-chart=\"{html.escape(column)}\"><figcaption>{html.escape(label)}</figcaption>"
            f"<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{_CHART_WIDTH}\" height=\"{height}\" "
            f"viewBox=\"0 0 {_CHART_WIDTH} {height}\" role=\"img\" aria-label=\"{html.escape(label)} by row\">{body}</svg></figure>\n")


_CHART_WIDTH, _LABEL_WIDTH, _BAR_WIDTH = 660, 250, 260


def _leading_number(cell: str) -> float:
    """The number a chart's cell starts with (the chart holds only the rows whose cell starts with one)."""
    match = _NUMBER.match(cell)
    if match is None:
        raise ValueError(f"the table cell {cell!r} starts with no number")
    return float(match.group(0))


def _bar(benchmark: str, number: int, line: TableLine, cell: str, scale: float, position: int) -> str:
    value = _leading_number(cell)
    name = (f"{line.row.llm} | " if line.row.llm else "") + line.cells[2]
    short = name if len(name) <= 38 else name[:37] + "…"
    width = max(0.5, _BAR_WIDTH * value / scale)
    whisker = _whisker(cell, scale)
    kind = line.row.source + ("" if line.row.ranked else " unranked")
    return (f"<g data-row=\"{row_id(benchmark, number)}\" class=\"bar {kind}\" transform=\"translate(0,{18 * position + 3})\">"
            f"<title>{html.escape(name)}: {html.escape(cell)}</title>"
            f"<text x=\"{_LABEL_WIDTH - 6}\" y=\"12\" text-anchor=\"end\">{html.escape(short)}</text>"
            f"<rect x=\"{_LABEL_WIDTH}\" y=\"2\" width=\"{width:.1f}\" height=\"13\"></rect>{whisker}"
            f"<text x=\"{_LABEL_WIDTH + _BAR_WIDTH + 8}\" y=\"12\" class=\"value\">{html.escape(cell)}</text></g>")


def _whisker(cell: str, scale: float) -> str:
    """The 95% interval an Avg. cell shows ("33.50 [31.00, 35.00]"), as a line over the bar."""
    found = _INTERVAL.search(cell)
    if not found:
        return ""
    low, high = (_LABEL_WIDTH + _BAR_WIDTH * float(value) / scale for value in found.groups())
    return f"<line class=\"interval\" x1=\"{low:.1f}\" x2=\"{high:.1f}\" y1=\"8.5\" y2=\"8.5\"></line>"
