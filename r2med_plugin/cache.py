"""On-disk cache for what is reused across runs (BM25 runs, embeddings).

Keys always include the task, the dataset revision and a fingerprint of the texts themselves, so a
changed mirror never serves stale results. Location: $R2MED_CACHE_DIR, else ~/.cache/r2med_plugin.
Writes are atomic; a corrupt entry is treated as a miss and rewritten.

The folder may be shared by concurrent processes and machines (a sweep on a cluster): an entry is
written to a uniquely named temporary file in the same folder, flushed to disk and renamed over the
entry, so a reader sees the old complete file or the new complete one, never a part. Two writers of
one key both write complete, equal files; the last rename wins. A reader that finds an unreadable
entry recomputes it and renames the new file over it (never deleting it: another process may just
have replaced it with a good one). Temporary files are created with the process umask, so a
group-shared cache stays readable by the group.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import zlib
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import numpy as np
import polars as pl

from r2med_plugin.io import atomic_write
from r2med_plugin.types import Run

CACHE_DIR_ENV = "R2MED_CACHE_DIR"
DISABLE_ENV = "R2MED_NO_CACHE"

# Every lookup this process made, as (kind, "hit" or "miss"): `r2med evaluate --quiet` compares two snapshots to
# say that a task's result came from the cache (its "finished in 0.0 s" would otherwise look like a measurement).
_LOOKUPS: Counter[tuple[str, str]] = Counter()


def lookups() -> Counter[tuple[str, str]]:
    """A snapshot of the cache lookups so far: (kind, "hit" or "miss") -> count (the cache switched off: none)."""
    return Counter(_LOOKUPS)


def _count(kind: str, hit: bool) -> None:
    _LOOKUPS[(kind, "hit" if hit else "miss")] += 1


def cache_dir() -> Path:
    return Path(os.environ.get(CACHE_DIR_ENV) or Path.home() / ".cache" / "r2med_plugin").expanduser()


def cache_enabled() -> bool:
    return not os.environ.get(DISABLE_ENV)


def fingerprint(frame: pl.DataFrame) -> str:
    """A content hash of an (id, text) frame: order-sensitive, stable across processes."""
    digest = hashlib.sha256()
    for column in ("id", "text"):
        for chunk in frame[column].cast(pl.Utf8).to_list():
            digest.update(chunk.encode("utf-8", "surrogatepass"))
            digest.update(b"\0")
    return digest.hexdigest()[:24]


def key_of(*parts: object) -> str:
    return hashlib.sha256("\0".join(map(str, parts)).encode("utf-8")).hexdigest()[:32]


def cached_run(kind: str, key: str, compute: Callable[[], Run]) -> Run:
    """The run stored under (kind, key), computed and stored on a miss."""
    path = cache_dir() / kind / f"{key}.json.gz"
    if cache_enabled() and path.is_file():
        try:
            with gzip.open(path, "rt", encoding="utf-8") as stream:
                found = json.load(stream)
            _count(kind, hit=True)
            return found
        except (OSError, ValueError, EOFError, zlib.error):
            pass  # unreadable (or removed meanwhile): recompute and replace it below
    if cache_enabled():
        _count(kind, hit=False)
    run = compute()
    if cache_enabled():
        def write(temporary: Path) -> None:
            with gzip.open(temporary, "wt", encoding="utf-8", compresslevel=1) as stream:
                json.dump(run, stream)

        atomic_write(path, write)
    return run


def read_cached_array(kind: str, key: str) -> np.ndarray | None:
    """The array stored under (kind, key), or None (a miss, an unreadable entry, or the cache switched off)."""
    path = cache_dir() / kind / f"{key}.npy"
    if not cache_enabled():
        return None
    if path.is_file():
        try:
            found = np.load(path, allow_pickle=False)
            _count(kind, hit=True)
            return found
        except (OSError, ValueError, EOFError):
            pass  # unreadable (or removed meanwhile): the caller recomputes and stores it again
    _count(kind, hit=False)
    return None


def store_array(kind: str, key: str, array: np.ndarray) -> None:
    """Store ``array`` under (kind, key), atomically (nothing when the cache is switched off)."""
    if not cache_enabled():
        return

    def write(temporary: Path) -> None:
        with temporary.open("wb") as stream:
            np.save(stream, array, allow_pickle=False)

    atomic_write(cache_dir() / kind / f"{key}.npy", write)


def cached_array(kind: str, key: str, compute: Callable[[], np.ndarray]) -> np.ndarray:
    """The array stored under (kind, key), computed and stored on a miss."""
    found = read_cached_array(kind, key)
    if found is not None:
        return found
    array = compute()
    store_array(kind, key, array)
    return array


def remove_array(kind: str, key: str) -> None:
    """Remove the array stored under (kind, key), if any (another process may have removed it already)."""
    (cache_dir() / kind / f"{key}.npy").unlink(missing_ok=True)
