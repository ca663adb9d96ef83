"""``--extra-body``: sent with every LLM request, part of the reranker's name, refused where it replaces the request
or where two endpoints would share it; a sweep reranker takes its own."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from r2med_plugin.cli import main
from tests.llm.replies import TASK, pointwise_reply, rankgpt_reply, server_host, write_sweep_spec
from tests.support.loopback_openai import LoopbackOpenAI


def test_extra_body_reaches_every_llm_request_and_names_the_reranker(mirror_env: Path, own_cache: Path, tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch, capsys):
    """--extra-body is merged into every chat request (Qwen3's thinking switch); it changes the answers, so
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
    assert sorted(results) == sorted([f"test-llm (pointwise @{server_host(server)} {label})", f"test-llm (pointwise @{server_host(server)})"])
    assert results[f"test-llm (pointwise @{server_host(server)} {label})"]["rerank_usage"]["extra_body"] == extra
    assert "extra_body" not in results[f"test-llm (pointwise @{server_host(server)})"]["rerank_usage"]


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
        spec = load_spec(write_sweep_spec(tmp_path, entry | {"extra_body": {"top_k": 20}}))
        assert run_sweep(spec, show_progress=False).count("done") == 1
        bodies = server.completions()
    assert bodies and all(body["top_k"] == 20 for body in bodies)
    plain = load_spec(write_sweep_spec(tmp_path, entry))
    assert [job.job_id for job in expand_jobs(plain)] != [job.job_id for job in expand_jobs(spec)]
    from r2med_plugin.sweep.spec import SpecError

    with pytest.raises(SpecError, match=r"rerankers\[0\].*extra_body.*'messages'"):
        load_spec(write_sweep_spec(tmp_path, entry | {"extra_body": {"messages": []}}))
