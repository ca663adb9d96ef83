"""The leaderboard's paired tests (r2med_plugin.reporting.leaderboard_significance): rows on other data are never tested
against each other."""

from __future__ import annotations

from pathlib import Path

import pytest

from r2med_plugin.catalog import list_tasks
from r2med_plugin.reporting.leaderboard import build_leaderboard

NANO = list_tasks("nano")


@pytest.mark.slow
def test_rows_of_different_models_on_different_files_are_labelled_and_never_tested_against_each_other(
        mirror_env: Path, mirror_copy: Path, tmp_path: Path):
    import polars as pl

    from r2med_plugin.evaluation.runner import evaluate_task
    from r2med_plugin.evaluation.writers import write_outputs
    from r2med_plugin.reporting.leaderboard_significance import add_significance

    qrels = mirror_copy / "hakari-bench" / "NanoR2MED" / "qrels" / "NanoR2MEDBiology.parquet"
    frame = pl.read_parquet(qrels)
    frame.with_columns(pl.col("corpus-id").shift(1, fill_value=frame["corpus-id"][-1])).write_parquet(qrels)  # other positives
    for spec in NANO:  # two models, one mirror each (no commit recorded): Biology's files differ
        write_outputs(evaluate_task(spec.name, "bm25-robertson", show_progress=False), tmp_path)
        write_outputs(evaluate_task(spec.name, "bm25-lucene", data_dir=mirror_copy, show_progress=False), tmp_path)
    rows = build_leaderboard([tmp_path], benchmark="nano")
    biology = NANO[0].hub_name
    assert all(f"{biology} files " in row.note for row in rows) and rows[0].note != rows[1].note
    tested = add_significance(rows)
    other = next(row for row in tested if "computed on other data" in (row.significance or ""))
    assert other.versus_best == "-" and biology in other.significance
    assert all(row.versus_best == "-" for row in tested)  # nothing was compared: no row is called "best"
