"""What a rerank reports (r2med_plugin.llm.report): the warning for a rerank that mostly fell back."""

from __future__ import annotations

from pathlib import Path

import pytest

from r2med_plugin.cli import main
from r2med_plugin.llm import ListwiseLLMReranker
from tests.llm.replies import TASK, config_for, rank1_tokens, toy_data
from tests.support.loopback_openai import LoopbackOpenAI


def test_a_run_where_every_pair_fell_back_says_so(mirror_env: Path, own_cache: Path, tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch, capsys):
    """The usage line counts how pairs were scored, and a run whose pairs mostly fell back (here a budget of 2
    tokens, spent thinking) warns on stderr; a run the model answered does not."""
    from r2med_plugin.data.loader import load_task

    pairs = 10 * load_task(TASK).queries.height
    with LoopbackOpenAI(reply=rank1_tokens, reasoning_parser="deepseek_r1") as server:
        monkeypatch.setenv("OPENAI_API_KEY", server.api_key)
        base = ["evaluate", "--task", TASK, "--rerank", "llm-reasoning:test-llm", "--first-stage", "bm25-robertson",
                "--base-url", server.base_url, "--quiet"]
        assert main([*base, "--max-tokens", "2"]) == 0
        spent = capsys.readouterr()
        assert main(base) == 0
        answered = capsys.readouterr()
    usage_line = next(line for line in spent.out.splitlines() if "rerank usage:" in line)
    assert usage_line.endswith(f"; pairs: 0 scored_by_logprobs, 0 scored_by_answer, {pairs} undecided")
    assert f"{pairs} of {pairs} pairs (100%) were undecided" in spent.err
    assert "the model or endpoint is not giving usable answers" in spent.err and "--max-tokens" in spent.err
    usage_line = next(line for line in answered.out.splitlines() if "rerank usage:" in line)
    assert usage_line.endswith(f"; pairs: {pairs} scored_by_logprobs, 0 scored_by_answer, 0 undecided")
    assert "undecided" not in answered.err


def test_listwise_answers_without_identifiers_warn(own_cache: Path, monkeypatch, caplog):
    first_stage, queries, documents = toy_data(count=6, queries=3)
    prose = {"q0": "I cannot rank these passages.", "q1": "", "q2": "[2] > [1]"}  # 2 of 3 windows unusable

    def reply(body: dict) -> str:
        query = next(query_id for query_id in queries if f"binds protein {query_id[1:]}." in body["messages"][-1]["content"])
        return prose[query]

    with LoopbackOpenAI(reply=reply) as server:
        monkeypatch.setenv("OPENAI_API_KEY", server.api_key)
        reranker = ListwiseLLMReranker("test-llm", config_for(server))
        with caplog.at_level("WARNING", logger="r2med_plugin"):
            reranker.rerank(first_stage, queries, documents, depth=3, show_progress=False)
    usage = reranker.last_report.usage
    assert usage["unparsed_answers"] == 1 and usage["empty_answers"] == 1 and usage["requests"] == 3
    [record] = [record for record in caplog.records if record.levelname == "WARNING"]
    assert record.getMessage().startswith(f"{reranker.name}: 2 of 3 windows (67%) were unparsed or empty")
    assert "kept the first stage's order" in record.getMessage()
