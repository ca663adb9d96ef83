"""A mirror's folder layout and dataset cards (r2med_plugin.data.layout): links out of the data folder, YAML bombs and
oversized cards are refused."""

from __future__ import annotations

from pathlib import Path

import pytest

import r2med_plugin


def test_symlinked_file_out_of_the_mirror(mirror_copy: Path, tmp_path: Path):
    secret = tmp_path / "secret.jsonl"
    secret.write_text('{"id": "x", "text": "a file outside the mirror"}\n')
    corpus = mirror_copy / "R2MED" / "Biology" / "corpus.jsonl"
    corpus.unlink()
    corpus.symlink_to(secret)
    with pytest.raises(ValueError, match="links out of the data folder are refused"):
        r2med_plugin.load_task("R2MEDBiology", data_dir=mirror_copy, accept_drift=True)


def test_yaml_bomb_is_refused(mirror_copy: Path, monkeypatch: pytest.MonkeyPatch):
    """Refused from the parser's events, before any loader builds it (its time: benchmarks/card_refusal.py)."""
    import yaml

    from r2med_plugin.data.layout import DatasetCardError

    readme = mirror_copy / "R2MED" / "Biology" / "README.md"
    bomb = ["---", 'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    bomb += [f"{chr(98 + i)}: &{chr(98 + i)} [" + ",".join([f"*{chr(97 + i)}"] * 9) + "]" for i in range(8)]
    readme.write_text("\n".join(bomb + ["configs: []", "---", ""]))
    loaded = []

    def never_load(*args, **kwargs):
        loaded.append(args)
        raise AssertionError("the bomb reached a YAML loader")

    for loader in ("load", "safe_load", "full_load", "unsafe_load", "compose", "safe_load_all", "load_all"):
        monkeypatch.setattr(yaml, loader, never_load)
    with pytest.raises(DatasetCardError, match="anchors and aliases") as refused:
        r2med_plugin.load_task("R2MEDBiology", data_dir=mirror_copy, accept_drift=True)
    assert str(readme) in str(refused.value) and loaded == []


def test_huge_readme_is_refused(mirror_copy: Path):
    readme = mirror_copy / "R2MED" / "Biology" / "README.md"
    readme.write_text(readme.read_text() + "x" * (2 * 1024 * 1024))
    with pytest.raises(ValueError, match="not a dataset card"):
        r2med_plugin.load_task("R2MEDBiology", data_dir=mirror_copy, accept_drift=True)
