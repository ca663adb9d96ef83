"""ir_datasets integration, tested in the style of ir_datasets' own integration tests:
exact counts and records at positions 0, 9 and last, here compared with the raw fixture files."""

from __future__ import annotations

import json
from pathlib import Path

import ir_datasets
import pyarrow.parquet as pq
import pytest
from ir_datasets.formats import GenericDoc, GenericQuery, TrecQrel

import r2med_plugin
from r2med_plugin.integrations import ir_datasets as integration
from r2med_plugin.integrations.ir_datasets import R2MEDCandidate, R2MEDGarQuery


@pytest.fixture(autouse=True)
def irds_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("IR_DATASETS_HOME", str(tmp_path / "irds"))
    r2med_plugin.register()
    return tmp_path / "irds"


def _fresh(dataset_id: str):
    """A freshly built dataset (the registered ones keep what they loaded for the whole process)."""
    datasets, metadata = integration.build_datasets()
    from ir_datasets.datasets.base import Dataset
    from ir_datasets.util.metadata import MetadataComponent, MetadataProvider

    return Dataset(MetadataComponent(dataset_id, datasets[dataset_id], MetadataProvider(lambda: metadata)), datasets[dataset_id])


def assert_records(records, count: int, expected: dict[int, tuple]) -> None:
    """ir_datasets' integration-test shape: the count and the records at chosen positions."""
    items = list(records)
    assert len(items) == count
    for position, record in expected.items():
        assert items[position] == record, position


def _jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_r2med_docs_queries_qrels(mirror_env: Path):
    repo = mirror_env / "R2MED" / "Biology"
    ds = _fresh("r2med/biology")
    docs = [GenericDoc(r["id"], r["text"]) for r in _jsonl(repo / "corpus.jsonl")]
    assert_records(ds.docs_iter(), len(docs), {0: docs[0], 9: docs[9], -1: docs[-1]})
    qrels = [TrecQrel(r["q_id"], r["p_id"], r["score"], "0") for r in _jsonl(repo / "qrels.jsonl")]
    assert_records(ds.qrels_iter(), 9, {0: qrels[0], -1: qrels[-1]})
    queries = [GenericQuery(r["id"], r["text"]) for r in _jsonl(repo / "query.jsonl")][:-1]  # the last has no positives
    assert_records(ds.queries_iter(), 5, {0: queries[0], -1: queries[-1]})


def test_r2med_expansion_queries(mirror_env: Path):
    rows = _jsonl(mirror_env / "R2MED" / "Biology" / "hyde" / "o3-mini" / "query_with_hydoc.jsonl")
    ds = _fresh("r2med/biology/hyde/o3-mini")
    expected = [R2MEDGarQuery(r["id"], r["text"], r["hy_doc"]) for r in rows][:-1]
    assert_records(ds.queries_iter(), 5, {0: expected[0], -1: expected[-1]})
    assert ds.queries_cls() is R2MEDGarQuery


def test_nano_docs_and_scoreddocs(mirror_env: Path):
    repo = mirror_env / "hakari-bench" / "NanoR2MED"
    corpus = pq.read_table(repo / "corpus" / "NanoR2MEDPMCTreatment.parquet").to_pylist()
    ds = _fresh("nano-r2med/pmc-treatment/hybrid")
    docs = [GenericDoc(r["_id"], r["text"]) for r in corpus]
    assert_records(ds.docs_iter(), 200, {0: docs[0], 9: docs[9], -1: docs[-1]})
    lists = pq.read_table(repo / "reranking_hybrid" / "NanoR2MEDPMCTreatment.parquet").to_pylist()
    expected = [
        R2MEDCandidate(row["query-id"], doc_id, float(len(row["corpus-ids"]) - i), i >= 100)
        for row in lists for i, doc_id in enumerate(row["corpus-ids"])
    ]
    assert_records(ds.scoreddocs_iter(), len(expected), {0: expected[0], 9: expected[9], -1: expected[-1]})
    assert sum(record.safeguard for record in ds.scoreddocs_iter()) == 1


def test_every_id_family_is_registered():
    ids = set(ir_datasets.registry)
    for spec in r2med_plugin.list_tasks():
        root = "r2med" if spec.kind == "r2med" else "nano-r2med"
        assert f"{root}/{spec.slug}" in ids
    assert "r2med/medqa-diag/search-r1/qwen-7b-ins" in ids and "r2med/iiyi-clinical/hyde/huatuo-o1-70b" in ids
    assert {f"nano-r2med/biology/{key}" for key in ("bm25", "dense", "hybrid")} <= ids
    # (ids under r2med/<slug>/local/ come from register_local_expansion, which other tests call)
    assert sum(i.startswith("r2med/") and "/local/" not in i for i in ids) == 8 + 8 * 20


def test_counts_are_known_before_any_download(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    monkeypatch.setenv("R2MED_DATA_DIR", str(tmp_path / "nothing-here"))
    ds = _fresh("r2med/medxpertqa-exam")
    assert (ds.docs_count(), ds.queries_count(), ds.qrels_count()) == (61379, 97, 292)
    nano = _fresh("nano-r2med/biology/hybrid")
    assert nano.scoreddocs_count() == round(100.029126 * 103)
    with pytest.raises(FileNotFoundError, match="not a folder"):
        next(iter(ds.docs_iter()))


def test_parents_documentation_and_docstore(mirror_env: Path, irds_home: Path):
    assert ir_datasets.docs_parent_id("nano-r2med/biology/bm25") == "nano-r2med/biology"
    assert ir_datasets.docs_parent_id("r2med/biology/lamer/gpt4") == "r2med/biology"
    assert ir_datasets.qrels_parent_id("r2med/biology/lamer/gpt4") == "r2med/biology"
    documentation = ir_datasets.load("r2med/pmc-clinical").documentation()
    assert documentation["official_measures"] == ["nDCG@10"] and "2505.14558" in documentation["bibtex"]
    ds = _fresh("r2med/pmc-clinical")
    store = ds.docs_store()
    assert store.get("pmc-clinical-doc-0005").doc_id == "pmc-clinical-doc-0005"
    spec = r2med_plugin.get_task_spec("R2MEDPMCClinical")
    # The fixture mirror records no commit: the docstore is keyed by the pin plus the files' fingerprint.
    data = r2med_plugin.load_task("R2MEDPMCClinical")
    folder = list((irds_home / "r2med" / "R2MED" / "PMC-Clinical").iterdir())[0].name
    assert folder == data.cache_revision == f"{spec.revision}-files-{data.files_fingerprint}"


def test_scores_from_records_equal_evaluate_run(mirror_env: Path):
    ds = _fresh("nano-r2med/medqa-diag/dense")
    qrels: dict = {}
    for qrel in ds.qrels_iter():
        qrels.setdefault(qrel.query_id, {})[qrel.doc_id] = qrel.relevance
    run: dict = {}
    for scored in ds.scoreddocs_iter():
        run.setdefault(scored.query_id, {})[scored.doc_id] = scored.score
    data = r2med_plugin.load_task("NanoR2MEDMedQADiag")
    from r2med_plugin.retrieval.candidates import candidates_as_run

    assert r2med_plugin.evaluate_run(qrels, run) == r2med_plugin.evaluate_run(data.qrels, candidates_as_run(data.candidates["dense"]))


def test_unknown_id_names_the_nearest_ids():
    with pytest.raises(KeyError, match=r"Nearest: r2med/bioinformatics, .*`ir_datasets list \| grep r2med/` lists all 168"):
        ir_datasets.load("r2med/bioinformatic")
    with pytest.raises(KeyError, match="Nearest: nano-r2med/biology/hybrid, "):
        ir_datasets.load("nano-r2med/biology/hybird")


def test_registration_is_idempotent_and_never_overwrites(monkeypatch: pytest.MonkeyPatch):
    assert integration.register() == []
    from ir_datasets.util import Registry

    fresh = Registry()
    sentinel = ir_datasets.datasets.base.Dataset(ir_datasets.formats.TsvDocs(None))
    fresh.register("r2med/biology", sentinel)
    monkeypatch.setattr(ir_datasets, "registry", fresh)
    added = integration.register()
    assert "r2med/biology" not in added and "r2med/bioinformatics" in added
    assert fresh["r2med/biology"] is not None and not hasattr(fresh["r2med/biology"], "_r2med_plugin_dataset")


def test_ir_datasets_counts_of_a_drifted_mirror_are_its_real_counts_before_and_after_iteration(
        mirror_env: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("IR_DATASETS_HOME", str(tmp_path / "irds"))
    import r2med_plugin
    from tests.support.fresh_ir_dataset import fresh_dataset

    data = r2med_plugin.load_task("NanoR2MEDBiology")
    dataset = fresh_dataset("nano-r2med/biology")
    qrels = sum(len(judged) for judged in data.qrels.values())
    before = (dataset.docs_count(), dataset.queries_count(), dataset.qrels_count())
    assert before == (data.corpus.height, data.queries.height, qrels)  # not the dataset card's 10000 documents
    assert sum(1 for _ in dataset.docs_iter()) == data.corpus.height
    assert (dataset.docs_count(), dataset.queries_count(), dataset.qrels_count()) == before


def test_unknown_ir_datasets_id_suggests_the_nearest(mirror_env: Path):
    import ir_datasets

    with pytest.raises(KeyError) as error:
        ir_datasets.load("r2med/bioinformatic/hyde/o3-mini")
    message = str(error.value)
    assert "r2med/bioinformatics/hyde/o3-mini" in message.split("Nearest: ")[1].split(",")[0]
    assert message.count("r2med/") <= 7 and len(message) < 600  # a handful of ids, not all 168
    with pytest.raises(KeyError, match="nano-r2med/biology"):
        ir_datasets.load("nano-r2med/biologyy")
