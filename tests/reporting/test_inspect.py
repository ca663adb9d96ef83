"""`r2med inspect` and `r2med compare` refuse results on different dataset revisions (r2med_plugin.reporting.inspect)."""

from __future__ import annotations

from pathlib import Path

import pytest


def test_compare_and_inspect_refuse_results_on_different_dataset_revisions(mirror_env: Path, mirror_copy: Path, tmp_path: Path):
    from r2med_plugin.evaluation.runner import evaluate_task
    from r2med_plugin.evaluation.writers import write_outputs
    from r2med_plugin.reporting.compare import compare_results
    from r2med_plugin.reporting.inspect import inspect_query

    write_outputs(evaluate_task("NanoR2MEDBiology", "bm25-robertson", show_progress=False), tmp_path / "a")
    qrels = mirror_copy / "hakari-bench" / "NanoR2MED" / "qrels" / "NanoR2MEDBiology.parquet"
    import polars as pl

    frame = pl.read_parquet(qrels)
    frame.with_columns(pl.col("corpus-id").shift(1, fill_value=frame["corpus-id"][-1])).write_parquet(qrels)  # other positives
    write_outputs(evaluate_task("NanoR2MEDBiology", "bm25-lucene", data_dir=mirror_copy, show_progress=False), tmp_path / "b")
    with pytest.raises(ValueError, match="different dataset revisions|other data"):
        compare_results([tmp_path / "a", tmp_path / "b"], baseline="bm25-robertson")
    query = frame["query-id"][0]
    with pytest.raises(ValueError, match="different dataset revisions"):
        inspect_query([tmp_path / "a", tmp_path / "b"], "NanoR2MEDBiology", query)
