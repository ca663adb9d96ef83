"""The LLM rerankers and `r2med generate` against a real OpenAI-compatible server installed from the package index:
`transformers serve` (the `transformers[serving]` extra, in the test extra), on 127.0.0.1, serving a tiny
seeded one-layer Llama with a chat template (tests/support/tiny_official.chat_llama), not our loopback server.

What this server does (transformers 5.24.0, observed here and read in transformers/cli/serving/):
- `/v1/models` lists one model when it is started with one (`transformers serve <model>`): its id is the argument
  exactly as given (a local folder: the path as typed; here the relative `models/tiny-chat`);
- any other model id is refused with HTTP 400 and FastAPI's `{"detail": "Server is pinned to ..."}` (not 404);
- `logprobs` and `top_logprobs` are accepted and ignored (a warning in its log): no answer holds log-probabilities,
  so `llm-pointwise` asks for 0-3 labels after its one probe;
- `finish_reason` is "length" when `max_tokens` new tokens were generated, else "stop"; a request without
  `max_tokens` may generate 1024 tokens (its default), so the listwise run here passes `--max-tokens`;
- temperature 0 decodes greedily; another temperature samples only when the model's generation_config has
  do_sample (this model's has not: `r2med generate`'s temperature 0.8 decodes greedily here).

The model never says a number (its vocabulary holds no digit) and never stops early (its special tokens are
suppressed), so what each reranker makes of its answers is fixed by construction: no pointwise label, no listwise
identifier, whatever the random weights say.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from r2med_plugin.cli import main
from tests.support.tiny_official import chat_llama

pytestmark = pytest.mark.slow

TASK = "R2MEDIIYiClinical"
MODEL_ARGUMENT = "models/tiny-chat"  # relative to the server's working folder: the id it serves
START_SECONDS = 120


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _get(url: str) -> tuple[int, bytes]:
    with urllib.request.urlopen(url, timeout=5) as response:  # noqa: S310 - a loopback URL built here
        return response.status, response.read()


@pytest.fixture(scope="module")
def transformers_server(fixture_mirror: Path, tmp_path_factory: pytest.TempPathFactory):
    """`transformers serve models/tiny-chat` on a free loopback port: (base URL, served model id, log file)."""
    root = tmp_path_factory.mktemp("transformers-serve")
    texts = []
    for name in ("corpus.jsonl", "query.jsonl"):
        for line in (fixture_mirror / "R2MED" / "IIYi-Clinical" / name).read_text(encoding="utf-8").splitlines():
            texts.append(str(json.loads(line).get("text") or ""))
    chat_llama(root / MODEL_ARGUMENT, texts, seed=0)
    port = _free_port()
    log_path = root / "serve.log"
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", HF_DATASETS_OFFLINE="1", OMP_NUM_THREADS="1",
               TOKENIZERS_PARALLELISM="false")
    command = [sys.executable, "-m", "transformers.cli.transformers", "serve", MODEL_ARGUMENT, "--host", "127.0.0.1",
               "--port", str(port), "--device", "cpu", "--log-level", "info"]
    with open(log_path, "wb") as log:
        process = subprocess.Popen(command, cwd=root, env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + START_SECONDS
        while True:
            if process.poll() is not None:
                pytest.fail(f"transformers serve exited with {process.returncode} before it answered; its log:\n"
                            f"{log_path.read_text(errors='replace')[-6000:]}")
            try:
                if _get(f"http://127.0.0.1:{port}/health")[0] == 200:
                    break
            except OSError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"transformers serve did not answer /health within {START_SECONDS} s; its log:\n"
                            f"{log_path.read_text(errors='replace')[-6000:]}")
            time.sleep(0.5)
        listed = json.loads(_get(f"http://127.0.0.1:{port}/v1/models")[1])
        served = [model["id"] for model in listed["data"]]
        assert served == [MODEL_ARGUMENT], served  # the argument as given, one model
        yield f"http://127.0.0.1:{port}/v1", served[0], log_path
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=20)


@pytest.fixture()
def served_env(mirror_env: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The fixture mirror, answers cached in this test's folder only, and no key (a local server checks none)."""
    monkeypatch.setenv("R2MED_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    return mirror_env


def _evaluate(base_url: str, rerank: str, out: Path, *extra: str) -> int:
    return main(["evaluate", "--task", TASK, "--retriever", "bm25-lucene", "--rerank", rerank, "--base-url", base_url,
                 "--rerank-depth", "10", "--output", str(out), "--accept-drift", "--trec", "--quiet", *extra])


def _result(out: Path) -> dict:
    (path,) = (out / "results").rglob(f"{TASK}.json")
    return json.loads(path.read_text(encoding="utf-8"))


def _trec(path: Path) -> dict[str, list[tuple[str, float]]]:
    """query -> [(document, score)] in rank order."""
    rows: dict[str, list[tuple[int, str, float]]] = {}
    for line in path.read_text().splitlines():
        query_id, _, doc_id, rank, score, _ = line.split()
        rows.setdefault(query_id, []).append((int(rank), doc_id, float(score)))
    return {query_id: [(doc_id, score) for _, doc_id, score in sorted(ranked)] for query_id, ranked in rows.items()}


def _runs(out: Path) -> tuple[dict, dict]:
    """(reranked run, first-stage run) from the TREC files of ``out``."""
    reranked = _trec(next(path for path in (out / "runs").rglob(f"{TASK}.trec")))
    first_stage = _trec(next((out / "runs").rglob(f"{TASK}.first_stage.trec")))
    return reranked, first_stage


def test_pointwise_against_transformers_serve_falls_back_to_labels(transformers_server, served_env: Path, tmp_path: Path,
                                                                   capsys):
    base_url, model, log = transformers_server
    out = tmp_path / "out"
    assert _evaluate(base_url, f"llm-pointwise:{model}", out) == 0, capsys.readouterr().err
    written = _result(out)
    usage = written["r2med_provenance"]["rerank_usage"]
    reranked, _ = _runs(out)
    pairs = sum(len(ranked) for ranked in reranked.values())
    assert pairs == 50 and len(reranked) == 5  # 5 queries with qrels, top 10 each
    # The server ignores logprobs/top_logprobs: the probe (the first pair's yes/no question) comes back without
    # log-probabilities, so every pair is asked the 0-3 label question; this model never says a digit: all undecided.
    assert (usage["scored_by_logprobs"], usage["scored_by_label"], usage["undecided"]) == (0, 0, pairs)
    # one label question per pair, and the probe counted apart: requests + cached answers add up to the pairs
    assert (usage["pairs"], usage["requests"], usage["cached_answers"], usage["probe_requests"]) == (pairs, pairs, 0, 1)
    assert usage["completion_tokens"] == 1 + 8 * pairs  # max_tokens 1 (probe), 8 (labels): always "length" here
    assert usage["endpoint"] == base_url.removesuffix("/v1")
    assert all(score == 0.5 for ranked in reranked.values() for _, score in ranked)
    assert f"{pairs} of {pairs} pairs (100%) were undecided" in capsys.readouterr().err
    assert "Ignoring unsupported fields in the request" in log.read_text(errors="replace")  # logprobs, top_logprobs
    # A rerun sends no request: every answer, the probe's too, from the cache.
    assert _evaluate(base_url, f"llm-pointwise:{model}", out) == 0
    usage = _result(out)["r2med_provenance"]["rerank_usage"]
    assert (usage["requests"], usage["cached_answers"], usage["undecided"]) == (0, pairs, pairs)
    assert (usage["probe_requests"], usage["probe_cached_answers"]) == (0, 1)


def test_listwise_against_transformers_serve_keeps_the_first_stage_order(transformers_server, served_env: Path,
                                                                         tmp_path: Path, capsys):
    base_url, model, _ = transformers_server
    out = tmp_path / "out"
    # --max-tokens: without it this server may generate 1024 tokens per window (its default), ~10 s each here
    assert _evaluate(base_url, f"llm-listwise:{model}", out, "--max-tokens", "16") == 0, capsys.readouterr().err
    usage = _result(out)["r2med_provenance"]["rerank_usage"]
    reranked, first_stage = _runs(out)
    windows = len(reranked)  # 10 passages, window 20: one window per query
    assert windows == 5
    # 16 words without a digit: no identifier, so every window is unparsed and keeps the first stage's order
    assert (usage["unparsed_answers"], usage["empty_answers"]) == (windows, 0)
    assert (usage["requests"], usage["cached_answers"], usage["completion_tokens"]) == (windows, 0, 16 * windows)
    assert f"{windows} of {windows} windows (100%) were unparsed or empty" in capsys.readouterr().err
    for query_id, ranked in reranked.items():
        scores = dict(first_stage[query_id])
        kept = [scores[doc_id] for doc_id, _ in ranked]
        assert len(ranked) == 10 and kept == sorted(kept, reverse=True)  # the first stage's order (ties in any order)
        assert kept == [score for _, score in first_stage[query_id][:10]]


def test_generate_against_transformers_serve_writes_one_expansion_per_query(transformers_server, served_env: Path,
                                                                            tmp_path: Path, capsys):
    base_url, model, _ = transformers_server
    out = tmp_path / "expansions"
    command = ["generate", "--task", TASK, "--method", "hyde", "--llm", model, "--name", "tiny-chat", "--base-url", base_url,
               "--max-tokens", "8", "--out", str(out), "--accept-drift", "--quiet"]
    assert main(command) == 0, capsys.readouterr().err
    folder = out / "IIYi-Clinical" / "hyde" / "tiny-chat"
    rows = [json.loads(line) for line in (folder / "query_with_hydoc.jsonl").read_text(encoding="utf-8").splitlines()]
    usage = [json.loads(line) for line in (folder / "usage.jsonl").read_text(encoding="utf-8").splitlines()]
    from r2med_plugin.data.loader import load_task

    assert [row["id"] for row in rows] == load_task(TASK).queries["id"].to_list()  # each query once, in order
    assert all(row["hy_doc"].strip() for row in rows)
    assert [(u["completion_tokens"], u["finish_reason"], u["served_model"]) for u in usage] == [(8, "length", model)] * len(rows)
    manifest = json.loads((folder / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["complete"] is True and manifest["served_models"] == [model] and manifest["generated"] == len(rows)


def test_a_model_id_the_server_does_not_serve_stops_at_once(transformers_server, served_env: Path, tmp_path: Path, capsys):
    """A model id the server does not serve, on the real server: `tiny-chat` (the folder's name, not the id it serves)."""
    base_url, model, _ = transformers_server
    assert _evaluate(base_url, "llm-pointwise:tiny-chat", tmp_path / "out") == 1
    err = capsys.readouterr().err
    assert "refused the model 'tiny-chat' (HTTP 400; the server said: Server is pinned to 'models/tiny-chat'" in err
    assert f"it serves {model}: name one of them in --rerank" in err


def test_the_estimate_counts_the_prompt_tokens_this_server_counts(transformers_server, served_env: Path, tmp_path: Path,
                                                                 monkeypatch, capsys):
    """The model is a local folder with a chat template, so `--estimate-cost` counts with its tokenizer
    and template; the server reports the same prompt tokens for the requests it then gets (the windows keep the first
    stage's order here: the messages are the ones the estimate assumed), and the estimate sent nothing."""
    base_url, model, log = transformers_server
    monkeypatch.chdir(log.parent)  # the served id is the folder's path relative to the server's working folder
    argv = ["evaluate", "--task", TASK, "--retriever", "bm25-lucene", "--rerank", f"llm-listwise:{model}", "--base-url",
            base_url, "--rerank-depth", "10", "--accept-drift", "--quiet", "--max-tokens", "16"]
    served_before = log.read_text(errors="replace").count("/v1/chat/completions")
    assert main([*argv, "--estimate-cost"]) == 0, capsys.readouterr().err
    printed = capsys.readouterr().out
    assert f"tokens counted by the model's tokenizer ({model}) with its chat template" in printed
    assert log.read_text(errors="replace").count("/v1/chat/completions") == served_before  # nothing sent
    out = tmp_path / "out"
    assert main([*argv, "--output", str(out)]) == 0, capsys.readouterr().err
    assert log.read_text(errors="replace").count("/v1/chat/completions") == served_before + 5  # the log does count them
    usage = _result(out)["r2med_provenance"]["rerank_usage"]
    estimate = usage["estimate"]
    assert f"{estimate['requests']} requests (exact); {estimate['prompt_tokens']:,} prompt tokens" in printed
    assert (estimate["requests"], estimate["prompt_tokens"]) == (usage["requests"], usage["prompt_tokens"]) and usage["requests"] == 5
    assert estimate["completion_tokens"] == usage["completion_tokens"] == 16 * 5  # the budget, spent: this model never stops
