"""Requests (r2med_plugin.llm.requests): the key never written, failures, refusals, a SIGKILL and its resume, and
the usage counts adding up to the questions asked on a first run and its rerun."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from r2med_plugin.cli import main
from r2med_plugin.llm import ListwiseLLMReranker, PointwiseLLMReranker, ReasoningLLMReranker
from tests.llm.replies import TASK, asked_passage, config_for, pointwise_reply, reasoning_reply, toy_data
from tests.support.loopback_openai import LoopbackOpenAI


def test_the_key_is_never_written_and_a_refused_key_is_redacted(mirror_env: Path, own_cache: Path, tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch, capsys):
    with LoopbackOpenAI(reply=pointwise_reply, api_key="sk-the-real-secret-key") as server:
        monkeypatch.setenv("OPENAI_API_KEY", "sk-the-real-secret-key")
        base = ["evaluate", "--task", TASK, "--rerank", "llm-pointwise:test-llm", "--first-stage", "bm25-robertson",
                "--base-url", server.base_url, "--output", str(tmp_path / "out"), "--quiet"]
        assert main(base) == 0
        monkeypatch.setenv("OPENAI_API_KEY", "sk-a-wrong-secret-key")
        capsys.readouterr()
        assert main([*base[:-3], "--rerank-depth", "12", "--quiet"]) == 1  # pairs 11 and 12 are not cached: asked, refused
    message = capsys.readouterr().err
    assert "HTTP 401" in message and "sk-a-wrong-secret-key" not in message
    for path in [*(tmp_path / "out").rglob("*"), *own_cache.rglob("*")]:
        if path.is_file():
            data = path.read_bytes()
            assert b"sk-the-real-secret-key" not in data and b"sk-a-wrong-secret-key" not in data, path


def test_without_the_openai_client_an_llm_reranker_is_refused_before_any_work(mirror_env: Path, tmp_path: Path,
                                                                              monkeypatch: pytest.MonkeyPatch, capsys):
    import sys

    import r2med_plugin.evaluation.plan as plan

    monkeypatch.setitem(sys.modules, "openai", None)  # `import openai` raises ImportError, as without the [generate] extra
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setattr(plan, "plan_of", lambda *a, **k: pytest.fail("the first stage was planned"))
    argv = ["evaluate", "--task", TASK, "--rerank", "llm-listwise:test-llm", "--first-stage", "bm25-robertson",
            "--base-url", "http://127.0.0.1:9/v1", "--output", str(tmp_path / "out"), "--quiet"]
    assert main(argv) == 2
    captured = capsys.readouterr()
    assert captured.err == ("r2med: error: --rerank llm-listwise:test-llm sends its requests through the openai client, "
                            "which is not installed here: pip install 'r2med-plugin[generate]', then run it again\n")
    assert "Traceback" not in captured.out + captured.err and not (tmp_path / "out").exists()


@pytest.mark.slow
def test_a_request_failing_every_retry_stops_the_run_and_keeps_the_answers(own_cache: Path, monkeypatch):
    first_stage, queries, documents = toy_data(count=4, queries=1)
    with LoopbackOpenAI(reply=pointwise_reply) as server:
        monkeypatch.setenv("OPENAI_API_KEY", server.api_key)
        reranker = PointwiseLLMReranker("test-llm", config_for(server, concurrency=1))
        reranker.rerank(first_stage, queries, documents, depth=1, show_progress=False)  # the first pair: answered
        server.add_faults(*["500"] * 5)  # the next request gets all five: max_retries=4
        with pytest.raises(RuntimeError, match="1 request\\(s\\) .* failed on every retry.*run the same command again"):
            reranker.rerank(first_stage, queries, documents, depth=4, show_progress=False)
        assert reranker.last_report.usage["requests"] == 2 and reranker.last_report.usage["cached_answers"] == 1
        run = reranker.rerank(first_stage, queries, documents, depth=4, show_progress=False)
        assert reranker.last_report.usage["requests"] == 1 and reranker.last_report.usage["cached_answers"] == 3
    assert len(run["q0"]) == 4


def test_a_server_pinned_to_another_model_stops_the_run_at_the_first_refusal(own_cache: Path, monkeypatch):
    """`transformers serve <path>` refuses any other model id with HTTP 400 and FastAPI's {"detail": ...} (not 404):
    the run stops at the first refusal, naming the served id and the server's reason (was: every pair sent, each
    refused, then "HTTP 400 on every retry", no reason, and "run the same command again to continue")."""
    first_stage, queries, documents = toy_data(count=12, queries=2)
    with LoopbackOpenAI(reply=pointwise_reply, models=("/models/tiny-chat",), pinned=True) as server:
        monkeypatch.setenv("OPENAI_API_KEY", server.api_key)
        for kind in (PointwiseLLMReranker, ListwiseLLMReranker):
            server.requests.clear()
            reranker = kind("tiny-chat", config_for(server, concurrency=1))
            with pytest.raises(RuntimeError) as error:
                reranker.rerank(first_stage, queries, documents, depth=12, show_progress=False)
            message = str(error.value)
            assert "refused the model 'tiny-chat' (HTTP 400; the server said: Server is pinned to '/models/tiny-chat'" in message
            assert "it serves /models/tiny-chat: name one of them in --rerank" in message and "run the same command" not in message
            # pointwise: its probe only; listwise: each query's first window (queries run in parallel), no second window
            assert len(server.completions()) == (1 if kind is PointwiseLLMReranker else len(queries)), kind


def test_a_refused_request_of_a_served_model_fails_alone_with_the_servers_reason(own_cache: Path, monkeypatch):
    """A 400 for a model the endpoint serves (a prompt over the context length) is that request's failure: the
    other requests go on, and the message says the request was refused (not retried) and why."""
    first_stage, queries, documents = toy_data(count=4, queries=1)
    with LoopbackOpenAI(reply=pointwise_reply, pinned=True) as server:
        monkeypatch.setenv("OPENAI_API_KEY", server.api_key)
        reranker = PointwiseLLMReranker("test-llm", config_for(server, concurrency=1))
        reranker.rerank(first_stage, queries, documents, depth=1, show_progress=False)  # the first pair: answered
        server.add_faults("400")
        with pytest.raises(RuntimeError, match=r"1 request\(s\) .* \(not retried; first: the endpoint refused the request \(HTTP 400; "
                                               r"a refused request is not retried\) \(server said: injected 400: this request is refused\)\)"):
            reranker.rerank(first_stage, queries, documents, depth=4, show_progress=False)
        assert reranker.last_report.usage["requests"] == 2 and len(server.completions()) == 4  # 1, then 3 (one refused)


RESUMED = """
import json, sys
from r2med_plugin.llm import Endpoint, LLMRerankerConfig, PointwiseLLMReranker
url, cache, toy = sys.argv[1:4]
first_stage, queries, documents = json.loads(open(toy).read())
reranker = PointwiseLLMReranker("test-llm", LLMRerankerConfig(Endpoint(url, concurrency=2), cache_dir=cache))
reranker.rerank(first_stage, queries, documents, depth=40, show_progress=False)
"""


@pytest.mark.slow
def test_a_run_killed_with_sigkill_resumes_from_its_cached_answers(own_cache: Path, tmp_path: Path, monkeypatch):
    first_stage, queries, documents = toy_data(count=40, queries=1)
    toy = tmp_path / "toy.json"
    toy.write_text(json.dumps([first_stage, queries, documents]))
    cache = tmp_path / "answers"
    with LoopbackOpenAI(reply=pointwise_reply, delay=0.05) as server:
        monkeypatch.setenv("OPENAI_API_KEY", server.api_key)
        child = subprocess.Popen([sys.executable, "-c", RESUMED, server.base_url, str(cache), str(toy)],
                                 env={**os.environ, "OPENAI_API_KEY": server.api_key}, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 60
        while len(list(cache.rglob("*.json"))) < 12 and time.monotonic() < deadline and child.poll() is None:
            time.sleep(0.01)
        child.send_signal(signal.SIGKILL)
        child.wait()
        assert child.returncode == -signal.SIGKILL
        kept = len(list(cache.rglob("*.json")))
        assert 12 <= kept < 40  # killed part-way
        for answer in cache.rglob("*.json"):  # whole answers only: a kill mid-write leaves at most a stray temporary file
            json.loads(answer.read_text())
        sent_before = len(server.completions())
        reranker = PointwiseLLMReranker("test-llm", config_for(server, cache, concurrency=2))
        resumed = reranker.rerank(first_stage, queries, documents, depth=40, show_progress=False)
        assert reranker.last_report.usage["cached_answers"] == kept
        assert len(server.completions()) - sent_before == 40 - kept == reranker.last_report.usage["requests"]
    with LoopbackOpenAI(reply=pointwise_reply) as fresh:
        monkeypatch.setenv("OPENAI_API_KEY", fresh.api_key)
        reference = PointwiseLLMReranker("test-llm", config_for(fresh, tmp_path / "fresh")).rerank(
            first_stage, queries, documents, depth=40, show_progress=False)
    assert resumed == reference


def test_refused_requests_are_not_said_to_be_retried_nor_to_help_rerunning(own_cache: Path, monkeypatch):
    """vLLM refuses a reasoning budget longer than the context with HTTP 400 on every pair: such a request is
    not retried, so the message says the server refused them, gives its text, and does not suggest running again."""
    from r2med_plugin.endpoints.client import EndpointError

    first_stage, queries, documents = toy_data(count=3, queries=1)
    with LoopbackOpenAI(reply=reasoning_reply, max_model_len=4096, report_max_model_len=False) as server:
        monkeypatch.setenv("OPENAI_API_KEY", server.api_key)
        reranker = ReasoningLLMReranker("test-llm", config_for(server, concurrency=1))  # the default budget: 8192
        with pytest.raises(EndpointError) as raised:
            reranker.rerank(first_stage, queries, documents, depth=3, show_progress=False)
        assert len(server.completions()) == 3  # each pair asked once: a 400 is not retried
    message = str(raised.value)
    assert "3 request(s)" in message and "were refused (not retried" in message and "maximum context length is 4096" in message
    assert "on every retry" not in message and "run the same command again to continue" not in message


def _labels_only(body: dict) -> str:
    """A server that returns no log-probabilities: "Yes" to the yes/no question, a 0-3 label to the graded one."""
    content = body["messages"][-1]["content"]
    return f"Relevance: {int(asked_passage(body).split()[1]) % 4}" if "scale of 0 to 3" in content else "Yes"


@pytest.mark.parametrize("logprobs", [True, False])
def test_pointwise_usage_adds_up_to_the_pairs_on_a_first_run_and_its_rerun(own_cache: Path, monkeypatch, logprobs: bool):
    first_stage, queries, documents = toy_data(count=10, queries=2)
    for doc_id in ("d07", "d08", "d09"):  # three passages repeat d06's text: their pairs ask d06's question
        documents[doc_id] = documents["d06"]
    pairs, unique = 2 * 10, 2 * 7  # per query: d00..d06 distinct, d07..d09 the same question as d06
    with LoopbackOpenAI(reply=pointwise_reply if logprobs else _labels_only, delay=0.05) as server:
        monkeypatch.setenv("OPENAI_API_KEY", server.api_key)
        reranker = PointwiseLLMReranker("test-llm", config_for(server, concurrency=8))
        reranker.rerank(first_stage, queries, documents, depth=10, show_progress=False)
        first = reranker.last_report.usage
        sent = len(server.completions())
        reranker.rerank(first_stage, queries, documents, depth=10, show_progress=False)
        again = reranker.last_report.usage
        assert len(server.completions()) == sent  # the rerun: every answer from the cache
    # with log-probabilities the probe is the first pair's own question; without, one yes/no question no pair uses
    probe = 0 if logprobs else 1
    assert sent == unique + probe  # each distinct question once, also when its twins are asked concurrently
    assert (first["pairs"], first["requests"], first["cached_answers"], first["repeated_questions"]) == (pairs, unique, 0, pairs - unique)
    assert (first["probe_requests"], first["probe_cached_answers"]) == (probe, 0)
    assert (again["pairs"], again["requests"], again["cached_answers"], again["repeated_questions"]) == (pairs, 0, unique, pairs - unique)
    assert (again["probe_requests"], again["probe_cached_answers"]) == (0, probe)
    for usage in (first, again):
        assert usage["requests"] + usage["cached_answers"] + usage["repeated_questions"] == usage["pairs"]
        assert usage["scored_by_logprobs" if logprobs else "scored_by_label"] == pairs
