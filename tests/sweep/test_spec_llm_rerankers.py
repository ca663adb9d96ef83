"""LLM rerankers in sweep specs: named, their settings checked with the fix, one model id on two servers is two
rerankers."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from r2med_plugin.cli import main
from tests.llm.replies import TASK, rankgpt_reply, server_host, write_sweep_spec
from tests.support.loopback_openai import LoopbackOpenAI


def test_a_sweep_spec_names_an_llm_reranker(mirror_env: Path, own_cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """rerankers: [{model: llm-listwise:<model>, base_url: ..., window: ..., concurrency: ...}] runs as --rerank does; the
    request settings (concurrency, timeout, retries, key variable) change no job id, what it asks (window) does."""
    from r2med_plugin.sweep import expand_jobs, load_spec, run_sweep

    with LoopbackOpenAI(reply=rankgpt_reply) as server:
        monkeypatch.setenv("R2MED_TEST_LLM_KEY", server.api_key)
        entry = {"model": "llm-listwise:test-llm", "first_stage": "bm25-robertson", "depth": 30, "base_url": server.base_url,
                 "api_key_env": "R2MED_TEST_LLM_KEY", "concurrency": 2, "timeout": 30, "max_retries": 1}
        spec = load_spec(write_sweep_spec(tmp_path, entry))
        first = run_sweep(spec, show_progress=False)
        assert first.count("done") == 1
        sent = len(server.completions())
        from r2med_plugin.data.loader import load_task

        assert sent == 2 * load_task(TASK).queries.height  # two windows (10-30, 0-20) per evaluated query
        assert run_sweep(spec, show_progress=False).count("skipped") == 1 and len(server.completions()) == sent
        same = load_spec(write_sweep_spec(tmp_path, entry | {"concurrency": 8, "timeout": 60, "max_retries": 3}))
        other = load_spec(write_sweep_spec(tmp_path, entry | {"window": 15, "step": 5}))
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
        load_spec(write_sweep_spec(tmp_path, {key: value for key, value in entry.items() if value is not None}))


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
        f"test-llm (listwise @{server_host(server)} w20s10)" for server in (first, second))


@pytest.mark.parametrize("timeout", [float("nan"), float("inf")])
def test_a_sweep_timeout_must_be_finite(tmp_path: Path, timeout: float):
    from r2med_plugin.sweep import load_spec
    from r2med_plugin.sweep.spec import SpecError

    entry = {"model": "llm-listwise:m", "first_stage": "bm25-robertson", "base_url": "http://127.0.0.1:9/v1", "timeout": timeout}
    with pytest.raises(SpecError, match=r"timeout must be a positive number of seconds"):
        load_spec(write_sweep_spec(tmp_path, entry))
