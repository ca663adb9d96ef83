"""Descriptive statistics of the 24 tasks: shipped, filled as mteb's tests require, made by the script, and
computed by mteb's own code from data agreeing with what the loader reads."""

from __future__ import annotations

import json
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import mteb
import pytest

import r2med_plugin
from r2med_plugin.integrations import descriptive_statistics as ds
from r2med_plugin.integrations import mteb as integration

REPO = Path(__file__).resolve().parents[2]
ALL_NAMES = ds.task_names()
SCRIPT = REPO / "scripts" / "make_descriptive_stats.py"


def expected_samples(name: str) -> dict[str, int]:
    counts = r2med_plugin.get_task_spec(ds.spec_name(name)).expected_counts
    return {"test": counts["documents"] + counts["queries"]}


def test_the_24_tasks():
    assert len(ALL_NAMES) == 24 and sum(name.endswith("Reranking") for name in ALL_NAMES) == 8
    assert sorted(path.stem for path in ds.SHIPPED_DIR.glob("*.json")) == sorted(ALL_NAMES)


@pytest.mark.parametrize("name", ALL_NAMES)
def test_metadata_is_filled_valid_and_has_statistics(name: str):
    """What mteb's test_all_metadata_is_filled_and_valid (tests/test_tasks, not in the sdist) checks, and more."""
    task = mteb.get_task(name)
    metadata = task.metadata
    metadata._validate_metadata()
    assert metadata.is_filled(), f"metadata of {name} is not filled"
    assert metadata.dataset.get("trust_remote_code", False) is False
    assert not task.is_aggregate
    assert metadata.descriptive_stats is not None
    assert metadata.n_samples == expected_samples(name)
    assert metadata.descriptive_stat_path == ds.SHIPPED_DIR / f"{name}.json"
    assert Path(mteb.__file__).parent not in metadata.descriptive_stat_path.parents


@pytest.mark.parametrize("name", ALL_NAMES)
def test_shipped_counts_and_provenance(name: str):
    stats = ds.shipped(name)["test"]
    spec = r2med_plugin.get_task_spec(ds.spec_name(name))
    counts = spec.expected_counts
    assert (stats["num_queries"], stats["num_documents"]) == (counts["queries"], counts["documents"])
    assert stats["relevant_docs_statistics"]["num_relevant_docs"] == counts["qrels"]
    provenance = stats["provenance"]
    assert provenance["dataset"] == spec.hub_repo and provenance["dataset_revision"] == (spec.revision or "main")
    assert provenance["mteb_version"] == "2.26.24" and provenance["generated_by"] == "scripts/make_descriptive_stats.py"
    if spec.kind == "r2med":
        assert provenance["source"] == "from_mteb"
        assert all(key in stats for key in ("documents_text_statistics", "queries_text_statistics", "number_of_characters"))
    else:
        assert provenance["source"] == "from_dataset_card"
        assert "queries_text_statistics.total_text_length" in provenance["unknown"]
        hybrid = spec.candidate_profiles["hybrid"]
        top_ranked = stats["top_ranked_statistics"]
        if name.endswith("Reranking"):
            assert top_ranked["num_top_ranked"] == 100 * counts["queries"] + hybrid["rows_with_101_candidates"]
            assert (top_ranked["min_top_ranked_per_query"], top_ranked["max_top_ranked_per_query"]) == (100, hybrid["candidate_count_max"])
        else:
            assert top_ranked is None


def test_r2med_statistics_correct_mtebs_num_queries():
    """mteb ships num_queries 5 for PMC-Treatment (150 queries); its text statistics are kept as shipped."""
    stats = ds.shipped("R2MEDPMCTreatment")["test"]
    assert stats["num_queries"] == 150 and stats["num_samples"] == 28954 + 150
    mtebs = mteb.get_task("R2MEDPMCTreatmentRetrieval").metadata.descriptive_stats["test"]
    assert mtebs["num_queries"] == 5 and mtebs["num_samples"] == 28954 + 5
    assert stats["documents_text_statistics"] == mtebs["documents_text_statistics"]
    provenance = stats["provenance"]
    assert provenance["corrections"][0].startswith("num_queries: mteb ships 5;")
    assert "describe 28809 texts" in provenance["caveats"][0]
    biology = ds.shipped("R2MEDBiology")["test"]["provenance"]  # mteb's counts were right there
    assert biology["corrections"] == [] and biology["caveats"] == []


@pytest.mark.slow
def test_shipped_statistics_are_what_the_script_writes():
    for name in ALL_NAMES:
        assert ds.comparable(ds.shipped(name)) == ds.comparable(json.loads(ds.render(ds.without_data(name)))), name
    run = subprocess.run([sys.executable, str(SCRIPT), "--without-data", "--check"], capture_output=True, text=True, cwd=REPO)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == f"checked 24 files in {ds.SHIPPED_DIR}"


@pytest.mark.slow
def test_script_rejects_unknown_task_names():
    run = subprocess.run(
        [sys.executable, str(SCRIPT), "--without-data", "--tasks", "NanoR2MEDBiolgy"], capture_output=True, text=True, cwd=REPO
    )
    assert run.returncode == 2 and "unknown task names ['NanoR2MEDBiolgy']" in run.stderr


def test_card_statistics_refuse_r2med_and_mteb_statistics_refuse_nano():
    with pytest.raises(ValueError, match="only NanoR2MED statistics are taken from the dataset card"):
        ds.from_dataset_card("R2MEDBiology")
    with pytest.raises(ValueError, match="mteb ships no statistics for this data"):
        ds.from_mteb("NanoR2MEDBiology")


def _text_stats(texts: list[str]) -> dict:
    lengths = [len(text) for text in texts]
    return {
        "total_text_length": sum(lengths),
        "min_text_length": min(lengths),
        "average_text_length": sum(lengths) / len(lengths),
        "max_text_length": max(lengths),
        "unique_texts": len(set(texts)),
    }


@pytest.mark.slow
def test_statistics_from_data_agree_with_the_loader(mirror_env: Path, tmp_path: Path):
    """The script's --from-data on the fixture mirror: mteb's computation, compared with the loader's data."""
    out = tmp_path / "stats"
    run = subprocess.run(
        [sys.executable, str(SCRIPT), "--from-data", "--out", str(out)], capture_output=True, text=True, cwd=REPO
    )
    assert run.returncode == 0, run.stderr[-3000:]
    assert sorted(path.stem for path in out.glob("*.json")) == sorted(ALL_NAMES)
    for name in ALL_NAMES:
        stats = json.loads((out / f"{name}.json").read_text())["test"]
        data = r2med_plugin.load_task(ds.spec_name(name))
        queries = data.queries["text"].to_list()
        # mteb measures the text a model reads: (title + " " + text).strip() (mteb._create_dataloaders._corpus_to_dict),
        # so the fixture's blank Biology document counts 0 characters there, as the real 1-character one counts 1
        documents = [text.strip() for text in data.corpus["text"].to_list()]
        per_query = [len(judged) for judged in data.qrels.values()]
        assert stats["num_queries"] == data.queries.height and stats["num_documents"] == data.corpus.height, name
        assert stats["num_samples"] == data.queries.height + data.corpus.height
        assert stats["queries_text_statistics"] == _text_stats(queries)
        assert stats["documents_text_statistics"] == _text_stats(documents)
        assert stats["number_of_characters"] == sum(map(len, queries)) + sum(map(len, documents))
        relevant = stats["relevant_docs_statistics"]
        assert relevant["num_relevant_docs"] == sum(per_query)
        assert (relevant["min_relevant_docs_per_query"], relevant["max_relevant_docs_per_query"]) == (min(per_query), max(per_query))
        assert relevant["average_relevant_docs_per_query"] == sum(per_query) / len(per_query)
        assert relevant["unique_relevant_docs"] == len({doc for judged in data.qrels.values() for doc in judged})
        assert (relevant["num_missing_query_ids"], relevant["num_missing_corpus_ids"]) == (0, 0)
        if name.endswith("Reranking"):
            lists = data.candidates["hybrid"]
            assert stats["top_ranked_statistics"]["num_top_ranked"] == sum(map(len, lists.values()))
            assert stats["top_ranked_statistics"]["max_top_ranked_per_query"] == 101  # the fixture's safeguard row
        else:
            assert stats["top_ranked_statistics"] is None
        provenance = stats["provenance"]
        assert provenance["source"] == "from_data" and provenance["dataset_revision"] == data.result_revision
        assert provenance["mteb_version"] == version("mteb")
        # The same fields as the shipped card statistics (NanoR2MED): only their values are unknown there.
        if data.spec.kind == "nano":
            assert set(stats) == set(ds.shipped(name)["test"])
        else:
            missing = set(stats) - set(ds.shipped(name)["test"])
            absent = set(ds.shipped(name)["test"]["provenance"]["absent_fields_of_this_mteb_schema"])
            assert missing == {key for key in absent if "." not in key}


def test_computing_statistics_never_overwrites_the_shipped_ones(mirror_env: Path, private_cache: Path):
    shipped = ds.SHIPPED_DIR / "R2MEDBiology.json"
    before = shipped.read_bytes()
    task = mteb.get_task("R2MEDBiology")
    assert task.metadata.descriptive_stat_path == shipped
    computed = task.calculate_descriptive_statistics(overwrite_results=True)
    assert shipped.read_bytes() == before
    path = task.metadata.descriptive_stat_path
    assert path.parent.parent == private_cache / "descriptive_stats" and json.loads(path.read_text()) == computed
    assert computed["test"]["num_queries"] == 5  # the fixture's, not the shipped 103


def test_shipped_statistics_are_only_shown_for_their_revision():
    metadata = mteb.get_task("R2MEDBiology").metadata
    assert metadata.descriptive_stats["test"]["num_queries"] == 103
    other = metadata.model_copy(update={"dataset": {**metadata.dataset, "revision": "0" * 40}})
    assert other.descriptive_stats is None  # nothing computed for that revision: never the pinned data's numbers
    writing = metadata.model_copy()
    writing._stats_target = "write"
    assert writing.descriptive_stat_path == writing.computed_stat_path != ds.SHIPPED_DIR / "R2MEDBiology.json"
    assert isinstance(metadata, integration.R2MEDTaskMetadata)
