"""MinHash signatures (datasketch's "affine32" scheme, computed for many texts at once) and the LSH index.

The permutations are datasketch's own (``MinHash(num_perm, seed).permutations``); a signature equals what
``MinHash.update_batch`` gives for the same 32-bit shingle hashes (tested), only computed for a batch of
texts in a few numpy operations instead of one MinHash object per text.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from r2med_plugin.audit.text import fmix64
from r2med_plugin.errors import UserError
from r2med_plugin.optional_dependencies import import_extra, require_extra

NUM_PERM = 128
SEED = 1
SCHEME = "affine32"
# LSH bands chosen for recall: a missed near-copy is worse than a candidate that exact Jaccard then rejects
LSH_WEIGHTS = (0.1, 0.9)  # (false positive, false negative)
NEEDS_DATASKETCH = "the train/eval overlap audit (r2med audit, r2med_plugin.audit.run.run_audit)"
_CHUNK = 1 << 15  # shingles per numpy block (NUM_PERM x CHUNK uint32 values: 16 MiB)
_LOW32 = np.uint64(0xFFFFFFFF)
_STEP = np.uint64(0x9E3779B97F4A7C15)


def _fmix32(values: np.ndarray) -> np.ndarray:
    """The 32-bit MurmurHash3 finalizer (datasketch pre-mixes every input hash with it)."""
    values = values ^ (values >> np.uint32(16))
    values = values * np.uint32(0x85EBCA6B)
    values = values ^ (values >> np.uint32(13))
    values = values * np.uint32(0xC2B2AE35)
    return values ^ (values >> np.uint32(16))


@dataclass(frozen=True)
class MinHasher:
    """Signatures of shingle sets under datasketch's permutations for ``num_perm`` and ``seed``."""

    num_perm: int = NUM_PERM
    seed: int = SEED
    permutations: np.ndarray = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "permutations", _datasketch().MinHash(num_perm=self.num_perm, seed=self.seed, scheme=SCHEME).permutations)

    def signatures(self, shingles: np.ndarray, counts: np.ndarray) -> np.ndarray:
        """One row of ``num_perm`` uint32 values per text, from the texts' 64-bit shingle hashes end to end
        (``counts`` per text, each at least 1); the low 32 bits of each hash are what datasketch hashes."""
        out = np.empty((len(counts), self.num_perm), dtype=np.uint32)
        ends = np.cumsum(counts)
        for first, last in _blocks(counts):
            low, high = (ends[first - 1] if first else 0), ends[last - 1]
            offsets = np.concatenate([[0], np.cumsum(counts[first:last])[:-1]])
            out[first:last] = self._block(shingles[low:high], offsets)
        return out

    def _block(self, shingles: np.ndarray, offsets: np.ndarray) -> np.ndarray:
        a, b = self.permutations
        mixed = _fmix32((shingles & _LOW32).astype(np.uint32))
        permuted = a[:, None] * mixed[None, :] + b[:, None]  # uint32 arithmetic wraps: a * h + b mod 2**32
        return np.minimum.reduceat(permuted, offsets, axis=1).T

    def minhash(self, signature: np.ndarray):
        """A datasketch MinHash holding ``signature`` (what MinHashLSH inserts and queries)."""
        return _datasketch().MinHash(hashvalues=signature, permutations=self.permutations, scheme=SCHEME)


def require_datasketch() -> None:
    """MissingExtraError (naming the ``audit`` extra) unless datasketch is installed; checked before any work."""
    require_extra("datasketch", NEEDS_DATASKETCH)


def _datasketch():
    return import_extra("datasketch", NEEDS_DATASKETCH)


def _blocks(counts: np.ndarray) -> list[tuple[int, int]]:
    """Consecutive ranges of texts holding about _CHUNK shingles together (a larger text alone)."""
    blocks, start, total = [], 0, 0
    for index, length in enumerate(counts.tolist()):
        if length <= 0:
            raise UserError("an empty shingle set has no MinHash signature; leave empty texts out first")
        if total and total + length > _CHUNK:
            blocks.append((start, index))
            start, total = index, 0
        total += length
    if start < len(counts):
        blocks.append((start, len(counts)))
    return blocks


def band_keys(signatures: np.ndarray, bands: int, rows: int) -> np.ndarray:
    """A 64-bit key per (text, band): equal band values give equal keys, so a text whose keys meet none of an
    index's keys shares no band with any indexed text (MinHashLSH.query would return nothing)."""
    keys = np.zeros((signatures.shape[0], bands), dtype=np.uint64)
    for band in range(bands):
        combined = np.full(signatures.shape[0], band + 1, dtype=np.uint64)
        for column in signatures[:, band * rows:(band + 1) * rows].T:
            combined = combined * _STEP + column.astype(np.uint64)  # wraps modulo 2**64
        keys[:, band] = combined
    return fmix64(keys)


def lsh_index(threshold: float, num_perm: int = NUM_PERM):
    """An empty datasketch MinHashLSH for Jaccard ``threshold``, its bands weighted towards recall."""
    return _datasketch().MinHashLSH(threshold=threshold, num_perm=num_perm, weights=LSH_WEIGHTS)


def candidate_probability(similarity: float, bands: int, rows: int) -> float:
    """The chance that two sets of Jaccard ``similarity`` share a band: 1 - (1 - s**r)**b."""
    return 1.0 - (1.0 - similarity ** rows) ** bands
