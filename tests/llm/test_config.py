"""An LLM reranker's settings (r2med_plugin.llm.config): checked with the fix, named, and the rerank depth refused
below 10 before any request."""

from __future__ import annotations

from pathlib import Path

import pytest

from r2med_plugin.cli import main
from r2med_plugin.evaluation.reranker_stage import as_reranker
from r2med_plugin.llm import Endpoint, LLMRerankerConfig, ReasoningLLMReranker
from r2med_plugin.rules import SettingError
from tests.llm.replies import TASK, config_for, pointwise_reply, write_sweep_spec
from tests.support.loopback_openai import LoopbackOpenAI


def test_settings_are_checked_with_the_fix():
    endpoint = Endpoint("http://127.0.0.1:9/v1")
    with pytest.raises(SettingError) as step:
        LLMRerankerConfig(endpoint, window=10, step=10)
    assert step.value.field == "step" and "smaller than" in str(step.value)
    # each front end names the settings its own way: the keyword (with its flag), the flag, the sweep key
    assert str(step.value).startswith("step (--step) must be smaller than window (--window)")
    assert step.value.flag_message.startswith("--step must be smaller than --window")
    assert step.value.render("key").startswith("step must be smaller than window")
    with pytest.raises(SettingError) as concurrency:
        Endpoint("http://127.0.0.1:9/v1", concurrency=0)
    assert concurrency.value.field == "concurrency" and "got 0" in str(concurrency.value)
    with pytest.raises(SettingError) as endpoint_missing:
        as_reranker("llm-listwise:m")
    assert endpoint_missing.value.field == "base_url" and "--base-url" in endpoint_missing.value.flag_message
    with pytest.raises(ValueError, match="did you mean llm-listwise"):
        as_reranker("llm-listwize:m", llm=LLMRerankerConfig(endpoint))
    with pytest.raises(ValueError, match="names no model"):
        as_reranker("llm-pointwise:", llm=LLMRerankerConfig(endpoint))
    reranker = as_reranker("llm-reasoning:Qwen/Qwen3-8B", llm=LLMRerankerConfig(endpoint, max_tokens=512))
    assert isinstance(reranker, ReasoningLLMReranker) and reranker.name == "Qwen/Qwen3-8B (reasoning @127.0.0.1-9 max512)"
    assert reranker.revision.startswith("reasoning-prompt-")


def test_llm_strategy_and_reranker_stage_refusals_name_their_setting():
    from r2med_plugin.llm.listwise import ListwiseLLMReranker

    with pytest.raises(SettingError) as unnamed:
        ListwiseLLMReranker(" ", LLMRerankerConfig(Endpoint("http://127.0.0.1:9/v1")))
    assert unnamed.value.field == "rerank" and unnamed.value.render("flag").startswith("--rerank llm-listwise:<model> needs")
    assert str(unnamed.value).startswith("rerank (--rerank) llm-listwise:<model>")
    with pytest.raises(SettingError) as cross:
        as_reranker("some/cross-encoder", llm=LLMRerankerConfig(Endpoint("http://127.0.0.1:9/v1")))
    assert cross.value.field == "llm"
    assert cross.value.render("flag").startswith("llm (the endpoint settings: --base-url, --window, ...) applies to LLM")
    assert str(cross.value).startswith("llm (the endpoint settings: base_url (--base-url), window (--window), ...)")


def test_an_empty_api_key_env_is_refused():
    from r2med_plugin.endpoints.client import api_key

    with pytest.raises(ValueError, match=r"api_key_env \(--api-key-env\) is empty"):
        api_key("")


def test_a_rerank_depth_below_10_is_refused_before_any_request(mirror_env: Path, own_cache: Path, tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch, capsys):
    """The main score is ndcg_at_10: a top-5 rerank cannot report it. It was found after every request had been sent
    (`main score 'ndcg_at_10' is not among the scores`, nothing written); the CLI, the Python API and sweep specs
    refuse it first."""
    from r2med_plugin import evaluate_task
    from r2med_plugin.sweep import load_spec
    from r2med_plugin.sweep.spec import SpecError

    with LoopbackOpenAI(reply=pointwise_reply) as server:
        monkeypatch.setenv("OPENAI_API_KEY", server.api_key)
        argv = ["evaluate", "--task", TASK, "--rerank", "llm-pointwise:test-llm", "--first-stage", "bm25-robertson",
                "--base-url", server.base_url, "--rerank-depth", "5", "--output", str(tmp_path / "out"), "--quiet"]
        assert main(argv) == 2
        err = capsys.readouterr().err
        reranker = as_reranker("llm-pointwise:test-llm", llm=config_for(server))
        with pytest.raises(ValueError, match=r"rerank_depth \(--rerank-depth\) must be at least 10 .*got 9"):
            evaluate_task(TASK, rerank=reranker, first_stage="bm25-robertson", rerank_depth=9, show_progress=False)
        assert server.completions() == []
    assert "r2med: error: --rerank-depth must be at least 10 documents per query" in err and "got 5" in err
    assert "ndcg_at_10" in err and not (tmp_path / "out").exists()
    entry = {"model": "llm-pointwise:m", "first_stage": "bm25-robertson", "base_url": "http://127.0.0.1:9/v1", "depth": 5}
    with pytest.raises(SpecError, match=r"`rerankers\[0\]\.depth` must be at least 10 documents per query.*got 5"):
        load_spec(write_sweep_spec(tmp_path, entry))
    with pytest.raises(SpecError, match=r"`rerankers\[0\]\.depth` must be at least 10"):
        load_spec(write_sweep_spec(tmp_path, {"model": "org/cross-encoder", "first_stage": "bm25-robertson", "depth": 3}))
    assert load_spec(write_sweep_spec(tmp_path, entry | {"depth": 10})).rerankers[0]["rerank_depth"] == 10
