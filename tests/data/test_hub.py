"""The real hub download path (r2med_plugin.data.hub) against a loopback hub: pinned revisions, retries, integrity,
offline behaviour, masked tokens."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import r2med_plugin
from tests.fixture_mirror import fixture_document_count
from tests.support.loopback_hub import HostedRepo, LoopbackHub

NANO_COMMIT = "c0ffee" + "0" * 34
TOKEN = "hf_SecretTokenForTests0123456789"
CHILD = """
import json, sys, logging
logging.basicConfig(level=logging.INFO)
import r2med_plugin
try:
    data = r2med_plugin.load_task(sys.argv[1])
    print(json.dumps({"ok": True, "source": data.source, "revision": data.revision, "docs": data.corpus.height}))
except Exception as error:
    print(json.dumps({"ok": False, "type": type(error).__name__, "message": str(error)}))
"""


@pytest.fixture()
def hosted(fixture_mirror: Path, tmp_path: Path) -> dict[str, HostedRepo]:
    """Copies of two fixture repos, served at their commits (R2MED pinned; NanoR2MED's main -> NANO_COMMIT)."""
    spec = r2med_plugin.get_task_spec("R2MEDBiology")
    repos = {}
    for repo_id, commit, aliases in (("R2MED/Biology", spec.revision, ()), ("hakari-bench/NanoR2MED", NANO_COMMIT, ("main",))):
        folder = tmp_path / "served" / repo_id
        shutil.copytree(fixture_mirror / repo_id, folder)
        repos[repo_id] = HostedRepo(repo_id, folder, commit, aliases)
    return repos


def load_via_hub(hub: LoopbackHub, task: str, hf_home: Path, **env: str) -> dict:
    child_env = {k: v for k, v in os.environ.items() if not k.startswith(("R2MED_", "HF_", "TRANSFORMERS_OFFLINE"))}
    child_env.update(HF_ENDPOINT=hub.endpoint, HF_HOME=str(hf_home), HF_HUB_DISABLE_TELEMETRY="1", HF_HUB_DISABLE_XET="1",
                     R2MED_ACCEPT_DRIFT="1", HF_HUB_ETAG_TIMEOUT="5", HF_HUB_DOWNLOAD_TIMEOUT="5", **env)
    out = subprocess.run([sys.executable, "-c", CHILD, task], env=child_env, capture_output=True, text=True, timeout=120)
    result = json.loads(out.stdout.strip().splitlines()[-1])
    result["stderr"] = out.stderr
    return result


def test_r2med_downloads_the_pinned_revision(hosted, tmp_path: Path):
    with LoopbackHub(hosted) as hub:
        result = load_via_hub(hub, "R2MEDBiology", tmp_path / "hf")
    spec = r2med_plugin.get_task_spec("R2MEDBiology")
    assert result["ok"], result
    assert result["source"] == "hub" and result["revision"] == spec.revision and result["docs"] == fixture_document_count("biology")
    paths = [path for _, path in hub.requests]
    assert all(spec.revision in path for path in paths) and not any("/main" in path for path in paths)
    assert {"/corpus.jsonl", "/query.jsonl", "/qrels.jsonl"} <= {p[p.rfind("/"):] for p in paths}
    assert not any("hyde" in path for path in paths)  # only the files the task needs


def test_nano_resolves_main_and_records_the_commit(hosted, tmp_path: Path):
    with LoopbackHub(hosted) as hub:
        result = load_via_hub(hub, "NanoR2MEDPMCClinical", tmp_path / "hf")
    assert result["ok"] and result["revision"] == NANO_COMMIT
    assert any(path.endswith("/resolve/main/README.md") for _, path in hub.requests)
    assert not any("NanoR2MEDBiology" in path for _, path in hub.requests)  # other splits are not fetched


@pytest.mark.slow
def test_transient_errors_are_retried(hosted, tmp_path: Path):
    with LoopbackHub(hosted) as hub:
        hub.add_fault("corpus.jsonl", "500", "drop", "500")
        hub.add_fault("qrels.jsonl", "truncate")
        result = load_via_hub(hub, "R2MEDBiology", tmp_path / "hf")
    assert result["ok"], result
    assert hub.downloads_of("corpus.jsonl") >= 4 and hub.downloads_of("qrels.jsonl") >= 2


def test_persistent_server_errors_end_in_a_clear_message(hosted, tmp_path: Path):
    with LoopbackHub(hosted) as hub:
        hub.add_fault("corpus.jsonl", *["500"] * 40)
        result = load_via_hub(hub, "R2MEDBiology", tmp_path / "hf", R2MED_HUB_RETRIES="2", HF_TOKEN=TOKEN)
    assert not result["ok"] and result["type"] == "UnreachableError"  # a ConnectionError subclass
    assert "R2MED_DATA_DIR" in result["message"]
    assert TOKEN not in result["message"] and TOKEN not in result["stderr"]


def test_corrupt_download_is_detected_and_not_cached(hosted, tmp_path: Path):
    with LoopbackHub(hosted) as hub:
        hub.add_fault("corpus/NanoR2MEDBiology.parquet", "corrupt")
        first = load_via_hub(hub, "NanoR2MEDBiology", tmp_path / "hf")
        second = load_via_hub(hub, "NanoR2MEDBiology", tmp_path / "hf")
    assert not first["ok"] and "not a readable parquet file" in first["message"]
    assert "removed from the Hugging Face cache" in first["message"]
    assert second["ok"] and second["docs"] == 200
    assert hub.downloads_of("corpus/NanoR2MEDBiology.parquet") == 2


def test_offline_with_a_warm_cache(hosted, tmp_path: Path):
    with LoopbackHub(hosted) as hub:
        assert load_via_hub(hub, "R2MEDBiology", tmp_path / "hf")["ok"]
        hub.requests.clear()
        result = load_via_hub(hub, "R2MEDBiology", tmp_path / "hf", HF_HUB_OFFLINE="1")
    assert result["ok"] and hub.requests == []


def test_offline_with_a_cold_cache(hosted, tmp_path: Path):
    with LoopbackHub(hosted) as hub:
        result = load_via_hub(hub, "R2MEDBiology", tmp_path / "cold", HF_HUB_OFFLINE="1")
    assert not result["ok"] and "R2MED_DATA_DIR" in result["message"] and hub.requests == []


def test_two_processes_load_the_same_task_at_once(hosted, tmp_path: Path):
    with LoopbackHub(hosted) as hub:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("R2MED_", "HF_", "TRANSFORMERS_OFFLINE"))}
        env.update(HF_ENDPOINT=hub.endpoint, HF_HOME=str(tmp_path / "hf"), HF_HUB_DISABLE_TELEMETRY="1",
                   HF_HUB_DISABLE_XET="1", R2MED_ACCEPT_DRIFT="1")
        children = [subprocess.Popen([sys.executable, "-c", CHILD, "NanoR2MEDIIYiClinical"], env=env, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL, text=True) for _ in range(2)]
        outputs = [json.loads(child.communicate(timeout=120)[0].strip().splitlines()[-1]) for child in children]
    assert all(out["ok"] and out["docs"] == 200 for out in outputs)
    assert hub.downloads_of("corpus/NanoR2MEDIIYiClinical.parquet") == 1


def test_symlinked_repo_out_of_the_mirror(mirror_copy: Path, tmp_path: Path):
    outside = tmp_path / "outside"
    shutil.move(str(mirror_copy / "R2MED" / "Biology"), outside)
    (mirror_copy / "R2MED" / "Biology").symlink_to(outside)
    with pytest.raises(ValueError, match="outside the mirror"):
        r2med_plugin.load_task("R2MEDBiology", data_dir=mirror_copy, accept_drift=True)


def test_tokens_are_masked_in_messages(monkeypatch: pytest.MonkeyPatch):
    from r2med_plugin.data.hub import without_secrets

    monkeypatch.setenv("HF_TOKEN", "custom-secret-value")
    text = "401 for url ... Authorization: Bearer hf_abcdefghijklmnop token=custom-secret-value"
    masked = without_secrets(text)
    assert "hf_abcdefghijklmnop" not in masked and "custom-secret-value" not in masked
