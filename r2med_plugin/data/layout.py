"""The hub layout of a dataset repo: README.md front matter -> files per config and split."""

from __future__ import annotations

import copy
import os
from functools import lru_cache
from pathlib import Path

import yaml

from r2med_plugin.errors import MissingFileError, UserError

README = "README.md"
MAX_README_BYTES = 1024 * 1024



class DatasetCardError(UserError):
    """A dataset card (README.md) whose front matter cannot be used: downloading again does not mend it."""


def read_front_matter(repo_root: Path) -> dict:
    """The YAML front matter of ``<repo_root>/README.md`` (the block between the first two '---' lines)."""
    readme = repo_root / README
    if not readme.is_file():
        raise MissingFileError(
            f"{readme} is missing: a dataset repo in the hub layout needs its README.md with the "
            "`configs` front matter (download the whole repo, README.md included)"
        )
    if readme.stat().st_size > MAX_README_BYTES:
        raise DatasetCardError(f"{readme} is over {MAX_README_BYTES:,} bytes: not a dataset card; refusing to parse it")
    text = readme.read_text(encoding="utf-8", errors="replace")
    lines = text.splitlines()
    if not lines or lines[0].strip() != "---":
        raise DatasetCardError(f"{readme}: no YAML front matter (the file must start with a '---' line)")
    try:
        end = next(i for i, line in enumerate(lines[1:], start=1) if line.strip() == "---")
    except StopIteration:
        raise DatasetCardError(f"{readme}: the YAML front matter is not closed by a '---' line") from None
    header = "\n".join(lines[1:end])
    if "&" in header and "*" in header and _has_aliases(header):
        raise DatasetCardError(f"{readme}: the YAML front matter uses anchors and aliases; dataset cards do not need them")
    try:
        front = _parsed(header)
    except yaml.YAMLError as error:
        raise DatasetCardError(f"{readme}: the YAML front matter does not parse ({error})") from error
    if not isinstance(front, dict):
        raise DatasetCardError(f"{readme}: the YAML front matter must be a mapping, got {type(front).__name__}")
    return copy.deepcopy(front)


@lru_cache(maxsize=32)
def _parsed(header: str) -> object:
    """The parsed front matter, by its text: a card is read for every file looked up in it (the reproduction matrix
    looks up 14 expansion files per task several times), and a large card takes tens of milliseconds to parse."""
    return yaml.safe_load(header) or {}


def _has_aliases(header: str) -> bool:
    """True when the YAML text defines anchors or uses aliases (the material of YAML bombs)."""
    try:
        events = yaml.parse(header, Loader=yaml.SafeLoader)
        return any(isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None) for event in events)
    except yaml.YAMLError:
        return False


def config_files(front_matter: dict, readme: Path) -> dict[str, dict[str, list[str]]]:
    """config name -> split -> relative file paths, from the front matter's ``configs`` list."""
    configs = front_matter.get("configs")
    if not isinstance(configs, list):
        raise DatasetCardError(f"{readme}: the front matter has no `configs` list")
    layout: dict[str, dict[str, list[str]]] = {}
    for position, entry in enumerate(configs):
        if not isinstance(entry, dict) or "config_name" not in entry:
            raise DatasetCardError(f"{readme}: configs[{position}] has no config_name")
        layout[str(entry["config_name"])] = _split_files(entry.get("data_files"), readme, entry["config_name"])
    return layout


def _split_files(data_files: object, readme: Path, config: str) -> dict[str, list[str]]:
    if isinstance(data_files, str):
        return {"train": [data_files]}
    if not isinstance(data_files, list):
        raise DatasetCardError(f"{readme}: config {config!r} has no data_files list")
    splits: dict[str, list[str]] = {}
    for item in data_files:
        if isinstance(item, str):
            splits.setdefault("train", []).append(item)
            continue
        if not isinstance(item, dict) or "split" not in item or "path" not in item:
            raise DatasetCardError(f"{readme}: config {config!r} has a data_files entry without split/path: {item!r}")
        paths = item["path"] if isinstance(item["path"], list) else [item["path"]]
        splits.setdefault(str(item["split"]), []).extend(str(path) for path in paths)
    return splits


def _expand_patterns(repo_root: Path, declared: list[str]) -> list[str]:
    """Declared paths, with glob patterns (``corpus/*.jsonl``) expanded inside the repo."""
    paths: list[str] = []
    for entry in declared:
        if any(ch in entry for ch in "*?["):
            paths += sorted(str(p.relative_to(repo_root)) for p in repo_root.glob(entry) if p.is_file() or p.is_symlink())
        else:
            paths.append(entry)
    return paths


def resolve_split_file(
    repo_root: Path, layout: dict[str, dict[str, list[str]]], config: str, split: str, trusted_root: Path | None = None
) -> Path:
    """The one file holding ``config``/``split``, checked to lie inside the repo.

    The declared path may not leave the repo (no ``..``, no absolute path); once symlinks are
    followed the file must still lie inside ``trusted_root`` (the mirror folder, or the repo's folder
    of the Hugging Face cache, whose snapshots link to its blobs).
    """
    readme = repo_root / README
    if config not in layout:
        raise UserError(
            f"{readme}: config {config!r} is not declared (declared: {', '.join(layout) or 'none'}); "
            "the mirror is incomplete or from another dataset"
        )
    if split not in layout[config]:
        raise UserError(
            f"{readme}: config {config!r} has no split {split!r} (has: {', '.join(layout[config])})"
        )
    paths = _expand_patterns(repo_root, layout[config][split])
    if len(paths) != 1:
        raise DatasetCardError(f"{readme}: config {config!r} split {split!r} must name exactly one file, got {paths}")
    declared = Path(os.path.normpath(repo_root / paths[0]))
    if Path(paths[0]).is_absolute() or not declared.is_relative_to(Path(os.path.normpath(repo_root))):
        raise DatasetCardError(f"{readme}: config {config!r} split {split!r} points outside the repo: {paths[0]!r}")
    target = declared.resolve()
    boundary = (trusted_root or repo_root).resolve()
    if declared.exists() and not target.is_relative_to(boundary):
        raise UserError(
            f"{declared} is a link to {target}, outside {boundary}; links out of the data folder are refused"
        )
    if not target.is_file():
        raise MissingFileError(
            f"{repo_root / paths[0]} is missing (declared in {readme} for config {config!r}, split {split!r}); "
            "download the complete dataset repo"
        )
    return declared  # the name as declared (hub cache snapshots are links to extension-less blobs)
