"""How a kind's questions are asked (r2med_plugin.llm.execution): the run and the cost estimate drive the same
``questions`` generator, so for every registered kind the estimate asks what the run sends; ``Together`` gathers in
order, ``TICK`` moves the progress bar; a kind is registered in one place (``register_llm_reranker``)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from r2med_plugin.llm.execution import TICK, Ask, RerankTask, Together, drive
from r2med_plugin.llm.reranker_kinds import LLM_RERANKER_KINDS, LLMReranker, llm_reranker, register_llm_reranker
from r2med_plugin.llm.strategy import positional_scores
from tests.support.loopback_openai import LoopbackOpenAI, listwise_passages, logprobs_of, reranker_config

# each kind answered as its estimate assumes (a listwise window keeps its order, a set picks its first passage, a
# pair says yes with log-probabilities): then even the counts that depend on the answers are the estimate's
BLANK_REPLIES = {
    "llm-listwise": lambda body: " > ".join(f"[{rank}]" for rank in range(1, len(listwise_passages(body)) + 1)),
    "llm-pointwise": lambda body: {"content": "Yes", "logprobs": logprobs_of([("Yes", -0.1, {"Yes": -0.1, "No": -2.5})])},
    "llm-reasoning": lambda body: {"content": "<think>it says so</think> true",
                                   "logprobs": logprobs_of([("true", -0.2, {"true": -0.2, "false": -1.7})])},
    "llm-setwise": lambda body: "Passage A",
    "llm-groupwise": lambda body: '{"1": 4, "2": 7}',
}


def _toy(count: int = 24, queries: int = 3) -> tuple[dict, dict, dict]:
    documents = {f"d{i:02d}": f"passage {i} on gene {i * 5 % 7} " + "and its protein " * (i % 4) for i in range(count)}
    query_texts = {f"q{j}": f"what does gene {j} encode" for j in range(queries)}
    first_stage = {query_id: {doc_id: float(count - rank) for rank, doc_id in enumerate(documents)} for query_id in query_texts}
    return first_stage, query_texts, documents


def test_every_registered_kind_has_a_blank_reply_here():
    # the package's own kinds: a docs example run in this process may have registered one of its own (llm-yesno)
    own = {name for name, kind in LLM_RERANKER_KINDS.items() if kind.__module__.startswith("r2med_plugin.")}
    assert set(BLANK_REPLIES) == own and len(own) >= 4


@pytest.mark.parametrize("kind", sorted(BLANK_REPLIES))
def test_the_estimate_asks_what_the_run_sends_for_every_kind(kind: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """One generator, two drivers: the estimate's request count is the run's counted requests and the requests the
    server received, and the distinct questions the dry run asked are the messages the server got."""
    first_stage, queries, documents = _toy()
    with LoopbackOpenAI(reply=BLANK_REPLIES[kind]) as server:
        monkeypatch.setenv("OPENAI_API_KEY", server.api_key)
        reranker = llm_reranker(f"{kind}:test-llm", reranker_config(server, tmp_path / "cache", concurrency=2))
        plan = reranker.plan_requests(first_stage, queries, documents, depth=12)
        estimate = reranker.estimate_cost(first_stage, queries, documents, depth=12, show_progress=False)
        assert server.completions() == []
        reranker.rerank(first_stage, queries, documents, depth=12, show_progress=False)
        sent = server.completions()
    usage = reranker.last_report.usage
    assert estimate.requests == usage["requests"] + usage["probe_requests"] == len(sent) > 0
    assert usage["cached_answers"] == usage["repeated_questions"] == 0
    asked = [json.dumps(request.messages, sort_keys=True) for request in plan.asked]  # a probe asked again: once
    assert sorted(set(asked)) == sorted(json.dumps(body["messages"], sort_keys=True) for body in sent)


class _Answers:
    """An asker that answers each question with its number (in the order asked), and records them."""

    rules = None

    def __init__(self) -> None:
        self.asked: list[tuple[str, bool]] = []

    async def ask(self, messages, parameters, *, probe=False):
        self.asked.append((messages[0]["content"], probe))
        number = len(self.asked)
        await asyncio.sleep(0)  # as a request would: the other jobs go on meanwhile
        return number


class _Bar:
    def __init__(self) -> None:
        self.done = 0

    def update(self, n: int = 1) -> None:
        self.done += n


def _question(text: str) -> Ask:
    return Ask([{"role": "user", "content": text}], {"temperature": 0})


def test_drive_asks_gathers_in_order_and_ticks():
    def job(name: str):
        first = yield _question(f"{name} 1")
        yield TICK
        second = yield _question(f"{name} 2")
        return name, first, second

    def questions():
        probe = yield Ask([{"role": "user", "content": "probe"}], {}, probe=True)
        results = yield Together([job("a"), job("b")])
        return probe, results

    asker, bar, task = _Answers(), _Bar(), RerankTask({}, {}, {}, {})
    probe, results = asyncio.run(drive(questions(), asker, task, bar))
    assert probe == 1 and bar.done == 2 and task.asked == 4  # the probe is not counted as asked
    assert results == [("a", 2, 4), ("b", 3, 5)]  # in the jobs' order, each job's questions in turn
    assert asker.asked == [("probe", True), ("a 1", False), ("b 1", False), ("a 2", False), ("b 2", False)]


def test_drive_refuses_a_step_it_does_not_know():
    def questions():
        yield "a question as a string"

    with pytest.raises(TypeError, match="yield Ask, Together or TICK, not 'a question as a string'"):
        asyncio.run(drive(questions(), _Answers(), RerankTask({}, {}, {}, {}), _Bar()))


class _FirstStageOrder(LLMReranker):
    kind = "first-stage-order"

    def questions(self, task):
        return {query_id: positional_scores(doc_ids) for query_id, doc_ids in task.lists.items()}
        yield  # a generator that asks nothing


def test_a_kind_is_registered_once_and_then_named_like_the_others(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr("r2med_plugin.llm.reranker_kinds.LLM_RERANKER_KINDS", dict(LLM_RERANKER_KINDS))
    from r2med_plugin.llm import reranker_kinds
    from r2med_plugin.llm.config import Endpoint, LLMRerankerConfig

    assert register_llm_reranker(_FirstStageOrder) is _FirstStageOrder
    assert reranker_kinds.LLM_RERANKER_KINDS["llm-first-stage-order"] is _FirstStageOrder
    assert register_llm_reranker(_FirstStageOrder) is _FirstStageOrder  # the same class again: nothing changes
    reranker = llm_reranker("llm-first-stage-order:m", LLMRerankerConfig(Endpoint("http://127.0.0.1:9/v1")))
    assert reranker.name == "m (first-stage-order @127.0.0.1-9)"
    assert "llm-first-stage-order:<model>" in reranker_kinds.llm_reranker_names()
    with pytest.raises(ValueError, match="llm-listwise is already registered to ListwiseLLMReranker"):
        register_llm_reranker(type("Other", (_FirstStageOrder,), {"kind": "listwise"}))
    with pytest.raises(TypeError, match="an LLMReranker subclass that defines questions"):
        register_llm_reranker(type("Bare", (LLMReranker,), {"kind": "bare"}))
    with pytest.raises(ValueError, match="must be a lower-case word"):
        register_llm_reranker(type("Spaced", (_FirstStageOrder,), {"kind": "two words"}))
