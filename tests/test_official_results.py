from __future__ import annotations

import json
from pathlib import Path

import pytest

from r2med_plugin import evaluate_run, write_official_results


def test_official_json_fields_and_rounding(tmp_path: Path):
    qrels = {"q1": {"d1": 1, "d3": 1}, "q2": {"d5": 1}, "q3": {"d9": 1}}
    run = {"q1": {"d1": 3.0, "d2": 2.0, "d3": 1.0}, "q2": {"d4": 5.0, "d5": 5.0}}
    scores = evaluate_run(qrels, run)
    path = write_official_results(
        tmp_path / "out" / "Biology.json", dataset_name="Biology", model_name="bm25", scores=scores, evaluation_time=1.23456
    )
    payload = json.loads(path.read_text())
    assert list(payload) == ["dataset_name", "model_name", "evaluation_time", "test"]
    assert payload["dataset_name"] == "Biology" and payload["model_name"] == "bm25"
    test = payload["test"]
    expected_keys = [f"{f}_{k}" for f in ("ndcg_at", "map_at", "recall_at", "precision_at") for k in (1, 10, 25, 50, 100)]
    assert list(test) == expected_keys + ["mrr"]
    assert test["recall_at_1"] == round((1 / 2 + 1 + 0) / 3, 5) == 0.5
    assert test["precision_at_10"] == round((2 / 10 + 1 / 10) / 3, 5) == 0.1
    assert test["mrr"] == round((1 + 1 + 0) / 3, 5) == 0.66667
    assert not list(path.parent.glob("*.tmp"))


def test_missing_scores_are_refused(tmp_path: Path):
    with pytest.raises(ValueError, match="scores lack"):
        write_official_results(tmp_path / "x.json", dataset_name="B", model_name="m", scores={"ndcg_at_10": 0.5}, evaluation_time=1)
    with pytest.raises(ValueError, match="non-empty"):
        write_official_results(tmp_path / "x.json", dataset_name="", model_name="m", scores={}, evaluation_time=1)
    assert not (tmp_path / "x.json").exists()
