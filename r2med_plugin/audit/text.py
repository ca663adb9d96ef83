"""Text as the audit compares it, for a batch of texts at once (polars for the strings, numpy for the hashes).

Normalised: Unicode NFKC, lower-cased, runs of whitespace as one space, stripped. Words: runs of letters,
digits and underscores (punctuation is dropped). Shingles: the word n-grams, each a 64-bit hash; a text with
fewer than n words is one shingle of all its words. Hashes are computed by polars and numpy in this process;
both sides of a comparison are always hashed in one run, so they agree.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Sequence

import numpy as np
import polars as pl

_STEP = np.uint64(0x9E3779B97F4A7C15)  # odd: word k of an n-gram is weighted by STEP ** (n - 1 - k)
_SEED = 20250520


def fmix64(values: np.ndarray) -> np.ndarray:
    """The 64-bit MurmurHash3 finalizer, element-wise (uint64 array arithmetic wraps, as intended)."""
    values = values ^ (values >> np.uint64(33))
    values = values * np.uint64(0xFF51AFD7ED558CCD)
    values = values ^ (values >> np.uint64(33))
    values = values * np.uint64(0xC4CEB9FE1A85EC53)
    return values ^ (values >> np.uint64(33))


def normalize(text: str) -> str:
    """One text normalised as ``prepare`` does it (NFKC, lower case, collapsed whitespace)."""
    return " ".join(unicodedata.normalize("NFKC", text).lower().split())


def _normalized(texts: Sequence[str]) -> pl.Series:
    series = pl.Series("text", list(texts), dtype=pl.Utf8)
    if hasattr(series.str, "normalize"):
        series = series.str.normalize("NFKC")
    else:  # polars before str.normalize
        series = series.map_elements(lambda text: unicodedata.normalize("NFKC", text), return_dtype=pl.Utf8)
    return series.str.to_lowercase().str.replace_all(r"\s+", " ").str.strip_chars(" ")


def prepare(texts: Sequence[str], ngram: int) -> dict:
    """For each text: its normalised form, the hash of that (``keys``), its word count, and its shingles
    (``shingles`` flat, ``shingle_counts`` per text, in text order; duplicates within a text are kept)."""
    normalized = _normalized(texts)
    tokens = normalized.str.extract_all(r"\w+")
    lengths = tokens.list.len().fill_null(0).to_numpy().astype(np.int64)
    flat = tokens.explode().drop_nulls().hash(seed=_SEED).to_numpy().astype(np.uint64)
    shingles, counts = _ngram_hashes(flat, lengths, ngram)
    return {"normalized": normalized.to_list(), "keys": normalized.hash(seed=_SEED).to_numpy().astype(np.uint64),
            "words": lengths, "shingles": shingles, "shingle_counts": counts}


def _ngram_hashes(flat: np.ndarray, lengths: np.ndarray, ngram: int) -> tuple[np.ndarray, np.ndarray]:
    """The n-gram hashes of every text from the word hashes ``flat`` (texts of ``lengths`` words, end to end)."""
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64)
    position = np.arange(flat.size, dtype=np.int64) - np.repeat(starts, lengths)
    length = np.repeat(lengths, lengths)
    combined = flat.copy()
    for offset in range(1, ngram):
        following = np.zeros_like(flat)
        following[:-offset or None] = flat[offset:]
        inside = position + offset < length
        combined = np.where(inside, combined * _STEP + following, combined)
    keep = position <= np.maximum(length - ngram, 0)
    counts = np.where(lengths > 0, np.maximum(lengths - ngram + 1, 1), 0)
    return fmix64(combined[keep]), counts


def split_shingles(prepared: dict) -> list[np.ndarray]:
    """The shingles of each text, as sorted unique arrays."""
    bounds = np.cumsum(prepared["shingle_counts"])
    return [np.unique(part) for part in np.split(prepared["shingles"], bounds[:-1])] if bounds.size else []


def jaccard(left: np.ndarray, right: np.ndarray) -> float:
    """Exact Jaccard similarity of two sorted unique shingle arrays (0.0 when both are empty)."""
    if left.size == 0 and right.size == 0:
        return 0.0
    shared = np.intersect1d(left, right, assume_unique=True).size
    return shared / (left.size + right.size - shared)
