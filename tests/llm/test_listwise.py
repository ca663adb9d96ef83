"""``llm-listwise`` (RankGPT) against a loopback OpenAI-compatible server: end to end through `r2med evaluate` with
faults (429, dropped connections), malformed and empty permutations."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from r2med_plugin.cli import main
from r2med_plugin.llm import ListwiseLLMReranker
from tests.llm.replies import TASK, config_for, hidden_order, rankgpt_reply, server_host, toy_data
from tests.support.loopback_openai import LoopbackOpenAI, trec_rankings


def test_listwise_end_to_end_with_429s_and_dropped_connections(mirror_env: Path, own_cache: Path, tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch, capsys):
    with LoopbackOpenAI(reply=rankgpt_reply) as server:
        monkeypatch.setenv("OPENAI_API_KEY", server.api_key)
        server.add_faults("429", "drop", "500", "429")
        argv = ["evaluate", "--task", TASK, "--rerank", "llm-listwise:test-llm", "--first-stage", "bm25-robertson",
                "--rerank-depth", "30", "--base-url", server.base_url, "--output", str(tmp_path / "out"), "--trec", "--quiet"]
        assert main(argv) == 0
        first = capsys.readouterr().out
        sent = len(server.completions())
        assert main(argv) == 0  # a rerun: every answer from the cache
        second = capsys.readouterr().out
        assert len(server.completions()) == sent
    from r2med_plugin.data.loader import load_task
    data = load_task(TASK)
    windows_sent = 2 * data.queries.height  # two windows per query: 10-30, then 0-20
    assert sent == windows_sent + 4  # and the four faults, retried by the client
    assert f"rerank usage: {windows_sent} windows: {windows_sent} requests + 0 answers from the cache;" in first
    assert f"rerank usage: {windows_sent} windows: 0 requests + {windows_sent} answers from the cache;" in second
    name = f"test-llm (listwise @{server_host(server)} w20s10)"
    (path,) = (tmp_path / "out" / "results" / f"{name.replace(' ', '_')}--bm25-robertson--top_30").glob(f"*/{TASK}.json")
    written = json.loads(path.read_text())
    provenance = written["r2med_provenance"]
    assert (provenance["reranker"], provenance["first_stage"], provenance["rerank_depth"]) == (name, "bm25-robertson", 30)
    usage = written["r2med_provenance"]["rerank_usage"]  # the rerun's
    assert usage["requests"] == 0 and usage["cached_answers"] == windows_sent and usage["prompt_tokens"] == 0
    # The windows carried the best passages up: each query's top 10 is the server's top 10 of its 30, in order.
    texts = dict(zip(data.corpus["id"].to_list(), data.corpus["text"].to_list(), strict=True))
    first_stage, reranked = _trec(next(path.parent.parent.parent.parent.rglob(f"{TASK}.first_stage.trec"))), _trec(
        next((tmp_path / "out" / "runs").rglob(f"{TASK}.trec")))
    assert set(reranked) == set(first_stage) and len(reranked) == data.queries.height
    for query_id, ranked in reranked.items():  # (the first stage's file orders its score ties by id, not as the run)
        assert len(ranked) == 30 and set(ranked) <= set(first_stage[query_id])
        assert ranked[:10] == sorted(ranked, key=lambda doc_id: hidden_order(" ".join(texts[doc_id].strip().split()[:300])))[:10]


_trec = trec_rankings


def test_malformed_and_empty_permutations_keep_unmentioned_passages_in_order(own_cache: Path, monkeypatch):
    answers = iter(["[3] > [3] > [1] > [99]", "", "no ranking, sorry", "[2]"])

    def reply(body: dict) -> str:
        return next(answers)

    first_stage, queries, documents = toy_data(count=6, queries=4)
    with LoopbackOpenAI(reply=reply) as server:
        monkeypatch.setenv("OPENAI_API_KEY", server.api_key)
        reranker = ListwiseLLMReranker("test-llm", config_for(server, concurrency=1))
        run = reranker.rerank(first_stage, queries, documents, depth=3, show_progress=False)
    ids = ["d00", "d01", "d02"]
    orders = sorted(list(ranked) for ranked in run.values())
    assert sorted(orders) == sorted([["d02", "d00", "d01"], ids, ids, ["d01", "d00", "d02"]])
    assert reranker.last_report.usage["empty_answers"] == 1 and reranker.last_report.usage["unparsed_answers"] == 1
    assert all(list(scores.values()) == [3.0, 2.0, 1.0] for scores in run.values())
