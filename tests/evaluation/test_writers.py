"""Writing an evaluation's outputs (r2med_plugin.evaluation.writers): candidate-only files, stale run files, metrics no
deeper than the run."""

from __future__ import annotations

import json
from pathlib import Path

from r2med_plugin.evaluation.runner import evaluate_task
from r2med_plugin.evaluation.writers import write_outputs
from r2med_plugin.models.hashing import HashingEncoder


def test_a_result_written_without_trec_warns_about_an_earlier_run_file(mirror_env: Path, tmp_path: Path, caplog):
    from r2med_plugin.evaluation.runner import evaluate_task
    from r2med_plugin.evaluation.writers import write_outputs

    write_outputs(evaluate_task("NanoR2MEDBiology", "bm25-robertson", show_progress=False), tmp_path, trec=True)
    with caplog.at_level("WARNING"):
        write_outputs(evaluate_task("NanoR2MEDBiology", "bm25-robertson", top_k=20, show_progress=False), tmp_path)
    assert any("a TREC run of an earlier run" in record.getMessage() for record in caplog.records)


def test_candidates_only_never_overwrites_the_full_corpus_result(mirror_env: Path, tmp_path: Path):
    encoder = HashingEncoder(dim=32, name="cand-probe")
    full = evaluate_task("NanoR2MEDBiology", encoder, candidates=["hybrid"], show_progress=False)
    full_paths = write_outputs(full, tmp_path, trec=True)
    before = full_paths["mteb"].read_bytes(), full_paths["trec"].read_bytes()
    only = evaluate_task("NanoR2MEDBiology", encoder, candidates=["hybrid"], candidates_only=True, show_progress=False)
    only_paths = write_outputs(only, tmp_path, trec=True)
    assert (full_paths["mteb"].read_bytes(), full_paths["trec"].read_bytes()) == before
    assert only_paths["mteb"] != full_paths["mteb"] and only_paths["trec"] != full_paths["trec"]
    assert "results" not in only_paths["mteb"].relative_to(tmp_path).parts  # ResultCache reads <dir>/results/ only
    payload = json.loads(only_paths["mteb"].read_text())
    assert payload["r2med_evaluation"] == "candidates-only"
    # Every ResultCache reader sees only the full-corpus result.
    full_files = sorted(p.relative_to(tmp_path) for p in (tmp_path / "results").rglob("NanoR2MEDBiology.json"))
    assert full_files == [full_paths["mteb"].relative_to(tmp_path)]


def test_top_k_never_reports_metrics_deeper_than_the_run(mirror_env: Path, tmp_path: Path):
    shallow = evaluate_task("NanoR2MEDBiology", "bm25-robertson", top_k=10, show_progress=False)
    deep = evaluate_task("NanoR2MEDBiology", "bm25-robertson", show_progress=False)
    assert shallow.scores["ndcg_at_10"] == deep.scores["ndcg_at_10"]
    assert "recall_at_100" not in shallow.scores and "ndcg_at_1000" not in shallow.scores  # would be recall_at_10 in disguise
    assert "recall_at_100" in deep.scores and "mrr" in shallow.scores
    paths = write_outputs(shallow, tmp_path)
    assert "recall_at_1000" not in json.loads(paths["mteb"].read_text())["scores"]["test"][0]
    # The official file needs each query's top 100: BM25 ranks again that deep, so it equals the deep run's.
    assert shallow.official == deep.official and "recall_at_100" in shallow.official


def test_a_candidates_only_bm25_run_keeps_only_the_candidates(mirror_env: Path, tmp_path: Path):
    result = evaluate_task("NanoR2MEDBiology", "bm25-robertson", candidates=["bm25"], candidates_only=True, show_progress=False)
    lists = result.data.candidates["bm25"]
    assert result.run and all(set(ranked) <= set(lists[query_id]) for query_id, ranked in result.run.items())
    trec = write_outputs(result, tmp_path, trec=True)["trec"]
    written = {(line.split()[0], line.split()[2]) for line in trec.read_text().splitlines()}
    assert written == {(query_id, doc_id) for query_id, ranked in result.run.items() for doc_id in ranked}


def test_every_result_records_the_request_that_produced_it(mirror_env: Path, tmp_path: Path):
    from dataclasses import replace

    from r2med_plugin.evaluation.plan import request_of
    from r2med_plugin.evaluation.request import EvaluationRequest, Outputs, TaskArguments

    request = request_of("NanoR2MEDBiology", "bm25-robertson", TaskArguments.of({"top_k": 50, "candidates": ["bm25"],
                                                                                 "show_progress": False}, "test"))
    paths = write_outputs(evaluate_task(request), tmp_path)
    recorded = json.loads(paths["mteb"].read_text())["r2med_provenance"]["request"]
    assert recorded == request.to_dict()
    assert EvaluationRequest.from_dict(recorded) == request  # what ran, read back
    assert json.loads(paths["official_metadata"].read_text())["request"] == recorded
    placed = replace(request, data_dir=str(tmp_path / "mirror-elsewhere"), outputs=Outputs(str(tmp_path / "out"), trec=True))
    assert placed.recorded() == request.to_dict() | {"outputs": {"folder": "out", "trec": True, "trec_depth": 1000}}
    assert str(tmp_path) not in json.dumps(placed.recorded())  # result files are published: no folder of this machine
    assert EvaluationRequest.from_dict(placed.recorded()).outputs.trec  # still a request that runs
    objects = write_outputs(evaluate_task("NanoR2MEDBiology", HashingEncoder(dim=16, name="h"), show_progress=False),
                            tmp_path / "objects")
    assert "request" not in json.loads(objects["mteb"].read_text())["r2med_provenance"]  # a Python object: not recorded
