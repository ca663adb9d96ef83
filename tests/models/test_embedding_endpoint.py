"""`--retriever openai:<model>`: any OpenAI-compatible /v1/embeddings server, against a loopback server.

Batched and concurrent requests, retried on 429/5xx/dropped connections; every batch cached as it arrives, so a
SIGKILLed run resumes and a rerun sends no request; wrong dimensions, a non-JSON body and a bad key stop the run
with a message that names the fix and never the key.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from r2med_plugin.cli import main
from tests.support.loopback_openai import LoopbackOpenAI

pytestmark = pytest.mark.slow  # loopback servers and CLI child processes

ROOT = Path(__file__).resolve().parents[2]
TASK = "NanoR2MEDBiology"
KEY = "sk-loopback-test"


def _argv(server: LoopbackOpenAI, *extra: str) -> list[str]:
    return ["evaluate", "--task", TASK, "--retriever", "openai:emb", "--base-url", server.base_url, "--api-key-env", "R2MED_TEST_KEY",
            "--quiet", *extra]


@pytest.fixture()
def endpoint_env(mirror_env: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("R2MED_TEST_KEY", KEY)
    monkeypatch.setenv("R2MED_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path


def _scores(printed: str) -> list[str]:
    return [line for line in printed.splitlines() if line.startswith("  ") and "wrote" not in line]


def _texts_in_requests(server: LoopbackOpenAI) -> int:
    return sum(len(body["input"]) for body in server.embedding_requests())


def test_faults_are_retried_and_a_rerun_sends_nothing(endpoint_env: Path, capsys: pytest.CaptureFixture[str]):
    from r2med_plugin.data.loader import load_task

    data = load_task(TASK)
    with LoopbackOpenAI(models=("emb",)) as server:
        server.add_faults("429", "500", "drop", "429")
        assert main(_argv(server, "--batch-size", "7", "--concurrency", "4", "--output", str(endpoint_env / "out"))) == 0
        first = capsys.readouterr()
        bodies = server.embedding_requests()
        queued = len(bodies)
        # every text went out in batches of at most 7, and each answered batch exactly once beyond the 4 faults
        assert max(len(body["input"]) for body in bodies) == 7
        assert _texts_in_requests(server) >= data.corpus.height + data.queries.height
        assert all(body["model"] == "emb" and body["encoding_format"] == "float" and "dimensions" not in body for body in bodies)
        assert main(_argv(server, "--batch-size", "7", "--concurrency", "4")) == 0
        second = capsys.readouterr()
        assert len(server.embedding_requests()) == queued  # a rerun is served from the cache: no request at all
    assert _scores(first.out) == _scores(second.out) and _scores(first.out)  # same scores
    written = [path for path in (endpoint_env / "out").rglob("*") if path.is_file()]
    mteb_file = next(path for path in written if path.name == f"{TASK}.json" and "r2med_provenance" in path.read_text())
    filed = f"emb@{_host(server)}"  # the model id at its server (host-port)
    assert json.loads(mteb_file.read_text())["r2med_provenance"]["model_name"] == filed and mteb_file.parent.parent.name == filed
    for path in [*written, *(endpoint_env / "cache").rglob("*")]:  # the key is never written anywhere
        assert not path.is_file() or KEY.encode() not in path.read_bytes(), path
    assert KEY not in first.out + first.err + second.out + second.err


def test_embeddings_match_the_server_and_dimensions_are_asked_for(endpoint_env: Path):
    from r2med_plugin.models.registry import load_encoder

    with LoopbackOpenAI(models=("emb",)) as server:
        encoder = load_encoder("openai:emb", settings={"base_url": server.base_url, "api_key_env": "R2MED_TEST_KEY", "dimensions": 8,
                                                       "concurrency": 3}, batch_size=2, show_progress=False)
        texts = [f"text number {index} about genes" for index in range(9)]
        got = encoder.encode(texts, kind="document", prompt="passage: ")
        expected = np.asarray([LoopbackOpenAI.embedding("passage: " + text, 8) for text in texts], dtype=np.float32)
        np.testing.assert_array_equal(got, expected)  # in input order although the server answers rows reversed
        assert {body["dimensions"] for body in server.embedding_requests()} == {8}
        assert len(server.embedding_requests()) == 5  # ceil(9 / 2)
    assert "R2MED_TEST_KEY" not in encoder.cache_identity and KEY not in encoder.cache_identity
    assert encoder.cache_identity == f"endpoint:http://127.0.0.1:{server._server.server_address[1]}:emb:dimensions=8"


@pytest.mark.parametrize("fault, words", [
    ("baddim", ["15-dimensional", "--dimensions 16"]),
    ("nonjson", ["not JSON", "--base-url"]),
    ("fewer", ["returned 3 embeddings for 4 texts", "--batch-size"]),
])
def test_bad_answers_stop_the_run_with_the_fix(endpoint_env: Path, capsys: pytest.CaptureFixture[str], fault: str, words: list[str]):
    with LoopbackOpenAI(models=("emb",), embedding_dim=16) as server:
        server.add_faults(fault)
        assert main(_argv(server, "--batch-size", "4", "--concurrency", "1", "--dimensions", "16")) == 2
    error = capsys.readouterr().err
    assert all(word in error for word in words), error
    assert KEY not in error


@pytest.mark.parametrize("fault, field, flag", [("baddim", "dimensions", "drop --dimensions (or give 15)"),
                                               ("fewer", "batch_size", "lower --batch-size")])
def test_a_bad_answer_names_the_setting_that_fixes_it(endpoint_env: Path, fault: str, field: str, flag: str):
    from r2med_plugin.models.embedding_endpoint import EndpointError, EndpointSettingError
    from r2med_plugin.models.registry import load_encoder

    with LoopbackOpenAI(models=("emb",), embedding_dim=16) as server:
        server.add_faults(fault)
        encoder = load_encoder("openai:emb", settings={"base_url": server.base_url, "api_key_env": "R2MED_TEST_KEY",
                                                       "dimensions": 16, "concurrency": 1}, batch_size=4, show_progress=False)
        with pytest.raises(EndpointSettingError) as raised:
            encoder.encode([f"text {index}" for index in range(4)], kind="document")
    assert isinstance(raised.value, EndpointError) and raised.value.field == field
    assert flag in raised.value.render("flag") and f"{field} (--" in str(raised.value)


def test_a_wrong_key_is_never_shown(endpoint_env: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("R2MED_TEST_KEY", "sk-this-is-secret-42")
    with LoopbackOpenAI(models=("emb",)) as server:
        assert main(_argv(server)) == 2
    error = capsys.readouterr().err
    assert "HTTP 401" in error and "$R2MED_TEST_KEY" in error and "sk-this-is-secret-42" not in error


def test_an_unknown_model_names_the_option(endpoint_env: Path, capsys: pytest.CaptureFixture[str]):
    with LoopbackOpenAI(models=("other",)) as server:
        assert main(_argv(server)) == 2
    error = capsys.readouterr().err
    assert "HTTP 404" in error and "--retriever openai:<model>" in error


def test_missing_base_url_and_bad_settings_are_refused(endpoint_env: Path, capsys: pytest.CaptureFixture[str]):
    assert main(["evaluate", "--task", TASK, "--retriever", "openai:emb"]) == 2
    assert "needs --base-url" in capsys.readouterr().err
    assert main(["evaluate", "--task", TASK, "--retriever", "openai:emb", "--base-url", "http://user:pw@127.0.0.1:9/v1"]) == 2
    assert "user:password" in capsys.readouterr().err
    assert main(["evaluate", "--task", TASK, "--retriever", "openai:emb", "--base-url", "http://127.0.0.1:9/v1", "--dimensions", "0"]) == 2
    assert "--dimensions must be a positive integer" in capsys.readouterr().err
    assert main(["evaluate", "--task", TASK, "--retriever", "openai:emb", "--base-url", "http://127.0.0.1:9/v1", "--api-key-env", "R2MED_UNSET_VAR"]) == 2
    assert "R2MED_UNSET_VAR is not set" in capsys.readouterr().err


def test_a_sigkilled_run_resumes_from_its_cached_batches(endpoint_env: Path, capsys: pytest.CaptureFixture[str]):
    from r2med_plugin.data.loader import load_task

    data = load_task(TASK)
    documents, queries = data.corpus.height, data.queries.height
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    with LoopbackOpenAI(models=("emb",), delay=0.05) as server:
        command = [sys.executable, "-m", "r2med_plugin.cli", *_argv(server, "--batch-size", "2", "--concurrency", "1")]
        process = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 120
        while len(server.embedding_requests()) < 8 and time.monotonic() < deadline and process.poll() is None:
            time.sleep(0.02)
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=30)
        assert process.returncode == -signal.SIGKILL, process.stderr.read().decode()[-2000:]
        before = _texts_in_requests(server)
        assert 8 * 2 <= before < documents  # killed part-way through the corpus
        assert main(_argv(server, "--batch-size", "2", "--concurrency", "1")) == 0
        resumed = capsys.readouterr().out
        after = _texts_in_requests(server) - before
    # the batches answered before the kill (all but the one in flight) are not asked for again
    assert after <= documents - (before - 2) + queries, (before, after)
    assert after < documents + queries
    with LoopbackOpenAI(models=("emb",)) as fresh:  # a clean run from an empty cache gives the same scores
        os.environ["R2MED_CACHE_DIR"] = str(endpoint_env / "clean-cache")
        assert main(_argv(fresh, "--batch-size", "2", "--concurrency", "1")) == 0
    clean = capsys.readouterr().out
    assert _scores(resumed) == _scores(clean) and _scores(clean)


def test_a_sweep_reaches_the_endpoint_and_a_rerun_skips_it(endpoint_env: Path):
    """`r2med sweep` takes the same retriever (with its endpoint settings) and files the same result; the key's
    variable name and the concurrency are settings of how, not what, a job computes."""
    import yaml

    from r2med_plugin.sweep import load_spec, run_sweep

    with LoopbackOpenAI(models=("emb",)) as server:
        entry = {"model": "openai:emb", "base_url": server.base_url, "api_key_env": "R2MED_TEST_KEY", "dimensions": 8, "concurrency": 2}
        spec_path = endpoint_env / "spec.yaml"
        spec_path.write_text(yaml.safe_dump({"output": "out", "tasks": [TASK], "retrievers": [entry]}), encoding="utf-8")
        first = run_sweep(load_spec(spec_path), show_progress=False)
        sent = len(server.embedding_requests())
        again = run_sweep(load_spec(spec_path), show_progress=False)
        assert [s.status for s in first.jobs] == ["done"] and [s.status for s in again.jobs] == ["skipped"]
        assert sent > 0 and len(server.embedding_requests()) == sent
        assert {body["dimensions"] for body in server.embedding_requests()} == {8}
        record = json.loads(next((endpoint_env / "out" / ".sweep" / "jobs").glob("*.json")).read_text())
        assert ":openai:http://127.0.0.1:" in record["stamps"]["retriever"] and ":emb:dimensions=8" in record["stamps"]["retriever"]
        assert KEY not in json.dumps(record)
        spec_path.write_text(yaml.safe_dump({"output": "out", "tasks": [TASK], "retrievers": [{"model": "org/m", "dimensions": 8}]}))
        with pytest.raises(ValueError, match="dimensions configure an embedding endpoint"):
            load_spec(spec_path)


def test_timeout_and_max_retries_reach_the_requests(endpoint_env: Path, capsys: pytest.CaptureFixture[str]):
    """--timeout and --max-retries set the client's: a 0.2 s timeout against a server answering after 1 s, with no
    retry, fails after one request and names --timeout; the defaults (120 s, 6 retries) wait for the answer."""
    with LoopbackOpenAI(models=("emb",), delay=1.0) as server:
        code = main(_argv(server, "--timeout", "0.2", "--max-retries", "0", "--batch-size", "1000"))
        assert code == 2
        assert "raise --timeout" in capsys.readouterr().err
        assert len(server.embedding_requests()) == 1
        assert main(_argv(server, "--batch-size", "1000")) == 0
    with pytest.raises(SystemExit):
        main(_argv(server, "--timeout", "0"))
    assert "positive number of seconds" in capsys.readouterr().err


def _host(server: LoopbackOpenAI) -> str:
    """The server's host as result names hold it: host-port."""
    return server.base_url.split("://", 1)[1].split("/", 1)[0].replace(":", "-")


def test_two_servers_and_two_dimensions_are_three_systems(endpoint_env: Path):
    """One model id on two servers, or with another --dimensions, is another system: three leaderboard rows named
    by host-port and dimensions, none hidden as an older "model revision" of another (found by a third trial)."""
    from r2med_plugin.reporting.leaderboard import build_leaderboard

    out = endpoint_env / "out"
    with LoopbackOpenAI(models=("emb",)) as first, LoopbackOpenAI(models=("emb",)) as second:
        for server, extra in ((first, ()), (second, ()), (second, ("--dimensions", "8"))):
            assert main(_argv(server, "--output", str(out), *extra)) == 0
        expected = {f"emb@{_host(first)}", f"emb@{_host(second)}", f"emb@{_host(second)}+dim8"}
    filed = {json.loads(path.read_text())["r2med_provenance"]["model_name"] for path in (out / "results").rglob(f"{TASK}.json")}
    assert filed == expected
    rows = build_leaderboard([out], benchmark="nano")
    assert sorted(row.retriever for row in rows if row.source == "yours") == sorted(expected)
    assert not [row.note for row in rows if "model revision" in row.note]
def test_extra_body_reaches_every_request_and_cuts_texts_vllm_refuses(endpoint_env: Path, capsys: pytest.CaptureFixture[str]):
    """vLLM refuses an input longer than the model's context with HTTP 400 unless the request carries
    truncate_prompt_tokens: --extra-body puts it in every embeddings request; the vectors are the server's of
    the cut texts; the extra body is in the cache key and the revision results are filed under (it changes them)."""
    from r2med_plugin.data.loader import load_task
    from r2med_plugin.models.registry import load_encoder, resolve

    data = load_task(TASK)
    longest = max(len(text.split()) for text in data.corpus["text"].to_list())
    context = longest - 1  # the longest documents do not fit, as 1.3% of a real task's do not fit MiniLM's 256 tokens
    with LoopbackOpenAI(models=("emb",), context_tokens=context) as server:
        assert main(_argv(server, "--batch-size", "50", "--concurrency", "1")) == 2  # one at a time: none left in flight
        refused = capsys.readouterr().err
        assert f"maximum context length is {context} tokens" in refused and "HTTP 400" in refused
        assert "--extra-body '{\"truncate_prompt_tokens\": N}'" in refused  # the fix, in the message
        before = len(server.embedding_requests())
        body = json.dumps({"truncate_prompt_tokens": context})
        assert main(_argv(server, "--batch-size", "50", "--extra-body", body, "--output", str(endpoint_env / "out"))) == 0
        sent = server.embedding_requests()[before:]
        assert sent and all(request["truncate_prompt_tokens"] == context for request in sent)
        assert sum(len(request["input"]) for request in sent) == len(set(data.corpus["text"].to_list())) + data.queries.height
        assert main(_argv(server, "--batch-size", "50", "--extra-body", body)) == 0
        assert len(server.embedding_requests()) == before + len(sent)  # a rerun: every answer from the cache
        settings = {"base_url": server.base_url, "api_key_env": "R2MED_TEST_KEY", "extra_body": {"truncate_prompt_tokens": context}}
        encoder = load_encoder("openai:emb", settings=settings, show_progress=False)
        text = max(data.corpus["text"].to_list(), key=lambda value: len(value.split()))
        got = encoder.encode([text], kind="document")
        cut = " ".join(text.split()[:context])
        np.testing.assert_array_equal(got, np.asarray([LoopbackOpenAI.embedding(cut, 16)], dtype=np.float32))
    plain = load_encoder("openai:emb", settings={"base_url": server.base_url, "api_key_env": "R2MED_TEST_KEY"}, show_progress=False)
    host = f"http://127.0.0.1:{server._server.server_address[1]}"
    assert encoder.cache_identity == f'endpoint:{host}:emb:dimensions=None:extra_body={{"truncate_prompt_tokens":{context}}}'
    assert plain.cache_identity == f"endpoint:{host}:emb:dimensions=None"  # no extra body: the keys of earlier versions
    assert encoder.revision != plain.revision and encoder.revision.startswith("endpoint-")
    assert resolve("openai:emb", settings=settings).stamp() != resolve("openai:emb", settings={"base_url": server.base_url}).stamp()
    mteb_file = next(path for path in (endpoint_env / "out").rglob(f"{TASK}.json") if "r2med_provenance" in path.read_text())
    assert json.loads(mteb_file.read_text())["r2med_provenance"]["model_revision"] == encoder.revision
    assert mteb_file.parent.name == encoder.revision


@pytest.mark.parametrize("extra, words", [
    ("{bad json", ["--extra-body is not valid JSON"]),
    ("[1, 2]", ["--extra-body must be a JSON object"]),
    ('{"dimensions": 8}', ["--extra-body sets 'dimensions'", "--dimensions"]),
    ('{"input": ["x"]}', ["--extra-body sets 'input'"]),
])
def test_a_bad_extra_body_is_refused_before_any_request(endpoint_env: Path, capsys: pytest.CaptureFixture[str], extra: str,
                                                         words: list[str]):
    with LoopbackOpenAI(models=("emb",)) as server:
        assert main(_argv(server, "--extra-body", extra)) == 2
        assert server.embedding_requests() == []
    error = capsys.readouterr().err
    assert all(word in error for word in words), error


def test_a_sweep_retriever_takes_an_extra_body(endpoint_env: Path):
    """retrievers: [{model: openai:<model>, extra_body: {...}}] reaches every request, and is part of the job id and the
    retriever's stamp (it changes the embeddings)."""
    import yaml

    from r2med_plugin.sweep import expand_jobs, load_spec, run_sweep
    from r2med_plugin.sweep.spec import SpecError

    with LoopbackOpenAI(models=("emb",), context_tokens=17) as server:
        entry = {"model": "openai:emb", "base_url": server.base_url, "api_key_env": "R2MED_TEST_KEY"}
        spec_path = endpoint_env / "spec.yaml"
        spec_path.write_text(yaml.safe_dump({"output": "out", "tasks": [TASK],
                                             "retrievers": [entry | {"extra_body": {"truncate_prompt_tokens": 17}}]}))
        spec = load_spec(spec_path)
        assert [status.status for status in run_sweep(spec, show_progress=False).jobs] == ["done"]
        assert all(body["truncate_prompt_tokens"] == 17 for body in server.embedding_requests())
    record = json.loads(next((endpoint_env / "out" / ".sweep" / "jobs").glob("*.json")).read_text())
    assert record["stamps"]["retriever"].endswith(':emb:dimensions=None:extra_body={"truncate_prompt_tokens":17}')
    spec_path.write_text(yaml.safe_dump({"output": "out", "tasks": [TASK], "retrievers": [entry]}))
    assert [job.job_id for job in expand_jobs(load_spec(spec_path))] != [job.job_id for job in expand_jobs(spec)]
    spec_path.write_text(yaml.safe_dump({"output": "out", "tasks": [TASK], "retrievers": [entry | {"extra_body": {"model": "x"}}]}))
    with pytest.raises(SpecError) as raised:
        load_spec(spec_path)
    message = str(raised.value)  # the spec's entry, the setting under its key (not a flag) and the field it may not set
    assert "`retrievers[0]`" in message and "extra_body sets 'model'" in message and "--extra-body" not in message


def test_a_404_names_the_url_tried_and_both_base_url_forms(endpoint_env: Path, capsys: pytest.CaptureFixture[str]):
    """infinity serves /embeddings at the root, vLLM and the others under /v1: a 404 for the route names the
    URL that was tried and both --base-url forms (it said "check that --base-url ends in /v1", the opposite of the fix
    for infinity)."""
    with LoopbackOpenAI(models=("emb",), route_prefix="") as infinity:  # infinity's routes
        root = infinity.base_url
        assert main(["evaluate", "--task", TASK, "--retriever", "openai:emb", "--base-url", f"{root}/v1",
                     "--api-key-env", "R2MED_TEST_KEY", "--quiet"]) == 2
        error = capsys.readouterr().err
        assert f"POST {root}/v1/embeddings was not found (HTTP 404)" in error
        assert f"under /v1 (vLLM, TEI, Ollama, llama.cpp's server, LiteLLM, OpenAI: --base-url {root}/v1)" in error
        assert f"at the root (infinity: --base-url {root})" in error and "ends in /v1" not in error
        assert main(["evaluate", "--task", TASK, "--retriever", "openai:emb", "--base-url", root, "--api-key-env",
                     "R2MED_TEST_KEY", "--quiet"]) == 0  # the root form reaches infinity's routes
        assert infinity.embedding_requests()
    with LoopbackOpenAI(models=("emb",)) as vllm:  # routes under /v1, --base-url without it
        root = vllm.base_url.removesuffix("/v1")
        assert main(["evaluate", "--task", TASK, "--retriever", "openai:emb", "--base-url", root, "--api-key-env",
                     "R2MED_TEST_KEY", "--quiet"]) == 2
    error = capsys.readouterr().err
    assert f"POST {root}/embeddings was not found" in error and f"--base-url {root}/v1" in error


@pytest.mark.parametrize("mode, words", [
    ("refuse", ["HTTP 400", "does not support matryoshka", "the server refused --dimensions 8", "drop --dimensions"]),
    ("ignore", ["returned 16-dimensional embeddings", "the server ignored --dimensions and answered longer ones"]),
])
def test_dimensions_the_server_refuses_or_ignores_say_so(endpoint_env: Path, capsys: pytest.CaptureFixture[str], mode: str,
                                                         words: list[str]):
    """vLLM refuses --dimensions for a model without Matryoshka support (HTTP 400); a server that ignores it answers
    its full width: the message says which the server did, and the fix."""
    with LoopbackOpenAI(models=("emb",), embedding_dim=16, dimensions_mode=mode) as server:
        assert main(_argv(server, "--dimensions", "8")) == 2
    error = capsys.readouterr().err
    assert all(word in error for word in words), error


def test_dimensions_cut_without_renormalising_are_normalised_before_scoring(endpoint_env: Path):
    """infinity answers --dimensions N with the first N values of the full vector, not renormalised: the answer has N
    dimensions (checked), and embeddings are L2-normalised before cosine scoring, so the cut vectors score as
    renormalised ones."""
    from r2med_plugin.models.registry import load_encoder
    from r2med_plugin.retrieval.dense import encode_cached

    texts = ["gene expression in the liver", "protein folding and chaperones"]
    with LoopbackOpenAI(models=("emb",), embedding_dim=16, dimensions_mode="cut") as server:
        encoder = load_encoder("openai:emb", settings={"base_url": server.base_url, "api_key_env": "R2MED_TEST_KEY",
                                                       "dimensions": 8}, show_progress=False)
        raw = encoder.encode(texts, kind="document")
        normalised = encode_cached(encoder, texts, kind="document", dataset_revision="test-cut")
    full = np.asarray([LoopbackOpenAI.embedding(text, 16) for text in texts], dtype=np.float32)
    np.testing.assert_array_equal(raw, full[:, :8])  # cut, as the server sent it
    assert not np.allclose(np.linalg.norm(raw, axis=1), 1.0)
    np.testing.assert_allclose(normalised, full[:, :8] / np.linalg.norm(full[:, :8], axis=1, keepdims=True), rtol=1e-6)


def test_a_litellm_proxy_refusing_a_key_names_its_master_key(endpoint_env: Path, capsys: pytest.CaptureFixture[str],
                                                            monkeypatch: pytest.MonkeyPatch):
    """LiteLLM's proxy without a database answers a key it does not know with HTTP 400 "No connected db.": the message
    keeps the server's text and adds that the proxy may need its master key; the key itself is never shown."""
    monkeypatch.setenv("R2MED_TEST_KEY", "sk-wrong-key-123456")
    with LoopbackOpenAI(models=("emb",), wrong_key="litellm") as server:
        assert main(_argv(server, "--batch-size", "1000")) == 2
        assert len(server.embedding_requests()) == 1  # a 400 is not retried
    error = capsys.readouterr().err
    assert "HTTP 400" in error and "No connected db." in error and "master key" in error and "$R2MED_TEST_KEY" in error
    assert "on every retry" not in error and "sk-wrong-key-123456" not in error
