"""Parameters a model refuses (r2med_plugin.endpoints.client.RequestRules): an OpenAI reasoning model gets
max_completion_tokens and labels, and reranks by the said word."""

from __future__ import annotations

from pathlib import Path

import pytest

from r2med_plugin.llm import ListwiseLLMReranker, PointwiseLLMReranker, ReasoningLLMReranker
from tests.llm.replies import asked_passage, config_for, rankgpt_reply, toy_data
from tests.support.loopback_openai import LoopbackOpenAI

REASONING_API = ("max_tokens", "temperature", "logprobs", "top_logprobs")  # what OpenAI's o-series and gpt-5 refuse


def graded_or_yes(body: dict) -> str:
    """Labels by passage number for the 0-3 question, "Yes" for the yes/no one (an API model's plain answers)."""
    if "scale of 0 to 3" not in body["messages"][-1]["content"]:
        return "Yes"
    return f"Relevance: {int(asked_passage(body).split()[1]) % 4}"


def test_an_openai_reasoning_model_gets_max_completion_tokens_and_labels(own_cache: Path, monkeypatch, caplog):
    """OpenAI's reasoning models answer max_tokens, temperature and logprobs with HTTP 400 "Unsupported parameter":
    each refusal is learned once (the probe's two 400s), every later request is sent with
    max_completion_tokens and neither temperature nor logprobs, and pointwise falls back to the 0-3 labels, with the
    reasoning budget (their hidden reasoning counts in max_completion_tokens), with one message; a rerun asks as the
    first run did and is served from the cache."""
    first_stage, queries, documents = toy_data(count=6, queries=1)
    with LoopbackOpenAI(reply=graded_or_yes, unsupported=REASONING_API, hidden_reasoning=50) as server:
        monkeypatch.setenv("OPENAI_API_KEY", server.api_key)
        reranker = PointwiseLLMReranker("test-llm", config_for(server, concurrency=2))
        with caplog.at_level("WARNING"):
            run = reranker.rerank(first_stage, queries, documents, depth=6, show_progress=False)
        notes = [record.getMessage() for record in caplog.records if "refused" in record.getMessage()]
        bodies = server.completions()
        again = PointwiseLLMReranker("test-llm", config_for(server, concurrency=2))
        assert again.rerank(first_stage, queries, documents, depth=6, show_progress=False) == run
        assert len(server.completions()) == len(bodies)  # the rerun: every answer from the cache, no 400 asked again
    assert run["q0"] == pytest.approx({f"d{i:02d}": (i % 4) / 3 for i in range(6)})
    refused = [body for body in bodies if "max_tokens" in body or "logprobs" in body]
    assert len(refused) == 2  # the probe: max_tokens (then temperature left out with it), then logprobs
    answered = bodies[len(refused):]
    assert all("max_tokens" not in body and "temperature" not in body and "logprobs" not in body for body in answered)
    assert answered[0]["max_completion_tokens"] == 1  # the probe, answered empty: no log-probabilities
    assert {body["max_completion_tokens"] for body in answered[1:]} == {8192}  # 8 tokens never cover the hidden reasoning
    usage = reranker.last_report.usage
    assert usage["scored_by_label"] == 6 and usage["undecided"] == 0 and usage["unsupported_parameters"] == ["logprobs", "max_tokens"]
    assert len(notes) == 1 and "max_completion_tokens in place of max_tokens" in notes[0] and "0-3 label" in notes[0]
    assert "Use 'max_completion_tokens' instead" in notes[0]


def test_an_openai_reasoning_model_reranks_by_the_said_word_and_listwise_without_temperature(own_cache: Path, monkeypatch):
    first_stage, queries, documents = toy_data(count=4, queries=1)

    def said(body: dict) -> str:
        return "true" if int(asked_passage(body).split()[1]) % 2 else "false"

    with LoopbackOpenAI(reply=said, unsupported=REASONING_API) as server:
        monkeypatch.setenv("OPENAI_API_KEY", server.api_key)
        reranker = ReasoningLLMReranker("test-llm", config_for(server, concurrency=1))
        run = reranker.rerank(first_stage, queries, documents, depth=4, show_progress=False)
        bodies = server.completions()
    assert run["q0"] == {"d00": 0.0, "d01": 1.0, "d02": 0.0, "d03": 1.0}
    assert reranker.last_report.usage["scored_by_answer"] == 4 and len(bodies) == 4 + 2
    assert {body.get("max_completion_tokens") for body in bodies[2:]} == {8192}
    with LoopbackOpenAI(reply=rankgpt_reply, unsupported=("temperature",)) as server:
        monkeypatch.setenv("OPENAI_API_KEY", server.api_key)
        listwise = ListwiseLLMReranker("test-llm", config_for(server, concurrency=1))
        listwise.rerank(*toy_data(count=30, queries=2), depth=30, show_progress=False)
        bodies = server.completions()
    assert bodies[0]["temperature"] == 0 and all("temperature" not in body for body in bodies[1:])
    assert len(bodies) == 1 + 2 * 2 and listwise.last_report.usage["unsupported_parameters"] == ["temperature"]
