"""r2med generate against a loopback OpenAI-compatible server, driving the real openai client.

Expected prompts are the official templates as written in R2MED/R2MED src/instrcution.py (commit
62b7074), typed here from the source, filled in by hand; LaMer's passages come from the official
procedure rebuilt here with gensim's LuceneBM25Model (what eval_BM25.py uses) and Python's stable sort.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
import traceback
from pathlib import Path

import pytest

import r2med_plugin
from r2med_plugin.cli import main
from r2med_plugin.generation import GenerationError, generate_expansions
from r2med_plugin.retrieval.analyzer import analyze_many
from r2med_plugin.retrieval.bm25 import bm25_search
from r2med_plugin.rules import SettingError
from tests.support.loopback_openai import LoopbackOpenAI

KEY = "sk-loopback-SECRET-7f3a9c21"
SYSTEM = "You are a helpful assistant."
# src/instrcution.py, hyde / lamer, "Stack-Biology" and "PMCPatients"
HYDE_BIOLOGY = "Please write a passage to help answer the Biology post.\nPost: {TEXT}\nPassage: "
HYDE_PMC_CLINICAL = "Please write a similar case to help diagnose the Clinical Case.\nCase: {TEXT}\nSimilar Case: "
LAMER_BIOLOGY = (
    "Give a Biology post and its possible relevant passages (most of these passages are wrong). Please write a correct "
    "passage that help answer the post.\nJust output the correct passage, don't explanation.\n\nPost: {TEXT}\n\n"
    "Possible Relevant Passages: {PASSAGE}"
)
QUERY2DOC_BIOLOGY_HEAD = (
    "Write a passage that help answer the Biology post.\n\n###Examples:###\nPost: What does a virus need to transmit "
    "through air between humans?"
)
QUERY2DOC_BIOLOGY_TAIL = "et al., 2013; Phumichai et al., 2015).\n\n\n###Real Test:###\nPost: {TEXT}\nPassage: "
# sha256 of the whole template string as the official module builds it (examples from src/example.py)
QUERY2DOC_BIOLOGY_SHA256 = "c1909e50dc7f8f1c8d62bb9f3384999d4c17a3f9d525d5141dea44318afcfa94"


@pytest.fixture()
def server(monkeypatch: pytest.MonkeyPatch):
    with LoopbackOpenAI(api_key=KEY, max_seconds=120) as loopback:
        monkeypatch.setenv("OPENAI_API_KEY", KEY)
        yield loopback


def _generate(server: LoopbackOpenAI, out: Path, method: str, task: str = "R2MEDBiology", **options):
    options.setdefault("show_progress", False)
    return generate_expansions(task, method, "test-llm", server.base_url, out=out, **options)


def _lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def _user_prompts(server: LoopbackOpenAI) -> list[str]:
    return [body["messages"][1]["content"] for body in server.completions()]


def _official_top10(data) -> dict[str, list[str]]:
    """eval_BM25.py's ranking: gensim LuceneBM25Model scores, sorted(..., reverse=True) (stable), top 10."""
    from gensim.corpora import Dictionary
    from gensim.models import LuceneBM25Model
    from gensim.similarities import SparseMatrixSimilarity

    doc_ids, documents = data.corpus["id"].to_list(), data.corpus["text"].to_list()
    corpus = analyze_many(documents)
    dictionary = Dictionary(corpus)
    model = LuceneBM25Model(dictionary=dictionary, k1=0.9, b=0.4)
    index = SparseMatrixSimilarity(model[list(map(dictionary.doc2bow, corpus))], num_docs=len(corpus), num_terms=len(dictionary),
                                   normalize_queries=False, normalize_documents=False)
    ranking = {}
    for query_id, tokens in zip(data.queries["id"].to_list(), analyze_many(data.queries["text"].to_list()), strict=True):
        scores = index[model[dictionary.doc2bow(tokens)]].tolist()
        ranking[query_id] = [d for d, _ in sorted(zip(doc_ids, scores, strict=True), key=lambda pair: pair[1], reverse=True)][:10]
    return ranking


def _official_passages(doc_ids: list[str], doc_text: dict[str, str]) -> str:
    out = ""
    for number, doc_id in enumerate(doc_ids[:10]):
        words = doc_text[doc_id].replace("\n", " ").split()
        out += f"\n[{number + 1}]. " + " ".join(words[:512] if len(words) > 512 else words)
    return out


# --- the exact requests --------------------------------------------------------------------------


def test_hyde_and_query2doc_send_the_official_prompts(server, mirror_env, tmp_path):
    data = r2med_plugin.load_task("R2MEDBiology")
    texts = dict(zip(data.queries["id"].to_list(), data.queries["text"].to_list(), strict=True))
    _generate(server, tmp_path / "exp", "hyde")
    bodies = server.completions()
    assert len(bodies) == len(texts) == 5  # one request per evaluated query
    assert sorted(b["messages"][1]["content"] for b in bodies) == sorted(HYDE_BIOLOGY.replace("{TEXT}", t) for t in texts.values())
    for body in bodies:
        assert body["messages"][0] == {"role": "system", "content": SYSTEM} and len(body["messages"]) == 2
        assert body["model"] == "test-llm"
        # the official OpenAI-path defaults: temperature 0.8, top_p 0.8, nothing else
        assert (body["temperature"], body["top_p"]) == (0.8, 0.8) and "max_tokens" not in body and "seed" not in body

    server.requests.clear()
    _generate(server, tmp_path / "exp", "query2doc")
    prompts = _user_prompts(server)
    assert len(prompts) == 5
    template = next(iter(prompts)).replace(next(t for t in texts.values() if t in prompts[0]), "{TEXT}")
    assert template.startswith(QUERY2DOC_BIOLOGY_HEAD) and template.endswith(QUERY2DOC_BIOLOGY_TAIL)
    assert hashlib.sha256(template.encode("utf-8")).hexdigest() == QUERY2DOC_BIOLOGY_SHA256
    assert sorted(prompts) == sorted(template.replace("{TEXT}", t) for t in texts.values())


def test_clinical_task_uses_its_own_template(server, mirror_env, tmp_path):
    data = r2med_plugin.load_task("R2MEDPMCClinical")
    _generate(server, tmp_path / "exp", "hyde", task="R2MEDPMCClinical")
    assert sorted(_user_prompts(server)) == sorted(HYDE_PMC_CLINICAL.replace("{TEXT}", t) for t in data.queries["text"].to_list())


def test_sampling_presets_and_overrides_reach_the_request(server, mirror_env, tmp_path):
    _generate(server, tmp_path / "a", "hyde", preset="vllm")
    body = server.completions()[0]
    assert (body["temperature"], body["seed"], body["max_tokens"]) == (0.7, 42, 10240) and "top_p" not in body
    server.requests.clear()
    _generate(server, tmp_path / "b", "hyde", temperature=0.25, top_p=0.5, max_tokens=64, seed=7,
              extra_body={"chat_template_kwargs": {"enable_thinking": True}})
    body = server.completions()[0]
    assert (body["temperature"], body["top_p"], body["max_tokens"], body["seed"]) == (0.25, 0.5, 64, 7)
    assert body["chat_template_kwargs"] == {"enable_thinking": True}
    manifest = json.loads((tmp_path / "b" / "Biology" / "hyde" / "test-llm" / "manifest.json").read_text())
    assert manifest["sampling"] == {"temperature": 0.25, "top_p": 0.5, "max_tokens": 64, "seed": 7}


def test_lamer_passages_are_the_official_bm25_top10_cut_to_512_words(server, mirror_copy_env, tmp_path):
    corpus_path = mirror_copy_env / "R2MED" / "Biology" / "corpus.jsonl"
    rows = _lines(corpus_path)
    long_words = [f"insulin{i % 7} glucose" if i % 50 == 0 else f"word{i}" for i in range(700)]
    rows[5]["text"] = "longdoc insulin glucose pancreas\n" + " ".join(long_words[:300]) + "\n\n" + " ".join(long_words[300:])
    corpus_path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    data = r2med_plugin.load_task("R2MEDBiology")
    doc_text = dict(zip(data.corpus["id"].to_list(), data.corpus["text"].to_list(), strict=True))
    ranking = _official_top10(data)
    assert rows[5]["id"] in ranking["biology-q-000"]  # the long document is among the passages of query 0

    _generate(server, tmp_path / "exp", "lamer")
    texts = dict(zip(data.queries["id"].to_list(), data.queries["text"].to_list(), strict=True))
    expected = {LAMER_BIOLOGY.format(TEXT=texts[q], PASSAGE=_official_passages(ranking[q], doc_text)) for q in texts}
    prompts = _user_prompts(server)
    assert len(prompts) == 5 and set(prompts) == expected
    long_item = next(p for p in prompts if texts["biology-q-000"] in p).split("\n[")
    cut = next(item for item in long_item if item.split("]. ", 1)[-1].startswith("longdoc"))
    assert len(cut.split("]. ", 1)[1].split()) == 512


def test_lamer_with_a_trec_or_topk_run_file(server, mirror_env, tmp_path):
    data = r2med_plugin.load_task("R2MEDBiology")
    doc_ids = data.corpus["id"].to_list()
    doc_text = dict(zip(doc_ids, data.corpus["text"].to_list(), strict=True))
    texts = dict(zip(data.queries["id"].to_list(), data.queries["text"].to_list(), strict=True))
    # TREC: ranked by score (the rank column is not trusted); ties keep file order
    trec = tmp_path / "first.trec"
    lines = [f"{q} Q0 {d} {r + 1} {float(len(doc_ids) - r) if r != 3 else 1000.0} mine" for q in texts for r, d in enumerate(reversed(doc_ids))]
    trec.write_text("\n".join(lines) + "\n")
    _generate(server, tmp_path / "a", "lamer", first_stage=str(trec))
    reversed_ids = list(reversed(doc_ids))
    order = [reversed_ids[3]] + reversed_ids[:3] + reversed_ids[4:]
    assert set(_user_prompts(server)) == {LAMER_BIOLOGY.format(TEXT=t, PASSAGE=_official_passages(order, doc_text)) for t in texts.values()}
    # the official topk_docs JSONL: kept in its order
    server.requests.clear()
    topk = tmp_path / "bm25.jsonl"
    topk.write_text("".join(json.dumps({"id": q, "topk_pid": [[d, 1.0] for d in doc_ids[::2]]}) + "\n" for q in texts))
    _generate(server, tmp_path / "b", "lamer", first_stage=str(topk))
    assert set(_user_prompts(server)) == {LAMER_BIOLOGY.format(TEXT=t, PASSAGE=_official_passages(doc_ids[::2], doc_text)) for t in texts.values()}
    with pytest.raises(ValueError, match="lamer only"):
        _generate(server, tmp_path / "c", "hyde", first_stage=str(topk))


# --- reliability ---------------------------------------------------------------------------------


@pytest.mark.slow
def test_faults_are_retried_and_every_query_lands_once(server, mirror_env, tmp_path):
    server.add_faults("429", "500", "drop", "slow:6")  # the slow answer comes after the 2 s timeout: retried
    report = _generate(server, tmp_path / "exp", "hyde", concurrency=1, timeout=2.0)
    assert report.complete and report.generated == 5 and not report.failures
    assert len(server.completions()) == 5 + 4  # each fault cost exactly one retry
    data = r2med_plugin.load_task("R2MEDBiology")
    rows = _lines(tmp_path / "exp" / "Biology" / "hyde" / "test-llm" / "query_with_hydoc.jsonl")
    assert [r["id"] for r in rows] == data.queries["id"].to_list()  # once each, in the task's order
    assert [sorted(r) for r in rows] == [["doc_id", "hy_doc", "id", "text"]] * 5
    assert rows[0]["doc_id"] == list(data.qrels[rows[0]["id"]])


def test_a_query_failing_every_retry_is_left_for_the_next_run(server, mirror_env, tmp_path):
    server.add_faults("500", "500")
    with pytest.raises(GenerationError, match="1 of 5 queries failed after 1 retries.*run the same command again") as error:
        _generate(server, tmp_path / "exp", "hyde", concurrency=1, max_retries=1)
    assert "HTTP 500" in str(error.value)
    folder = tmp_path / "exp" / "Biology" / "hyde" / "test-llm"
    assert len(_lines(folder / "query_with_hydoc.jsonl")) == 4
    assert json.loads((folder / "manifest.json").read_text())["complete"] is False
    server.requests.clear()
    report = _generate(server, tmp_path / "exp", "hyde")
    assert (report.already_done, report.generated) == (4, 1) and len(server.completions()) == 1
    assert json.loads((folder / "manifest.json").read_text())["complete"] is True


def _subprocess_env(mirror: Path, tmp_path: Path) -> dict[str, str]:
    env = dict(os.environ, OPENAI_API_KEY=KEY, R2MED_DATA_DIR=str(mirror), R2MED_ACCEPT_DRIFT="1")
    env["PYTHONPATH"] = str(Path(__file__).resolve().parents[2])
    return env


def test_a_killed_run_resumes_with_every_query_exactly_once(server, mirror_env, tmp_path):
    out = tmp_path / "exp"
    file = out / "Biology" / "hyde" / "test-llm" / "query_with_hydoc.jsonl"
    server.delay = 0.4
    command = [sys.executable, "-m", "r2med_plugin.cli", "generate", "--task", "R2MEDBiology", "--method", "hyde",
               "--llm", "test-llm", "--base-url", server.base_url, "--out", str(out), "--concurrency", "1", "--quiet"]
    process = subprocess.Popen(command, env=_subprocess_env(mirror_env, tmp_path), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline and (not file.is_file() or len(file.read_bytes().splitlines()) < 2):
        time.sleep(0.02)
    process.send_signal(signal.SIGKILL)
    process.communicate(timeout=30)
    finished = [row["id"] for row in _lines(file)]
    assert 2 <= len(finished) < 5 and len(set(finished)) == len(finished)

    server.delay = 0.0
    before = len(server.completions())
    report = _generate(server, out, "hyde")
    assert (report.already_done, report.generated) == (len(finished), 5 - len(finished))
    data = r2med_plugin.load_task("R2MEDBiology")
    texts = dict(zip(data.queries["id"].to_list(), data.queries["text"].to_list(), strict=True))
    resumed = [body["messages"][1]["content"] for body in server.completions()[before:]]
    assert sorted(resumed) == sorted(HYDE_BIOLOGY.replace("{TEXT}", texts[q]) for q in texts if q not in finished)
    assert [row["id"] for row in _lines(file)] == list(texts)


def test_a_half_written_last_line_is_cut_off_on_resume(server, mirror_env, tmp_path):
    _generate(server, tmp_path / "exp", "hyde")
    file = tmp_path / "exp" / "Biology" / "hyde" / "test-llm" / "query_with_hydoc.jsonl"
    rows = _lines(file)
    file.write_text("".join(json.dumps(r) + "\n" for r in rows[:3]) + json.dumps(rows[3])[:25], encoding="utf-8")
    server.requests.clear()
    report = _generate(server, tmp_path / "exp", "hyde")
    assert (report.already_done, report.generated) == (3, 2) and len(server.completions()) == 2
    assert [r["id"] for r in _lines(file)] == [r["id"] for r in rows]


def test_another_configuration_is_refused_unless_overwritten(server, mirror_env, tmp_path):
    _generate(server, tmp_path / "exp", "hyde")
    with pytest.raises(SettingError) as refused:
        _generate(server, tmp_path / "exp", "hyde", temperature=0.5)
    assert refused.value.field == "out" and "another configuration (sampling: " in str(refused.value)
    assert "0.8" in str(refused.value) and "0.5" in str(refused.value)
    assert refused.value.render("flag").endswith("Use another --name or --out, or pass --overwrite to start that folder again")
    server.requests.clear()
    _generate(server, tmp_path / "exp", "hyde", temperature=0.5, overwrite=True)
    assert len(server.completions()) == 5 and server.completions()[0]["temperature"] == 0.5


# --- errors and the key --------------------------------------------------------------------------


def _all_text_under(folder: Path) -> str:
    return "".join(p.read_text(encoding="utf-8", errors="replace") for p in folder.rglob("*") if p.is_file())


def test_a_bad_key_stops_with_a_clear_message_and_is_never_shown(server, mirror_env, tmp_path, monkeypatch, capsys, caplog):
    wrong = "sk-wrong-SECRET-0d9e8f7a6b"
    monkeypatch.setenv("MY_KEY", wrong)
    caplog.set_level("DEBUG")
    command = ["generate", "--task", "R2MEDBiology", "--method", "hyde", "--llm", "test-llm", "--base-url", server.base_url,
               "--api-key-env", "MY_KEY", "--out", str(tmp_path / "exp"), "--quiet"]
    assert main(command) == 1
    captured = capsys.readouterr()
    assert "HTTP 401" in captured.err and "$MY_KEY" in captured.err and "Incorrect API key provided: ***" in captured.err
    assert server.requests and not any(r["authorized"] for r in server.requests)  # the server did see the wrong key...
    for text in (captured.out, captured.err, caplog.text, _all_text_under(tmp_path / "exp")):
        assert wrong not in text  # ...and nothing we print, log or write repeats it
    with pytest.raises(GenerationError) as error:
        generate_expansions("R2MEDBiology", "hyde", "test-llm", server.base_url, api_key_env="MY_KEY", out=tmp_path / "exp", show_progress=False)
    rendered = "".join(traceback.format_exception(error.value))
    assert wrong not in rendered and wrong not in repr(error.value) and error.value.__cause__ is None
    monkeypatch.delenv("MY_KEY")
    with pytest.raises(ValueError, match="MY_KEY is not set"):
        generate_expansions("R2MEDBiology", "hyde", "test-llm", server.base_url, api_key_env="MY_KEY", out=tmp_path / "exp")


def test_an_unknown_model_names_the_served_ones(server, mirror_env, tmp_path, capsys):
    command = ["generate", "--task", "R2MEDBiology", "--method", "hyde", "--llm", "no-such-llm", "--base-url", server.base_url,
               "--out", str(tmp_path / "exp"), "--quiet"]
    assert main(command) == 1
    err = capsys.readouterr().err
    assert "unknown model 'no-such-llm'" in err and "HTTP 404" in err and "the endpoint serves: test-llm" in err


def test_a_server_pinned_to_another_model_stops_at_once_naming_it(mirror_env, tmp_path, monkeypatch, capsys):
    """`transformers serve <path>` refuses another model id with HTTP 400 {"detail": ...}: the run stops at the first
    refusal with the served id and the server's reason (was: "5 of 5 queries failed ... HTTP 400 on every retry", no
    reason)."""
    with LoopbackOpenAI(api_key=KEY, models=("/models/tiny-chat",), pinned=True) as pinned:
        monkeypatch.setenv("OPENAI_API_KEY", KEY)
        command = ["generate", "--task", "R2MEDBiology", "--method", "hyde", "--llm", "tiny-chat", "--base-url", pinned.base_url,
                   "--concurrency", "1", "--out", str(tmp_path / "exp"), "--quiet"]
        assert main(command) == 1
    err = capsys.readouterr().err
    assert "refused the model 'tiny-chat' (HTTP 400; the server said: Server is pinned to '/models/tiny-chat'; requested" in err
    assert "it serves /models/tiny-chat: name one of them in --llm" in err and not (tmp_path / "exp").exists()


def test_the_key_and_url_credentials_never_reach_the_files(server, mirror_env, tmp_path):
    # user:password@ would go out as Basic auth (and be echoed back by a server); a query string breaks the paths
    for url in (server.base_url.replace("http://", "http://alice:url-SECRET-pass@"), server.base_url + "?token=query-SECRET-tok"):
        with pytest.raises(ValueError, match="plain http") as error:
            generate_expansions("R2MEDBiology", "hyde", "test-llm", url, out=tmp_path / "x", show_progress=False)
        assert "SECRET" not in str(error.value)
    assert not server.requests
    _generate(server, tmp_path / "exp", "lamer")
    manifest = json.loads((tmp_path / "exp" / "Biology" / "lamer" / "test-llm" / "manifest.json").read_text())
    assert manifest["endpoint_host"] == server.base_url.removesuffix("/v1")
    assert KEY not in _all_text_under(tmp_path / "exp") and "SECRET" not in _all_text_under(tmp_path)


def test_manifest_records_the_run(server, mirror_env, tmp_path):
    report = _generate(server, tmp_path / "exp", "hyde")
    folder = tmp_path / "exp" / "Biology" / "hyde" / "test-llm"
    manifest = json.loads((folder / "manifest.json").read_text())
    usage = _lines(folder / "usage.jsonl")
    prompt_tokens = sum(len(SYSTEM.split()) + len(b["messages"][1]["content"].split()) for b in server.completions())
    assert manifest["tokens"]["prompt"] == prompt_tokens == report.prompt_tokens == sum(u["prompt_tokens"] for u in usage)
    assert manifest["tokens"]["completion"] == report.completion_tokens > 0
    assert manifest["model"] == "test-llm" and manifest["served_models"] == ["test-llm"] and manifest["complete"] is True
    assert manifest["prompts_source"]["commit"] == "62b7074600407f7776fbec6f55a4db96eb237ea4"
    assert len(manifest["prompts_sha256"]) == 64 and manifest["started"] <= manifest["finished"]
    assert manifest["sampling"] == {"temperature": 0.8, "top_p": 0.8, "max_tokens": None, "seed": None}


# --- evaluating what was generated ---------------------------------------------------------------


@pytest.mark.parametrize("method", ["hyde", "query2doc", "lamer"])
def test_local_expansion_equals_a_hand_built_bm25_run(server, mirror_env, tmp_path, method):
    _generate(server, tmp_path / "exp", method, task="R2MEDBioinformatics")
    result = r2med_plugin.evaluate_task("R2MEDBioinformatics", "bm25-lucene", expansion=f"local:{tmp_path}/exp/{method}/test-llm",
                                        show_progress=False)
    data = r2med_plugin.load_task("R2MEDBioinformatics")
    hy_doc = {r["id"]: r["hy_doc"] for r in _lines(tmp_path / "exp" / "Bioinformatics" / method / "test-llm" / "query_with_hydoc.jsonl")}
    rule = {"hyde": lambda t, h: h, "query2doc": lambda t, h: t * 2 + " " + h, "lamer": lambda t, h: t + " " + h}[method]
    texts = [rule(t, hy_doc[q]) for q, t in zip(data.queries["id"].to_list(), data.queries["text"].to_list(), strict=True)]
    import polars as pl

    expected = bm25_search(data.corpus, data.queries.with_columns(text=pl.Series(texts)), show_progress=False)
    assert result.scores == r2med_plugin.evaluate_run(data.qrels, expected)


def test_a_reasoning_model_contributes_only_its_answer(mirror_env, tmp_path, monkeypatch):
    def reply(body):
        return {"content": "insulin glucose pancreas diabetes", "reasoning_content": "tumor chemotherapy metastasis oncology"}

    with LoopbackOpenAI(api_key=KEY, reply=reply) as server:
        monkeypatch.setenv("OPENAI_API_KEY", KEY)
        _generate(server, tmp_path / "exp", "hyde", name="my-reasoner")
    folder = tmp_path / "exp" / "Biology" / "hyde" / "my-reasoner"
    rows = _lines(folder / "query_with_hydoc.jsonl")
    assert rows[0]["hy_doc"] == "<think>\ntumor chemotherapy metastasis oncology\n</think>\n\ninsulin glucose pancreas diabetes"
    assert json.loads((folder / "manifest.json").read_text())["reasoning"] is True
    result = r2med_plugin.evaluate_task("R2MEDBiology", "bm25-lucene", expansion=f"local:{tmp_path}/exp/hyde/my-reasoner", show_progress=False)
    data = r2med_plugin.load_task("R2MEDBiology")
    import polars as pl

    answer_only = bm25_search(data.corpus, data.queries.with_columns(text=pl.lit("insulin glucose pancreas diabetes")), show_progress=False)
    assert result.scores == r2med_plugin.evaluate_run(data.qrels, answer_only)


def test_two_commands_to_a_leaderboard_row_beside_the_released_one(server, mirror_env, tmp_path, capsys):
    out, results = tmp_path / "exp", tmp_path / "results"
    tasks = ["R2MEDBiology", "R2MEDBioinformatics"]
    server.reply = lambda body: "cardiac arrhythmia ventricle ecg"  # a poor LLM: its rows must not look like the released one's
    assert main(["generate", "--task", *tasks, "--method", "hyde", "--llm", "test-llm", "--name", "qwen-7b",
                 "--base-url", server.base_url, "--out", str(out), "--quiet"]) == 0
    printed = capsys.readouterr().out
    assert f"--expansion local:{out / 'hyde' / 'qwen-7b'}" in printed
    assert main(["evaluate", "--task", *tasks, "--retriever", "bm25-lucene", "--expansion", f"local:{out}/hyde/qwen-7b",
                 "--output", str(results), "--quiet"]) == 0
    assert main(["evaluate", "--task", *tasks, "--retriever", "bm25-lucene", "--expansion", "hyde/qwen-7b",
                 "--output", str(results), "--quiet"]) == 0
    from r2med_plugin.reporting.leaderboard import build_leaderboard
    from r2med_plugin.reporting.render import render

    rows = build_leaderboard([results / "results"])
    mine = {(row.llm, row.retriever, row.note) for row in rows}
    folder_id = hashlib.sha256(str(out.resolve()).encode()).hexdigest()[:8]
    # the fixture mirror records no download metadata, and its counts are not the dataset card's
    unverified = "pinned commits, unverified mirror files, counts differ from the dataset card"
    assert mine == {("qwen-7b", "bm25-lucene", f"hyde, generated locally @{folder_id}, {unverified}"),
                    ("qwen-7b", "bm25-lucene", f"hyde, {unverified}")}
    local = next(row for row in rows if "locally" in row.note)
    released = next(row for row in rows if row.note == f"hyde, {unverified}")
    assert local.scores["Biology"] < released.scores["Biology"] == 100.0  # separate results, no overwriting
    assert f"| qwen-7b | bm25-lucene (hyde, generated locally @{folder_id}, {unverified}) |" in render(rows)
    assert (results / "results" / f"local__hyde__qwen-7b@{folder_id}+bm25-lucene").is_dir()


def test_a_missing_local_expansion_names_the_command_that_makes_it(mirror_env, tmp_path):
    with pytest.raises(FileNotFoundError, match="r2med generate --task R2MEDBiology --method hyde --name nope"):
        r2med_plugin.evaluate_task("R2MEDBiology", "bm25-lucene", expansion=f"local:{tmp_path}/hyde/nope", show_progress=False)
    with pytest.raises(ValueError, match="not an expansion method"):
        r2med_plugin.evaluate_task("R2MEDBiology", "bm25-lucene", expansion=f"local:{tmp_path}/hype/x", show_progress=False)


def test_ir_datasets_serves_a_local_folder_as_gar_queries(server, mirror_env, tmp_path, monkeypatch):
    monkeypatch.setenv("IR_DATASETS_HOME", str(tmp_path / "irds"))
    import ir_datasets

    from r2med_plugin.integrations.ir_datasets import R2MEDGarQuery, register_local_expansion

    _generate(server, tmp_path / "exp", "lamer", task="R2MEDBioinformatics")
    dataset_id = register_local_expansion(str(tmp_path / "exp" / "lamer" / "test-llm"), "R2MEDBioinformatics")
    folder_id = hashlib.sha256(str((tmp_path / "exp").resolve()).encode()).hexdigest()[:8]
    assert dataset_id == f"r2med/bioinformatics/local/lamer/test-llm@{folder_id}"
    dataset = ir_datasets.load(dataset_id)
    rows = _lines(tmp_path / "exp" / "Bioinformatics" / "lamer" / "test-llm" / "query_with_hydoc.jsonl")
    assert list(dataset.queries_iter()) == [R2MEDGarQuery(r["id"], r["text"], r["hy_doc"]) for r in rows]
    assert dataset.queries_count() == 5
    assert ir_datasets.docs_parent_id(dataset_id) == "r2med/bioinformatics"
    assert register_local_expansion(str(tmp_path / "exp" / "lamer" / "test-llm"), "R2MEDBioinformatics") == dataset_id  # idempotent
    # Another folder with the same method and LLM name gets its own id; the first id keeps serving its folder.
    _generate(server, tmp_path / "other-exp", "lamer", task="R2MEDBioinformatics")
    other_rows = _lines(tmp_path / "other-exp" / "Bioinformatics" / "lamer" / "test-llm" / "query_with_hydoc.jsonl")
    other_rows = [{**row, "hy_doc": row["hy_doc"] + " (second folder)"} for row in other_rows]
    (tmp_path / "other-exp" / "Bioinformatics" / "lamer" / "test-llm" / "query_with_hydoc.jsonl").write_text(
        "".join(json.dumps(row) + "\n" for row in other_rows))
    other_id = register_local_expansion(str(tmp_path / "other-exp" / "lamer" / "test-llm"), "R2MEDBioinformatics")
    assert other_id != dataset_id
    assert [q.hy_doc for q in ir_datasets.load(other_id).queries_iter()] == [r["hy_doc"] for r in other_rows]
    assert list(ir_datasets.load(dataset_id).queries_iter()) == [R2MEDGarQuery(r["id"], r["text"], r["hy_doc"]) for r in rows]


def test_dense_with_a_local_expansion_follows_the_official_rules(server, mirror_env, tmp_path):
    from r2med_plugin.models.hashing import HashingEncoder
    from r2med_plugin.retrieval.dense import encode_cached, normalise, search_vectors

    data = r2med_plugin.load_task("R2MEDMedQADiag")
    rev, ids = data.revision, data.queries["id"].to_list()
    docs = data.corpus["text"].to_list()
    for method in ("hyde", "query2doc"):
        _generate(server, tmp_path / "exp", method, task="R2MEDMedQADiag")
        hy_doc = {r["id"]: r["hy_doc"] for r in _lines(tmp_path / "exp" / "MedQA-Diag" / method / "test-llm" / "query_with_hydoc.jsonl")}
        encoder = HashingEncoder(dim=64, name=f"local-{method}")
        result = r2med_plugin.evaluate_task("R2MEDMedQADiag", encoder, expansion=f"local:{tmp_path}/exp/{method}/test-llm",
                                            query_prompt="Instruct: x\nQuery: ", show_progress=False)
        doc_vectors = encode_cached(encoder, docs, kind="document", dataset_revision=rev)
        if method == "hyde":  # mean of the instructed query and the expansion (no instruction)
            queries = encode_cached(encoder, data.queries["text"].to_list(), kind="query", dataset_revision=rev, prompt="Instruct: x\nQuery: ")
            vectors = normalise((queries + encode_cached(encoder, [hy_doc[q] for q in ids], kind="document", dataset_revision=rev)) / 2)
        else:  # one string: text + "[SEP]" + hy_doc
            joined = [t + "[SEP]" + hy_doc[q] for q, t in zip(ids, data.queries["text"].to_list(), strict=True)]
            vectors = encode_cached(encoder, joined, kind="query", dataset_revision=rev, prompt="Instruct: x\nQuery: ")
        expected = search_vectors(ids, vectors, data.corpus["id"].to_list(), doc_vectors, 1000)
        assert result.scores == r2med_plugin.evaluate_run(data.qrels, expected), method


# --- pure helpers --------------------------------------------------------------------------------


def test_lamer_passage_format_by_hand():
    from r2med_plugin.generation.prompts import cut_words, lamer_passages

    assert cut_words("a  b\tc\nd", 3) == "a b c"
    texts = {"d1": "first\nline  two", "d2": " ".join(["w"] * 600), **{f"x{i}": f"doc {i}" for i in range(12)}}
    ranked = ["d1", "d2"] + [f"x{i}" for i in range(12)]
    passages = lamer_passages(ranked, texts)
    assert passages.startswith("\n[1]. first line two\n[2]. " + " ".join(["w"] * 512) + "\n[3]. doc 0")
    assert passages.endswith("\n[10]. doc 7") and "[11]" not in passages  # the top 10 only


def test_endpoint_names_and_sampling_checks():
    from r2med_plugin.endpoints.client import endpoint_host
    from r2med_plugin.generation.generate import sampling_parameters
    from r2med_plugin.generation.store import check_name, slug_name

    assert endpoint_host("https://api.example.org/v1") == "https://api.example.org"
    assert endpoint_host("http://localhost:8000/v1/") == "http://localhost:8000"
    with pytest.raises(ValueError, match="http\\(s\\) URL"):
        endpoint_host("localhost:8000")
    assert slug_name("Qwen/Qwen2.5-7B-Instruct") == "Qwen-Qwen2.5-7B-Instruct" and slug_name("llama3:8b") == "llama3-8b"
    with pytest.raises(SettingError) as unnamed:
        slug_name("///")
    assert unnamed.value.field == "name" and unnamed.value.render("flag").endswith("; pass --name NAME")
    assert str(unnamed.value).endswith("; pass name (--name) NAME")  # GenerationRequest's field, with the CLI's flag
    with pytest.raises(ValueError, match="must be a folder name"):
        check_name("../up")
    assert sampling_parameters("api") == {"temperature": 0.8, "top_p": 0.8, "max_tokens": None, "seed": None}
    assert sampling_parameters("vllm", seed=1) == {"temperature": 0.7, "top_p": None, "max_tokens": 10240, "seed": 1}
    with pytest.raises(SettingError) as top_p:
        sampling_parameters("api", top_p=1.5)
    assert top_p.value.field == "top_p" and top_p.value.flag_message.startswith("--top-p must be within (0, 1]")
    with pytest.raises(ValueError, match="unknown sampling preset"):
        sampling_parameters("fast")


def test_bad_inputs_are_refused_before_any_request(server, mirror_env, tmp_path):
    with pytest.raises(ValueError, match="R2MED tasks"):
        _generate(server, tmp_path, "hyde", task="NanoR2MEDBiology")
    with pytest.raises(ValueError, match="unknown generation method 'search-r1'"):
        _generate(server, tmp_path, "search-r1")
    bad = tmp_path / "bad.trec"
    bad.write_text("q1 Q0 d1 1\n")
    with pytest.raises(ValueError, match="bad.trec, line 1: expected 6 fields"):
        _generate(server, tmp_path, "lamer", first_stage=str(bad))
    partial = tmp_path / "partial.jsonl"
    partial.write_text(json.dumps({"id": "biology-q-000", "topk_pid": [["biology-doc-0001", 1.0]]}) + "\n")
    with pytest.raises(ValueError, match="no ranked documents for 4 queries"):
        _generate(server, tmp_path, "lamer", first_stage=str(partial))
    assert not server.requests


def test_two_runs_never_write_one_folder_at_once(server, mirror_env, tmp_path):
    from r2med_plugin.generation.store import ExpansionStore

    other = ExpansionStore(tmp_path / "exp" / "Biology" / "hyde" / "test-llm")
    with other.locked():
        with pytest.raises(SettingError) as refused:
            _generate(server, tmp_path / "exp", "hyde")
    assert refused.value.field == "out" and "being written by another r2med generate run" in str(refused.value)
    assert refused.value.render("flag").endswith("wait for it or use another --name/--out")
    assert not server.requests
    assert _generate(server, tmp_path / "exp", "hyde").generated == 5


def test_generate_from_code_that_runs_an_event_loop(server, mirror_env, tmp_path):
    import asyncio

    async def notebook_cell():  # Jupyter runs cells inside an event loop
        return _generate(server, tmp_path / "exp", "hyde")

    assert asyncio.run(notebook_cell()).generated == 5


def test_generated_files_are_readable_like_any_file_open_creates(server, mirror_env, tmp_path):
    _generate(server, tmp_path / "exp", "hyde")
    mask = os.umask(0o022)
    os.umask(mask)
    folder = tmp_path / "exp" / "Biology" / "hyde" / "test-llm"
    for name in ("query_with_hydoc.jsonl", "manifest.json", "usage.jsonl"):
        assert (folder / name).stat().st_mode & 0o777 == 0o666 & ~mask, name


def test_an_openai_reasoning_model_gets_max_completion_tokens(mirror_env, tmp_path, monkeypatch, caplog):
    """OpenAI's reasoning models answer max_tokens and temperature with HTTP 400 "Unsupported parameter": the
    first refusal is learned, the request is sent again at once with max_completion_tokens and without temperature, and
    so is every later one; the manifest records it and one warning says it."""
    with LoopbackOpenAI(api_key=KEY, unsupported=("max_tokens", "temperature")) as server:
        monkeypatch.setenv("OPENAI_API_KEY", KEY)
        with caplog.at_level("WARNING"):
            report = _generate(server, tmp_path / "exp", "hyde", preset="vllm", concurrency=1)
        bodies = server.completions()
    assert report.generated == report.total > 1 and not report.failures
    assert bodies[0]["max_tokens"] == 10240 and bodies[0]["temperature"] == 0.7  # refused once
    assert len(bodies) == report.total + 1
    assert all(body["max_completion_tokens"] == 10240 and "max_tokens" not in body and "temperature" not in body
               and body["seed"] == 42 for body in bodies[1:])
    manifest = json.loads(next((tmp_path / "exp").rglob("manifest.json")).read_text())
    assert manifest["runs"][-1]["unsupported_parameters"] == {"refused": ["max_tokens"], "sent_max_completion_tokens": True,
                                                              "left_out": ["temperature"]}
    notes = [record.getMessage() for record in caplog.records if "refused" in record.getMessage()]
    assert len(notes) == 1 and "max_completion_tokens in place of max_tokens" in notes[0]


def test_a_budget_the_context_cannot_hold_is_refused_before_any_request(mirror_env, tmp_path, monkeypatch, capsys):
    """--preset vllm sends max_tokens 10240; on a model served with a shorter context every request was refused (HTTP
    400), the run stopped after 10 queries and said to run it again. vLLM reports max_model_len in GET
    /models: a budget that cannot fit is refused before the data loads or a completion is sent, with the fix."""
    with LoopbackOpenAI(api_key=KEY, max_model_len=4096) as server:
        monkeypatch.setenv("OPENAI_API_KEY", KEY)
        argv = ["generate", "--task", "R2MEDBiology", "--method", "hyde", "--llm", "test-llm", "--base-url", server.base_url,
                "--preset", "vllm", "--out", str(tmp_path / "exp"), "--quiet"]
        assert main(argv) == 2
        assert server.completions() == []
        error = capsys.readouterr().err
        assert "--preset vllm sends max_tokens 10240" in error and "context of 4096 tokens (max_model_len)" in error
        assert "--max-tokens 2048" in error and "again" not in error
        assert not (tmp_path / "exp").exists()
        assert main(argv + ["--max-tokens", "2048"]) == 0  # a budget that fits: generated
        assert {body["max_tokens"] for body in server.completions()} == {2048}


def test_a_refused_request_is_never_said_to_be_retried_nor_to_help_rerunning(mirror_env, tmp_path, monkeypatch, capsys):
    """A server that does not report its context answers every request with vLLM's 400: the message says the server
    refused them (not "on every retry", which a 400 never gets), gives the server's text and the fix (lower
    --max-tokens), and never suggests running the same command again."""
    with LoopbackOpenAI(api_key=KEY, max_model_len=60, report_max_model_len=False) as server:
        monkeypatch.setenv("OPENAI_API_KEY", KEY)
        argv = ["generate", "--task", "R2MEDBiology", "--method", "hyde", "--llm", "test-llm", "--base-url", server.base_url,
                "--max-tokens", "50", "--out", str(tmp_path / "exp"), "--quiet", "--max-failures", "3"]
        assert main(argv) == 1
        sent = server.completions()
    error = capsys.readouterr().err
    assert "maximum context length is 60 tokens" in error and "HTTP 400; a refused request is not retried" in error
    assert "on every retry" not in error and "after 6 retries" not in error
    assert "lower --max-tokens" in error and "sends the same requests" in error
    assert "run the same command again to" not in error and "then run again" not in error
    assert 3 <= len(sent) <= 3 + 8  # stopped after --max-failures refused queries (others were in flight), each sent once


def test_generation_leaves_no_lock_file_and_a_failed_run_no_folder(mirror_env: Path, tmp_path: Path, monkeypatch, capsys):
    from r2med_plugin.cli import main
    from tests.support.loopback_openai import LoopbackOpenAI

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    with LoopbackOpenAI(api_key="sk-test", max_seconds=60) as server:
        base = ["generate", "--task", "R2MEDBiology", "--method", "hyde", "--base-url", server.base_url,
                "--out", str(tmp_path / "exp"), "--quiet", "--max-retries", "0"]
        assert main([*base, "--llm", "no-such-llm"]) == 1  # 404 for every query
        assert "unknown model 'no-such-llm'" in capsys.readouterr().err
        assert not (tmp_path / "exp").exists()
        assert main([*base, "--llm", "test-llm"]) == 0
    folder = tmp_path / "exp" / "Biology" / "hyde" / "test-llm"
    assert sorted(path.name for path in folder.iterdir()) == ["manifest.json", "query_with_hydoc.jsonl", "usage.jsonl"]


def test_generation_never_resumes_a_folder_made_from_other_data(mirror_env: Path, mirror_copy: Path, tmp_path: Path, monkeypatch):
    from r2med_plugin.generation import generate_expansions
    from tests.support.loopback_openai import LoopbackOpenAI

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    with LoopbackOpenAI(api_key="sk-test", max_seconds=60) as server:
        first = generate_expansions("R2MEDBiology", "hyde", "test-llm", server.base_url, out=tmp_path / "exp", show_progress=False)
        lines = first.folder.joinpath("query_with_hydoc.jsonl").read_text().splitlines()
        first.folder.joinpath("query_with_hydoc.jsonl").write_text("\n".join(lines[:-1]) + "\n")  # one query left to do
        queries = mirror_copy / "R2MED" / "Biology" / "query.jsonl"
        queries.write_text(queries.read_text().replace("insulin", "glucagon", 1))
        with pytest.raises(ValueError, match="another configuration .*dataset_revision"):
            generate_expansions("R2MEDBiology", "hyde", "test-llm", server.base_url, out=tmp_path / "exp",
                                data_dir=mirror_copy, show_progress=False)


def test_a_generation_request_is_the_one_argument_and_the_keyword_form_builds_the_same(server, mirror_env, tmp_path):
    from r2med_plugin.generation import estimate_generation_cost
    from r2med_plugin.generation.config import GenerationConfig, GenerationRequest
    from r2med_plugin.llm.config import Endpoint

    config = GenerationConfig("hyde", "test-llm", max_tokens=64)
    request = GenerationRequest("R2MEDBiology", config, Endpoint(server.base_url, concurrency=2), out=tmp_path / "exp",
                                show_progress=False)
    keyword = dict(max_tokens=64, concurrency=2, out=tmp_path / "exp", show_progress=False)
    assert GenerationRequest.of("R2MEDBiology", "hyde", "test-llm", server.base_url, **keyword) == request
    assert estimate_generation_cost(request) == estimate_generation_cost("R2MEDBiology", "hyde", "test-llm", **keyword)
    report = generate_expansions(request)
    assert report.complete and report.generated == report.total > 0
    assert report.folder == tmp_path / "exp" / "Biology" / "hyde" / "test-llm"
    assert len(server.completions()) == report.total
    with pytest.raises(TypeError, match="unexpected keyword argument 'concurency'; it takes task, method, llm, base_url and "
                                        "name, preset, .*concurrency"):
        generate_expansions("R2MEDBiology", "hyde", "test-llm", server.base_url, concurency=2)
    with pytest.raises(TypeError, match="takes a GenerationRequest alone"):
        generate_expansions(request, overwrite=True)
    with pytest.raises(ValueError, match=r"generate_expansions sends requests: give the endpoint, GenerationRequest\(task, config, "
                                         r"Endpoint\(base_url\)\)"):
        generate_expansions(GenerationRequest("R2MEDBiology", config))


def test_a_missing_first_stage_run_is_a_missing_file_named_by_its_setting(tmp_path):
    from r2med_plugin.generation.config import GenerationConfig
    from r2med_plugin.rules import SettingFileError

    absent = tmp_path / "absent.trec"
    with pytest.raises(SettingFileError) as refused:
        GenerationConfig(method="lamer", llm="test-llm", first_stage=str(absent)).first_stage_identity()
    error = refused.value
    assert isinstance(error, FileNotFoundError) and error.field == "first_stage"
    assert error.render("flag").startswith(f"--first-stage {absent}: no such run file")
    assert str(error).startswith(f"first_stage (--first-stage) {absent}")
