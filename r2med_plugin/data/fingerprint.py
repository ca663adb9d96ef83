"""Content fingerprints of files: what derived caches are keyed by when no commit vouches for the files.

A file's SHA-256 is remembered on disk under (path, size, mtime, ctime, inode): any rewrite, copy or
replacement changes ctime, so a remembered hash is never served for changed bytes, and an unchanged
multi-gigabyte corpus or model is hashed once.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable
from pathlib import Path

from r2med_plugin.cache import cache_dir, cache_enabled, key_of
from r2med_plugin.io import write_text_atomic

_CHUNK = 1 << 20


def file_sha256(path: str | os.PathLike) -> str:
    """The SHA-256 of a file's bytes (remembered per file state in the cache folder)."""
    real = Path(path).resolve()
    status = real.stat()
    memo = cache_dir() / "file-hashes" / f"{key_of(real, status.st_size, status.st_mtime_ns, status.st_ctime_ns, status.st_ino)}.txt"
    if cache_enabled() and memo.is_file():
        remembered = memo.read_text(encoding="ascii").strip()
        if len(remembered) == 64:
            return remembered
    digest = hashlib.sha256()
    with real.open("rb") as stream:
        for chunk in iter(lambda: stream.read(_CHUNK), b""):
            digest.update(chunk)
    value = digest.hexdigest()
    if cache_enabled():
        write_text_atomic(memo, value)  # the cache may be shared across machines: a unique temporary name
    return value


def file_git_blob_sha1(path: str | os.PathLike) -> str:
    """Git's object id of a file's bytes (SHA-1 of ``blob <size>\\0`` + bytes): the hub's etag of a file kept
    in git rather than LFS. Not remembered: such files are small."""
    real = Path(path)
    digest = hashlib.sha1(f"blob {real.stat().st_size}\0".encode("ascii"))
    with real.open("rb") as stream:
        for chunk in iter(lambda: stream.read(_CHUNK), b""):
            digest.update(chunk)
    return digest.hexdigest()


def files_fingerprint(files: Iterable[str | os.PathLike], root: str | os.PathLike | None = None) -> str:
    """One hash over (relative name, content hash) of every file: renaming, adding or editing one changes it."""
    digest = hashlib.sha256()
    base = Path(root) if root is not None else None
    for path in sorted({Path(file) for file in files}):
        name = path.relative_to(base).as_posix() if base is not None else path.as_posix()
        digest.update(f"{name}\0{file_sha256(path)}\n".encode("utf-8", "surrogatepass"))
    return digest.hexdigest()[:16]
