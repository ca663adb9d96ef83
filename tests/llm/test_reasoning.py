"""``llm-reasoning`` (Rank1) against a loopback OpenAI-compatible server: traces beside the result, inline <think>,
spent budgets, the answer token behind a reasoning parser."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from r2med_plugin.cli import main
from r2med_plugin.llm import ReasoningLLMReranker
from tests.llm.replies import (
    TASK,
    asked_passage,
    config_for,
    rank1_tokens,
    reasoning_reply,
    toy_data,
    true_false_logprobs,
)
from tests.support.loopback_openai import LoopbackOpenAI, logprobs_of


def test_reasoning_end_to_end_saves_traces_beside_the_result(mirror_env: Path, own_cache: Path, tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch, capsys):
    with LoopbackOpenAI(reply=reasoning_reply) as server:
        monkeypatch.setenv("OPENAI_API_KEY", server.api_key)
        server.add_faults("500")
        argv = ["evaluate", "--task", TASK, "--rerank", "llm-reasoning:test-llm", "--first-stage", "bm25-robertson",
                "--base-url", server.base_url, "--max-tokens", "256", "--output", str(tmp_path / "out"), "--quiet"]
        assert main(argv) == 0
        assert {body["max_tokens"] for body in server.completions()} == {256}
    assert "rerank usage:" in capsys.readouterr().out
    result = next((tmp_path / "out" / "results").rglob(f"{TASK}.json"))
    traces = [json.loads(line) for line in result.with_name(f"{TASK}.reasoning.jsonl").read_text().splitlines()]
    from r2med_plugin.data.loader import load_task

    data = load_task(TASK)
    texts = dict(zip(data.corpus["id"].to_list(), data.corpus["text"].to_list(), strict=True))
    assert len(traces) == 10 * data.queries.height
    for trace in traces:
        true, false = true_false_logprobs(texts[trace["doc_id"]])
        p_true = math.exp(true) + math.exp(-9.0)  # "true" and "True" add up
        assert trace["score"] == pytest.approx(p_true / (p_true + math.exp(false)), abs=1e-12)
        assert trace["reasoning"].startswith("The query asks about genes") and trace["answer"] in ("true", "false")
    assert json.loads(result.read_text())["r2med_provenance"]["reranker"].endswith(" max256)")


def test_reasoning_answers_inline_think_and_spent_budgets(own_cache: Path, monkeypatch):
    def reply(body: dict) -> dict:
        passage = asked_passage(body)
        number = int(passage.split()[1])
        if number == 0:
            return {"content": "thinking on and on", "finish_reason": "length"}
        if number == 1:
            return {"content": "maybe true?</think>\nfalse"}  # no logprobs: the word after </think>
        return {"content": "it says true.</think> true",
                "logprobs": logprobs_of([("it", -0.1, {}), (" says", -0.1, {}), (" true", -0.2, {" true": -0.2}), (".</think>", -0.1, {}),
                                         (" true", -0.3, {" true": -0.3, " false": -1.5})])}

    first_stage, queries, documents = toy_data(count=3, queries=1)
    with LoopbackOpenAI(reply=reply) as server:
        monkeypatch.setenv("OPENAI_API_KEY", server.api_key)
        reranker = ReasoningLLMReranker("test-llm", config_for(server))
        run = reranker.rerank(first_stage, queries, documents, depth=3, show_progress=False)
    p_true = math.exp(-0.3) / (math.exp(-0.3) + math.exp(-1.5))  # the token after </think>, not the one inside the thought
    assert run["q0"] == pytest.approx({"d00": 0.5, "d01": 0.0, "d02": p_true})
    usage = reranker.last_report.usage
    assert usage["undecided"] == 1 and usage["scored_by_answer"] == 1 and usage["scored_by_logprobs"] == 1


@pytest.mark.parametrize("parser", ["deepseek_r1", None])
def test_reasoning_scores_the_answer_token_behind_a_reasoning_parser(own_cache: Path, monkeypatch, parser: str | None):
    """vLLM's --reasoning-parser moves the thought to reasoning_content, but its log-probabilities still cover the
    thought's tokens first: the score is read at the answer's token, as with the thought inline in the content; a
    budget spent thinking (--max-tokens 2: no answer) is undecided, not scored from the thought's tokens."""
    first_stage, queries, documents = toy_data(count=4, queries=1)
    with LoopbackOpenAI(reply=rank1_tokens, reasoning_parser=parser) as server:
        monkeypatch.setenv("OPENAI_API_KEY", server.api_key)
        reranker = ReasoningLLMReranker("test-llm", config_for(server))
        run = reranker.rerank(first_stage, queries, documents, depth=4, show_progress=False)
        answered = reranker.last_report.usage
        cut = ReasoningLLMReranker("test-llm", config_for(server, max_tokens=2))
        spent = cut.rerank(first_stage, queries, documents, depth=4, show_progress=False)
        message = server.completions()[0]
    expected = {}
    for doc_id, passage in documents.items():
        true, false = true_false_logprobs(passage)
        p_true = math.exp(true) + math.exp(-9.0)  # the answer token's "true" and "True"; not the thought's 1 / (1 + e)
        expected[doc_id] = p_true / (p_true + math.exp(false))
    assert run["q0"] == pytest.approx(expected, abs=1e-12)
    assert answered["scored_by_logprobs"] == 4 and answered["undecided"] == 0
    assert spent["q0"] == {doc_id: 0.5 for doc_id in documents}
    assert cut.last_report.usage["undecided"] == 4 and cut.last_report.usage["scored_by_logprobs"] == 0
    assert message["logprobs"] is True and message["top_logprobs"] == 20
    traces = {trace["doc_id"]: trace for trace in cut.last_report.traces}
    assert traces["d00"]["reasoning"] == "Okay," and traces["d00"]["answer"] == "" and traces["d00"]["finish_reason"] == "length"
