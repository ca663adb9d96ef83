"""The `r2med leaderboard --html` page in a real browser (Debian's headless Chromium through its
chromedriver, driven by selenium), opened from file:// with no server: it renders with no console error, a click on
a column's heading orders the rows as the numbers say, each filter hides the right rows (and their chart bars), and a
screenshot is kept (in $R2MED_BROWSER_ARTIFACTS, else in pytest's tmp folder).

Without Chromium these tests skip, saying why, unless CI=true or R2MED_REQUIRE_BROWSER=1: then they fail (.ci/run
installs chromium and chromium-driver)."""

from __future__ import annotations

import contextlib
import io
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from r2med_plugin.cli import main
from r2med_plugin.reporting.leaderboard import build_leaderboards
from r2med_plugin.reporting.leaderboard_page import PAGE_FILE, model_family, row_id
from r2med_plugin.reporting.leaderboard_significance import significance_for_tables
from tests.support.leaderboard_results import build_results

BROWSERS = ("chromium", "chromium-browser")
REQUIRED = os.environ.get("CI", "").lower() == "true" or os.environ.get("R2MED_REQUIRE_BROWSER") == "1"
INSTALL = "apt-get install -y chromium chromium-driver"


def _unavailable(reason: str) -> None:
    if REQUIRED:
        pytest.fail(f"{reason}: the browser tests must run here (CI=true or R2MED_REQUIRE_BROWSER=1); install it with `{INSTALL}`")
    pytest.skip(f"{reason} ({INSTALL} to run these; R2MED_REQUIRE_BROWSER=1 makes a missing browser a failure)")


def _browser_paths() -> tuple[str, str]:
    browser = next((found for found in map(shutil.which, BROWSERS) if found), None)
    driver = shutil.which("chromedriver")
    if browser is None or driver is None:
        _unavailable(f"no {'Chromium' if browser is None else 'chromedriver'} on PATH")
    return browser, driver


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        _unavailable("selenium is not installed (it is in the test extras)")
    binary, driver_path = _browser_paths()
    options = webdriver.ChromeOptions()
    options.binary_location = binary  # with both paths given, selenium looks nothing up and downloads nothing
    for argument in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1500,1800",
                     "--disable-extensions", "--no-first-run", "--allow-file-access-from-files"):
        options.add_argument(argument)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(executable_path=driver_path), options=options)
    driver.set_page_load_timeout(60)
    try:
        yield driver
    finally:
        driver.quit()


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    """A page from the command line (R2MED among the published rows, with significance; NanoR2MED), and its tables."""
    results = build_results(tmp_path_factory.mktemp("browser"))
    page = results.parent / "site"
    with contextlib.redirect_stdout(io.StringIO()):
        assert main(["leaderboard", str(results), "--compare-published", "--significance", "--html", str(page)]) == 0
    tables = significance_for_tables(build_leaderboards([results], compare_published=True))
    return page / PAGE_FILE, tables


@pytest.fixture()
def opened(browser, site):
    page, _ = site
    browser.get_log("browser")  # read (and so dropped): what an earlier test's page logged
    browser.get(page.as_uri())
    return browser


def _severe(driver) -> list[str]:
    return [entry["message"] for entry in driver.get_log("browser") if entry["level"] == "SEVERE"]


# One script per question, not one WebDriver round trip per cell: what the page shows is the rendered layout
# (an element hidden by a filter, or inside a hidden section, has no client rects).
_SHOWN = """
const [selector, column] = arguments;
return Array.from(document.querySelectorAll(selector)).filter(element => element.getClientRects().length > 0)
  .map(element => column === null ? element.getAttribute('data-row')
                  : column < 0 ? element.innerText : element.cells[column].innerText.trim());
"""
_HEADINGS = "return Array.from(document.querySelectorAll(arguments[0])).map(th => th.textContent);"


def _shown(driver, selector: str, column: int | None = None) -> list[str]:
    return driver.execute_script(_SHOWN, selector, column)


def _headings(driver, benchmark: str) -> list[str]:
    return driver.execute_script(_HEADINGS, f"#board-{benchmark} thead th")


def _column(driver, benchmark: str, name: str) -> list[str]:
    return _shown(driver, f"#board-{benchmark} tbody tr", _headings(driver, benchmark).index(name))


def _click_heading(driver, benchmark: str, name: str) -> None:
    index = _headings(driver, benchmark).index(name)
    driver.find_elements("css selector", f"#board-{benchmark} thead th")[index].click()


def _leading_numbers(cells: list[str]) -> tuple[list[float], list[str]]:
    """The numbers of the cells that hold one ("33.50 [31.00, 35.00]" -> 33.5), and the rest ("-")."""
    numbers = [float(cell.split()[0]) for cell in cells if cell != "-"]
    return numbers, [cell for cell in cells if cell == "-"]


def test_console_errors_are_caught(browser, tmp_path: Path):
    """The check below would see an error: a page that throws one is reported."""
    broken = tmp_path / "broken.html"
    broken.write_text("<!DOCTYPE html><html><head><link rel=\"icon\" href=\"data:,\"></head><body>"
                      "<script>throw new Error('deliberate');</script></body></html>")
    browser.get(broken.as_uri())
    assert any("deliberate" in message for message in _severe(browser))


def test_renders_without_console_errors_and_keeps_a_screenshot(opened, site, tmp_path: Path):
    page, tables = site
    assert opened.title == "R2MED leaderboard"
    assert _severe(opened) == []
    for benchmark, rows in tables.items():
        assert len(_shown(opened, f"#board-{benchmark} tbody tr")) == len(rows)
    first = opened.find_element("css selector", "#board-r2med tbody tr")
    assert first.is_displayed() and first.find_elements("css selector", "td")[2].text == "bm25-lucene (hyde)"
    counter = opened.find_element("id", "shown").text
    assert counter == f"{sum(map(len, tables.values()))} of {sum(map(len, tables.values()))} rows shown"
    bars = _shown(opened, "section[data-benchmark='r2med'] figure[data-chart='Biology'] g[data-row]")
    assert len(bars) == len(tables["r2med"])
    folder = Path(os.environ.get("R2MED_BROWSER_ARTIFACTS") or tmp_path)
    folder.mkdir(parents=True, exist_ok=True)
    height = opened.execute_script("return document.documentElement.scrollHeight")
    opened.set_window_size(1500, min(int(height), 8000))
    shot = folder / "leaderboard-page.png"
    assert opened.save_screenshot(str(shot))
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 10_000
    opened.set_window_size(1500, 1800)
    assert _severe(opened) == []


@pytest.mark.parametrize("column", ["Biology", "Avg.", "IIYi-Clinical"])
def test_sorting_by_a_column_orders_rows_as_the_numbers_say(opened, column: str):
    before = sorted(_shown(opened, "#board-r2med tbody tr", -1))
    _click_heading(opened, "r2med", column)
    numbers, missing = _leading_numbers(_column(opened, "r2med", column))
    assert numbers == sorted(numbers, reverse=True) and len(set(numbers)) > 5  # best first, rows without a score last
    assert _column(opened, "r2med", column)[len(numbers):] == missing
    _click_heading(opened, "r2med", column)
    numbers, _ = _leading_numbers(_column(opened, "r2med", column))
    assert numbers == sorted(numbers)
    assert sorted(_shown(opened, "#board-r2med tbody tr", -1)) == before  # the same rows, reordered
    _click_heading(opened, "r2med", "Rank")
    ranks, unranked = _leading_numbers(_column(opened, "r2med", "Rank"))
    assert ranks == [float(n) for n in range(1, len(ranks) + 1)] and unranked == ["-"]
    assert _severe(opened) == []


def _expected(tables: dict, keep) -> set[str]:
    return {row_id(benchmark, number) for benchmark, rows in tables.items() for number, row in enumerate(rows) if keep(benchmark, row)}


FILTERS = {
    "benchmark=nano": ({"benchmark": "nano"}, lambda benchmark, row: benchmark == "nano"),
    "source=yours": ({"source": "yours"}, lambda benchmark, row: row.source == "yours"),
    "expansion=with": ({"expansion": "with"}, lambda benchmark, row: bool(row.llm)),
    "reranked=yes": ({"reranked": "yes"}, lambda benchmark, row: row.reranked),
    "family=BM25": ({"family": "BM25"}, lambda benchmark, row: model_family(row) == "BM25"),
    "published BM25 with an expansion": ({"family": "BM25", "expansion": "with", "source": "published"},
                                         lambda benchmark, row: model_family(row) == "BM25" and bool(row.llm)
                                         and row.source == "published"),
}


@pytest.mark.parametrize("name", sorted(FILTERS))
def test_a_filter_hides_the_right_rows_and_bars(opened, site, name: str):
    from selenium.webdriver.support.ui import Select

    _, tables = site
    chosen, keep = FILTERS[name]
    for key, value in chosen.items():
        Select(opened.find_element("id", f"filter-{key}")).select_by_value(value)
    expected = _expected(tables, keep)
    assert 0 < len(expected) < sum(map(len, tables.values()))
    shown = set(_shown(opened, "tr[data-row]"))
    assert shown == expected
    hidden = next(row for row in opened.find_elements("css selector", "tr[data-row]") if row.get_attribute("data-row") not in expected)
    assert not hidden.is_displayed()  # selenium's own visibility agrees
    bars = set(_shown(opened, "figure[data-chart='Avg.'] g[data-row]"))
    ranked = {row_id(b, n) for b, rows in tables.items() for n, row in enumerate(rows) if row.ranked}
    assert bars == expected & ranked  # the average chart shows the ranked rows left, closed up
    sections = {s.get_attribute("data-benchmark") for s in opened.find_elements("css selector", "section[data-benchmark]")
                if s.is_displayed()}
    assert sections == ({"nano"} if chosen.get("benchmark") == "nano" else {"r2med", "nano"})
    assert opened.find_element("id", "shown").text.startswith(f"{len(expected)} of ")
    for key in chosen:
        Select(opened.find_element("id", f"filter-{key}")).select_by_value("")
    assert set(_shown(opened, "tr[data-row]")) == _expected(tables, lambda benchmark, row: True)
    assert _severe(opened) == []


_OFF_SCREEN = """
const section = document.querySelector("section[data-benchmark='" + arguments[0] + "']");
const box = section.querySelector(".scroll").getBoundingClientRect();
const hint = section.querySelector(".offscreen");
return {off: Array.from(section.querySelectorAll("th[data-col]")).filter(
            h => h.getBoundingClientRect().right > box.right + 1 || h.getBoundingClientRect().left < box.left - 1)
            .map(h => h.getAttribute("data-name")),
        hint: hint && !hint.hidden ? hint.textContent : "",
        cand: Array.from(section.querySelectorAll("th[data-col]")).map(h => h.getAttribute("data-name"))
            .filter(name => name.startsWith("Cand."))};
"""


def _settled(driver, benchmark: str) -> dict:
    """What is off screen and what the page says, once the page has seen the window's new size (its resize event)."""
    from selenium.webdriver.support.ui import WebDriverWait

    WebDriverWait(driver, 10).until(
        lambda d: bool((seen := d.execute_script(_OFF_SCREEN, benchmark))["hint"]) == bool(seen["off"]))
    return driver.execute_script(_OFF_SCREEN, benchmark)


def test_on_a_1600_px_laptop_screen_the_whole_table_shows_or_the_page_names_what_is_off_screen(opened, tmp_path: Path):
    opened.set_window_size(1600, 900)
    try:
        for benchmark in ("r2med", "nano"):
            seen = _settled(opened, benchmark)
            assert all(name in seen["hint"] for name in seen["off"]), (benchmark, seen)  # whatever is off screen is named
            assert not [name for name in seen["cand"] if name in seen["off"]], seen  # the Cand. columns show
            assert bool(seen["hint"]) == bool(seen["off"])
        folder = Path(os.environ.get("R2MED_BROWSER_ARTIFACTS") or tmp_path)
        folder.mkdir(parents=True, exist_ok=True)
        assert opened.save_screenshot(str(folder / "leaderboard-page-1600.png"))
        opened.set_window_size(900, 900)  # a narrow window: columns are off screen, and the page says which
        seen = _settled(opened, "nano")
        assert seen["off"] and seen["hint"].startswith("Scroll the table sideways; off screen to the right: ")
        assert all(name in seen["hint"] for name in seen["off"])
    finally:
        opened.set_window_size(1500, 1800)
    assert _severe(opened) == []
