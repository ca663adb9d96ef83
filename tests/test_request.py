"""Issue 31: each rule of an evaluation request lives once, in the type that owns it; the CLI, sweep specs and
evaluate_task/build_plan all come through it (one test per rule, at its type, then that every front end says it)."""

from __future__ import annotations

from pathlib import Path

import pytest

from r2med_plugin.catalog import get_task_spec
from r2med_plugin.cli import main
from r2med_plugin.evaluation.plan import build_plan
from r2med_plugin.evaluation.request import RequestError, Scoring
from r2med_plugin.llm.config import build_reranker_config, settings_unused_by
from r2med_plugin.sweep.spec import SpecError, parse_spec

NANO, R2MED = "NanoR2MEDBiology", "R2MEDBiology"


@pytest.mark.parametrize("settings, field, api, flags", [
    (dict(hybrid=True, candidates=("bm25",), candidates_only=True), "hybrid", "fuse full-corpus runs",
     "--hybrid fuses full-corpus runs, which --candidates-only skips"),
    (dict(candidates=("bm26",)), "candidates", "unknown candidate subset(s) ['bm26']", "--candidates bm26: unknown"),
    (dict(candidates_only=True), "candidates_only", "needs at least one candidate subset",
     "--candidates-only needs at least one candidate subset"),
    (dict(top_k=5), "top_k", "top_k (--top-k) must be at least 10", "--top-k must be at least 10"),
])
def test_scoring_refuses_what_no_task_could_run(settings: dict, field: str, api: str, flags: str):
    with pytest.raises(RequestError) as raised:
        Scoring(**settings)
    error = raised.value
    assert error.field == field and api in str(error) and error.flag_message.startswith(flags)
    assert error.keyed(f"`{field}`").startswith(f"`{field}` ")


def test_scoring_checks_what_depends_on_the_task():
    with pytest.raises(ValueError, match="R2MEDBiology has no stored candidate lists"):
        Scoring(candidates=("bm25",)).check_task(get_task_spec(R2MED))
    with pytest.raises(ValueError, match="expansions apply to the R2MED tasks, candidate subsets to NanoR2MED"):
        Scoring(candidates=("bm25",), expansion="hyde/gpt4").check_task(get_task_spec(NANO))
    with pytest.raises(KeyError, match="Did you mean"):
        Scoring(expansion="hyde/gtp4").check_task(get_task_spec(R2MED))
    Scoring(expansion="hyde/gpt4").check_task(get_task_spec(R2MED))
    assert Scoring(candidates=("hybrid", "bm25", "hybrid")).candidates == ("hybrid", "bm25")


def test_one_scoring_rule_three_front_ends(mirror_env: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    """The same refusal, worded for each front end, from the one rule."""
    with pytest.raises(RequestError, match=r"top_k \(--top-k\) must be at least 10"):
        build_plan(NANO, "bm25-lucene", top_k=5)
    assert main(["evaluate", "--task", NANO, "--retriever", "bm25-lucene", "--top-k", "5"]) == 2
    assert "r2med: error: --top-k must be at least 10: the main score is nDCG@10; got 5" in capsys.readouterr().err
    with pytest.raises(SpecError, match=r"`top_k` must be at least 10: the main score is nDCG@10; got 5; raise it"):
        parse_spec({"output": str(tmp_path), "tasks": [NANO], "retrievers": ["bm25-lucene"], "top_k": 5}, tmp_path / "s.yaml")
    with pytest.raises(SpecError, match=r"`hybrid` fuses full-corpus runs, which candidates_only skips; drop one"):
        parse_spec({"output": str(tmp_path), "tasks": [NANO], "retrievers": ["bm25-lucene"], "hybrid": True,
                    "candidates": ["bm25"], "candidates_only": True}, tmp_path / "s.yaml")


def test_the_tasks_own_bm25():
    assert get_task_spec(R2MED).own_bm25 == "bm25-lucene" and get_task_spec(NANO).own_bm25 == "bm25-robertson"
    from r2med_plugin.evaluation.plan import extra_scorers, hybrid_partner

    assert extra_scorers(get_task_spec(NANO))[0].partner == "bm25-robertson"
    assert hybrid_partner(get_task_spec(NANO), "bm25-robertson") == "bm25-lucene"  # never fused with itself


def test_llm_settings_each_kind_reads():
    setwise = {"set_size", "setwise_method", "setwise_k"}
    assert set(settings_unused_by("listwise")) == setwise
    assert set(settings_unused_by("pointwise")) == {"window", "step", "max_tokens"} | setwise
    assert set(settings_unused_by("reasoning")) == {"window", "step"} | setwise
    assert set(settings_unused_by("setwise")) == {"window", "step"}
    assert "llm-reasoning asks about one passage at a time" in settings_unused_by("reasoning")["window"]
    assert "llm-setwise asks about sets of --set-size passages" in settings_unused_by("setwise")["window"]
    assert "llm-listwise does not sort by picks from sets" in settings_unused_by("listwise")["set_size"]


def test_the_llm_settings_rule_says_the_same_in_the_cli_and_a_spec(mirror_env: Path, tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]):
    why = settings_unused_by("pointwise")["window"]
    argv = ["evaluate", "--task", NANO, "--first-stage", "bm25-lucene", "--rerank", "llm-pointwise:m",
            "--base-url", "http://127.0.0.1:9/v1", "--window", "4"]
    assert main(argv) == 2
    assert why in capsys.readouterr().err
    with pytest.raises(SpecError) as raised:
        parse_spec({"output": str(tmp_path), "tasks": [NANO], "rerankers": [
            {"model": "llm-pointwise:m", "first_stage": "bm25-lucene", "base_url": "http://127.0.0.1:9/v1", "window": 4}]},
            tmp_path / "s.yaml")
    assert why in str(raised.value) and "rerankers[0].window" in str(raised.value)


def test_one_builder_for_an_llm_rerankers_endpoint(monkeypatch: pytest.MonkeyPatch):
    config = build_reranker_config("http://127.0.0.1:8000/v1", what="x", check_key=False, concurrency=3, timeout=5.0,
                                   window=8, step=4, extra_body={"a": 1})
    assert (config.endpoint.concurrency, config.endpoint.timeout, config.window, config.step) == (3, 5.0, 8, 4)
    assert config.extra_body == {"a": 1} and build_reranker_config("http://h/v1", what="x", check_key=False).window == 20
    setwise = build_reranker_config("http://h/v1", what="x", check_key=False, set_size=5, setwise_method="bubblesort", setwise_k=4)
    assert (setwise.set_size, setwise.setwise_method, setwise.setwise_k) == (5, "bubblesort", 4)
    plain = build_reranker_config("http://h/v1", what="x", check_key=False)
    assert (plain.set_size, plain.setwise_method, plain.setwise_k) == (3, "heapsort", 10)
    with pytest.raises(ValueError, match="--rerank llm-listwise:m needs an endpoint: add --base-url"):
        build_reranker_config(None, what="--rerank llm-listwise:m")
    with pytest.raises(ValueError, match="concurrency must be an integer of at least 1"):
        build_reranker_config("http://h/v1", what="x", check_key=False, concurrency=0)
    with pytest.raises(ValueError, match="timeout must be a positive number"):
        build_reranker_config("http://h/v1", what="x", check_key=False, timeout=-1)
    monkeypatch.delenv("MISSING_KEY_VAR", raising=False)
    with pytest.raises(ValueError, match="MISSING_KEY_VAR"):
        build_reranker_config("http://h/v1", what="x", api_key_env="MISSING_KEY_VAR")


def test_the_instruction_rule_is_the_models(tmp_path: Path, capsys: pytest.CaptureFixture[str], mirror_env: Path):
    from r2med_plugin.models.registry import resolve

    assert resolve("minilm-packaged").instruction_refusal is None
    why, fix = resolve("official:bge").instruction_refusal
    assert "official profile" in why and fix == "drop instruction"
    assert main(["evaluate", "--task", R2MED, "--retriever", "official:bge", "--instruction"]) == 2
    assert why in capsys.readouterr().err
    with pytest.raises(SpecError) as raised:
        parse_spec({"output": str(tmp_path), "tasks": [R2MED], "retrievers": [{"model": "official:bge", "instruction": True}]},
                   tmp_path / "s.yaml")
    assert why in str(raised.value) and "retrievers[0].instruction" in str(raised.value)
