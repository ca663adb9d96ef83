"""A fast deterministic stand-in encoder for tests and benchmarks: no model, no download."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import polars as pl

from r2med_plugin.errors import UserError
from r2med_plugin.models.protocols import EncodeKind, EncoderBase, with_prompt


class HashingEncoder(EncoderBase):
    """Deterministic bag-of-hashed-words embeddings: no model, no download, thousands of texts a second."""

    def __init__(self, dim: int = 256, name: str = "hashing-encoder") -> None:
        if dim < 1:
            raise UserError(f"dim must be positive, got {dim}")
        self.dim = dim
        self.name = name
        self.revision = f"dim{dim}"
        self.encoded_texts = 0

    def encode(self, texts: Sequence[str], *, kind: EncodeKind, prompt: str | None = None) -> np.ndarray:
        texts = with_prompt(prompt, texts)
        self.encoded_texts += len(texts)
        words = pl.Series("text", list(texts), dtype=pl.Utf8).str.to_lowercase().str.extract_all(r"[a-z0-9]+")
        exploded = pl.DataFrame({"row": np.arange(len(texts)), "word": words}).explode("word").drop_nulls()
        buckets = (exploded["word"].hash(seed=7) % self.dim).cast(pl.Int64).to_numpy()
        matrix = np.zeros((len(texts), self.dim), dtype=np.float32)
        np.add.at(matrix, (exploded["row"].to_numpy(), buckets), 1.0)
        return matrix
