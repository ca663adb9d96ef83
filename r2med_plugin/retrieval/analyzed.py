"""Analysed texts in compact form, analysed in parallel processes, and the on-disk analysed-corpus cache.

``AnalyzedTexts`` holds what BM25 needs from Lucene's analyzer: the distinct terms, every text's
term ids (concatenated) and every text's length. Workers return that compact form (a few arrays,
not millions of Python strings), and the cache stores it under a key made of the corpus
fingerprint and the analyzer version, so a second run (other queries, another expansion) skips
corpus analysis.
"""

from __future__ import annotations

import hashlib
import os
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from multiprocessing import get_all_start_methods, get_context
from pathlib import Path

import numpy as np
import polars as pl
from tqdm.auto import tqdm

from r2med_plugin.cache import cache_dir, cache_enabled, fingerprint, key_of
from r2med_plugin.errors import UserError
from r2med_plugin.io import atomic_write
from r2med_plugin.quiet import bar_disabled
from r2med_plugin.retrieval.analyzer import analyze_compact, tables

_CACHE_KIND = "lucene-analyzed"
WORKERS_ENV = "R2MED_BM25_WORKERS"  # default number of analysis processes (else all cores); `r2med evaluate --workers`
_PARALLEL_MIN_CHARS = 2_000_000  # below this, starting processes costs more than it saves
_CHUNKS_PER_WORKER = 8


@dataclass(frozen=True)
class AnalyzedTexts:
    vocabulary: list[str]  # distinct terms
    term_ids: np.ndarray  # int32 indices into vocabulary, all texts concatenated
    lengths: np.ndarray  # int64 number of terms of each text

    def __len__(self) -> int:
        return len(self.lengths)

    def terms(self) -> list[list[str]]:
        """Every text's terms, as ``analyze`` gives them."""
        words = np.asarray(self.vocabulary, dtype=object)[self.term_ids] if len(self.term_ids) else np.zeros(0, dtype=object)
        ends = np.cumsum(self.lengths)
        return [words[end - length : end].tolist() for end, length in zip(ends, self.lengths, strict=True)]


@lru_cache(maxsize=1)
def analyzer_version() -> str:
    """Changes whenever the analyzer's code or tables change (part of every analysed-corpus cache key)."""
    digest = hashlib.sha256()
    package = resources.files("r2med_plugin.retrieval")
    for name in ("analyzer.py", "wordbreak.py", "data/lucene_wordbreak.json.gz"):
        digest.update(package.joinpath(name).read_bytes())
    return digest.hexdigest()[:16]


def merge_analyzed(parts) -> AnalyzedTexts:
    """One vocabulary from the workers' parts (each sends the terms its session added since its last part)."""
    vocabulary: dict[str, int] = {}
    to_global: dict[int, np.ndarray] = {}  # process id -> its session's term ids -> global ids
    ids, lengths = [], []
    for pid, first_new, new_terms, local_ids, local_lengths in parts:
        mapping = to_global.get(pid, np.zeros(0, dtype=np.int32))
        if len(mapping) != first_new:
            raise RuntimeError(f"analysis parts of process {pid} arrived out of order")
        added = np.fromiter((vocabulary.setdefault(t, len(vocabulary)) for t in new_terms), dtype=np.int32, count=len(new_terms))
        mapping = to_global[pid] = np.concatenate([mapping, added])
        ids.append(mapping[local_ids] if len(local_ids) else np.zeros(0, dtype=np.int32))
        lengths.append(local_lengths)
    return AnalyzedTexts(
        list(vocabulary),
        np.concatenate(ids) if ids else np.zeros(0, dtype=np.int32),
        np.concatenate(lengths) if lengths else np.zeros(0, dtype=np.int64),
    )


def resolve_workers(workers: int | None) -> int:
    """``workers``, else $R2MED_BM25_WORKERS, else all cores."""
    if workers is None:
        configured = os.environ.get(WORKERS_ENV)
        if configured:
            try:
                workers = int(configured)
            except ValueError:
                raise UserError(f"${WORKERS_ENV} must be a positive integer, got {configured!r}") from None
        else:
            return os.cpu_count() or 1
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise UserError(f"workers must be a positive integer (or None for all cores), got {workers!r}")
    return workers


def analyze_texts(texts, *, workers: int | None = None, show_progress: bool = False, desc: str = "analysing") -> AnalyzedTexts:
    """Lucene's English analysis of every text, in ``workers`` processes (default: all cores)."""
    texts = list(texts)
    workers = resolve_workers(workers)
    if workers > 1 and sum(map(len, texts)) < _PARALLEL_MIN_CHARS:
        workers = 1
    size = max(1, -(-len(texts) // (workers * _CHUNKS_PER_WORKER))) if workers > 1 else max(1, min(len(texts), 2000))
    chunks = [texts[start : start + size] for start in range(0, len(texts), size)]
    progress = tqdm(total=len(texts), desc=desc, disable=bar_disabled(show_progress), unit="doc")
    parts = []
    session = object() if workers == 1 else os.urandom(8).hex()
    if workers == 1:
        for chunk in chunks:
            parts.append(analyze_compact(chunk, session))
            progress.update(len(chunk))
    else:
        # fork where there is one: workers start at once and share the loaded class table; they run
        # only the analyzer (pure Python + numpy), never polars, so the parent's threads are no hazard
        tables()
        method = "fork" if "fork" in get_all_start_methods() else "spawn"
        with ProcessPoolExecutor(max_workers=workers, mp_context=get_context(method)) as pool:
            for chunk, part in zip(chunks, pool.map(analyze_compact, chunks, [session] * len(chunks)), strict=True):
                parts.append(part)
                progress.update(len(chunk))
    progress.close()
    return merge_analyzed(parts)


def _cache_path(corpus: pl.DataFrame) -> Path:
    return cache_dir() / _CACHE_KIND / f"{key_of(analyzer_version(), fingerprint(corpus))}.npz"


def _load(path: Path) -> AnalyzedTexts | None:
    try:
        with np.load(path, allow_pickle=False) as stored:
            vocabulary = bytes(stored["vocabulary"]).decode("utf-8", "surrogatepass").split("\0")
            return AnalyzedTexts(vocabulary if vocabulary != [""] else [], stored["term_ids"], stored["lengths"])
    except (OSError, ValueError, KeyError, UnicodeDecodeError):
        path.unlink(missing_ok=True)
        return None


def _save(path: Path, analyzed: AnalyzedTexts) -> None:
    vocabulary = np.frombuffer("\0".join(analyzed.vocabulary).encode("utf-8", "surrogatepass"), dtype=np.uint8)

    def write(temporary: Path) -> None:
        with temporary.open("wb") as stream:
            np.savez(stream, vocabulary=vocabulary, term_ids=analyzed.term_ids, lengths=analyzed.lengths)

    atomic_write(path, write)


def analyze_corpus(corpus: pl.DataFrame, *, workers: int | None = None, show_progress: bool = True) -> AnalyzedTexts:
    """The analysed corpus (columns id, text), from the on-disk cache when this corpus was analysed before."""
    path = _cache_path(corpus) if cache_enabled() else None
    if path is not None and path.is_file():
        cached = _load(path)
        if cached is not None and len(cached) == corpus.height:
            return cached
    analyzed = analyze_texts(corpus["text"].to_list(), workers=workers, show_progress=show_progress,
                             desc="bm25-lucene: analysing documents")
    if path is not None:
        _save(path, analyzed)
    return analyzed
