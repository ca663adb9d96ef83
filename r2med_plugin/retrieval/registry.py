"""One registry of retrievers and rerankers: ``resolve(name)`` says what a name is (a BM25, a model that
ships in a package, a local folder, or a hub model), how to load it, and what identifies it before loading.

Every command resolves names here: ``r2med evaluate``, ``r2med sweep`` (its "already done" stamps) and
the Python API, so one name means one thing everywhere.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from r2med_plugin.names import BM25_VARIANTS
from r2med_plugin.retrieval.model_identity import PACKAGED_MODELS, packaged_model_folder
from r2med_plugin.version import __version__

RetrieverKind = Literal["bm25", "packaged", "folder", "hub"]


@dataclass(frozen=True)
class RetrieverRef:
    name: str  # as given
    kind: RetrieverKind
    source: str  # what loads: the BM25 name, the folder, or the hub id
    revision: str | None = None  # the requested hub revision (a folder's label)

    def stamp(self) -> str:
        """What the model is, without loading it: the plugin version (how the numbers are computed), then the
        files (size and time) of a folder or package, or the commit the hub cache holds for the revision."""
        code = f"r2med-plugin-{__version__}"
        if self.kind == "bm25":
            return code
        if self.kind in ("folder", "packaged"):
            folder = Path(self.source)
            return f"{code}:path:{self.revision or '-'}:{files_stamp(folder) if folder.is_dir() else files_stamp(folder.parent)}"
        commit = self.revision or cached_hub_commit(self.source, "model", "main")
        if commit is None and "/" not in self.source:  # sentence-transformers completes bare names ("all-MiniLM-L6-v2")
            commit = cached_hub_commit(f"sentence-transformers/{self.source}", "model", "main")
        return f"{code}:hub:{commit or 'unresolved'}"

    def load_encoder(self, **options: Any):
        """A SentenceTransformerEncoder (options: device, devices, batch_size, show_progress, name)."""
        from r2med_plugin.retrieval.dense import SentenceTransformerEncoder

        if self.kind == "bm25":
            raise ValueError(f"{self.name} is a BM25 retriever, not a model to encode with")
        return SentenceTransformerEncoder(self.name, revision=self.revision, **options)

    def load_cross_encoder(self, **options: Any):
        """A SentenceTransformerCrossEncoder (options: device, batch_size, max_length)."""
        from r2med_plugin.retrieval.rerank import SentenceTransformerCrossEncoder

        if self.kind == "bm25":
            raise ValueError(f"{self.name} is a BM25 retriever, not a cross-encoder")
        return SentenceTransformerCrossEncoder(self.name, revision=self.revision, **options)


def resolve(name: str, revision: str | None = None) -> RetrieverRef:
    """What ``name`` is: bm25-lucene / bm25-robertson, a packaged model alias (minilm-packaged), an existing
    folder, else a hub model id."""
    if name in BM25_VARIANTS:
        return RetrieverRef(name, "bm25", name)
    if name in PACKAGED_MODELS:
        if revision is not None:
            raise ValueError(f"{name} is one set of packaged weights: drop its revision ({revision!r})")
        return RetrieverRef(name, "packaged", str(packaged_model_folder(name)))
    if Path(name).expanduser().exists():
        return RetrieverRef(name, "folder", str(Path(name).expanduser()), revision)
    return RetrieverRef(name, "hub", name, revision)


# --- identity without loading ------------------------------------------------------------------------------


def files_stamp(root: Path) -> str:
    """A hash of every file's relative path, size and modification time under ``root`` (hub metadata excluded)."""
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*")):
        relative = path.relative_to(root)
        if relative.parts[0] == ".cache" or not path.is_file():
            continue
        stat = path.stat()
        digest.update(f"{relative.as_posix()}\0{stat.st_size}\0{stat.st_mtime_ns}\n".encode())
    return digest.hexdigest()[:16]


def hub_cache_dir() -> Path:
    """The Hugging Face hub cache the current environment names (HF_HUB_CACHE, else HF_HOME/hub, else the default),
    read now: huggingface_hub fixes its own value at import, before a sweep spec's `env:` is applied."""
    explicit = os.environ.get("HF_HUB_CACHE") or os.environ.get("HUGGINGFACE_HUB_CACHE")
    if explicit:
        return Path(explicit).expanduser()
    home = os.environ.get("HF_HOME") or os.path.join(os.environ.get("XDG_CACHE_HOME") or "~/.cache", "huggingface")
    return Path(home).expanduser() / "hub"


def cached_hub_commit(repo: str, repo_type: str, revision: str) -> str | None:
    """The commit ``revision`` points to in the local Hugging Face cache, if it was downloaded."""
    ref = hub_cache_dir() / f"{repo_type}s--{repo.replace('/', '--')}" / "refs" / revision
    try:
        return ref.read_text(encoding="utf-8").strip() or None
    except OSError:
        return None
