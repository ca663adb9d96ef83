"""Official R2MED result files, checked against a re-implementation of the official evaluators
(tests/support/official_reference.py): our files must equal theirs byte for byte."""

from __future__ import annotations

import json
import os
import random
import stat
from pathlib import Path

import numpy as np
import pytest

from r2med_plugin import evaluate_run, write_official_results
from r2med_plugin.evaluation.official import (
    official_bm25_run,
    official_bm25_scores,
    official_dense_scores,
)
from r2med_plugin.evaluation.runner import evaluate_task
from r2med_plugin.evaluation.writers import write_outputs
from r2med_plugin.io import write_json_atomic
from r2med_plugin.models.hashing import HashingEncoder
from r2med_plugin.reporting.official_files import official_minutes, official_model_name
from r2med_plugin.retrieval.ranking import top_k_run
from tests.support.official_reference import full_bm25, reference_bm25_file, reference_dense_file, row_ids

# --- a corpus built to separate the rules -----------------------------------------------------------


N_DOCS = 400
rng = random.Random(14)
DOC_IDS = [f"d{rng.randrange(10**6):06d}-{i}" for i in range(N_DOCS)]  # corpus order is not id order
QUERIES = ["q-tie", "q-deep", "d-self", "q-absent-from-run", "q-plain"]
DOC_IDS[7] = "d-self"  # a document whose id equals a query id


def _matrix() -> dict[str, list[float]]:
    base = np.random.default_rng(14)
    rows = {}
    for query_id in ("q-tie", "q-deep", "d-self", "q-plain"):
        rows[query_id] = [float(x) for x in np.round(base.random(N_DOCS), 3).astype(np.float32)]
    # q-tie: ranks 91..130 share one score: the cut at 100 falls inside the tie.
    tie = rows["q-tie"]
    order = sorted(range(N_DOCS), key=lambda i: -tie[i])
    for i in order[90:130]:
        tie[i] = float(np.float32(0.25))
    for i in order[130:]:
        tie[i] = min(tie[i], float(np.float32(0.2)))
    # q-deep: its only positive at rank 136 (no MRR for the official BM25 file, which cuts at 100).
    return rows


FULL = _matrix()
TIE_GROUP = sorted(i for i, s in enumerate(FULL["q-tie"]) if s == np.float32(0.25))  # corpus order
KEPT_BY_ID = sorted(TIE_GROUP, key=lambda i: DOC_IDS[i], reverse=True)[:10]  # pytrec_eval keeps the largest ids
TIE_POSITIVE = next(i for i in KEPT_BY_ID if i not in TIE_GROUP[:10])  # the stable sort keeps the first 10 in corpus order
DEEP_ORDER = sorted(range(N_DOCS), key=lambda i: -FULL["q-deep"][i])
FULL["d-self"][7] = 2.0  # the identically named document is the top hit of query d-self
SELF_ORDER = sorted(range(N_DOCS), key=lambda i: -FULL["d-self"][i])
QRELS = {
    "q-tie": {DOC_IDS[TIE_POSITIVE]: 1, DOC_IDS[sorted(range(N_DOCS), key=lambda i: -FULL["q-tie"][i])[0]]: 1},
    "q-deep": {DOC_IDS[DEEP_ORDER[135]]: 1},
    "d-self": {DOC_IDS[SELF_ORDER[3]]: 1, DOC_IDS[SELF_ORDER[40]]: 1},
    "q-absent-from-run": {DOC_IDS[0]: 1},
    "q-plain": {DOC_IDS[i]: 1 for i in sorted(range(N_DOCS), key=lambda i: -FULL["q-plain"][i])[:30:4]},
}


def _our_run(depth: int, ties: str = "doc_id") -> dict:
    query_ids = list(FULL)
    matrix = np.array([FULL[q] for q in query_ids], dtype=np.float32)
    return top_k_run(query_ids, DOC_IDS, matrix, depth, ties=ties)


def test_the_corpus_separates_the_rules():
    assert SELF_ORDER[0] == 7 and len(TIE_GROUP) == 40
    stable = sorted(range(N_DOCS), key=lambda i: -FULL["q-tie"][i])[:100]  # Python's sort is stable
    assert TIE_POSITIVE not in stable and TIE_POSITIVE in [DOC_IDS.index(d) for d in _our_run(100)["q-tie"]]
    assert evaluate_run(QRELS, _our_run(1000))["recall_at_100"] != evaluate_run(QRELS, _our_run(100, ties="corpus"))["recall_at_100"]


def test_bm25_file_equals_the_official_code(tmp_path: Path):
    official_run = official_bm25_run(_our_run(1000), DOC_IDS)
    assert official_run is not None
    path = write_official_results(
        tmp_path / "Biology.json", dataset_name="Biology", model_name="bm25", scores=official_bm25_scores(QRELS, official_run),
        evaluation_time=12.9,
    )
    expected = reference_bm25_file(DOC_IDS, FULL, QRELS, 12.9, "Biology")
    assert path.read_text(encoding="utf-8") == expected
    test = json.loads(expected)["test"]
    assert sorted(test) == sorted([f"{m}_at_{k}" for m in ("ndcg", "map", "recall", "precision") for k in (1, 10, 25, 50, 100)] + ["mrr"])
    # Means over the 4 queries of the run that have qrels, not the 5 of the qrels (MTEB zero-fills).
    mteb = evaluate_run(QRELS, _our_run(1000))
    assert mteb["mrr"] != test["mrr"]
    assert json.loads(expected)["evaluation_time"] == "0.21 minutes"


def test_bm25_tie_reaching_the_run_depth_needs_corpus_order_ties():
    shallow = _our_run(100)  # pytrec_eval order; the tie group at rank 100 reaches past the run
    assert official_bm25_run(shallow, DOC_IDS) is None
    again = _our_run(100, ties="corpus")
    expected = json.loads(reference_bm25_file(DOC_IDS, FULL, QRELS, 0, "Biology"))["test"]
    assert official_bm25_scores(QRELS, again) == expected
    assert official_bm25_scores(QRELS, official_bm25_run(_our_run(N_DOCS), DOC_IDS)) == expected


def test_dense_file_equals_beir(tmp_path: Path):
    scores = official_dense_scores(QRELS, _our_run(1000))
    path = write_official_results(tmp_path / "B.json", dataset_name="Biology", model_name="bge", scores=scores, evaluation_time=4.2)
    assert path.read_text(encoding="utf-8") == reference_dense_file(DOC_IDS, FULL, QRELS, 4.2, "Biology", "bge")
    assert "mrr" not in scores and "ndcg_at_3" in scores and "ndcg_at_25" not in scores
    # The self-match of query d-self is dropped: its positive at rank 4 moves to rank 3.
    with_self = evaluate_run({"d-self": QRELS["d-self"]}, _our_run(1000), k_values=(3,))
    without = official_dense_scores({"d-self": QRELS["d-self"]}, _our_run(1000), k_values=(3,))
    assert with_self["recall_at_3"] == 0.0 and without["recall_at_3"] == 0.5


def test_minutes_and_model_names():
    assert official_minutes(12.9) == "0.21 minutes" and official_minutes(6) == "0.1 minutes" and official_minutes(0) == "0.0 minutes"
    assert official_model_name("bm25-lucene") == "bm25" and official_model_name("nvidia/NV-Embed-v2") == "nv"
    assert official_model_name("my/model") == "my/model"


def test_files_are_readable(tmp_path: Path):
    path = write_json_atomic(tmp_path / "x.json", {"a": 1})
    mask = os.umask(0)
    os.umask(mask)
    assert stat.S_IMODE(path.stat().st_mode) == 0o666 & ~mask
    assert stat.S_IMODE(path.stat().st_mode) & stat.S_IROTH or mask & stat.S_IROTH


def test_missing_scores_are_refused(tmp_path: Path):
    with pytest.raises(ValueError, match="scores lack"):
        write_official_results(tmp_path / "x.json", dataset_name="B", model_name="m", scores={"ndcg_at_10": 0.5}, evaluation_time=1, layout="bm25")
    with pytest.raises(ValueError, match="non-empty"):
        write_official_results(tmp_path / "x.json", dataset_name="", model_name="m", scores={}, evaluation_time=1)
    with pytest.raises(ValueError, match="divide by zero"):
        official_bm25_scores({"a": {"x": 1}}, {"b": {"x": 1.0}})
    assert not (tmp_path / "x.json").exists()


# --- end to end: the runner on the fixture mirror ---------------------------------------------------


@pytest.mark.parametrize("top_k", [1000, 100])  # 100: the zero-score tie at rank 100 forces a corpus-order rerun
def test_runner_writes_the_official_bm25_file(mirror_env: Path, tmp_path: Path, top_k: int):
    result = evaluate_task("NanoR2MEDBiology", "bm25-lucene", top_k=top_k, show_progress=False)
    data = result.data
    expected = reference_bm25_file(row_ids(data), full_bm25(data), data.qrels, result.evaluation_time, data.spec.hub_name)
    path = write_outputs(result, tmp_path)["official"]
    assert path.read_text(encoding="utf-8") == expected
    assert result.official_layout == "bm25" and json.loads(expected)["model_name"] == "bm25"


def test_runner_writes_the_official_dense_file(mirror_env: Path, tmp_path: Path):
    encoder = HashingEncoder(dim=32, name="official-dense-probe")
    result = evaluate_task("NanoR2MEDMedQADiag", encoder, show_progress=False)
    data = result.data
    docs = encoder.encode(data.corpus["text"].to_list(), kind="document")
    queries = encoder.encode(data.queries["text"].to_list(), kind="query")
    docs = docs / np.linalg.norm(docs, axis=1, keepdims=True)
    queries = queries / np.linalg.norm(queries, axis=1, keepdims=True)
    run_scores = {q: {d: s for d, s in result.run[q].items()} for q in result.run}
    full = {}
    for row, query_id in enumerate(data.queries["id"].to_list()):
        # The run's own scores where it has them (same float path), cosine elsewhere (below rank 1000: none here).
        cosine = (queries[row] @ docs.T).astype(np.float32)
        full[query_id] = [run_scores[query_id].get(d, float(c)) for d, c in zip(data.corpus["id"].to_list(), cosine, strict=True)]
    expected = reference_dense_file(data.corpus["id"].to_list(), full, data.qrels, result.evaluation_time, data.spec.hub_name, encoder.name)
    assert write_outputs(result, tmp_path)["official"].read_text(encoding="utf-8") == expected


def test_shallow_dense_run_gets_no_official_file(mirror_env: Path, tmp_path: Path):
    encoder = HashingEncoder(dim=32, name="official-shallow-probe")
    result = evaluate_task("NanoR2MEDMedQADiag", encoder, top_k=50, show_progress=False)
    assert result.official is None and "official" not in write_outputs(result, tmp_path)


def test_run_from_another_corpus_is_refused():
    with pytest.raises(ValueError, match="not in the corpus"):
        official_bm25_run({"q": {"elsewhere": 1.0}}, DOC_IDS)
