from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import r2med_plugin
from r2med_plugin.cli import main
from r2med_plugin.evaluation.runner import evaluate_task, execute
from r2med_plugin.evaluation.writers import write_outputs
from r2med_plugin.models.hashing import HashingEncoder
from r2med_plugin.retrieval.bm25 import bm25_search
from r2med_plugin.retrieval.dense import dense_search
from tests.support.requests import requested


def test_bm25_scores_equal_evaluate_run(mirror_env: Path):
    result = evaluate_task("R2MEDMedQADiag", "bm25-lucene", show_progress=False)
    data = r2med_plugin.load_task("R2MEDMedQADiag")
    expected = r2med_plugin.evaluate_run(data.qrels, bm25_search(data.corpus, data.queries, show_progress=False))
    assert {key: result.scores[key] for key in expected} == expected
    assert result.main_score == "ndcg_at_10" and result.dataset_revision == data.spec.revision


def test_hybrid_and_candidate_keys(mirror_env: Path):
    result = evaluate_task("NanoR2MEDBiology", HashingEncoder(), hybrid=True, candidates=["bm25", "hybrid"], show_progress=False)
    assert "hybrid_ndcg_at_10" in result.scores and "candidates_bm25_ndcg_at_10" in result.scores
    assert "candidates_hybrid_ndcg_at_10_without_safeguard" in result.scores
    assert not any(key.startswith("candidates_dense") for key in result.scores)


def test_candidates_only_encodes_only_the_candidate_union(mirror_env: Path):
    data = r2med_plugin.load_task("NanoR2MEDMedQADiag")
    union = {doc_id for ids in data.candidates["hybrid"].values() for doc_id in ids}
    encoder = HashingEncoder(dim=64, name="counting-encoder")
    result = evaluate_task("NanoR2MEDMedQADiag", encoder, candidates=["hybrid"], candidates_only=True, show_progress=False)
    assert encoder.encoded_texts == len(union) + data.queries.height
    assert len(union) < data.corpus.height
    assert result.main_score == "candidates_hybrid_ndcg_at_10_with_safeguard"
    assert "ndcg_at_10" not in result.scores


def test_second_run_encodes_nothing(mirror_env: Path):
    first = HashingEncoder(dim=32, name="cache-probe")
    evaluate_task("R2MEDPMCTreatment", first, show_progress=False)
    assert first.encoded_texts > 0
    second = HashingEncoder(dim=32, name="cache-probe")
    evaluate_task("R2MEDPMCTreatment", second, show_progress=False)
    assert second.encoded_texts == 0


class _BrokenEncoder(HashingEncoder):
    def __init__(self, mode: str) -> None:
        super().__init__(dim=8, name=f"broken-{mode}")
        self.mode = mode

    def encode(self, texts, *, kind):
        vectors = super().encode(texts, kind=kind)
        if self.mode == "nan":
            vectors[0, 0] = np.nan
            return vectors
        if self.mode == "dimension":
            return vectors if kind == "document" else np.hstack([vectors, vectors])
        return vectors[:-1]


@pytest.mark.parametrize(
    ("mode", "message"),
    [("nan", "returned NaN or infinite"), ("rows", "expected one row per text"), ("dimension", "16-dimensional query embeddings but 8")],
)
def test_broken_encoder_is_named(mirror_env: Path, mode: str, message: str):
    with pytest.raises(ValueError, match=rf"model 'broken-{mode}' {message}|model 'broken-{mode}' .*{message}"):
        evaluate_task("R2MEDBiology", _BrokenEncoder(mode), show_progress=False)


def test_bad_arguments(mirror_env: Path):
    with pytest.raises(ValueError, match="unknown retriever 'bm25'"):
        evaluate_task("R2MEDBiology", "bm25")
    with pytest.raises(ValueError, match="unknown candidate subset"):
        evaluate_task("NanoR2MEDBiology", "bm25-robertson", candidates=["top"])
    with pytest.raises(ValueError, match="NanoR2MED tasks only"):
        evaluate_task("R2MEDBiology", "bm25-lucene", candidates=["bm25"])
    with pytest.raises(ValueError, match="needs at least one candidate subset"):
        evaluate_task("NanoR2MEDBiology", "bm25-robertson", candidates_only=True)
    with pytest.raises(TypeError, match="retriever must be"):
        evaluate_task("NanoR2MEDBiology", 42)  # type: ignore[arg-type]


def test_dense_search_matches_a_brute_force_cosine(mirror_env: Path):
    data = r2med_plugin.load_task("NanoR2MEDBiology")
    encoder = HashingEncoder(dim=48, name="brute-force-check")
    run = dense_search(encoder, data.corpus, data.queries, dataset_revision="x", top_k=7)
    docs = encoder.encode(data.corpus["text"].to_list(), kind="document")
    queries = encoder.encode(data.queries["text"].to_list(), kind="query")
    docs /= np.linalg.norm(docs, axis=1, keepdims=True)
    queries /= np.linalg.norm(queries, axis=1, keepdims=True)
    scores = queries @ docs.T
    first = data.queries["id"][0]
    assert max(run[first].values()) == pytest.approx(float(scores[0].max()), rel=1e-6)
    assert len(run[first]) == 7


def test_outputs(mirror_env: Path, tmp_path: Path):
    result = evaluate_task("NanoR2MEDPMCClinical", "bm25-robertson", hybrid=True, show_progress=False)
    paths = write_outputs(result, tmp_path, trec=True)
    mteb_file = json.loads(paths["mteb"].read_text())
    assert paths["mteb"] == tmp_path / "results" / "bm25-robertson" / "r2med-plugin-0.2.0" / "NanoR2MEDPMCClinical.json"
    assert mteb_file["task_name"] == "NanoR2MEDPMCClinical"
    assert mteb_file["scores"]["test"][0]["main_score"] == result.scores["ndcg_at_10"]
    official = json.loads(paths["official"].read_text())
    assert official["dataset_name"] == "PMC-Clinical" and official["test"]["ndcg_at_10"] == round(result.scores["ndcg_at_10"], 5)
    lines = paths["trec"].read_text().splitlines()
    first_query = next(iter(result.run))
    assert lines[0].split()[:4] == [first_query, "Q0", next(iter(result.run[first_query])), "1"]


def test_cli_evaluate(mirror_env: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    assert main(["evaluate", "--task", "NanoR2MEDBiology", "--retriever", "bm25-robertson", "--candidates", "hybrid",
                 "--output", str(tmp_path), "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "candidates_hybrid_ndcg_at_10_with_safeguard" in out and "wrote mteb" in out
    assert main(["evaluate", "--task", "NanoR2MEDBiology", "--retriever", "bm25-lucene", "--candidates", "hybrid", "--candidates-only",
                 "--quiet"]) == 0
    assert main(["evaluate", "--task", "R2MEDBiology", "--retriever", "bm25-lucene", "--candidates", "bm25", "--quiet"]) == 2
    assert "NanoR2MED tasks only" in capsys.readouterr().err


def test_score_candidate_lists_api(mirror_env: Path):
    data = r2med_plugin.load_task("NanoR2MEDPMCTreatment")
    encoder = HashingEncoder(dim=40, name="rerank-api-probe")
    run = r2med_plugin.score_candidate_lists(encoder, "NanoR2MEDPMCTreatment", "dense")
    assert {q: set(docs) for q, docs in run.items()} == {q: set(ids) for q, ids in data.candidates["dense"].items()}
    union = {doc_id for ids in data.candidates["dense"].values() for doc_id in ids}
    assert encoder.encoded_texts == len(union) + data.queries.height
    bm25 = r2med_plugin.score_candidate_lists("bm25-robertson", data, "bm25")
    assert {q: set(docs) for q, docs in bm25.items()} == {q: set(ids) for q, ids in data.candidates["bm25"].items()}
    with pytest.raises(ValueError, match="unknown candidate subset"):
        r2med_plugin.score_candidate_lists(encoder, data, "all")


def test_validate_inputs_hands_each_request_its_data_within_the_memory_bound(mirror_env: Path):
    from r2med_plugin.evaluation.runner import validate_inputs

    requests = [requested(task, "bm25-robertson", expansion=expansion, show_progress=False)
             for task in ("R2MEDBiology", "R2MEDBioinformatics") for expansion in ("hyde/gpt4", "query2doc/gpt4")]
    kept = validate_inputs(requests)
    assert [data.name for data in kept] == ["R2MEDBiology"] * 2 + ["R2MEDBioinformatics"] * 2
    assert kept[0] is kept[1] and kept[2] is kept[3]  # one task read once for all its expansions
    bounded = validate_inputs(requests, keep_bytes=0)  # only the first task's data is kept; the other is read again
    assert [data is not None for data in bounded] == [True, True, False, False]
    assert execute(requests[2], kept[2]).scores == execute(requests[2]).scores


def test_an_expansion_lacking_a_query_is_an_input_file_error(mirror_copy_env: Path):
    from r2med_plugin.errors import InputFileError
    from r2med_plugin.evaluation.runner import validate_inputs

    path = mirror_copy_env / "R2MED" / "Biology" / "hyde" / "gpt4" / "query_with_hydoc.jsonl"
    rows = path.read_text().splitlines()
    path.write_text("\n".join(rows[1:]) + "\n")
    request = requested("R2MEDBiology", "bm25-robertson", expansion="hyde/gpt4", show_progress=False)
    for check in (lambda: validate_inputs([request]), lambda: execute(request)):
        with pytest.raises(InputFileError) as raised:
            check()
        assert str(path) in str(raised.value) and "'biology-q-000'" in str(raised.value)


def test_the_python_api_takes_a_model_by_name_and_one_candidate_subset_by_name(monkeypatch):
    """evaluate_task takes what `r2med evaluate --retriever` takes: a model's name is a ModelSpec (resolved, not loaded,
    until it runs); candidates="bm25" is the one subset, not four letters."""
    from r2med_plugin.evaluation.plan import request_of
    from r2med_plugin.evaluation.request import TaskArguments
    from r2med_plugin.evaluation.specs import ModelSpec

    request = request_of("NanoR2MEDBiology", "minilm-packaged", TaskArguments(candidates="bm25"))
    assert isinstance(request.first_stage, ModelSpec) and request.first_stage.name == "minilm-packaged"
    assert request.scoring.candidates == ("bm25",)
    with pytest.raises(ValueError, match="query_prompt") as refused:
        request_of("NanoR2MEDBiology", "minilm-packaged", TaskArguments(query_prompt="Query: "))
    assert "load_encoder('minilm-packaged')" in str(refused.value)
