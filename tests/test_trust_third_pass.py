"""Issue 35 (third trust pass): re-runs that dropped scores without a word, TREC files that changed their run's score."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from r2med_plugin.cli import main

NANO_TASK = "NanoR2MEDBioinformatics"


def _scores_of(out: Path, model: str) -> dict:
    (path,) = (out / "results" / model).glob(f"*/{NANO_TASK}.json")
    return json.loads(path.read_text())["scores"]["test"][0]


def test_a_rerun_with_fewer_options_names_the_score_groups_it_drops(mirror_env: Path, tmp_path: Path,
                                                                    caplog: pytest.LogCaptureFixture):
    """Re-running into one --output without --hybrid and --candidates replaced the result (98 keys to 58) and the
    leaderboard's Hybrid and Cand. columns vanished, without a word; it warns now, naming each group and its flag."""
    out = tmp_path / "out"
    full = ["evaluate", "--task", NANO_TASK, "--retriever", "bm25-robertson", "--output", str(out), "--quiet"]
    assert main([*full, "--hybrid", "--candidates", "bm25", "dense", "hybrid"]) == 0
    wide = _scores_of(out, "bm25-robertson")
    with caplog.at_level("WARNING"):
        assert main([*full, "--hybrid", "--candidates", "bm25", "dense", "hybrid"]) == 0  # the same options: no word
    assert not [record for record in caplog.records if "drops" in record.getMessage()]
    with caplog.at_level("WARNING"):
        assert main(full) == 0
    narrow = _scores_of(out, "bm25-robertson")
    dropped = set(wide) - set(narrow)
    groups = {key.split("_ndcg_at_10")[0] for key in dropped if "_ndcg_at_10" in key}
    assert groups == {"hybrid", "candidates_bm25", "candidates_dense", "candidates_hybrid"} and not set(narrow) - set(wide)
    (message,) = [record.getMessage() for record in caplog.records if "drops" in record.getMessage()]
    count = {group: sum(key.startswith(f"{group}_") for key in dropped) for group in ("hybrid", "candidates_bm25")}
    assert f"hybrid_* ({count['hybrid']} scores; --hybrid)" in message
    assert f"candidates_bm25_* ({count['candidates_bm25']} scores; --candidates bm25)" in message
    assert "candidates_dense_*" in message and "candidates_hybrid_*" in message and "--output" in message
