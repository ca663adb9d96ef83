"""Per-query sidecars as the paired tests read them (r2med_plugin.reporting.per_query): runs on the same judged data
pair up."""

from __future__ import annotations

from pathlib import Path

import pytest

from r2med_plugin.cli import main


def test_compare_pairs_a_run_with_its_expanded_run_on_an_unverified_mirror(mirror_env: Path, tmp_path: Path,
                                                                          capsys: pytest.CaptureFixture[str]):
    """Found by the third new-user trial: on a mirror that does not prove its commit, an expansion run's dataset
    revision also covers the expansion file, so compare and inspect refused every pair of a folder that held one
    ("other data"), though the queries, qrels and corpus are the same. Sidecars record the judged data's revision
    (`paired_revision`) and the paired test pairs by it; an edited qrels file still keeps two runs apart."""
    out = tmp_path / "out"
    task = "R2MEDBioinformatics"
    base = ["evaluate", "--task", task, "--retriever", "bm25-lucene", "--output", str(out), "--quiet"]
    assert main(base) == 0 and main([*base, "--expansion", "hyde/o3-mini"]) == 0
    capsys.readouterr()
    assert main(["compare", str(out), "--baseline", "bm25-lucene"]) == 0, capsys.readouterr().err
    report = capsys.readouterr().out
    assert "hyde/o3-mini+bm25-lucene" in report and "other data" not in report
    assert main(["inspect", str(out), "--task", task, "--query", "bioinformatics-q-000"]) == 0
    from r2med_plugin.reporting.per_query import read_per_query

    infos = [read_per_query(path).info for path in out.rglob(f"{task}.per_query.parquet")]
    assert len(infos) == 2 and infos[0]["paired_revision"] == infos[1]["paired_revision"]
    assert infos[0]["dataset_revision"] != infos[1]["dataset_revision"]  # the expansion file is still in the revision
