"""Charts (r2med_plugin.reporting.plots) draw only what was computed, say which rows they leave out, and keep
expansion methods apart."""

from __future__ import annotations

from pathlib import Path

import matplotlib
import pytest

from r2med_plugin.catalog import list_tasks
from r2med_plugin.cli import main
from r2med_plugin.reporting.leaderboard import build_leaderboard, rank_rows
from r2med_plugin.reporting.plots import plot_nano, plot_tasks
from r2med_plugin.reporting.render import notes
from r2med_plugin.reporting.rows import LeaderboardRow
from tests.support.builders import write_result

NANO = list_tasks("nano")
R2MED = list_tasks("r2med")


def _svg_text(path: Path) -> str:
    return path.read_text(encoding="utf-8")


@pytest.fixture()
def svg_text():
    """Keep chart text as <text> elements, so that a test can read labels and legends."""
    with matplotlib.rc_context({"svg.fonttype": "none"}):
        yield


def _nano_row(with_candidates: bool) -> LeaderboardRow:
    hubs = [spec.hub_name for spec in NANO]
    extras = {hub: ({"candidates_hybrid_ndcg_at_10_with_safeguard": 55.5} if with_candidates and i == 0 else {}) for i, hub in enumerate(hubs)}
    return LeaderboardRow(llm="", retriever="org/m", scores={hub: 42.25 for hub in hubs}, source="yours", task_extras=extras)


def test_nano_chart_says_n_a_for_scores_never_computed(tmp_path: Path, svg_text):
    path = plot_nano(_nano_row(with_candidates=True), tmp_path / "nano.svg")
    text = _svg_text(path)
    assert text.count(">42.2<") == 8 and text.count(">55.5<") == 1
    assert text.count(">n/a<") == 8 + 7  # hybrid fusion never computed; candidate subset computed for one task only
    assert ">0.0<" not in text


def test_legends_and_notes_keep_expansion_methods_apart(tmp_path: Path, svg_text):
    rows = [LeaderboardRow(llm="o3-mini", retriever="bm25-lucene", note=method, scores={"Biology": 10.0 + i}, source="yours")
            for i, method in enumerate(("hyde", "lamer", "query2doc"))]
    rows = rank_rows(rows)
    text = _svg_text(plot_tasks(rows, tmp_path / "r2med.svg"))
    for method in ("hyde", "lamer", "query2doc"):
        assert f"o3-mini | bm25-lucene ({method})" in text
    assert sorted(n.split(":")[0] for n in notes(rows)) == [f"o3-mini | bm25-lucene ({m})" for m in ("hyde", "lamer", "query2doc")]


def test_plot_rows_are_chosen_and_never_dropped_silently(tmp_path: Path, capsys: pytest.CaptureFixture[str], svg_text):
    from r2med_plugin.reporting.plots import plot_leaderboard

    for i in range(8):
        for spec in R2MED:
            write_result(tmp_path, f"org/m{i}", spec.name, 0.1 + i / 100, spec.revision)
    rows = build_leaderboard([tmp_path])
    _, dropped = plot_leaderboard(rows, tmp_path / "default.svg")
    assert dropped == ["org/m1", "org/m0"]  # the two lowest of 8 rows, named
    path, dropped = plot_leaderboard(rows, tmp_path / "all.svg", selection=["all"])
    assert dropped == [] and all(f"org/m{i}" in _svg_text(path) for i in range(8))
    assert main(["leaderboard", str(tmp_path), "--plot", str(tmp_path / "cli.svg")]) == 0
    assert "not plotted (2 rows; choose with --plot-rows, or --plot-rows all): org/m1; org/m0" in capsys.readouterr().err
    assert main(["leaderboard", str(tmp_path), "--plot", str(tmp_path / "two.svg"), "--plot-rows", "1", "org/m0"]) == 0
    text = _svg_text(tmp_path / "two.svg")
    assert "org/m7" in text and "org/m0" in text and "org/m3" not in text
    assert main(["leaderboard", str(tmp_path), "--plot", str(tmp_path / "x.svg"), "--plot-rows", "nobody"]) == 2
    assert "no row 'nobody'" in capsys.readouterr().err


def test_nano_plot_rows(tmp_path: Path, capsys: pytest.CaptureFixture[str], svg_text):
    for name, score in (("org/a", 0.5), ("org/b", 0.3)):
        for spec in NANO:
            write_result(tmp_path, name, spec.name, score)
    assert main(["leaderboard", str(tmp_path), "--benchmark", "nano", "--plot", str(tmp_path / "first.svg")]) == 0
    out = capsys.readouterr().err  # notes on stderr; stdout is the table alone
    assert "not plotted (1 rows" in out and "org/b" in out.split("not plotted")[1]
    assert "NanoR2MED: org/a" in _svg_text(tmp_path / "first.svg")
    assert main(["leaderboard", str(tmp_path), "--benchmark", "nano", "--plot", str(tmp_path / "b.svg"), "--plot-rows", "org/b"]) == 0
    assert "NanoR2MED: org/b" in _svg_text(tmp_path / "b.svg")
    capsys.readouterr()
    assert main(["leaderboard", str(tmp_path), "--benchmark", "nano", "--plot", str(tmp_path / "all.svg"), "--plot-rows", "all"]) == 0
    text = _svg_text(tmp_path / "all.svg")
    assert "org/a" in text and "org/b" in text and "not plotted" not in capsys.readouterr().out


def test_the_nano_chart_draws_a_real_row_before_the_demo_sample(tmp_path: Path, svg_text):
    """With the demo's synthetic results in the same folder as real ones, --plot drew the demo's row."""
    from r2med_plugin.reporting.plots import plot_leaderboard

    for index, spec in enumerate(NANO):
        write_result(tmp_path, "demo/minilm", spec.name, 0.9, "synthetic-sample")
        if index < 2:  # a first real run of two tasks: unranked, as the demo's row is next to it
            write_result(tmp_path, "org/real", spec.name, 0.3, "rev")
    rows = build_leaderboard([tmp_path], benchmark="nano")
    assert [row.synthetic for row in rows if row.source == "yours"] == [True, False]  # the demo's row comes first
    path, dropped = plot_leaderboard(rows, tmp_path / "nano.svg", benchmark="nano")
    assert "NanoR2MED: org/real" in _svg_text(path) and dropped == ["demo/minilm (synthetic sample)"]
