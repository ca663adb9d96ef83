"""Reporting refusals name the setting at fault, worded per front end: the Python API names the parameter with its
flag (``count (--worst)``), the CLI its flag alone (``--worst``), as `r2med` printed them before."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from r2med_plugin.reporting.compare import load_scores, plot_report, resolve_model
from r2med_plugin.reporting.inspect import inspect_query, worst_queries
from r2med_plugin.reporting.leaderboard import build_leaderboard
from r2med_plugin.reporting.leaderboard_audit import parse_audits
from r2med_plugin.reporting.leaderboard_page import check_page_folder
from r2med_plugin.reporting.plots import select_rows
from r2med_plugin.rules import SettingError


def _refusal(call, *args, **kwargs) -> SettingError:
    with pytest.raises(SettingError) as raised:
        call(*args, **kwargs)
    return raised.value


def test_compare_names_metric_baseline_test_and_plot():
    error = _refusal(load_scores, [], metric="")
    assert error.field == "metric" and error.render("flag") == "--metric is empty; e.g. --metric ndcg_at_10"
    assert str(error).startswith("metric (--metric) is empty")
    scores = SimpleNamespace(models=("org/a", "org/b"), sidecars={}, metric="ndcg_at_10")
    error = _refusal(resolve_model, scores, "org/c")
    assert error.field == "baseline" and error.render("flag").startswith("--baseline 'org/c' is not among the models")
    assert str(error).startswith("baseline (--baseline) 'org/c'")
    error = _refusal(plot_report, None, "chart.txt")
    assert error.field == "path" and error.render("flag").startswith("--plot chart.txt: the chart is written as")
    assert str(error).startswith("path (--plot) chart.txt")


def test_inspect_names_task_and_worst():
    error = _refusal(inspect_query, [], "NoSuchTask", "q1")
    assert error.field == "task" and error.render("flag").startswith("--task 'NoSuchTask' is not an R2MED")
    error = _refusal(worst_queries, [], "org/a", 0)
    assert error.field == "count" and error.render("flag") == "--worst must be a positive number of queries, got 0"
    assert str(error).startswith("count (--worst) must be")  # worst_queries' parameter, with the CLI's flag


def test_leaderboard_names_benchmark(tmp_path: Path):
    error = _refusal(build_leaderboard, [tmp_path], benchmark="nano", compare_published=True)
    assert error.field == "benchmark" and error.render("flag").endswith("(use --benchmark r2med)")
    assert "benchmark (--benchmark) r2med" in str(error)


def test_leaderboard_audit_names_the_audit_values(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    monkeypatch.setattr("r2med_plugin.reporting.leaderboard_audit.read_audit", lambda folder: {})
    error = _refusal(parse_audits, [str(tmp_path)])
    assert error.field == "values" and error.render("flag").startswith(f"--audit {tmp_path}: the audit names no model")
    assert f"write --audit MODEL={tmp_path}" in error.render("flag") and str(error).startswith("values (--audit)")


def test_leaderboard_page_names_its_folder(tmp_path: Path):
    file = tmp_path / "page.html"
    file.write_text("x")
    error = _refusal(check_page_folder, file)
    assert error.field == "folder" and error.render("flag").startswith(f"--html {file}: this is a file")
    assert str(error).startswith("folder (--html)")


def test_plots_name_the_row_selection():
    error = _refusal(select_rows, [], ["9"])
    assert error.field == "selection" and error.render("flag").startswith("--plot-rows: no row '9'")

# submission's folder refusals (field out_dir, --out and --force on the CLI): tests/reporting/test_reporting.py
