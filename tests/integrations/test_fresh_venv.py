"""The built wheel in a fresh virtual environment: the real `mteb` CLI sees our tasks with no glue.

The wheel is installed without dependencies into a new venv (no editable install); the
dependencies come from the test environment through a path file, so nothing is downloaded.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

import r2med_plugin
from tests.offline_model import MODEL_NAME, MODEL_REVISION, populate_hf_cache

pytestmark = pytest.mark.slow

REPO_ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def cli_env(fresh_python: Path, fixture_mirror: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    hf_home = tmp_path_factory.mktemp("hf_home")
    populate_hf_cache(hf_home)
    env = {key: value for key, value in os.environ.items() if not key.startswith(("R2MED_", "PYTHONPATH"))}
    env.update(
        HF_HOME=str(hf_home), HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1", TRANSFORMERS_OFFLINE="1",
        R2MED_DATA_DIR=str(fixture_mirror), R2MED_ACCEPT_DRIFT="1", TOKENIZERS_PARALLELISM="false",
    )
    return env


def _run(python: Path, args: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(python), *args], env=env, cwd=cwd, capture_output=True, text=True, timeout=600)


def test_the_wheel_is_what_runs(fresh_python: Path, cli_env: dict[str, str], tmp_path: Path):
    out = _run(fresh_python, ["-c", "import r2med_plugin, sys; print(r2med_plugin.__file__); print('mteb' in sys.modules)"], cli_env, tmp_path)
    location, mteb_imported = out.stdout.split()
    assert str(fresh_python.parent.parent) in location
    assert mteb_imported == "False"  # the autoload hook imports nothing at start-up


# What registering inside `import mteb` leaves for later (benchmarks/startup.py measures what it costs).
LATER = ["mteb.benchmarks.benchmarks", "r2med_plugin.data.loader", "r2med_plugin.evaluation.plan",
         "r2med_plugin.integrations.mteb_metadata", "r2med_plugin.metrics", "r2med_plugin.types"]
REGISTERED = (
    "import json, sys, mteb\n"
    "registry = mteb.get_tasks.__globals__['_TASKS_REGISTRY']\n"
    "ours = sorted(name for name, cls in registry.items() if getattr(cls, '__r2med_plugin__', False))\n"
    "later = %r\n"
    "before = [name for name in later if name in sys.modules]\n"
    "medical = [t.metadata.name for t in mteb.get_tasks(domains=['Medical']) if getattr(t, '__r2med_plugin__', False)]\n"
    "benchmarks = {name: len(mteb.get_benchmark(name).tasks) for name in ('NanoR2MED', 'R2MED-Full')}\n"
    "print(json.dumps({'ours': ours, 'before': before, 'medical': medical, 'benchmarks': benchmarks,\n"
    "                  'after': [name for name in later if name in sys.modules]}))\n"
) % (LATER,)


def test_import_mteb_registers_names_and_builds_the_rest_on_first_use(fresh_python: Path, cli_env: dict[str, str], tmp_path: Path):
    out = _run(fresh_python, ["-c", REGISTERED], cli_env, tmp_path)
    assert out.returncode == 0, out.stderr[-3000:]
    found = json.loads(out.stdout.strip().splitlines()[-1])
    domains = [spec.domain for spec in r2med_plugin.list_tasks("r2med")]
    names = [f"R2MED{d}" for d in domains] + [f"NanoR2MED{d}" for d in domains] + [f"NanoR2MED{d}Reranking" for d in domains]
    assert found["ours"] == sorted(names) and len(names) == 8 * 3
    assert found["before"] == []  # no metadata, loader, metric, scorer or mteb benchmark built by `import mteb`
    assert sorted(found["medical"]) == sorted(names)
    assert found["benchmarks"] == {"NanoR2MED": 8, "R2MED-Full": 8}
    assert {"mteb.benchmarks.benchmarks", "r2med_plugin.integrations.mteb_metadata", "r2med_plugin.types"} <= set(found["after"])


@pytest.mark.parametrize("task", ["NanoR2MEDBioinformatics", "R2MEDBioinformatics", "R2MEDPMCTreatment"])
def test_mteb_run_cli(fresh_python: Path, cli_env: dict[str, str], tmp_path: Path, task: str):
    out = _run(
        fresh_python,
        ["-m", "mteb", "run", "-t", task, "-m", MODEL_NAME, "--output-folder", str(tmp_path / "results"),
         "--prediction-folder", str(tmp_path / "predictions")],
        cli_env, tmp_path,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    if task == "R2MEDPMCTreatment":  # the real file's shape: ids on several rows; mteb ranks the unique ids, and says so
        shown = " ".join((out.stdout + out.stderr).split())  # mteb's rich log handler wraps lines on stdout
        assert "repeat an earlier id with identical" in shown and "unique ids" in shown
    result_file = tmp_path / "results" / "results" / MODEL_NAME.replace("/", "__") / MODEL_REVISION / f"{task}.json"
    result = json.loads(result_file.read_text())
    scores = result["scores"]["test"][0]
    run = json.loads((tmp_path / "predictions" / f"{task}_predictions.json").read_text())["default"]["test"]
    data = r2med_plugin.load_task(task, data_dir=cli_env["R2MED_DATA_DIR"], accept_drift=True)
    ours = r2med_plugin.evaluate_run(data.qrels, run)
    for key in ("ndcg_at_10", "map_at_10", "recall_at_100", "precision_at_10"):
        assert scores[key] == round(ours[key], 5)
    assert scores["hit_at_10"] == ours["hit_at_10"]
    assert result["dataset_revision"] == data.result_revision  # the fixture mirror records no commit: marked unverified
    assert result["task_name"] == task
    # the predictions file mteb itself wrote exports as a TREC run, filed and tagged by the model mteb recorded
    from r2med_plugin.reporting.submission import export_trec_runs

    (trec,) = export_trec_runs([tmp_path / "predictions"], tmp_path / "trec")
    assert trec == tmp_path / "trec" / MODEL_NAME.replace("/", "__") / MODEL_REVISION / f"{task}.trec"
    first_query = sorted(run)[0]
    lines = [line.split() for line in trec.read_text().splitlines() if line.startswith(first_query + " ")]
    best = max(run[first_query].items(), key=lambda item: (item[1], item[0]))
    assert lines[0][:4] == [first_query, "Q0", best[0], "1"] and lines[0][5] == MODEL_NAME.replace("/", "__")
    assert len(lines) == min(1000, len(run[first_query]))


def test_mteb_lists_our_tasks(fresh_python: Path, cli_env: dict[str, str], tmp_path: Path):
    out = _run(fresh_python, ["-m", "mteb", "available-tasks", "--task-types", "Reranking"], cli_env, tmp_path)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.count("NanoR2MED") == 8
    code = "import mteb; print(len(mteb.get_benchmark('NanoR2MED').tasks), len(mteb.get_tasks(domains=['Medical'])))"
    out = _run(fresh_python, ["-c", code], cli_env, tmp_path)
    n_bench, n_medical = map(int, out.stdout.split())
    assert n_bench == 8 and n_medical >= 24


def test_the_wheel_ships_descriptive_statistics(fresh_python: Path, cli_env: dict[str, str], tmp_path: Path):
    code = (
        "import mteb, json; names = [t.metadata.name for t in mteb.get_tasks(domains=['Medical']) "
        "if getattr(t, '__r2med_plugin__', False)]; "
        "print(json.dumps({n: [mteb.get_task(n).metadata.n_samples, str(mteb.get_task(n).metadata.descriptive_stat_path)] for n in names}))"
    )
    env = {key: value for key, value in cli_env.items() if key != "R2MED_DATA_DIR"}
    out = _run(fresh_python, ["-c", code], env, tmp_path)
    assert out.returncode == 0, out.stderr[-2000:]
    found = json.loads(out.stdout.strip().splitlines()[-1])
    assert len(found) == 24
    assert found["R2MEDBiology"][0] == {"test": 57359 + 103} and found["NanoR2MEDBiologyReranking"][0] == {"test": 10000 + 103}
    assert all(str(fresh_python.parent.parent) in path and "/r2med_plugin/integrations/descriptive_stats/" in path for _, path in found.values())


def test_saved_results_load_back(fresh_python: Path, cli_env: dict[str, str], tmp_path: Path):
    out = _run(
        fresh_python,
        ["-m", "mteb", "run", "-t", "NanoR2MEDPMCTreatmentReranking", "-m", MODEL_NAME, "--output-folder", str(tmp_path / "cache")],
        cli_env, tmp_path,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    code = (
        "import mteb; cache = mteb.ResultCache(%r); "
        "res = cache.load_results(tasks=['NanoR2MEDPMCTreatmentReranking'], models=[%r]); "
        "r = res.model_results[0].task_results[0]; print(r.task_name, r.get_score())"
    ) % (str(tmp_path / "cache"), MODEL_NAME)
    out = _run(fresh_python, ["-c", code], cli_env, tmp_path)
    assert out.returncode == 0, out.stderr[-3000:]
    name, score = out.stdout.split()
    assert name == "NanoR2MEDPMCTreatmentReranking" and 0.0 < float(score) <= 1.0


def test_bad_input_through_the_cli(fresh_python: Path, cli_env: dict[str, str], tmp_path: Path):
    out = _run(fresh_python, ["-m", "mteb", "run", "-t", "NanoR2MEDBiolgy", "-m", MODEL_NAME], cli_env, tmp_path)
    assert out.returncode != 0 and "Did you mean: 'NanoR2MEDBiology'" in out.stderr
    empty = tmp_path / "empty-mirror"
    empty.mkdir()
    out = _run(fresh_python, ["-m", "mteb", "run", "-t", "NanoR2MEDBiology", "-m", MODEL_NAME, "--output-folder", str(tmp_path / "r")],
               {**cli_env, "R2MED_DATA_DIR": str(empty)}, tmp_path)
    assert out.returncode != 0
    assert "hakari-bench/NanoR2MED is missing from the local mirror" in out.stderr


def test_ir_datasets_cli(fresh_python: Path, cli_env: dict[str, str], tmp_path: Path):
    env = {**cli_env, "IR_DATASETS_HOME": str(tmp_path / "irds")}
    out = _run(fresh_python, ["-m", "ir_datasets", "export", "r2med/bioinformatics", "docs"], env, tmp_path)
    assert out.returncode == 0, out.stderr[-2000:]
    lines = out.stdout.splitlines()
    assert len(lines) == 24 and lines[0].startswith("bioinformatics-doc-0000\t")
    out = _run(fresh_python, ["-m", "ir_datasets", "export", "nano-r2med/pmc-treatment/bm25", "scoreddocs", "--format", "trec"], env, tmp_path)
    assert out.returncode == 0, out.stderr[-2000:]
    first = out.stdout.splitlines()[0].split()
    assert first[0] == "nano-pmc-treatment-q-000" and first[1] == "Q0" and first[-1] == "run"
    out = _run(fresh_python, ["-m", "ir_datasets", "lookup", "r2med/bioinformatics", "bioinformatics-doc-0003"], env, tmp_path)
    assert out.returncode == 0 and out.stdout.startswith("bioinformatics-doc-0003\t")
    out = _run(fresh_python, ["-m", "ir_datasets", "export", "r2med/bioinformatics/hyde/o3-mini", "queries"], env, tmp_path)
    assert out.stdout.splitlines()[0].count("\t") == 2  # query_id, text, hy_doc
    out = _run(fresh_python, ["-m", "ir_datasets", "list"], env, tmp_path)
    assert "nano-r2med/biology/hybrid" in out.stdout.split()


def test_demo_from_the_installed_wheel(demo_run):
    out, _ = demo_run
    assert out.returncode == 0, out.stderr[-3000:]
    assert "site-packages" in out.stdout.split("== sample: ")[1].splitlines()[0]  # the sample inside the wheel
    assert "| sentence-transformers/all-MiniLM-L6-v2 (synthetic sample) |" in out.stdout and "| bm25-hakari (synthetic sample) |" in out.stdout