"""LLM rerankers (issue 23) against a loopback OpenAI-compatible server: listwise (RankGPT), pointwise (P(yes))
and reasoning (Rank1), end to end through `r2med evaluate`, with faults (429, dropped connections, malformed and
empty answers) and a SIGKILL followed by a resume."""

from __future__ import annotations

import hashlib
import json
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from r2med_plugin.cli import main
from r2med_plugin.evaluation.rerankers import as_reranker
from r2med_plugin.llm import (
    Endpoint,
    LLMRerankerConfig,
    ListwiseLLMReranker,
    PointwiseLLMReranker,
    ReasoningLLMReranker,
    SetwiseLLMReranker,
)
from r2med_plugin.llm.prompting import apply_permutation, llm_prompts, parse_permutation, parse_pick, setwise_messages, windows
from tests.support.loopback_openai import LoopbackOpenAI, listwise_passages, reranker_config, trec_rankings, logprobs_of

TASK = "NanoR2MEDBiology"


def _hidden(text: str) -> str:
    """The server's hidden relevance order: a hash of the passage (any fixed total order will do)."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _host(server: LoopbackOpenAI) -> str:
    """The server's host as LLM reranker names hold it: host-port."""
    return server.base_url.split("://", 1)[1].split("/", 1)[0].replace(":", "-")


def rankgpt_reply(body: dict) -> str:
    """A well-behaved RankGPT answer: the window's passages by the hidden order."""
    passages = listwise_passages(body)
    order = sorted(range(len(passages)), key=lambda i: _hidden(passages[i]))
    return " > ".join(f"[{i + 1}]" for i in order)


def _passage(body: dict) -> str:
    return body["messages"][-1]["content"].split("Passage: ", 1)[1].split("\n")[0]


def _yes_no_logprobs(passage: str) -> tuple[float, float, float]:
    """The log-probabilities the server gives "Yes", " yes" and "No" for a passage (from its hash)."""
    digest = hashlib.sha256(passage.encode("utf-8")).digest()
    return -digest[0] / 40 - 0.01, -digest[1] / 30 - 2.0, -digest[2] / 40 - 0.01


def pointwise_reply(body: dict) -> dict:
    yes, yes_spaced, no = _yes_no_logprobs(_passage(body))
    top = {"Yes": yes, " yes": yes_spaced, "No": no, "Maybe": -6.0}
    first = "Yes" if yes >= no else "No"
    return {"content": first, "logprobs": logprobs_of([(first, top[first], top)])}


@pytest.fixture()
def own_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Answers cached in this test's folder only (the session cache would answer another test's prompts)."""
    path = tmp_path / "cache"
    monkeypatch.setenv("R2MED_CACHE_DIR", str(path))
    return path


_config = reranker_config


def _toy(count: int = 30, queries: int = 2) -> tuple[dict, dict, dict]:
    documents = {f"d{i:02d}": f"passage {i} about gene {i * 7 % 11} and protein [{i}]" for i in range(count)}
    query_texts = {f"q{j}": f"which gene [{j}] binds protein {j}" for j in range(queries)}
    first_stage = {query_id: {doc_id: float(count - rank) for rank, doc_id in enumerate(documents)} for query_id in query_texts}
    return first_stage, query_texts, documents


# --- pure logic -------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("answer, expected", [
    ("[2] > [1] > [3]", [1, 0, 2]),
    ("[2] > [2] > [1] > [3]", [1, 0, 2]),       # repeated: counted once
    ("[5] > [1] > [0]", [0, 1, 2]),             # out of range: dropped
    ("[3]", [2, 0, 1]),                          # missing: the rest follow in their order
    ("I cannot rank these passages.", [0, 1, 2]),  # no identifier: the window keeps its order
    ("", [0, 1, 2]),
    ("<think>[1] looks best</think>\n[3] > [2]", [2, 1, 0]),
    ("［２］ > ［３］", [1, 2, 0]),                # full-width digits, as RankGPT normalises them
])
def test_permutations_are_parsed_as_rankgpt_does(answer: str, expected: list[int]):
    assert parse_permutation(answer, 3) == expected


def test_sliding_windows_go_from_the_bottom_to_the_top():
    assert windows(30, 20, 10) == [(10, 30), (0, 20)]
    assert windows(25, 20, 10) == [(5, 25), (0, 15)]
    assert windows(10, 20, 10) == [(0, 10)]
    assert windows(0, 20, 10) == []
    spans = windows(100, 20, 10)
    assert spans[0] == (80, 100) and spans[-1] == (0, 20) and len(spans) == 9
    assert apply_permutation(list("abcde"), 1, 4, [2, 0, 1]) == list("adbce")


def test_every_prompt_names_its_published_source():
    prompts = llm_prompts()
    assert set(prompts) == {"listwise", "pointwise", "pointwise_graded", "reasoning", "setwise", "listwise_scores", "groupwise"}
    assert all(len(prompt["source"]) > 40 for prompt in prompts.values())


def test_settings_are_checked_with_the_fix():
    endpoint = Endpoint("http://127.0.0.1:9/v1")
    with pytest.raises(ValueError, match="--step .* smaller than --window"):
        LLMRerankerConfig(endpoint, window=10, step=10)
    with pytest.raises(ValueError, match="--concurrency"):
        Endpoint("http://127.0.0.1:9/v1", concurrency=0)
    with pytest.raises(ValueError, match="needs an endpoint: add --base-url"):
        as_reranker("llm-listwise:m")
    with pytest.raises(ValueError, match="did you mean llm-listwise"):
        as_reranker("llm-listwize:m", llm=LLMRerankerConfig(endpoint))
    with pytest.raises(ValueError, match="names no model"):
        as_reranker("llm-pointwise:", llm=LLMRerankerConfig(endpoint))
    reranker = as_reranker("llm-reasoning:Qwen/Qwen3-8B", llm=LLMRerankerConfig(endpoint, max_tokens=512))
    assert isinstance(reranker, ReasoningLLMReranker) and reranker.name == "Qwen/Qwen3-8B (reasoning @127.0.0.1-9 max512)"
    assert reranker.revision.startswith("reasoning-prompt-")


# --- listwise -----------------------------------------------------------------------------------------------------

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
    name = f"test-llm (listwise @{_host(server)} w20s10)"
    (path,) = (tmp_path / "out" / "results" / f"{name.replace(' ', '_')}--bm25-robertson--top_30").glob(f"*/{TASK}.json")
    written = json.loads(path.read_text())
    provenance = written["r2med_provenance"]
    assert (provenance["reranker"], provenance["first_stage"], provenance["rerank_depth"]) == (name, "bm25-robertson", 30)
    usage = written["r2med_provenance"]["rerank_usage"]  # the rerun's
    assert usage["requests"] == 0 and usage["cached_answers"] == windows_sent and usage["prompt_tokens"] == 0
    # The windows carried the best passages up: each query's top 10 is the server's top 10 of its 30, in order.
    texts = dict(zip(data.corpus["id"].to_list(), data.corpus["text"].to_list()))
    first_stage, reranked = _trec(next(path.parent.parent.parent.parent.rglob(f"{TASK}.first_stage.trec"))), _trec(
        next((tmp_path / "out" / "runs").rglob(f"{TASK}.trec")))
    assert set(reranked) == set(first_stage) and len(reranked) == data.queries.height
    for query_id, ranked in reranked.items():  # (the first stage's file orders its score ties by id, not as the run)
        assert len(ranked) == 30 and set(ranked) <= set(first_stage[query_id])
        assert ranked[:10] == sorted(ranked, key=lambda doc_id: _hidden(" ".join(texts[doc_id].strip().split()[:300])))[:10]


_trec = trec_rankings


def test_malformed_and_empty_permutations_keep_unmentioned_passages_in_order(own_cache: Path, monkeypatch):
    answers = iter(["[3] > [3] > [1] > [99]", "", "no ranking, sorry", "[2]"])

    def reply(body: dict) -> str:
        return next(answers)

    first_stage, queries, documents = _toy(count=6, queries=4)
    with LoopbackOpenAI(reply=reply) as server:
        monkeypatch.setenv("OPENAI_API_KEY", server.api_key)
        reranker = ListwiseLLMReranker("test-llm", _config(server, concurrency=1))
        run = reranker.rerank(first_stage, queries, documents, depth=3, show_progress=False)
    ids = ["d00", "d01", "d02"]
    orders = sorted(list(ranked) for ranked in run.values())
    assert sorted(orders) == sorted([["d02", "d00", "d01"], ids, ids, ["d01", "d00", "d02"]])
    assert reranker.last_report.usage["empty_answers"] == 1 and reranker.last_report.usage["unparsed_answers"] == 1
    assert all(list(scores.values()) == [3.0, 2.0, 1.0] for scores in run.values())


# --- pointwise ----------------------------------------------------------------------------------------------------

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
    texts = dict(zip(data.corpus["id"].to_list(), data.corpus["text"].to_list()))
    assert len(scores) == 10 * data.queries.height
    for (query_id, doc_id), score in scores.items():
        yes, yes_spaced, no = _yes_no_logprobs(texts[doc_id])
        expected = (math.exp(yes) + math.exp(yes_spaced)) / (math.exp(yes) + math.exp(yes_spaced) + math.exp(no))
        assert score == pytest.approx(expected, abs=1e-6)  # the TREC file keeps 6 decimals or more
    written = json.loads(next((tmp_path / "out" / "results").rglob(f"{TASK}.json")).read_text())
    assert written["r2med_provenance"]["rerank_usage"]["scored_by_logprobs"] == len(scores)
    name = f"test-llm (pointwise @{_host(server)})"
    assert written["r2med_provenance"]["reranker"] == name
    assert next((tmp_path / "out" / "results").rglob(f"{TASK}.json")).parts[-3] == f"{name.replace(' ', '_')}--bm25-robertson--top_10"


def test_pointwise_falls_back_to_graded_labels_without_logprobs(own_cache: Path, monkeypatch):
    def reply(body: dict) -> str:
        content = body["messages"][-1]["content"]
        if "scale of 0 to 3" not in content:
            return "Yes"
        number = int(_passage(body).split()[1])
        return "" if number == 5 else f"Relevance: {number % 4}"

    first_stage, queries, documents = _toy(count=8, queries=1)
    with LoopbackOpenAI(reply=reply) as server:
        monkeypatch.setenv("OPENAI_API_KEY", server.api_key)
        reranker = PointwiseLLMReranker("test-llm", _config(server, concurrency=1))
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
    """Behind a reasoning parser the log-probabilities cover the reasoning first (issue 36): the pointwise P(Yes) is
    read at the answer's own tokens only, as llm-reasoning's; a one-token budget spent inside the thought (content
    empty, or "<think>" alone) gives no answer: the pair is undecided (0.5), not the thought's P(Yes) of 0.95 (or,
    on "<think>", 0.73), and the warning names the fix (llm-reasoning, or thinking turned off)."""
    first_stage, queries, documents = _toy(count=4, queries=1)

    with LoopbackOpenAI(reply=lambda body: {"tokens": thinking_first_tokens(parser)}, reasoning_parser=parser) as server:
        monkeypatch.setenv("OPENAI_API_KEY", server.api_key)
        reranker = PointwiseLLMReranker("test-llm", _config(server, concurrency=1))
        with caplog.at_level("WARNING"):
            run = reranker.rerank(first_stage, queries, documents, depth=4, show_progress=False)
        first = server.completions()[0]
    assert first["max_tokens"] == 1 and first["logprobs"] is True
    assert run["q0"] == {doc_id: 0.5 for doc_id in documents}
    usage = reranker.last_report.usage
    assert usage["undecided"] == 4 and usage["scored_by_logprobs"] == 0 and usage["scored_by_label"] == 0
    assert "enable_thinking" in caplog.text and "llm-reasoning" in caplog.text


def test_extra_body_reaches_every_llm_request_and_names_the_reranker(mirror_env: Path, own_cache: Path, tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch, capsys):
    """--extra-body is merged into every chat request (Qwen3's thinking switch, issue 36); it changes the answers, so
    it is part of each answer's cache key and of the reranker's name (filed apart) and recorded in rerank_usage."""
    extra = {"chat_template_kwargs": {"enable_thinking": False}}
    label = "body-" + hashlib.sha256(json.dumps(extra, sort_keys=True, separators=(",", ":")).encode()).hexdigest()[:8]
    with LoopbackOpenAI(reply=pointwise_reply) as server:
        monkeypatch.setenv("OPENAI_API_KEY", server.api_key)
        argv = ["evaluate", "--task", TASK, "--rerank", "llm-pointwise:test-llm", "--first-stage", "bm25-robertson",
                "--base-url", server.base_url, "--output", str(tmp_path / "out"), "--quiet"]
        assert main(argv + ["--extra-body", json.dumps(extra)]) == 0
        with_body = server.completions()
        assert main(argv) == 0  # without it: other answers, asked again (never served the other's from the cache)
        without = server.completions()[len(with_body):]
    assert with_body and all(body["chat_template_kwargs"] == {"enable_thinking": False} for body in with_body)
    assert len(without) == len(with_body) and not any("chat_template_kwargs" in body for body in without)
    printed = capsys.readouterr().out
    assert printed.count(" requests + 0 answers from the cache") == 2
    results = {json.loads(path.read_text())["r2med_provenance"]["reranker"]: json.loads(path.read_text())["r2med_provenance"]
               for path in (tmp_path / "out" / "results").rglob(f"{TASK}.json")}
    assert sorted(results) == sorted([f"test-llm (pointwise @{_host(server)} {label})", f"test-llm (pointwise @{_host(server)})"])
    assert results[f"test-llm (pointwise @{_host(server)} {label})"]["rerank_usage"]["extra_body"] == extra
    assert "extra_body" not in results[f"test-llm (pointwise @{_host(server)})"]["rerank_usage"]


@pytest.mark.parametrize("extra, words", [
    ('{"max_tokens": 5}', "--max-tokens"),
    ('{"temperature": 0.7}', "'temperature'"),
    ('"thinking"', "must be a JSON object"),
])
def test_an_llm_extra_body_that_replaces_the_request_is_refused(mirror_env: Path, own_cache: Path, capsys, extra: str, words: str):
    argv = ["evaluate", "--task", TASK, "--rerank", "llm-listwise:m", "--first-stage", "bm25-robertson",
            "--base-url", "http://127.0.0.1:9/v1", "--extra-body", extra]
    assert main(argv) == 2
    assert words in capsys.readouterr().err


def test_an_extra_body_for_two_endpoints_is_refused(mirror_env: Path, own_cache: Path, capsys):
    """An embedding first stage and an LLM reranker take other request fields: one --extra-body for both is refused."""
    argv = ["evaluate", "--task", TASK, "--rerank", "llm-listwise:m", "--first-stage", "openai:emb",
            "--base-url", "http://127.0.0.1:9/v1", "--extra-body", '{"truncate_prompt_tokens": 256}']
    assert main(argv) == 2
    error = capsys.readouterr().err
    assert "two endpoints" in error and "sweep spec" in error


def test_a_sweep_reranker_takes_its_own_extra_body(mirror_env: Path, own_cache: Path, tmp_path: Path, monkeypatch):
    """rerankers: [{..., extra_body: {...}}] reaches every request, and is part of the job id (it changes the answers)."""
    from r2med_plugin.sweep import expand_jobs, load_spec, run_sweep

    with LoopbackOpenAI(reply=rankgpt_reply) as server:
        monkeypatch.setenv("OPENAI_API_KEY", server.api_key)
        entry = {"model": "llm-listwise:test-llm", "first_stage": "bm25-robertson", "base_url": server.base_url}
        spec = load_spec(_sweep_spec(tmp_path, entry | {"extra_body": {"top_k": 20}}))
        assert run_sweep(spec, show_progress=False).count("done") == 1
        bodies = server.completions()
    assert bodies and all(body["top_k"] == 20 for body in bodies)
    plain = load_spec(_sweep_spec(tmp_path, entry))
    assert [job.job_id for job in expand_jobs(plain)] != [job.job_id for job in expand_jobs(spec)]
    from r2med_plugin.sweep.spec import SpecError

    with pytest.raises(SpecError, match=r"rerankers\[0\].*extra_body.*'messages'"):
        load_spec(_sweep_spec(tmp_path, entry | {"extra_body": {"messages": []}}))


REASONING_API = ("max_tokens", "temperature", "logprobs", "top_logprobs")  # what OpenAI's o-series and gpt-5 refuse


def graded_or_yes(body: dict) -> str:
    """Labels by passage number for the 0-3 question, "Yes" for the yes/no one (an API model's plain answers)."""
    if "scale of 0 to 3" not in body["messages"][-1]["content"]:
        return "Yes"
    return f"Relevance: {int(_passage(body).split()[1]) % 4}"


def test_an_openai_reasoning_model_gets_max_completion_tokens_and_labels(own_cache: Path, monkeypatch, caplog):
    """OpenAI's reasoning models answer max_tokens, temperature and logprobs with HTTP 400 "Unsupported parameter"
    (issue 36): each refusal is learned once (the probe's two 400s), every later request is sent with
    max_completion_tokens and neither temperature nor logprobs, and pointwise falls back to the 0-3 labels, with the
    reasoning budget (their hidden reasoning counts in max_completion_tokens), with one message; a rerun asks as the
    first run did and is served from the cache."""
    first_stage, queries, documents = _toy(count=6, queries=1)
    with LoopbackOpenAI(reply=graded_or_yes, unsupported=REASONING_API, hidden_reasoning=50) as server:
        monkeypatch.setenv("OPENAI_API_KEY", server.api_key)
        reranker = PointwiseLLMReranker("test-llm", _config(server, concurrency=2))
        with caplog.at_level("WARNING"):
            run = reranker.rerank(first_stage, queries, documents, depth=6, show_progress=False)
        notes = [record.getMessage() for record in caplog.records if "refused" in record.getMessage()]
        bodies = server.completions()
        again = PointwiseLLMReranker("test-llm", _config(server, concurrency=2))
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
    first_stage, queries, documents = _toy(count=4, queries=1)

    def said(body: dict) -> str:
        return "true" if int(_passage(body).split()[1]) % 2 else "false"

    with LoopbackOpenAI(reply=said, unsupported=REASONING_API) as server:
        monkeypatch.setenv("OPENAI_API_KEY", server.api_key)
        reranker = ReasoningLLMReranker("test-llm", _config(server, concurrency=1))
        run = reranker.rerank(first_stage, queries, documents, depth=4, show_progress=False)
        bodies = server.completions()
    assert run["q0"] == {"d00": 0.0, "d01": 1.0, "d02": 0.0, "d03": 1.0}
    assert reranker.last_report.usage["scored_by_answer"] == 4 and len(bodies) == 4 + 2
    assert {body.get("max_completion_tokens") for body in bodies[2:]} == {8192}
    with LoopbackOpenAI(reply=rankgpt_reply, unsupported=("temperature",)) as server:
        monkeypatch.setenv("OPENAI_API_KEY", server.api_key)
        listwise = ListwiseLLMReranker("test-llm", _config(server, concurrency=1))
        listwise.rerank(*_toy(count=30, queries=2), depth=30, show_progress=False)
        bodies = server.completions()
    assert bodies[0]["temperature"] == 0 and all("temperature" not in body for body in bodies[1:])
    assert len(bodies) == 1 + 2 * 2 and listwise.last_report.usage["unsupported_parameters"] == ["temperature"]


# --- reasoning ----------------------------------------------------------------------------------------------------

def _true_false(passage: str) -> tuple[float, float]:
    digest = hashlib.sha256(passage.encode("utf-8")).digest()
    return -digest[0] / 50 - 0.01, -digest[1] / 50 - 0.01


def reasoning_reply(body: dict) -> dict:
    passage = _passage(body)
    if "budget" in passage:  # thinks past the budget: no answer
        return {"reasoning_content": "Let me think about " + passage, "content": "", "finish_reason": "length"}
    true, false = _true_false(passage)
    word = "true" if true >= false else "false"
    return {"reasoning_content": f"The query asks about genes; {passage} mentions one.", "content": word,
            "logprobs": logprobs_of([(word, max(true, false), {"true": true, "false": false, "True": -9.0})])}


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
    texts = dict(zip(data.corpus["id"].to_list(), data.corpus["text"].to_list()))
    assert len(traces) == 10 * data.queries.height
    for trace in traces:
        true, false = _true_false(texts[trace["doc_id"]])
        p_true = math.exp(true) + math.exp(-9.0)  # "true" and "True" add up
        assert trace["score"] == pytest.approx(p_true / (p_true + math.exp(false)), abs=1e-12)
        assert trace["reasoning"].startswith("The query asks about genes") and trace["answer"] in ("true", "false")
    assert json.loads(result.read_text())["r2med_provenance"]["reranker"].endswith(" max256)")


def test_reasoning_answers_inline_think_and_spent_budgets(own_cache: Path, monkeypatch):
    def reply(body: dict) -> dict:
        passage = _passage(body)
        number = int(passage.split()[1])
        if number == 0:
            return {"content": "thinking on and on", "finish_reason": "length"}
        if number == 1:
            return {"content": "maybe true?</think>\nfalse"}  # no logprobs: the word after </think>
        return {"content": "it says true.</think> true",
                "logprobs": logprobs_of([("it", -0.1, {}), (" says", -0.1, {}), (" true", -0.2, {" true": -0.2}), (".</think>", -0.1, {}),
                                         (" true", -0.3, {" true": -0.3, " false": -1.5})])}

    first_stage, queries, documents = _toy(count=3, queries=1)
    with LoopbackOpenAI(reply=reply) as server:
        monkeypatch.setenv("OPENAI_API_KEY", server.api_key)
        reranker = ReasoningLLMReranker("test-llm", _config(server))
        run = reranker.rerank(first_stage, queries, documents, depth=3, show_progress=False)
    p_true = math.exp(-0.3) / (math.exp(-0.3) + math.exp(-1.5))  # the token after </think>, not the one inside the thought
    assert run["q0"] == pytest.approx({"d00": 0.5, "d01": 0.0, "d02": p_true})
    usage = reranker.last_report.usage
    assert usage["undecided"] == 1 and usage["scored_by_answer"] == 1 and usage["scored_by_logprobs"] == 1


def rank1_tokens(body: dict) -> dict:
    """What a Rank1 model generates: reasoning whose tokens also weigh true against false (a top-20 list holds many
    words: "True"/"False" at the first token, " true"/" false" later), "</think>", then the answer token."""
    true, false = _true_false(_passage(body))
    word = "true" if true >= false else "false"
    return {"tokens": [
        ("Okay", -0.3, {"Okay": -0.3, "Alright": -1.5, "True": -6.0, "False": -5.0}), (",", -0.1, {}), (" the", -0.2, {}),
        (" passage", -0.1, {}), (" says", -0.4, {}), (" true", -0.5, {" true": -0.5, " false": -1.3}), (".\n", -0.2, {}),
        ("</think>", -0.01, {}), ("\n\n", -0.01, {}), (word, max(true, false), {"true": true, "false": false, "True": -9.0}),
    ]}


@pytest.mark.parametrize("parser", ["deepseek_r1", None])
def test_reasoning_scores_the_answer_token_behind_a_reasoning_parser(own_cache: Path, monkeypatch, parser: str | None):
    """vLLM's --reasoning-parser moves the thought to reasoning_content, but its log-probabilities still cover the
    thought's tokens first: the score is read at the answer's token, as with the thought inline in the content; a
    budget spent thinking (--max-tokens 2: no answer) is undecided, not scored from the thought's tokens."""
    first_stage, queries, documents = _toy(count=4, queries=1)
    with LoopbackOpenAI(reply=rank1_tokens, reasoning_parser=parser) as server:
        monkeypatch.setenv("OPENAI_API_KEY", server.api_key)
        reranker = ReasoningLLMReranker("test-llm", _config(server))
        run = reranker.rerank(first_stage, queries, documents, depth=4, show_progress=False)
        answered = reranker.last_report.usage
        cut = ReasoningLLMReranker("test-llm", _config(server, max_tokens=2))
        spent = cut.rerank(first_stage, queries, documents, depth=4, show_progress=False)
        message = server.completions()[0]
    expected = {}
    for doc_id, passage in documents.items():
        true, false = _true_false(passage)
        p_true = math.exp(true) + math.exp(-9.0)  # the answer token's "true" and "True"; not the thought's 1 / (1 + e)
        expected[doc_id] = p_true / (p_true + math.exp(false))
    assert run["q0"] == pytest.approx(expected, abs=1e-12)
    assert answered["scored_by_logprobs"] == 4 and answered["undecided"] == 0
    assert spent["q0"] == {doc_id: 0.5 for doc_id in documents}
    assert cut.last_report.usage["undecided"] == 4 and cut.last_report.usage["scored_by_logprobs"] == 0
    assert message["logprobs"] is True and message["top_logprobs"] == 20
    traces = {trace["doc_id"]: trace for trace in cut.last_report.traces}
    assert traces["d00"]["reasoning"] == "Okay," and traces["d00"]["answer"] == "" and traces["d00"]["finish_reason"] == "length"


def test_a_run_where_every_pair_fell_back_says_so(mirror_env: Path, own_cache: Path, tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch, capsys):
    """The usage line counts how pairs were scored, and a run whose pairs mostly fell back (here a budget of 2
    tokens, spent thinking) warns on stderr; a run the model answered does not."""
    from r2med_plugin.data.loader import load_task

    pairs = 10 * load_task(TASK).queries.height
    with LoopbackOpenAI(reply=rank1_tokens, reasoning_parser="deepseek_r1") as server:
        monkeypatch.setenv("OPENAI_API_KEY", server.api_key)
        base = ["evaluate", "--task", TASK, "--rerank", "llm-reasoning:test-llm", "--first-stage", "bm25-robertson",
                "--base-url", server.base_url, "--quiet"]
        assert main([*base, "--max-tokens", "2"]) == 0
        spent = capsys.readouterr()
        assert main(base) == 0
        answered = capsys.readouterr()
    usage_line = next(line for line in spent.out.splitlines() if "rerank usage:" in line)
    assert usage_line.endswith(f"; pairs: 0 scored_by_logprobs, 0 scored_by_answer, {pairs} undecided")
    assert f"{pairs} of {pairs} pairs (100%) were undecided" in spent.err
    assert "the model or endpoint is not giving usable answers" in spent.err and "--max-tokens" in spent.err
    usage_line = next(line for line in answered.out.splitlines() if "rerank usage:" in line)
    assert usage_line.endswith(f"; pairs: {pairs} scored_by_logprobs, 0 scored_by_answer, 0 undecided")
    assert "undecided" not in answered.err


def test_listwise_answers_without_identifiers_warn(own_cache: Path, monkeypatch, caplog):
    first_stage, queries, documents = _toy(count=6, queries=3)
    prose = {"q0": "I cannot rank these passages.", "q1": "", "q2": "[2] > [1]"}  # 2 of 3 windows unusable

    def reply(body: dict) -> str:
        query = next(query_id for query_id in queries if f"binds protein {query_id[1:]}." in body["messages"][-1]["content"])
        return prose[query]

    with LoopbackOpenAI(reply=reply) as server:
        monkeypatch.setenv("OPENAI_API_KEY", server.api_key)
        reranker = ListwiseLLMReranker("test-llm", _config(server))
        with caplog.at_level("WARNING", logger="r2med_plugin"):
            reranker.rerank(first_stage, queries, documents, depth=3, show_progress=False)
    usage = reranker.last_report.usage
    assert usage["unparsed_answers"] == 1 and usage["empty_answers"] == 1 and usage["requests"] == 3
    [record] = [record for record in caplog.records if record.levelname == "WARNING"]
    assert record.getMessage().startswith(f"{reranker.name}: 2 of 3 windows (67%) were unparsed or empty")
    assert "kept the first stage's order" in record.getMessage()


# --- requests: keys, failures, SIGKILL ----------------------------------------------------------------------------

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
    monkeypatch.setattr(plan, "plan_request", lambda *a, **k: pytest.fail("the first stage was planned"))
    argv = ["evaluate", "--task", TASK, "--rerank", "llm-listwise:test-llm", "--first-stage", "bm25-robertson",
            "--base-url", "http://127.0.0.1:9/v1", "--output", str(tmp_path / "out"), "--quiet"]
    assert main(argv) == 2
    captured = capsys.readouterr()
    assert captured.err == ("r2med: error: --rerank llm-listwise:test-llm sends its requests through the openai client, "
                            "which is not installed here: pip install 'r2med-plugin[generate]', then run it again\n")
    assert "Traceback" not in captured.out + captured.err and not (tmp_path / "out").exists()


def test_a_request_failing_every_retry_stops_the_run_and_keeps_the_answers(own_cache: Path, monkeypatch):
    first_stage, queries, documents = _toy(count=4, queries=1)
    with LoopbackOpenAI(reply=pointwise_reply) as server:
        monkeypatch.setenv("OPENAI_API_KEY", server.api_key)
        reranker = PointwiseLLMReranker("test-llm", _config(server, concurrency=1))
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
    first_stage, queries, documents = _toy(count=12, queries=2)
    with LoopbackOpenAI(reply=pointwise_reply, models=("/models/tiny-chat",), pinned=True) as server:
        monkeypatch.setenv("OPENAI_API_KEY", server.api_key)
        for kind in (PointwiseLLMReranker, ListwiseLLMReranker):
            server.requests.clear()
            reranker = kind("tiny-chat", _config(server, concurrency=1))
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
    first_stage, queries, documents = _toy(count=4, queries=1)
    with LoopbackOpenAI(reply=pointwise_reply, pinned=True) as server:
        monkeypatch.setenv("OPENAI_API_KEY", server.api_key)
        reranker = PointwiseLLMReranker("test-llm", _config(server, concurrency=1))
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


def test_a_run_killed_with_sigkill_resumes_from_its_cached_answers(own_cache: Path, tmp_path: Path, monkeypatch):
    first_stage, queries, documents = _toy(count=40, queries=1)
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
        reranker = PointwiseLLMReranker("test-llm", _config(server, cache, concurrency=2))
        resumed = reranker.rerank(first_stage, queries, documents, depth=40, show_progress=False)
        assert reranker.last_report.usage["cached_answers"] == kept
        assert len(server.completions()) - sent_before == 40 - kept == reranker.last_report.usage["requests"]
    with LoopbackOpenAI(reply=pointwise_reply) as fresh:
        monkeypatch.setenv("OPENAI_API_KEY", fresh.api_key)
        reference = PointwiseLLMReranker("test-llm", _config(fresh, tmp_path / "fresh")).rerank(
            first_stage, queries, documents, depth=40, show_progress=False)
    assert resumed == reference


# --- sweeps ---------------------------------------------------------------------------------------------------------


def _sweep_spec(tmp_path: Path, reranker: dict) -> Path:
    import yaml

    path = tmp_path / "sweep.yaml"
    path.write_text(yaml.safe_dump({"output": str(tmp_path / "sweep-out"), "tasks": [TASK], "rerankers": [reranker]}))
    return path


def test_a_sweep_spec_names_an_llm_reranker(mirror_env: Path, own_cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """rerankers: [{model: llm-listwise:<model>, base_url: ..., window: ..., concurrency: ...}] runs as --rerank does; the
    request settings (concurrency, timeout, retries, key variable) change no job id, what it asks (window) does."""
    from r2med_plugin.sweep import expand_jobs, load_spec, run_sweep

    with LoopbackOpenAI(reply=rankgpt_reply) as server:
        monkeypatch.setenv("R2MED_TEST_LLM_KEY", server.api_key)
        entry = {"model": "llm-listwise:test-llm", "first_stage": "bm25-robertson", "depth": 30, "base_url": server.base_url,
                 "api_key_env": "R2MED_TEST_LLM_KEY", "concurrency": 2, "timeout": 30, "max_retries": 1}
        spec = load_spec(_sweep_spec(tmp_path, entry))
        first = run_sweep(spec, show_progress=False)
        assert first.count("done") == 1
        sent = len(server.completions())
        from r2med_plugin.data.loader import load_task

        assert sent == 2 * load_task(TASK).queries.height  # two windows (10-30, 0-20) per evaluated query
        assert run_sweep(spec, show_progress=False).count("skipped") == 1 and len(server.completions()) == sent
        same = load_spec(_sweep_spec(tmp_path, entry | {"concurrency": 8, "timeout": 60, "max_retries": 3}))
        other = load_spec(_sweep_spec(tmp_path, entry | {"window": 15, "step": 5}))
    ids = [job.job_id for job in expand_jobs(spec)]
    assert [job.job_id for job in expand_jobs(same)] == ids and [job.job_id for job in expand_jobs(other)] != ids
    (path,) = (tmp_path / "sweep-out" / "results").glob(f"test-llm_(listwise_@*)--bm25-robertson--top_30/*/{TASK}.json")
    assert json.loads(path.read_text())["r2med_provenance"]["rerank_depth"] == 30


@pytest.mark.parametrize(("change", "words"), [
    ({"base_url": None}, r"rerankers\[0\]\.base_url.*is missing.*needs its endpoint"),
    ({"window": 10, "step": 10}, r"step .* smaller than window"),
    ({"timeout": 0}, r"timeout must be a positive number"),
    ({"batch_size": 8}, r"an LLM reranker batches nothing"),
    ({"model": "llm-listwize:m"}, r"did you mean llm-listwise"),
    ({"model": "org/cross-encoder", "base_url": None, "window": 5}, r"rerankers\[0\]\.window.*is a cross-encoder"),
    ({"model": "llm-pointwise:m", "window": 4}, r"rerankers\[0\]\.window.*llm-pointwise.*sliding window is listwise"),
    ({"model": "llm-reasoning:m", "step": 4}, r"rerankers\[0\]\.step.*llm-reasoning"),
    ({"model": "llm-pointwise:m", "max_tokens": 50}, r"rerankers\[0\]\.max_tokens.*one-token answer"),
    ({"api_key_env": "R2MED_SURELY_UNSET_KEY"}, r"R2MED_SURELY_UNSET_KEY is set neither here nor in the spec's env"),
])
def test_llm_reranker_sweep_settings_are_checked_with_the_fix(tmp_path: Path, change: dict, words: str):
    from r2med_plugin.sweep import load_spec
    from r2med_plugin.sweep.spec import SpecError

    entry = {"model": "llm-listwise:m", "first_stage": "bm25-robertson", "base_url": "http://127.0.0.1:9/v1"} | change
    with pytest.raises(SpecError, match=words):
        load_spec(_sweep_spec(tmp_path, {key: value for key, value in entry.items() if value is not None}))


def test_one_model_id_on_two_servers_is_two_rerankers(mirror_env: Path, own_cache: Path, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch, capsys):
    """Answers are cached per endpoint host and results filed per host: a second server is asked, never served the
    first one's answers, and its result goes beside the first (found by a new-user trial)."""
    with LoopbackOpenAI(reply=rankgpt_reply) as first, LoopbackOpenAI(reply=rankgpt_reply) as second:
        monkeypatch.setenv("OPENAI_API_KEY", first.api_key)
        for server in (first, second):
            argv = ["evaluate", "--task", TASK, "--rerank", "llm-listwise:test-llm", "--first-stage", "bm25-robertson",
                    "--base-url", server.base_url, "--output", str(tmp_path / "out"), "--quiet"]
            assert main(argv) == 0
        assert len(first.completions()) == len(second.completions()) > 0
    printed = capsys.readouterr().out
    assert printed.count(" requests + 0 answers from the cache") == 2
    results = sorted((tmp_path / "out" / "results").glob(f"test-llm_(listwise_@*_w20s10)--bm25-robertson--top_10/*/{TASK}.json"))
    assert len(results) == 2  # two rerankers: test-llm (listwise @<host> w20s10), one per server
    hosts = {json.loads(path.read_text())["r2med_provenance"]["rerank_usage"]["endpoint"] for path in results}
    assert hosts == {first.base_url.rsplit("/", 1)[0], second.base_url.rsplit("/", 1)[0]}
    from r2med_plugin.reporting.leaderboard import build_leaderboard

    rows = build_leaderboard([tmp_path / "out"], benchmark="nano")  # two rows, never one standing in for the other
    assert sorted(row.retriever.split(" | ")[0] for row in rows) == sorted(
        f"test-llm (listwise @{_host(server)} w20s10)" for server in (first, second))


@pytest.mark.parametrize("timeout", [float("nan"), float("inf")])
def test_a_sweep_timeout_must_be_finite(tmp_path: Path, timeout: float):
    from r2med_plugin.sweep import load_spec
    from r2med_plugin.sweep.spec import SpecError

    entry = {"model": "llm-listwise:m", "first_stage": "bm25-robertson", "base_url": "http://127.0.0.1:9/v1", "timeout": timeout}
    with pytest.raises(SpecError, match=r"timeout must be a positive number of seconds"):
        load_spec(_sweep_spec(tmp_path, entry))


def test_an_empty_api_key_env_is_refused():
    from r2med_plugin.llm.client import api_key

    with pytest.raises(ValueError, match=r"--api-key-env is empty"):
        api_key("")


# --- rerank depth -------------------------------------------------------------------------------------------------

def test_a_rerank_depth_below_10_is_refused_before_any_request(mirror_env: Path, own_cache: Path, tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch, capsys):
    """The main score is ndcg_at_10: a top-5 rerank cannot report it. It was found after every request had been sent
    (`main score 'ndcg_at_10' is not among the scores`, nothing written); the CLI, the Python API and sweep specs
    refuse it first."""
    from r2med_plugin import evaluate_task
    from r2med_plugin.sweep import load_spec
    from r2med_plugin.sweep.spec import SpecError

    with LoopbackOpenAI(reply=pointwise_reply) as server:
        monkeypatch.setenv("OPENAI_API_KEY", server.api_key)
        argv = ["evaluate", "--task", TASK, "--rerank", "llm-pointwise:test-llm", "--first-stage", "bm25-robertson",
                "--base-url", server.base_url, "--rerank-depth", "5", "--output", str(tmp_path / "out"), "--quiet"]
        assert main(argv) == 2
        err = capsys.readouterr().err
        reranker = as_reranker("llm-pointwise:test-llm", llm=_config(server))
        with pytest.raises(ValueError, match=r"rerank_depth \(--rerank-depth\) must be at least 10 .*got 9"):
            evaluate_task(TASK, rerank=reranker, first_stage="bm25-robertson", rerank_depth=9, show_progress=False)
        assert server.completions() == []
    assert "r2med: error: --rerank-depth must be at least 10 documents per query" in err and "got 5" in err
    assert "ndcg_at_10" in err and not (tmp_path / "out").exists()
    entry = {"model": "llm-pointwise:m", "first_stage": "bm25-robertson", "base_url": "http://127.0.0.1:9/v1", "depth": 5}
    with pytest.raises(SpecError, match=r"`rerankers\[0\]\.depth` must be at least 10 documents per query.*got 5"):
        load_spec(_sweep_spec(tmp_path, entry))
    with pytest.raises(SpecError, match=r"`rerankers\[0\]\.depth` must be at least 10"):
        load_spec(_sweep_spec(tmp_path, {"model": "org/cross-encoder", "first_stage": "bm25-robertson", "depth": 3}))
    assert load_spec(_sweep_spec(tmp_path, entry | {"depth": 10})).rerankers[0]["rerank_depth"] == 10


def test_refused_requests_are_not_said_to_be_retried_nor_to_help_rerunning(own_cache: Path, monkeypatch):
    """vLLM refuses a reasoning budget longer than the context with HTTP 400 on every pair (issue 36): such a request is
    not retried, so the message says the server refused them, gives its text, and does not suggest running again."""
    from r2med_plugin.llm.client import EndpointError

    first_stage, queries, documents = _toy(count=3, queries=1)
    with LoopbackOpenAI(reply=reasoning_reply, max_model_len=4096, report_max_model_len=False) as server:
        monkeypatch.setenv("OPENAI_API_KEY", server.api_key)
        reranker = ReasoningLLMReranker("test-llm", _config(server, concurrency=1))  # the default budget: 8192
        with pytest.raises(EndpointError) as raised:
            reranker.rerank(first_stage, queries, documents, depth=3, show_progress=False)
        assert len(server.completions()) == 3  # each pair asked once: a 400 is not retried
    message = str(raised.value)
    assert "3 request(s)" in message and "were refused (not retried" in message and "maximum context length is 4096" in message
    assert "on every retry" not in message and "run the same command again to continue" not in message


# --- issue 35, 5b: the usage counts add up to the questions asked, on a first run and its rerun ----------------


def _labels_only(body: dict) -> str:
    """A server that returns no log-probabilities: "Yes" to the yes/no question, a 0-3 label to the graded one."""
    content = body["messages"][-1]["content"]
    return f"Relevance: {int(_passage(body).split()[1]) % 4}" if "scale of 0 to 3" in content else "Yes"


@pytest.mark.parametrize("logprobs", [True, False])
def test_pointwise_usage_adds_up_to_the_pairs_on_a_first_run_and_its_rerun(own_cache: Path, monkeypatch, logprobs: bool):
    first_stage, queries, documents = _toy(count=10, queries=2)
    for doc_id in ("d07", "d08", "d09"):  # three passages repeat d06's text: their pairs ask d06's question
        documents[doc_id] = documents["d06"]
    pairs, unique = 2 * 10, 2 * 7  # per query: d00..d06 distinct, d07..d09 the same question as d06
    with LoopbackOpenAI(reply=pointwise_reply if logprobs else _labels_only, delay=0.05) as server:
        monkeypatch.setenv("OPENAI_API_KEY", server.api_key)
        reranker = PointwiseLLMReranker("test-llm", _config(server, concurrency=8))
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


# --- setwise (issue 33, item 1) -------------------------------------------------------------------------------------

def _setwise_passages(body: dict) -> list[str]:
    """The passages of a setwise question, in their A, B, C, ... order."""
    listed = body["messages"][-1]["content"].split("most relevant one to the query?\n\n", 1)[1]
    listed = listed.rsplit("\n\nOutput only the passage label", 1)[0]
    return [part.split(': "', 1)[1][:-1] for part in listed.split("\n\nPassage ")]


def setwise_reply(body: dict) -> str:
    """A well-behaved setwise answer: the set's best passage by the hidden order."""
    passages = _setwise_passages(body)
    return f"Passage {'ABCDEFGHIJKLMNOPQRSTUVW'[min(range(len(passages)), key=lambda i: _hidden(passages[i]))]}"


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
    first_stage, queries, documents = _toy(count=30, queries=2)
    with LoopbackOpenAI(reply=setwise_reply) as server:
        monkeypatch.setenv("OPENAI_API_KEY", server.api_key)
        for k in (10, 4):
            reranker = SetwiseLLMReranker("test-llm", _config(server, set_size=set_size, setwise_method=method, setwise_k=k))
            run = reranker.rerank(first_stage, queries, documents, depth=30, show_progress=False)
            for query_id, ranked in run.items():
                order = list(ranked)
                assert order[:k] == sorted(documents, key=lambda doc_id: _hidden(documents[doc_id]))[:k]
                placed = set(order[:k])
                assert order[k:] == [doc_id for doc_id in first_stage[query_id] if doc_id not in placed]  # first-stage order
                assert list(ranked.values()) == [float(30 - rank) for rank in range(30)]
            assert all(len(_setwise_passages(body)) <= set_size for body in server.completions())
    assert reranker.name == f"test-llm (setwise @{_host(server)} {method} c{set_size} k4)"
    assert reranker.revision.startswith("setwise-prompt-")


def test_setwise_answers_are_cached_and_usage_adds_up_to_the_comparisons(own_cache: Path, monkeypatch):
    first_stage, queries, documents = _toy(count=20, queries=3)
    documents["d19"] = documents["d18"]  # a twin: some sets ask a question asked before
    with LoopbackOpenAI(reply=setwise_reply) as server:
        monkeypatch.setenv("OPENAI_API_KEY", server.api_key)
        reranker = SetwiseLLMReranker("test-llm", _config(server, set_size=2))
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
    first_stage, queries, documents = _toy(count=12, queries=2)

    def reply(body: dict) -> str:  # one question in three answered with nothing, one with prose
        return ["", "I cannot tell which one.", setwise_reply(body)][int(_hidden(json.dumps(body["messages"])), 16) % 3]

    with LoopbackOpenAI(reply=reply) as server:
        monkeypatch.setenv("OPENAI_API_KEY", server.api_key)
        reranker = SetwiseLLMReranker("test-llm", _config(server, setwise_method="bubblesort"))
        reranker.rerank(first_stage, queries, documents, depth=12, show_progress=False)
        usage = reranker.last_report.usage
        answers = [reply(body) for body in server.completions()]
    # counted per comparison (a repeated question's answer counts again), so at least once per request sent
    assert usage["empty_answers"] >= answers.count("") > 0
    assert usage["unparsed_answers"] >= answers.count("I cannot tell which one.") > 0
    with LoopbackOpenAI(reply=lambda body: "no idea") as server:  # every pick unparsed: the set's first, no swap
        monkeypatch.setenv("OPENAI_API_KEY", server.api_key)
        reranker = SetwiseLLMReranker("test-llm", _config(server, setwise_method="bubblesort", cache=own_cache / "none"))
        with caplog.at_level("WARNING"):
            run = reranker.rerank(first_stage, queries, documents, depth=12, show_progress=False)
    assert all(list(ranked) == list(first_stage[query_id]) for query_id, ranked in run.items())
    assert reranker.last_report.usage["unparsed_answers"] == reranker.last_report.usage["comparisons"] > 0
    assert "each picked its set's first passage" in caplog.text


def test_setwise_settings_are_checked_and_named():
    endpoint = Endpoint("http://127.0.0.1:9/v1")
    for settings, words in (({"set_size": 1}, "--set-size must be an integer from 2 to 23"), ({"set_size": 24}, "from 2 to 23"),
                            ({"setwise_method": "quicksort"}, "--setwise-method must be one of heapsort, bubblesort"),
                            ({"setwise_k": 0}, "--setwise-k must be an integer of at least 1")):
        with pytest.raises(ValueError, match=words):
            LLMRerankerConfig(endpoint, **settings)
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
    name = f"test-llm (setwise @{_host(server)} bubblesort c4 k5)"
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
    ({"model": "llm-setwise:m", "set_size": 30}, r"set-size must be an integer from 2 to 23"),
    ({"model": "org/cross-encoder", "base_url": None, "set_size": 3}, r"rerankers\[0\]\.set_size.*is a cross-encoder"),
])
def test_setwise_sweep_settings_are_refused_for_other_kinds(tmp_path: Path, entry: dict, words: str):
    from r2med_plugin.sweep import load_spec
    from r2med_plugin.sweep.spec import SpecError

    entry = {"first_stage": "bm25-robertson", "base_url": "http://127.0.0.1:9/v1"} | entry
    with pytest.raises(SpecError, match=words):
        load_spec(_sweep_spec(tmp_path, {key: value for key, value in entry.items() if value is not None}))


def test_a_sweep_spec_names_a_setwise_reranker(mirror_env: Path, own_cache: Path, tmp_path: Path, monkeypatch):
    from r2med_plugin.sweep import expand_jobs, load_spec, run_sweep

    with LoopbackOpenAI(reply=setwise_reply) as server:
        monkeypatch.setenv("OPENAI_API_KEY", server.api_key)
        entry = {"model": "llm-setwise:test-llm", "first_stage": "bm25-robertson", "depth": 10, "base_url": server.base_url,
                 "set_size": 4, "setwise_method": "heapsort", "setwise_k": 10}
        spec = load_spec(_sweep_spec(tmp_path, entry))
        assert run_sweep(spec, show_progress=False).count("done") == 1
        other = load_spec(_sweep_spec(tmp_path, entry | {"set_size": 3}))
    assert [job.job_id for job in expand_jobs(other)] != [job.job_id for job in expand_jobs(spec)]
    (path,) = (tmp_path / "sweep-out" / "results").glob(f"test-llm_(setwise_@*_heapsort_c4_k10)--bm25-robertson--top_10/*/{TASK}.json")
    assert json.loads(path.read_text())["r2med_provenance"]["rerank_usage"]["comparisons"] > 0


def test_setwise_heapsort_asks_llm_rankers_questions_in_its_order():
    """The sets llm-rankers 0.0.2's heapSort asks (num_child 2, k 3, seven passages, picks by a fixed order), recorded
    from its own code: ours asks the same sets in the same order and ends with the same ranking."""
    import asyncio

    from r2med_plugin.llm.rerankers import heap_top

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

    from r2med_plugin.llm.rerankers import bubble_top, heap_top

    rng = random.Random(33)
    for _ in range(300):
        count, set_size = rng.randint(1, 40), rng.randint(2, 12)
        k, hidden = rng.randint(1, count), rng.sample(range(count), count)
        sizes = []

        async def pick(doc_ids):
            sizes.append(len(doc_ids))
            return min(range(len(doc_ids)), key=lambda i: hidden[doc_ids[i]])

        items = list(range(count))
        top = asyncio.run(heap_top(items, k, set_size - 1, pick) if method == "heapsort" else bubble_top(items, k, set_size, pick))
        assert top == sorted(range(count), key=hidden.__getitem__)[:k], (count, set_size, k)
        assert all(2 <= size <= set_size for size in sizes)
