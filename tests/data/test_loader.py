from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

import r2med_plugin
from r2med_plugin.catalog import list_tasks
from tests.fixture_mirror import (
    NANO_QUERIES,
    R2MED_DOCS,
    R2MED_QUERIES,
    SAFEGUARD_QUERY,
    fixture_document_count,
    fixture_positives,
    fixture_query_id,
)

NANO = list_tasks("nano")


@pytest.mark.parametrize("name", [spec.name for spec in list_tasks()])
def test_every_task_loads_from_the_mirror(mirror_env: Path, name: str):
    data = r2med_plugin.load_task(name)
    spec = data.spec
    positives = fixture_positives(spec.slug, spec.kind)
    assert data.source == "mirror"
    assert data.corpus.columns == ["id", "text"] and data.queries.columns == ["id", "text"]
    assert data.qrels == {q: dict.fromkeys(docs, 1) for q, docs in positives.items()}
    assert data.queries["id"].to_list() == sorted(positives)
    if spec.kind == "r2med":
        assert data.corpus.height == fixture_document_count(spec.slug)
        assert data.revision == spec.revision  # a mirror without recorded revision is taken as the pinned one
        assert data.report["queries_without_positives"] == [fixture_query_id(spec.slug, R2MED_QUERIES - 1)]
        assert data.candidates == {}
    else:
        assert data.report["queries_without_positives"] == []
        assert set(data.candidates) == {"bm25", "dense", "hybrid"}
        assert all(len(ids) == 60 for ids in data.candidates["bm25"].values())
        lengths = sorted(len(ids) for ids in data.candidates["hybrid"].values())
        assert lengths == [100] * (NANO_QUERIES - 1) + [101]
    assert data.report["count_drift"]["documents"]["expected"] == spec.expected_counts["documents"]


def test_safeguard_row_is_a_positive(mirror_env: Path):
    data = r2med_plugin.load_task("NanoR2MEDBiology")
    query_id = f"nano-biology-q-{SAFEGUARD_QUERY:03d}"
    hybrid = data.candidates["hybrid"][query_id]
    assert len(hybrid) == 101
    assert not set(hybrid[:100]) & set(data.qrels[query_id])
    assert hybrid[100] in data.qrels[query_id]


def test_data_dir_argument_overrides_environment(fixture_mirror: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("R2MED_DATA_DIR", "/nonexistent/for/sure")
    data = r2med_plugin.load_task("R2MEDBiology", data_dir=fixture_mirror, accept_drift=True)
    assert data.corpus.height == fixture_document_count("biology")


def test_recorded_mirror_revision_is_reported(mirror_copy: Path):
    repo = mirror_copy / "hakari-bench" / "NanoR2MED"
    metadata = repo / ".cache" / "huggingface" / "download"
    metadata.mkdir(parents=True)
    (metadata / "README.md.metadata").write_text("a" * 40 + "\netag\n1700000000.0\n")
    data = r2med_plugin.load_task("NanoR2MEDBiology", data_dir=mirror_copy, accept_drift=True)
    assert data.revision == "a" * 40


def test_r2med_mirror_at_another_revision_is_refused(mirror_copy: Path):
    metadata = mirror_copy / "R2MED" / "Biology" / ".cache" / "huggingface" / "download"
    metadata.mkdir(parents=True)
    (metadata / "README.md.metadata").write_text("b" * 40 + "\netag\n1700000000.0\n")
    with pytest.raises(ValueError, match="holds revision b{40} but R2MEDBiology is pinned to 8b9fec2d"):
        r2med_plugin.load_task("R2MEDBiology", data_dir=mirror_copy, accept_drift=False)
    assert r2med_plugin.load_task("R2MEDBiology", data_dir=mirror_copy, accept_drift=True).revision == "b" * 40


def test_count_drift_is_an_error_unless_accepted(fixture_mirror: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv("R2MED_ACCEPT_DRIFT", raising=False)
    with pytest.raises(ValueError, match=r"documents: expected 47473, found 24.*accept_drift=True"):
        r2med_plugin.load_task("R2MEDBioinformatics", data_dir=fixture_mirror)
    monkeypatch.setenv("R2MED_ACCEPT_DRIFT", "1")
    assert r2med_plugin.load_task("R2MEDBioinformatics", data_dir=fixture_mirror).corpus.height == R2MED_DOCS


def test_matching_counts_pass_without_drift(mirror_copy: Path, monkeypatch: pytest.MonkeyPatch):
    # A mirror whose counts equal task_metadata loads with the strict check on.
    monkeypatch.setattr(
        "r2med_plugin.data.loader.count_differences", lambda expected, found: {}
    )
    assert r2med_plugin.load_task("R2MEDBiology", data_dir=mirror_copy, accept_drift=False).report["count_drift"] == {}


def test_unknown_task_name(mirror_env: Path):
    with pytest.raises(KeyError, match="Did you mean 'NanoR2MEDBiology'"):
        r2med_plugin.load_task("NanoR2MEDBiolgy")


def test_missing_mirror_folder(tmp_path: Path):
    with pytest.raises(FileNotFoundError, match="not a folder"):
        r2med_plugin.load_task("R2MEDBiology", data_dir=tmp_path / "absent")


def test_missing_repo_in_mirror_names_the_download_command(tmp_path: Path):
    with pytest.raises(FileNotFoundError, match=r"R2MED/Biology is missing.*huggingface-cli download R2MED/Biology"):
        r2med_plugin.load_task("R2MEDBiology", data_dir=tmp_path)


def test_missing_config(mirror_copy: Path):
    readme = mirror_copy / "R2MED" / "Biology" / "README.md"
    readme.write_text(readme.read_text().replace("config_name: qrels", "config_name: judgements"))
    with pytest.raises(ValueError, match=r"README.md: config 'qrels' is not declared"):
        r2med_plugin.load_task("R2MEDBiology", data_dir=mirror_copy, accept_drift=True)


def test_missing_file(mirror_copy: Path):
    (mirror_copy / "hakari-bench" / "NanoR2MED" / "bm25" / "NanoR2MEDBiology.parquet").unlink()
    with pytest.raises(FileNotFoundError, match=r"bm25/NanoR2MEDBiology.parquet is missing"):
        r2med_plugin.load_task("NanoR2MEDBiology", data_dir=mirror_copy, accept_drift=True)


def test_readme_without_front_matter(mirror_copy: Path):
    (mirror_copy / "R2MED" / "Biology" / "README.md").write_text("# no front matter\n")
    with pytest.raises(ValueError, match="no YAML front matter"):
        r2med_plugin.load_task("R2MEDBiology", data_dir=mirror_copy, accept_drift=True)


def test_data_file_outside_the_repo_is_refused(mirror_copy: Path):
    readme = mirror_copy / "R2MED" / "Biology" / "README.md"
    readme.write_text(readme.read_text().replace("path: corpus.jsonl", "path: ../Bioinformatics/corpus.jsonl"))
    with pytest.raises(ValueError, match="points outside the repo"):
        r2med_plugin.load_task("R2MEDBiology", data_dir=mirror_copy, accept_drift=True)


def test_truncated_jsonl_line(mirror_copy: Path):
    corpus = mirror_copy / "R2MED" / "Biology" / "corpus.jsonl"
    lines = corpus.read_bytes().splitlines(keepends=True)
    corpus.write_bytes(b"".join(lines[:-1]) + lines[-1][: len(lines[-1]) // 2])
    with pytest.raises(ValueError, match=rf"corpus.jsonl, line {len(lines)}: malformed JSON .*truncated"):
        r2med_plugin.load_task("R2MEDBiology", data_dir=mirror_copy, accept_drift=True)


def test_missing_column(mirror_copy: Path):
    queries = mirror_copy / "R2MED" / "Biology" / "query.jsonl"
    rows = [json.loads(line) for line in queries.read_text().splitlines()]
    queries.write_text("".join(json.dumps({"id": r["id"], "body": r["text"]}) + "\n" for r in rows))
    with pytest.raises(ValueError, match=r"query.jsonl: missing column\(s\) \['text'\]"):
        r2med_plugin.load_task("R2MEDBiology", data_dir=mirror_copy, accept_drift=True)


def test_missing_value_names_the_row(mirror_copy: Path):
    queries = mirror_copy / "R2MED" / "Biology" / "query.jsonl"
    rows = [json.loads(line) for line in queries.read_text().splitlines()]
    del rows[2]["text"]
    queries.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(ValueError, match=r"query.jsonl, row 3: no value for 'text'"):
        r2med_plugin.load_task("R2MEDBiology", data_dir=mirror_copy, accept_drift=True)


def test_duplicate_document_id(mirror_copy: Path):
    """A repeated row with the same text is folded (the real PMC-Treatment has 145); other text is refused."""
    corpus = mirror_copy / "R2MED" / "Biology" / "corpus.jsonl"
    lines = corpus.read_text().splitlines()
    corpus.write_text("\n".join(lines + [lines[4]]) + "\n")
    data = r2med_plugin.load_task("R2MEDBiology", data_dir=mirror_copy, accept_drift=True)
    assert dict(data.report.repeated_document_ids) == {"biology-doc-0004": 2} and data.corpus.height == len(lines)
    changed = json.loads(lines[4]) | {"text": "something else"}
    corpus.write_text("\n".join(lines + [json.dumps(changed)]) + "\n")
    with pytest.raises(ValueError, match=rf"corpus.jsonl, rows 5 and {len(lines) + 1}: document id 'biology-doc-0004' occurs twice with different text"):
        r2med_plugin.load_task("R2MEDBiology", data_dir=mirror_copy, accept_drift=True)


def test_empty_text(mirror_copy: Path):
    """A blank document is kept (a document with no tokens, as the references keep it); a blank query is refused."""
    path = mirror_copy / "hakari-bench" / "NanoR2MED" / "corpus" / "NanoR2MEDBiology.parquet"
    frame = pl.read_parquet(path)
    frame.with_columns(pl.when(pl.int_range(pl.len()) == 7).then(pl.lit("  ")).otherwise("text").alias("text")).write_parquet(path)
    data = r2med_plugin.load_task("NanoR2MEDBiology", data_dir=mirror_copy, accept_drift=True)
    assert data.report.near_empty_documents == ["nano-biology-doc-0007"]
    path = mirror_copy / "hakari-bench" / "NanoR2MED" / "queries" / "NanoR2MEDBiology.parquet"
    frame = pl.read_parquet(path)
    frame.with_columns(pl.when(pl.int_range(pl.len()) == 2).then(pl.lit("  ")).otherwise("text").alias("text")).write_parquet(path)
    with pytest.raises(ValueError, match=r"NanoR2MEDBiology.parquet, row 3: empty text for id 'nano-biology-q-002'"):
        r2med_plugin.load_task("NanoR2MEDBiology", data_dir=mirror_copy, accept_drift=True)


def test_qrels_naming_an_unknown_document(mirror_copy: Path):
    qrels = mirror_copy / "R2MED" / "Biology" / "qrels.jsonl"
    with qrels.open("a") as handle:
        handle.write(json.dumps({"q_id": "biology-q-000", "p_id": "biology-doc-9999", "score": 1}) + "\n")
    with pytest.raises(ValueError, match=r"qrels.jsonl, row 10: document id 'biology-doc-9999' is not in the document table"):
        r2med_plugin.load_task("R2MEDBiology", data_dir=mirror_copy, accept_drift=True)


def test_qrels_naming_an_unknown_query(mirror_copy: Path):
    path = mirror_copy / "hakari-bench" / "NanoR2MED" / "qrels" / "NanoR2MEDBiology.parquet"
    frame = pl.read_parquet(path)
    pl.concat([frame, pl.DataFrame({"query-id": ["ghost"], "corpus-id": ["nano-biology-doc-0001"]})]).write_parquet(path)
    with pytest.raises(ValueError, match=r"row 10: query id 'ghost' is not in the query table"):
        r2med_plugin.load_task("NanoR2MEDBiology", data_dir=mirror_copy, accept_drift=True)


def test_corrupt_parquet(mirror_copy: Path):
    path = mirror_copy / "hakari-bench" / "NanoR2MED" / "queries" / "NanoR2MEDBiology.parquet"
    path.write_bytes(path.read_bytes()[:40])
    with pytest.raises(ValueError, match=r"queries/NanoR2MEDBiology.parquet: not a readable parquet file"):
        r2med_plugin.load_task("NanoR2MEDBiology", data_dir=mirror_copy, accept_drift=True)


def test_query_ids_that_are_document_ids_are_reported(mirror_copy: Path):
    queries = mirror_copy / "R2MED" / "Biology" / "query.jsonl"
    qrels = mirror_copy / "R2MED" / "Biology" / "qrels.jsonl"
    queries.write_text(queries.read_text().replace("biology-q-000", "biology-doc-0000"))
    qrels.write_text(qrels.read_text().replace("biology-q-000", "biology-doc-0000"))
    data = r2med_plugin.load_task("R2MEDBiology", data_dir=mirror_copy, accept_drift=True)
    assert data.report["query_ids_in_corpus"] == ["biology-doc-0000"]


def test_integer_ids_are_read_as_strings(mirror_copy: Path):
    corpus = mirror_copy / "R2MED" / "Biology" / "corpus.jsonl"
    rows = [json.loads(line) for line in corpus.read_text().splitlines()]
    rows.append({"id": 123456, "text": "an extra document with a numeric id"})
    corpus.write_text("".join(json.dumps(r) + "\n" for r in rows))
    data = r2med_plugin.load_task("R2MEDBiology", data_dir=mirror_copy, accept_drift=True)
    assert "123456" in data.corpus["id"].to_list()


def test_offline_without_mirror_names_the_variable(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    monkeypatch.delenv("R2MED_DATA_DIR", raising=False)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    import huggingface_hub.constants as constants

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hf" / "hub"))
    with pytest.raises(ConnectionError, match="R2MED_DATA_DIR"):
        r2med_plugin.load_task("R2MEDBiology")


def test_loading_does_not_mutate_between_calls(mirror_env: Path):
    first = r2med_plugin.load_task("NanoR2MEDPMCClinical")
    first.qrels.clear()
    second = r2med_plugin.load_task("NanoR2MEDPMCClinical")
    assert len(second.qrels) == NANO_QUERIES


def test_data_files_may_be_glob_patterns(mirror_copy: Path):
    readme = mirror_copy / "R2MED" / "Biology" / "README.md"
    readme.write_text(readme.read_text().replace("path: corpus.jsonl", "path: corpus*.jsonl"))
    assert r2med_plugin.load_task("R2MEDBiology", data_dir=mirror_copy, accept_drift=True).corpus.height == fixture_document_count("biology")
    (mirror_copy / "R2MED" / "Biology" / "corpus-extra.jsonl").write_text('{"id": "x", "text": "y"}\n')
    with pytest.raises(ValueError, match="must name exactly one file"):
        r2med_plugin.load_task("R2MEDBiology", data_dir=mirror_copy, accept_drift=True)


def test_the_load_report_is_typed_and_damaged_files_are_their_own_error(mirror_copy: Path):
    from r2med_plugin.data.readers import DamagedFileError, read_table
    from r2med_plugin.types import LoadReport

    data = r2med_plugin.load_task("R2MEDBiology", data_dir=mirror_copy, accept_drift=True)
    assert isinstance(data.report, LoadReport)
    assert data.report.count_drift == data.report["count_drift"] and dict(data.report)["synthetic_sample"] is False
    broken = mirror_copy / "R2MED" / "Biology" / "corpus.jsonl"
    broken.write_text('{"id": "d1", "text": "x"}\n{"id": "d2", "te')
    with pytest.raises(DamagedFileError, match="corpus.jsonl, line 2: malformed JSON"):
        read_table(broken, {"id": pl.Utf8, "text": pl.Utf8})


def test_a_mirror_load_never_opens_a_connection_even_without_the_offline_switches(mirror_env: Path,
                                                                                   monkeypatch: pytest.MonkeyPatch):
    """With R2MED_DATA_DIR set, loading reads the disk only: no hub request, so nothing waits on hub retries when
    HF_HUB_OFFLINE is unset on a machine without network (here every connection attempt fails the test)."""
    import socket

    for switch in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE"):
        monkeypatch.delenv(switch, raising=False)
    attempts: list[object] = []

    def refuse(address, *args, **kwargs):
        attempts.append(address)
        raise OSError(f"no network in this test: {address}")

    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setattr(socket, "getaddrinfo", refuse)
    for name in ("R2MEDBiology", "NanoR2MEDBiology"):
        data = r2med_plugin.load_task(name)
        assert data.source == "mirror" and data.corpus.height > 0
    assert attempts == []


def test_the_unverified_mirror_warning_shows_once_per_mirror(mirror_env: Path, capsys):
    from r2med_plugin.cli import main

    nano = [spec.name for spec in NANO[:3]]
    assert main(["evaluate", "--task", *nano, "--retriever", "bm25-robertson", "--quiet"]) == 0
    err = capsys.readouterr().err
    assert err.count("records no commit it was downloaded at") == 1, err
    assert f"the mirror {mirror_env}:" in err


def test_the_unverified_mirror_warning_shows_once_for_tasks_of_several_repos(mirror_env: Path, capsys):
    """Each R2MED task is a repo of its own: the warning named the repo, so `reproduce` printed it 8 times, --quiet or
    not. It names the mirror folder now, one line per command."""
    from r2med_plugin.cli import main

    tasks = ["R2MEDBiology", "R2MEDIIYiClinical", "R2MEDPMCTreatment"]
    assert main(["evaluate", "--task", *tasks, "--retriever", "bm25-robertson", "--quiet"]) == 0
    err = capsys.readouterr().err
    assert err.count(f"the mirror {mirror_env}: a repo in it does not record every file read at one commit") == 1, err
    assert err.count("a repo in it") == 1  # and the files that contradict their published hash are named apart
    line = next(line for line in err.splitlines() if line.startswith("R2MEDIIYiClinical: 3 files of "))
    assert str(mirror_env / "R2MED" / "IIYi-Clinical") in line and "are not the files of revision" in line
    assert all(f"{name}: " in line for name in ("corpus.jsonl", "qrels.jsonl", "query.jsonl"))
    assert all(err.count(f"{task}: ") and sum(line.startswith(f"{task}: ") and "not the file" in line
                                             for line in err.splitlines()) <= 1 for task in tasks)  # a line per task


def test_no_code_from_a_dataset_repo_runs(mirror_copy: Path, tmp_path: Path):
    marker = tmp_path / "executed"
    script = f"from pathlib import Path\nPath({str(marker)!r}).write_text('ran')\n"
    repo = mirror_copy / "R2MED" / "Biology"
    for name in ("Biology.py", "__init__.py", "loading_script.py"):
        (repo / name).write_text(script)
    data = r2med_plugin.load_task("R2MEDBiology", data_dir=mirror_copy, accept_drift=True)
    assert data.corpus.height == fixture_document_count("biology") and not marker.exists()
