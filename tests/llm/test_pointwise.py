"""``llm-pointwise`` (P(yes)) against a loopback OpenAI-compatible server: the hand-computed share of yes, the 0-3
labels without log-probabilities, no reasoning token read as the answer."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from r2med_plugin.cli import main
from r2med_plugin.llm import PointwiseLLMReranker
from tests.llm.replies import TASK, asked_passage, config_for, pointwise_reply, server_host, toy_data, yes_no_logprobs
from tests.support.loopback_openai import LoopbackOpenAI


def test_pointwise_p_yes_is_the_hand_computed_share_of_yes(mirror_env: Path, own_cache: Path, tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch, capsys):
    with LoopbackOpenAI(reply=pointwise_reply) as server:
        monkeypatch.setenv("R2MED_TEST_KEY", server.api_key)
        server.add_faults("drop", "429")
        argv = ["evaluate", "--task", TASK, "--rerank", "llm-pointwise:test-llm", "--first-stage", "bm25-robertson",
                "--base-url", server.base_url, "--api-key-env", "R2MED_TEST_KEY", "--concurrency", "3",
                "--output", str(tmp_path / "out"), "--trec", "--quiet"]
        assert main(argv) == 0
        bodies = server.completions()
    assert all(body["logprobs"] is True and body["max_tokens"] == 1 and body["top_logprobs"] == 20 for body in bodies)
    run_file = next((tmp_path / "out" / "runs").rglob(f"{TASK}.trec"))
    scores = {(line.split()[0], line.split()[2]): float(line.split()[4]) for line in run_file.read_text().splitlines()}
    from r2med_plugin.data.loader import load_task

    data = load_task(TASK)
    texts = dict(zip(data.corpus["id"].to_list(), data.corpus["text"].to_list(), strict=True))
    assert len(scores) == 10 * data.queries.height
    for (_query_id, doc_id), score in scores.items():
        yes, yes_spaced, no = yes_no_logprobs(texts[doc_id])
        expected = (math.exp(yes) + math.exp(yes_spaced)) / (math.exp(yes) + math.exp(yes_spaced) + math.exp(no))
        assert score == pytest.approx(expected, abs=1e-6)  # the TREC file keeps 6 decimals or more
    written = json.loads(next((tmp_path / "out" / "results").rglob(f"{TASK}.json")).read_text())
    assert written["r2med_provenance"]["rerank_usage"]["scored_by_logprobs"] == len(scores)
    name = f"test-llm (pointwise @{server_host(server)})"
    assert written["r2med_provenance"]["reranker"] == name
    assert next((tmp_path / "out" / "results").rglob(f"{TASK}.json")).parts[-3] == f"{name.replace(' ', '_')}--bm25-robertson--top_10"


def test_pointwise_falls_back_to_graded_labels_without_logprobs(own_cache: Path, monkeypatch):
    def reply(body: dict) -> str:
        content = body["messages"][-1]["content"]
        if "scale of 0 to 3" not in content:
            return "Yes"
        number = int(asked_passage(body).split()[1])
        return "" if number == 5 else f"Relevance: {number % 4}"

    first_stage, queries, documents = toy_data(count=8, queries=1)
    with LoopbackOpenAI(reply=reply) as server:
        monkeypatch.setenv("OPENAI_API_KEY", server.api_key)
        reranker = PointwiseLLMReranker("test-llm", config_for(server, concurrency=1))
        run = reranker.rerank(first_stage, queries, documents, depth=8, show_progress=False)
    expected = {f"d{i:02d}": (0.5 if i == 5 else (i % 4) / 3) for i in range(8)}
    assert run["q0"] == pytest.approx(expected)
    usage = reranker.last_report.usage
    assert usage["scored_by_label"] == 7 and usage["undecided"] == 1
    assert (usage["pairs"], usage["requests"], usage["probe_requests"]) == (8, 8, 1)  # one yes/no probe, then labels


def thinking_first_tokens(parser: str | None) -> list[tuple[str, float, dict[str, float]]]:
    """What a reasoning model generates for the pointwise questions: it thinks first, and its first thought token weighs
    Yes against No (a thought opening "Yes, ..."); behind --reasoning-parser deepseek_r1 the chat template opened
    <think> in the prompt, without a parser the model writes it."""
    thought = [("Yes", -0.05, {"Yes": -0.05, "No": -3.0}), (",", -0.1, {}), (" the", -0.2, {}), (" passage", -0.1, {}),
               (" mentions", -0.3, {}), (" the", -0.1, {}), (" gene", -0.1, {}), (" but", -0.4, {}), ("</think>", -0.01, {}),
               ("No", -0.2, {"No": -0.2, "Yes": -1.8})]
    return thought if parser else [("<think>", -0.01, {"<think>": -0.01, "Yes": -5.0, "No": -6.0}), *thought]


@pytest.mark.parametrize("parser", ["deepseek_r1", None])
def test_pointwise_reads_no_reasoning_token_as_the_answer(own_cache: Path, monkeypatch, caplog, parser: str | None):
    """Behind a reasoning parser the log-probabilities cover the reasoning first: the pointwise P(Yes) is
    read at the answer's own tokens only, as llm-reasoning's; a one-token budget spent inside the thought (content
    empty, or "<think>" alone) gives no answer: the pair is undecided (0.5), not the thought's P(Yes) of 0.95 (or,
    on "<think>", 0.73), and the warning names the fix (llm-reasoning, or thinking turned off)."""
    first_stage, queries, documents = toy_data(count=4, queries=1)

    with LoopbackOpenAI(reply=lambda body: {"tokens": thinking_first_tokens(parser)}, reasoning_parser=parser) as server:
        monkeypatch.setenv("OPENAI_API_KEY", server.api_key)
        reranker = PointwiseLLMReranker("test-llm", config_for(server, concurrency=1))
        with caplog.at_level("WARNING"):
            run = reranker.rerank(first_stage, queries, documents, depth=4, show_progress=False)
        first = server.completions()[0]
    assert first["max_tokens"] == 1 and first["logprobs"] is True
    assert run["q0"] == {doc_id: 0.5 for doc_id in documents}
    usage = reranker.last_report.usage
    assert usage["undecided"] == 4 and usage["scored_by_logprobs"] == 0 and usage["scored_by_label"] == 0
    assert "enable_thinking" in caplog.text and "llm-reasoning" in caplog.text
