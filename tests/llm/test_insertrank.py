"""InsertRank: the first-stage scores in the listwise prompt (``show_scores``), in the cache key and the name."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from r2med_plugin.cli import main
from r2med_plugin.llm import ListwiseLLMReranker
from r2med_plugin.llm.prompting import listwise_messages
from tests.llm.keyed_replies import TASK, config_for, rankgpt_reply, server_host, toy_data
from tests.support.loopback_openai import LoopbackOpenAI


def test_insertrank_prompts_hold_the_first_stage_scores_and_change_the_cache_key(own_cache: Path, monkeypatch):
    first_stage, queries, documents = toy_data(count=30, queries=2)
    with LoopbackOpenAI(reply=rankgpt_reply) as server:
        monkeypatch.setenv("OPENAI_API_KEY", server.api_key)
        plain = ListwiseLLMReranker("test-llm", config_for(server))
        plain_run = plain.rerank(first_stage, queries, documents, depth=30, show_progress=False)
        sent = len(server.completions())
        shown = ListwiseLLMReranker("test-llm", config_for(server, show_scores=True))
        shown_run = shown.rerank(first_stage, queries, documents, depth=30, show_progress=False)
        bodies = server.completions()[sent:]
        shown.rerank(first_stage, queries, documents, depth=30, show_progress=False)
        assert len(server.completions()) == 2 * sent  # its own answers, cached: a rerun sends nothing
    assert len(bodies) == sent == 4 and shown.last_report.usage["requests"] == 0  # none served from the plain run's cache
    assert shown_run == plain_run  # the scores are in the prompt; this key ranks by text alone
    by_text = {text: doc_id for doc_id, text in documents.items()}
    for body in bodies:
        assert "Each passage comes with the score the first-stage retriever gave it" in body["messages"][1]["content"]
        query_id = next(query_id for query_id, text in queries.items() if f"query: {text}." in body["messages"][1]["content"])
        turns = [m["content"] for m in body["messages"] if m["role"] == "user" and m["content"].startswith("[")]
        for rank, turn in enumerate(turns, start=1):
            head, passage = turn.split(") ", 1)
            score = head.removeprefix(f"[{rank}] (first-stage score: ")
            assert score == f"{first_stage[query_id][by_text[passage]]:.4f}" and len(score.split(".")[1]) == 4
    assert "first-stage score" not in json.dumps(server.completions()[:sent])
    assert shown.name == f"test-llm (listwise @{server_host(server)} w20s10 scores.4f)" != plain.name
    assert shown.revision != plain.revision and shown.revision.startswith("listwise-prompt-")
    assert shown.last_report.usage["first_stage_scores"] == ".4f" and "first_stage_scores" not in plain.last_report.usage


def test_insertrank_scores_travel_with_their_passages():
    messages = listwise_messages("q", ["alpha", "beta"], 20, [3.14159, -0.5])
    assert [m["content"] for m in messages if m["content"].startswith("[")] == [
        "[1] (first-stage score: 3.1416) alpha", "[2] (first-stage score: -0.5000) beta"]
    with pytest.raises(ValueError, match="one score per passage"):
        listwise_messages("q", ["alpha", "beta"], 20, [1.0])
    assert listwise_messages("q", ["alpha"], 20) == listwise_messages("q", ["alpha"], 20, None)


def test_insertrank_from_the_cli_names_the_result(mirror_env: Path, own_cache: Path, tmp_path: Path, monkeypatch, capsys):
    with LoopbackOpenAI(reply=rankgpt_reply) as server:
        monkeypatch.setenv("OPENAI_API_KEY", server.api_key)
        argv = ["evaluate", "--task", TASK, "--rerank", "llm-listwise:test-llm", "--first-stage", "bm25-robertson",
                "--base-url", server.base_url, "--output", str(tmp_path / "out"), "--quiet"]
        assert main(argv) == 0 and main(argv + ["--show-scores"]) == 0
        plain, shown = server.completions()[:len(server.completions()) // 2], server.completions()[len(server.completions()) // 2:]
    assert len(plain) == len(shown) > 0 and all("first-stage score: " in json.dumps(body) for body in shown)
    results = sorted(path.parent.parent.name for path in (tmp_path / "out" / "results").glob(f"*/*/{TASK}.json"))
    host = server_host(server)
    assert results == sorted([f"test-llm_(listwise_@{host}_w20s10)--bm25-robertson--top_10",
                              f"test-llm_(listwise_@{host}_w20s10_scores.4f)--bm25-robertson--top_10"])
