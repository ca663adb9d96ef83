"""`r2med leaderboard --html DIR`, checked without a browser: the page's cells are the terminal table's,
its links reach the result files, its `vs above` marks are the paired test's, and it refuses folders it would spoil.
tests/reporting/test_leaderboard_page_browser.py runs the same page in headless Chromium."""

from __future__ import annotations

import contextlib
import dataclasses
import io
import itertools
import re
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote

import numpy as np
import polars as pl
import pytest

from r2med_plugin import significance as sig
from r2med_plugin.catalog import list_tasks
from r2med_plugin.cli import main
from r2med_plugin.reporting.leaderboard import build_leaderboards, published_leaderboard
from r2med_plugin.reporting.leaderboard_page import (
    EXTRA_COLUMNS,
    GENERATOR,
    PAGE_FILE,
    model_family,
    page_html,
    write_leaderboard_page,
    write_published_page,
)
from r2med_plugin.reporting.leaderboard_significance import add_significance, significance_for_tables
from r2med_plugin.reporting.per_query import per_query_path, read_per_query
from r2med_plugin.reporting.render import row_label, table_cells
from r2med_plugin.reporting.rows import LeaderboardRow
from tests.support.leaderboard_results import INCOMPLETE, build_results

ROOT = Path(__file__).resolve().parents[2]


class _Tables(HTMLParser):
    """Every <table class="board">: its headings (with their classes) and its rows (attributes, cells, links)."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tables: list[dict] = []
        self._cell: dict | None = None
        self._in_table = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        attributes = dict(attrs)
        if tag == "table" and "board" in (attributes.get("class") or ""):
            self.tables.append({"id": attributes.get("id"), "header": [], "extra": [], "rows": []})
            self._in_table = True
        elif not self._in_table:
            return
        elif tag == "tr" and "data-row" in attributes:
            self.tables[-1]["rows"].append({"attrs": attributes, "cells": [], "classes": [], "links": []})
        elif tag in ("th", "td"):
            self._cell = {"tag": tag, "text": "", "class": attributes.get("class") or ""}
        elif tag == "a" and self.tables[-1]["rows"]:
            self.tables[-1]["rows"][-1]["links"].append(attributes.get("href"))

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell["text"] += data

    def handle_endtag(self, tag: str) -> None:
        if tag == "table":
            self._in_table = False
        if tag not in ("th", "td") or self._cell is None or not self._in_table:
            return
        cell, self._cell = self._cell, None
        if cell["tag"] == "th":
            self.tables[-1]["header"].append(cell["text"])
            self.tables[-1]["extra"].append("extra" in cell["class"].split())
        else:
            row = self.tables[-1]["rows"][-1]
            row["cells"].append(cell["text"])
            row["classes"].append(cell["class"])


def _page_tables(page: Path) -> dict[str, dict]:
    parser = _Tables()
    parser.feed(page.read_text(encoding="utf-8"))
    return {table["id"].removeprefix("board-"): table for table in parser.tables}


def _terminal_columns(table: dict) -> tuple[list[str], list[list[str]]]:
    """The page table's columns that the terminal table has (the page adds `vs above` and `Files`)."""
    keep = [index for index, extra in enumerate(table["extra"]) if not extra]
    return [table["header"][i] for i in keep], [[row["cells"][i] for i in keep] for row in table["rows"]]


def _markdown_tables(text: str) -> dict[str, tuple[list[str], list[list[str]]]]:
    """Benchmark -> (header, rows) of what `r2med leaderboard` printed (one table, or several under ## titles)."""
    titles = {"R2MED": "r2med", "NanoR2MED": "nano"}
    sections = re.split(r"^## (R2MED|NanoR2MED)$", text, flags=re.M)
    pairs = zip(sections[1::2], sections[2::2], strict=True) if len(sections) > 1 else [("R2MED", text)]
    tables = {}
    for title, body in pairs:
        lines = list(itertools.takewhile(lambda line: line.startswith("|"), body.strip().splitlines()))  # the table, not
        lines = [line for line in lines if line.startswith("| ")]  # the per-task lines below it; no |---| line
        cells = [[cell.strip().replace("\\|", "|") for cell in re.split(r"(?<!\\)\|", line)[1:-1]] for line in lines]
        tables[titles[title]] = (cells[0], cells[1:])
    return tables


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_results(tmp_path_factory.mktemp("page"))


@pytest.fixture(scope="module")
def cli_page(results: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """The page and the terminal table of one `r2med leaderboard --compare-published --significance --html` run
    (stdout: the table alone; the "wrote" line goes to stderr)."""
    page = tmp_path_factory.mktemp("site") / "board"
    printed, told = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(printed), contextlib.redirect_stderr(told):
        assert main(["leaderboard", str(results), "--compare-published", "--significance", "--html", str(page)]) == 0
    assert f"wrote {page / PAGE_FILE}\n" in told.getvalue() and "wrote" not in printed.getvalue()
    return page / PAGE_FILE, printed.getvalue()


def test_page_numbers_equal_the_terminal_table(cli_page: tuple[Path, str]):
    page, printed = cli_page
    terminal = _markdown_tables(printed)
    shown = _page_tables(page)
    assert set(shown) == set(terminal) == {"r2med", "nano"}
    for benchmark, (header, rows) in terminal.items():
        page_header, page_rows = _terminal_columns(shown[benchmark])
        assert page_header == header
        assert page_rows == rows  # every cell, in the same order: the same strings, not recomputed numbers
    published = [row for row in shown["r2med"]["rows"] if row["attrs"]["data-source"] == "published"]
    assert len(published) == len(published_leaderboard())  # the published rows stand beside ours


def test_page_cells_are_the_table_cells_of_the_same_rows(results: Path, tmp_path: Path):
    tables = significance_for_tables(build_leaderboards([results], compare_published=True), permutations=200)
    before = [dataclasses.asdict(row) for rows in tables.values() for row in rows]
    page = write_leaderboard_page(tables, tmp_path / "page")
    assert [dataclasses.asdict(row) for rows in tables.values() for row in rows] == before  # the rows are not changed
    shown = _page_tables(page)
    for benchmark, rows in tables.items():
        assert _terminal_columns(shown[benchmark]) == table_cells(rows)
        assert [h for h, extra in zip(shown[benchmark]["header"], shown[benchmark]["extra"], strict=True) if extra] == list(EXTRA_COLUMNS)


def test_without_significance_there_are_no_test_columns(results: Path, tmp_path: Path):
    page = write_leaderboard_page(build_leaderboards([results]), tmp_path / "page")
    for table in _page_tables(page).values():
        assert "vs best" not in table["header"] and "vs above" not in table["header"] and table["header"][-1] == "Files"


def test_filter_attributes_follow_the_rows(cli_page: tuple[Path, str]):
    page, _ = cli_page
    rows = {(row["attrs"]["data-benchmark"], row["cells"][2]): row["attrs"] for table in _page_tables(page).values()
            for row in table["rows"]}
    lexical = rows[("r2med", "bm25-lucene")]
    assert (lexical["data-family"], lexical["data-expansion"], lexical["data-reranked"], lexical["data-source"]) == (
        "BM25", "without", "no", "yours")
    assert rows[("r2med", "bm25-lucene (hyde)")]["data-expansion"] == "with"
    reranked = rows[("r2med", "cross/encoder | bm25-lucene (rerank top 100)")]
    assert (reranked["data-reranked"], reranked["data-family"]) == ("yes", "cross-encoder reranker")
    assert rows[("r2med", "org/dense-a")]["data-family"] == "dense encoder"
    assert rows[("nano", "org/dense-a")]["data-benchmark"] == "nano"
    published = rows[("r2med", "monobert-large-msmarco | NV-Embed-v2 (rerank top 10) [published]")]
    assert (published["data-reranked"], published["data-source"]) == ("yes", "published")
    assert rows[("r2med", "BM25 [published]")]["data-family"] == "BM25"


@pytest.mark.parametrize("model, reranked, family", [
    ("bm25-lucene", False, "BM25"),
    ("hyde/o3-mini+bm25-robertson", False, "BM25"),
    ("org/model+instruction", False, "dense encoder"),
    ("intfloat/e5-mistral-7b-instruct+official-e5", False, "official profile"),
    ("text-embedding-3-small@api.openai.com+dim512", False, "embedding endpoint"),
    ("BAAI/bge-reranker-v2-m3|bm25-lucene|top_100", True, "cross-encoder reranker"),
    ("Qwen/Qwen3-8B (listwise @127.0.0.1-8000 w20s10)|bm25-lucene|top_20", True, "LLM reranker"),
])
def test_model_family(model: str, reranked: bool, family: str):
    assert model_family(LeaderboardRow(llm="", retriever=model, scores={}, source="yours", model=model, reranked=reranked)) == family


def test_every_row_links_its_result_files_and_sidecars(cli_page: tuple[Path, str], results: Path):
    page, _ = cli_page
    for table in _page_tables(page).values():
        for row in table["rows"]:
            hrefs = row["links"]
            if row["attrs"]["data-source"] == "published":
                assert len(hrefs) == 1 and hrefs[0].startswith("https://")
                continue
            assert hrefs and not any(href.startswith(("/", "file:", "http")) for href in hrefs)  # relative to the page
            targets = [(page.parent / unquote(href)).resolve() for href in hrefs]
            assert all(target.is_file() and results.resolve() in target.parents for target in targets)
            names = [target.name for target in targets]
            complete = row["cells"][2] != INCOMPLETE
            assert sum(name.endswith(".json") and name != "model_meta.json" for name in names) == (8 if complete else 5)
            assert sum(name.endswith(".per_query.parquet") for name in names) == (8 if complete else 0)
            assert names.count("model_meta.json") == 1


def _per_query(results: Path, model: str) -> dict[str, dict[str, float]]:
    """Task -> query -> nDCG@10, tasks in the official order, read from the sidecars directly."""
    values = {}
    for spec in list_tasks("r2med"):
        (result,) = (results / model.replace("/", "__")).rglob(f"{spec.name}.json")
        frame = read_per_query(per_query_path(result)).frame
        values[spec.name] = dict(frame.filter(pl.col("metric") == "ndcg_at_10").select("query_id", "value").iter_rows())
    return values


def test_vs_above_is_the_paired_test_between_neighbours(results: Path):
    (rows,) = build_leaderboards([results], benchmark="r2med").values()
    tested = add_significance(rows, permutations=2000)
    assert all(row.versus_above == "" for row in rows)  # the inputs are not changed
    ours = [row for row in tested if row.source == "yours" and row.ranked]
    assert [row.model for row in ours][:3] == ["hyde/o3-mini+bm25-lucene", "bm25-lucene", "bm25-twin"]
    assert ours[0].versus_above == "" and "nearest tested row above" in ours[0].adjacent_note
    twin = ours[2]
    assert twin.versus_above == "tied" and twin.above_detail == "against bm25-lucene: p = 1.0000 (holm)"  # identical scores
    # the same p-values from the per-query files, paired and Holm-corrected here
    raw = []
    for upper, lower in zip(ours, ours[1:], strict=False):
        a, b = _per_query(results, upper.model), _per_query(results, lower.model)
        diffs = [100 * (b[task][q] - a[task][q]) for task in a for q in sorted(a[task])]
        weights = [1 / (8 * len(a[task])) for task in a for _ in a[task]]
        raw.append(sig.randomization_p_values(np.array(diffs), permutations=2000, seed=0, weights=np.array(weights))[0])
    from statsmodels.stats.multitest import multipletests

    reject, adjusted, _, _ = multipletests(raw, alpha=0.05, method="holm")
    for row, upper, p, rejected in zip(ours[1:], ours, adjusted, reject, strict=False):
        assert row.above_detail == f"against {row_label(upper)}: p = {p:.4f} (holm)"
        assert row.versus_above == ("below" if rejected else "tied")


def test_the_folder_must_be_new_empty_or_an_earlier_page(results: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    tables = build_leaderboards([results], benchmark="nano")
    fresh = write_leaderboard_page(tables, tmp_path / "new" / "deeper")
    assert fresh.name == PAGE_FILE and f'<meta name="generator" content="{GENERATOR}' in fresh.read_text(encoding="utf-8")
    (tmp_path / "empty").mkdir()
    assert write_leaderboard_page(tables, tmp_path / "empty").is_file()
    assert write_leaderboard_page(tables, fresh.parent) == fresh  # an earlier page is replaced
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "notes.txt").write_text("mine")
    with pytest.raises(ValueError, match=r"busy: the folder holds files that are not an earlier leaderboard page \(notes.txt\)"):
        write_leaderboard_page(tables, busy)
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / PAGE_FILE).write_text("<html>someone's page</html>")
    with pytest.raises(ValueError, match="give a new or empty folder"):
        write_leaderboard_page(tables, foreign)
    assert (foreign / PAGE_FILE).read_text() == "<html>someone's page</html>" and sorted(busy.iterdir()) == [busy / "notes.txt"]
    # the command refuses before it reads any result: the results folder here does not even exist
    assert main(["leaderboard", str(tmp_path / "absent"), "--html", str(busy)]) == 2
    assert f"--html {busy}: the folder holds files" in capsys.readouterr().err
    assert main(["leaderboard", str(results), "--html", str(busy / "notes.txt")]) == 2
    assert "this is a file; give a folder" in capsys.readouterr().err


def test_page_is_self_contained(cli_page: tuple[Path, str]):
    text = cli_page[0].read_text(encoding="utf-8")
    assert "<script>" in text and "<style>" in text and "<svg" in text
    assert not re.search(r"<script[^>]*\ssrc=|<link[^>]*stylesheet|<img|@import|url\(", text)
    addresses = re.findall(r"https?://[^\s\"'<>]+", text)
    linked = re.findall(r"<a href=\"(https?://[^\"]+)\"", text)
    assert set(addresses) <= set(linked) | {"http://www.w3.org/2000/svg"}  # addresses only as links a reader may follow


def test_charts_show_the_table_numbers(cli_page: tuple[Path, str]):
    text = cli_page[0].read_text(encoding="utf-8")
    table = _page_tables(cli_page[0])["r2med"]
    column = table["header"].index("Biology")
    cells = {row["attrs"]["data-row"]: row["cells"][column] for row in table["rows"] if row["cells"][column] != "-"}
    chart = text.split('data-chart="Biology"')[1].split("</figure>")[0]
    bars = re.findall(r'<g data-row="(r2med-\d+)".*?class="value">([^<]+)</text></g>', chart)
    assert dict(bars) == cells  # every row with a Biology score, with the table's number
    values = [float(value) for _, value in bars]
    assert values == sorted(values, reverse=True)


def test_published_page_alone(tmp_path: Path):
    page = write_published_page(tmp_path / "published")
    (shown,) = _page_tables(page).values()
    assert _terminal_columns(shown) == table_cells(published_leaderboard())
    assert {row["attrs"]["data-source"] for row in shown["rows"]} == {"published"} and len(shown["rows"]) == 68 + 3
    script = subprocess.run([sys.executable, str(ROOT / "scripts" / "render_published_leaderboard.py"), str(tmp_path / "site")],
                            capture_output=True, text=True, check=False)
    assert script.returncode == 0, script.stderr
    assert (tmp_path / "site" / PAGE_FILE).read_text(encoding="utf-8") == page.read_text(encoding="utf-8")


def test_published_rows_beside_ours_are_the_published_page_rows(cli_page: tuple[Path, str], tmp_path: Path):
    header, rows = _terminal_columns(_page_tables(cli_page[0])["r2med"])
    sources = [row["attrs"]["data-source"] for row in _page_tables(cli_page[0])["r2med"]["rows"]]
    untested = header.index("vs best")  # published rows have no per-query scores: "-" there
    beside = [[cell for i, cell in enumerate(cells) if i not in (0, untested)] for cells, source in zip(rows, sources, strict=True)
              if source == "published"]
    _, alone = _terminal_columns(_page_tables(write_published_page(tmp_path / "published"))["r2med"])
    assert beside == [cells[1:] for cells in alone]  # the same rows, labels and numbers, in the same order; ranks differ


def test_page_html_names_the_page_folder_in_links(results: Path, tmp_path: Path):
    tables = build_leaderboards([results], benchmark="nano")
    near = page_html(tables, folder=results.parent / "site", title="t")
    assert 'href="../results/bm25-robertson/r1/NanoR2MEDBiology.json"' in near
