"""Listwise reasoning models: the reasoning set apart, windows without a ranking counted, traces kept, and
``reasoning_effort`` sent (or left out where the endpoint refuses it) by every reasoning kind."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from r2med_plugin.cli import main
from r2med_plugin.evaluation.reranker_stage import as_reranker
from r2med_plugin.llm import GroupwiseLLMReranker, ListwiseLLMReranker
from tests.llm.keyed_replies import (
    TASK,
    config_for,
    keyed_order,
    keyed_scores,
    rankgpt_reply,
    server_host,
    text_digest,
    toy_data,
)
from tests.support.loopback_openai import LoopbackOpenAI, listwise_passages


def reasoning_listwise(body: dict) -> dict:
    """A reasoning model's listwise answers, by the window's first passage: a ranking after its reasoning; the budget
    spent while reasoning (no answer); prose after the reasoning; an inline thought with identifiers and no answer."""
    passages = listwise_passages(body)
    ranking = " > ".join(f"[{i + 1}]" for i in sorted(range(len(passages)), key=lambda i: text_digest(passages[i])))
    kind = text_digest(passages[0]) % 4
    if kind == 0:
        return {"reasoning_content": "Passage [2] mentions the gene; [1] does not.", "content": ranking}
    if kind == 1:
        return {"reasoning_content": "Let me compare [1] with [2] and [3]", "content": None, "finish_reason": "length"}
    if kind == 2:
        return {"reasoning_content": "[3] then [1].", "content": "They are all relevant."}
    return {"content": "<think>[2] is better than [1]</think>\n"}


def test_listwise_reasoning_is_set_apart_and_windows_without_a_ranking_are_counted(own_cache: Path, monkeypatch, caplog):
    documents = {f"d{i:02d}": f"passage {i} on gene {i * 5}" for i in range(40)}
    queries = {f"q{j}": f"gene {j}?" for j in range(12)}
    first_stage = {query_id: {doc_id: float(-int(doc_id[1:])) for doc_id in list(documents)[j:j + 3]}
                   for j, query_id in enumerate(queries)}  # each query its own three passages: one window
    with LoopbackOpenAI(reply=reasoning_listwise) as server:
        monkeypatch.setenv("OPENAI_API_KEY", server.api_key)
        reranker = ListwiseLLMReranker("test-llm", config_for(server, max_tokens=4096, reasoning_effort="medium"))
        with caplog.at_level("WARNING"):
            run = reranker.rerank(first_stage, queries, documents, depth=3, show_progress=False)
        bodies = server.completions()
    assert {(body["max_tokens"], body["reasoning_effort"]) for body in bodies} == {(4096, "medium")}
    kinds = {query_id: text_digest(documents[next(iter(first_stage[query_id]))]) % 4 for query_id in queries}
    assert set(kinds.values()) == {0, 1, 2, 3}
    usage = reranker.last_report.usage
    unranked = sum(kind != 0 for kind in kinds.values())
    assert (usage["no_ranking_after_reasoning"], usage["unparsed_answers"], usage["empty_answers"]) == (unranked, 0, 0)
    for query_id, ranked in run.items():
        first = list(first_stage[query_id])
        expected = sorted(first, key=lambda doc_id: text_digest(documents[doc_id])) if kinds[query_id] == 0 else first
        assert list(ranked) == expected  # a window with no ranking after the reasoning keeps its order
    traces = reranker.last_report.traces
    assert reranker.last_report.traces_name == "reasoning" and len(traces) == len(queries)
    by_query = {trace["query_id"]: trace for trace in traces}
    for query_id, kind in kinds.items():
        trace = by_query[query_id]
        assert trace["ranked"] is (kind == 0) and trace["doc_ids"] == list(first_stage[query_id]) and trace["window"] == 0
        assert trace["reasoning"] == {0: "Passage [2] mentions the gene; [1] does not.", 1: "Let me compare [1] with [2] and [3]",
                                      2: "[3] then [1].", 3: "[2] is better than [1]"}[kind]
        ranking = " > ".join(f"[{list(first_stage[query_id]).index(doc_id) + 1}]" for doc_id in run[query_id])
        assert trace["answer"] == {0: ranking, 1: "", 2: "They are all relevant.", 3: ""}[kind]
    assert unranked == 9 and (f"{reranker.name}: 9 of 12 windows (75%) were unparsed or empty (9 held no ranking after the "
                              "reasoning) (each kept the first stage's order)") in caplog.text


def test_a_plain_listwise_model_keeps_no_traces(own_cache: Path, monkeypatch):
    first_stage, queries, documents = toy_data(count=10, queries=2)
    with LoopbackOpenAI(reply=rankgpt_reply) as server:
        monkeypatch.setenv("OPENAI_API_KEY", server.api_key)
        reranker = ListwiseLLMReranker("test-llm", config_for(server))
        reranker.rerank(first_stage, queries, documents, depth=10, show_progress=False)
        assert all("reasoning_effort" not in body for body in server.completions())
    assert reranker.last_report.traces is None and reranker.last_report.usage["no_ranking_after_reasoning"] == 0


def test_listwise_reasoning_from_the_cli_writes_traces_and_counts(mirror_env: Path, own_cache: Path, tmp_path: Path,
                                                                  monkeypatch, capsys):
    with LoopbackOpenAI(reply=reasoning_listwise) as server:
        monkeypatch.setenv("OPENAI_API_KEY", server.api_key)
        argv = ["evaluate", "--task", TASK, "--rerank", "llm-listwise:test-llm", "--first-stage", "bm25-robertson",
                "--max-tokens", "2048", "--reasoning-effort", "high", "--base-url", server.base_url,
                "--output", str(tmp_path / "out"), "--quiet"]
        assert main(argv) == 0
        printed = capsys.readouterr().out
        windows = len(server.completions())
        assert {body["reasoning_effort"] for body in server.completions()} == {"high"}
    name = f"test-llm (listwise @{server_host(server)} w20s10 max2048 effort-high)"
    (path,) = (tmp_path / "out" / "results").glob(f"{name.replace(' ', '_')}--bm25-robertson--top_10/*/{TASK}.json")
    usage = json.loads(path.read_text())["r2med_provenance"]["rerank_usage"]
    traces = [json.loads(line) for line in path.with_name(f"{TASK}.reasoning.jsonl").read_text().splitlines()]
    assert len(traces) == windows and usage["windows"] == windows
    assert usage["no_ranking_after_reasoning"] == sum(not trace["ranked"] for trace in traces) > 0
    assert f"{usage['no_ranking_after_reasoning']} no_ranking_after_reasoning" in printed


def test_a_reasoning_effort_the_endpoint_refuses_is_left_out_and_recorded(own_cache: Path, monkeypatch, caplog):
    first_stage, queries, documents = toy_data(count=12, queries=2)
    with LoopbackOpenAI(reply=keyed_scores, unsupported=("reasoning_effort",)) as server:
        monkeypatch.setenv("OPENAI_API_KEY", server.api_key)
        reranker = GroupwiseLLMReranker("test-llm", config_for(server, concurrency=1, group_size=6, reasoning_effort="low"))
        with caplog.at_level("WARNING"):
            run = reranker.rerank(first_stage, queries, documents, depth=12, show_progress=False)
        answered = [body for body in server.completions() if "reasoning_effort" not in body]
    assert len(server.completions()) == len(answered) + 1 and len(answered) == 4  # refused once, then left out
    assert reranker.last_report.usage["unsupported_parameters"] == ["reasoning_effort"]
    assert "refused 'reasoning_effort'" in caplog.text
    for query_id, ranked in run.items():
        assert list(ranked) == keyed_order(first_stage, documents, query_id)


@pytest.mark.parametrize("kind", ["llm-setwise", "llm-reasoning"])
def test_reasoning_effort_reaches_the_other_reasoning_kinds(own_cache: Path, monkeypatch, kind: str):
    first_stage, queries, documents = toy_data(count=4, queries=1)
    with LoopbackOpenAI(reply=lambda body: "Passage A" if kind == "llm-setwise" else "true") as server:
        monkeypatch.setenv("OPENAI_API_KEY", server.api_key)
        reranker = as_reranker(f"{kind}:test-llm", llm=config_for(server, reasoning_effort="minimal"))
        reranker.rerank(first_stage, queries, documents, depth=4, show_progress=False)
        assert {body["reasoning_effort"] for body in server.completions()} == {"minimal"}
    assert reranker.name.endswith(" effort-minimal)")
