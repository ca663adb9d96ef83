"""``llm-setwise`` (Setwise, llm-rankers' prompt and heap sort) against a loopback OpenAI-compatible server, and its
sorts (r2med_plugin.llm.setwise)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from r2med_plugin.cli import main
from r2med_plugin.evaluation.reranker_stage import as_reranker
from r2med_plugin.llm import Endpoint, LLMRerankerConfig, SetwiseLLMReranker
from r2med_plugin.llm.prompting import parse_pick, setwise_messages
from r2med_plugin.rules import SettingError, flag_of
from tests.llm.replies import TASK, config_for, hidden_order, server_host, toy_data, write_sweep_spec
from tests.support.loopback_openai import LoopbackOpenAI


def _setwise_passages(body: dict) -> list[str]:
    """The passages of a setwise question, in their A, B, C, ... order."""
    listed = body["messages"][-1]["content"].split("most relevant one to the query?\n\n", 1)[1]
    listed = listed.rsplit("\n\nOutput only the passage label", 1)[0]
    return [part.split(': "', 1)[1][:-1] for part in listed.split("\n\nPassage ")]


def setwise_reply(body: dict) -> str:
    """A well-behaved setwise answer: the set's best passage by the hidden order."""
    passages = _setwise_passages(body)
    return f"Passage {'ABCDEFGHIJKLMNOPQRSTUVW'[min(range(len(passages)), key=lambda i: hidden_order(passages[i]))]}"


def test_the_setwise_prompt_is_llm_rankers_openai_prompt():
    # llm-rankers 0.0.2, llmrankers/setwise.py, OpenAiSetwiseLlmRanker.compare: its system prompt and user text
    assert setwise_messages('bind "x"?', ["first one", "second {two}"]) == [
        {"role": "system", "content": "You are RankGPT, an intelligent assistant specialized in selecting the most relevant "
                                      "passage from a pool of passages based on their relevance to the query."},
        {"role": "user", "content": 'Given a query "bind "x"?", which of the following passages is the most relevant one to '
                                    'the query?\n\nPassage A: "first one"\n\nPassage B: "second {two}"\n\nOutput only the '
                                    'passage label of the most relevant passage.'}]
    with pytest.raises(ValueError, match="1 to 23 passages"):
        setwise_messages("q", ["p"] * 24)


@pytest.mark.parametrize("answer, expected", [
    ("Passage B", 1), ("The most relevant is Passage C.", 2), ("C", 2), (" B\n", 1),
    ("Passage A or Passage C", 0),          # the first one named
    ("Passage D", None),                     # a label beyond the set of 3
    ("passage b", None), ("**B**", None),    # as llm-rankers reads them: no "Passage X", not a bare label
    ("", None), ("I cannot tell.", None),
    ("<think>Passage A looks good</think>Passage C", 2),
])
def test_setwise_picks_are_read_as_llm_rankers_reads_them(answer: str, expected: int | None):
    assert parse_pick(answer, 3) == expected


@pytest.mark.parametrize("method", ["heapsort", "bubblesort"])
@pytest.mark.parametrize("set_size", [2, 3, 4, 7])
def test_setwise_top_k_is_the_keys_top_k(own_cache: Path, monkeypatch, method: str, set_size: int):
    first_stage, queries, documents = toy_data(count=30, queries=2)
    with LoopbackOpenAI(reply=setwise_reply) as server:
        monkeypatch.setenv("OPENAI_API_KEY", server.api_key)
        for k in (10, 4):
            reranker = SetwiseLLMReranker("test-llm", config_for(server, set_size=set_size, setwise_method=method, setwise_k=k))
            run = reranker.rerank(first_stage, queries, documents, depth=30, show_progress=False)
            for query_id, ranked in run.items():
                order = list(ranked)
                assert order[:k] == sorted(documents, key=lambda doc_id: hidden_order(documents[doc_id]))[:k]
                placed = set(order[:k])
                assert order[k:] == [doc_id for doc_id in first_stage[query_id] if doc_id not in placed]  # first-stage order
                assert list(ranked.values()) == [float(30 - rank) for rank in range(30)]
            assert all(len(_setwise_passages(body)) <= set_size for body in server.completions())
    assert reranker.name == f"test-llm (setwise @{server_host(server)} {method} c{set_size} k4)"
    assert reranker.revision.startswith("setwise-prompt-")


def test_setwise_answers_are_cached_and_usage_adds_up_to_the_comparisons(own_cache: Path, monkeypatch):
    first_stage, queries, documents = toy_data(count=20, queries=3)
    documents["d19"] = documents["d18"]  # a twin: some sets ask a question asked before
    with LoopbackOpenAI(reply=setwise_reply) as server:
        monkeypatch.setenv("OPENAI_API_KEY", server.api_key)
        reranker = SetwiseLLMReranker("test-llm", config_for(server, set_size=2))
        first_run = reranker.rerank(first_stage, queries, documents, depth=20, show_progress=False)
        first = reranker.last_report.usage
        sent = len(server.completions())
        again_run = reranker.rerank(first_stage, queries, documents, depth=20, show_progress=False)
        again = reranker.last_report.usage
        assert len(server.completions()) == sent  # the rerun sends no request
    assert again_run == first_run
    assert first["requests"] == sent and again["requests"] == 0 and again["cached_answers"] == sent
    assert first["repeated_questions"] > 0 and first["comparisons"] == again["comparisons"]
    for usage in (first, again):
        assert usage["requests"] + usage["cached_answers"] + usage["repeated_questions"] == usage["comparisons"]
        assert (usage["unparsed_answers"], usage["empty_answers"]) == (0, 0)


def test_an_unparseable_setwise_pick_is_counted_and_picks_the_sets_first(own_cache: Path, monkeypatch, caplog):
    first_stage, queries, documents = toy_data(count=12, queries=2)

    def reply(body: dict) -> str:  # one question in three answered with nothing, one with prose
        return ["", "I cannot tell which one.", setwise_reply(body)][int(hidden_order(json.dumps(body["messages"])), 16) % 3]

    with LoopbackOpenAI(reply=reply) as server:
        monkeypatch.setenv("OPENAI_API_KEY", server.api_key)
        reranker = SetwiseLLMReranker("test-llm", config_for(server, setwise_method="bubblesort"))
        reranker.rerank(first_stage, queries, documents, depth=12, show_progress=False)
        usage = reranker.last_report.usage
        answers = [reply(body) for body in server.completions()]
    # counted per comparison (a repeated question's answer counts again), so at least once per request sent
    assert usage["empty_answers"] >= answers.count("") > 0
    assert usage["unparsed_answers"] >= answers.count("I cannot tell which one.") > 0
    with LoopbackOpenAI(reply=lambda body: "no idea") as server:  # every pick unparsed: the set's first, no swap
        monkeypatch.setenv("OPENAI_API_KEY", server.api_key)
        reranker = SetwiseLLMReranker("test-llm", config_for(server, setwise_method="bubblesort", cache=own_cache / "none"))
        with caplog.at_level("WARNING"):
            run = reranker.rerank(first_stage, queries, documents, depth=12, show_progress=False)
    assert all(list(ranked) == list(first_stage[query_id]) for query_id, ranked in run.items())
    assert reranker.last_report.usage["unparsed_answers"] == reranker.last_report.usage["comparisons"] > 0
    assert "each picked its set's first passage" in caplog.text


def test_setwise_settings_are_checked_and_named():
    endpoint = Endpoint("http://127.0.0.1:9/v1")
    for settings, fact in (({"set_size": 1}, "must be an integer from 2 to 23"), ({"set_size": 24}, "from 2 to 23"),
                           ({"setwise_method": "quicksort"}, "must be one of heapsort, bubblesort"),
                           ({"setwise_k": 0}, "must be an integer of at least 1")):
        with pytest.raises(SettingError) as raised:
            LLMRerankerConfig(endpoint, **settings)
        field = next(iter(settings))
        assert raised.value.field == field and fact in raised.value.flag_message
        assert raised.value.flag_message.startswith(flag_of(field))
    reranker = as_reranker("llm-setwise:Qwen/Qwen3-8B", llm=LLMRerankerConfig(endpoint))
    assert isinstance(reranker, SetwiseLLMReranker) and reranker.name == "Qwen/Qwen3-8B (setwise @127.0.0.1-9 heapsort c3 k10)"
    budget = as_reranker("llm-setwise:m", llm=LLMRerankerConfig(endpoint, setwise_method="bubblesort", set_size=5, max_tokens=16))
    assert budget.name == "m (setwise @127.0.0.1-9 bubblesort c5 k10 max16)"


def test_setwise_end_to_end_from_the_cli(mirror_env: Path, own_cache: Path, tmp_path: Path, monkeypatch, capsys):
    with LoopbackOpenAI(reply=setwise_reply) as server:
        monkeypatch.setenv("OPENAI_API_KEY", server.api_key)
        argv = ["evaluate", "--task", TASK, "--rerank", "llm-setwise:test-llm", "--first-stage", "bm25-robertson",
                "--rerank-depth", "20", "--set-size", "4", "--setwise-method", "bubblesort", "--setwise-k", "5",
                "--base-url", server.base_url, "--output", str(tmp_path / "out"), "--quiet"]
        assert main(argv) == 0
        printed = capsys.readouterr().out
        assert main(argv) == 0
        again = capsys.readouterr().out
    name = f"test-llm (setwise @{server_host(server)} bubblesort c4 k5)"
    (path,) = (tmp_path / "out" / "results").glob(f"{name.replace(' ', '_')}--bm25-robertson--top_20/*/{TASK}.json")
    usage = json.loads(path.read_text())["r2med_provenance"]["rerank_usage"]
    assert usage["requests"] == 0 and usage["cached_answers"] + usage["repeated_questions"] == usage["comparisons"] > 0
    assert " comparisons: " in printed and " requests + 0 answers from the cache" in printed
    assert f"rerank usage: {usage['comparisons']} comparisons: 0 requests + {usage['cached_answers']} answers" in again


@pytest.mark.parametrize(("entry", "words"), [
    ({"model": "llm-listwise:m", "set_size": 4}, r"rerankers\[0\]\.set_size.*llm-listwise.*llm-setwise's"),
    ({"model": "llm-pointwise:m", "setwise_method": "bubblesort"}, r"rerankers\[0\]\.setwise_method.*llm-pointwise"),
    ({"model": "llm-reasoning:m", "setwise_k": 5}, r"rerankers\[0\]\.setwise_k.*llm-reasoning"),
    ({"model": "llm-setwise:m", "window": 10}, r"rerankers\[0\]\.window.*llm-setwise asks about sets of"),
    ({"model": "llm-setwise:m", "set_size": 30}, r"set_size must be an integer from 2 to 23"),
    ({"model": "org/cross-encoder", "base_url": None, "set_size": 3}, r"rerankers\[0\]\.set_size.*is a cross-encoder"),
])
def test_setwise_sweep_settings_are_refused_for_other_kinds(tmp_path: Path, entry: dict, words: str):
    from r2med_plugin.sweep import load_spec
    from r2med_plugin.sweep.spec import SpecError

    entry = {"first_stage": "bm25-robertson", "base_url": "http://127.0.0.1:9/v1"} | entry
    with pytest.raises(SpecError, match=words):
        load_spec(write_sweep_spec(tmp_path, {key: value for key, value in entry.items() if value is not None}))


def test_a_sweep_spec_names_a_setwise_reranker(mirror_env: Path, own_cache: Path, tmp_path: Path, monkeypatch):
    from r2med_plugin.sweep import expand_jobs, load_spec, run_sweep

    with LoopbackOpenAI(reply=setwise_reply) as server:
        monkeypatch.setenv("OPENAI_API_KEY", server.api_key)
        entry = {"model": "llm-setwise:test-llm", "first_stage": "bm25-robertson", "depth": 10, "base_url": server.base_url,
                 "set_size": 4, "setwise_method": "heapsort", "setwise_k": 10}
        spec = load_spec(write_sweep_spec(tmp_path, entry))
        assert run_sweep(spec, show_progress=False).count("done") == 1
        other = load_spec(write_sweep_spec(tmp_path, entry | {"set_size": 3}))
    assert [job.job_id for job in expand_jobs(other)] != [job.job_id for job in expand_jobs(spec)]
    (path,) = (tmp_path / "sweep-out" / "results").glob(f"test-llm_(setwise_@*_heapsort_c4_k10)--bm25-robertson--top_10/*/{TASK}.json")
    assert json.loads(path.read_text())["r2med_provenance"]["rerank_usage"]["comparisons"] > 0


def test_setwise_heapsort_asks_llm_rankers_questions_in_its_order():
    """The sets llm-rankers 0.0.2's heapSort asks (num_child 2, k 3, seven passages, picks by a fixed order), recorded
    from its own code: ours asks the same sets in the same order and ends with the same ranking."""
    import asyncio

    from r2med_plugin.llm.reranker_kinds import heap_top

    hidden, asked = [5, 2, 6, 0, 3, 1, 4], []  # document i's place in the order

    async def pick(doc_ids):
        asked.append(list(doc_ids))
        return min(range(len(doc_ids)), key=lambda i: hidden[doc_ids[i]])

    assert asyncio.run(heap_top(list(range(7)), 3, 2, pick)) == [3, 5, 1]
    assert asked == [[2, 5, 6], [1, 3, 4], [0, 3, 5], [0, 1, 4], [6, 1, 5], [6, 2], [2, 1, 6], [2, 0, 4]]


@pytest.mark.parametrize("method", ["heapsort", "bubblesort"])
def test_setwise_sorts_find_the_true_top_k_for_any_order(method: str):
    """Every pick right: both sorts put the true top k first, in order, over random orders, list lengths (also shorter
    than a set) and set sizes (llm-rankers' faster bubble sort does not: benchmarks/setwise_parity.py)."""
    import asyncio
    import random

    from r2med_plugin.llm.reranker_kinds import bubble_top, heap_top

    rng = random.Random(33)
    for _ in range(300):
        count, set_size = rng.randint(1, 40), rng.randint(2, 12)
        k, hidden = rng.randint(1, count), rng.sample(range(count), count)
        sizes = []

        async def pick(doc_ids, sizes=sizes, hidden=hidden):
            sizes.append(len(doc_ids))
            return min(range(len(doc_ids)), key=lambda i: hidden[doc_ids[i]])

        items = list(range(count))
        top = asyncio.run(heap_top(items, k, set_size - 1, pick) if method == "heapsort" else bubble_top(items, k, set_size, pick))
        assert top == sorted(range(count), key=hidden.__getitem__)[:k], (count, set_size, k)
        assert all(2 <= size <= set_size for size in sizes)
