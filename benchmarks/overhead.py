"""Plugin overhead under `mteb` and candidate-reranking encoding cost, measured side by side.

1. A NanoR2MED-size task (10,000 documents, 100 queries, 500-id lists) run through mteb.evaluate
   with a fast hashing encoder: total time minus the encoder's own time is the plugin's work
   (loading, BM25 for hybrid, fusion, candidate subsets, metrics, writing), compared with what
   all-MiniLM-L6-v2 needs to encode the same texts on this machine (measured on a sample).
2. Reranking 100 candidates per query on a 61,379-document corpus: texts encoded by
   r2med_plugin.score_candidate_lists vs MTEB's own top_ranked path (our Reranking task).

    python benchmarks/overhead.py
"""

from __future__ import annotations

import logging
import os
import tempfile
import time
from pathlib import Path

from common import NANO_TASK, hashing_mteb_model, minilm_passages_per_second, nano_mirror

from r2med_plugin.data.loader import load_task
from r2med_plugin.evaluation.runner import score_candidate_lists
from r2med_plugin.models.hashing import HashingEncoder


def plugin_overhead(tmp: Path) -> None:
    import mteb

    root = nano_mirror(tmp / "nano")
    os.environ["R2MED_DATA_DIR"] = str(root)
    os.environ["R2MED_CACHE_DIR"] = str(tmp / "cache")
    import sentence_transformers  # noqa: F401  (mteb imports it on first use: keep that out of the timing)

    model = hashing_mteb_model()
    start = time.perf_counter()
    mteb.evaluate(model, mteb.get_task(NANO_TASK), cache=mteb.ResultCache(tmp / "results"), show_progress_bar=False)
    total = time.perf_counter() - start
    data = load_task(NANO_TASK, accept_drift=True)
    texts = data.corpus["text"].to_list()
    rate = minilm_passages_per_second(texts[:256])
    minilm_budget = (data.corpus.height + data.queries.height) / rate
    plugin = total - model.encode_seconds
    print(f"1. {NANO_TASK} through mteb.evaluate: {data.corpus.height} documents, {data.queries.height} queries")
    print(f"   total {total:.2f} s, hashing encoder {model.encode_seconds:.2f} s -> plugin + mteb work {plugin:.2f} s")
    print(f"   all-MiniLM-L6-v2 here: {rate:.0f} passages/s -> {minilm_budget:.0f} s to encode this task")
    print(f"   overhead = {plugin / minilm_budget:.1%} of the MiniLM encoding time (target: under 5%)")


def candidate_encoding(tmp: Path) -> None:
    import mteb

    root = nano_mirror(tmp / "large", n_docs=61_379, n_queries=150, list_size=100)
    os.environ["R2MED_DATA_DIR"] = str(root)
    data = load_task(NANO_TASK, accept_drift=True)
    ours = HashingEncoder(dim=64, name="count-ours")
    score_candidate_lists(ours, data, "hybrid")
    theirs = hashing_mteb_model(dim=64)
    mteb.evaluate(theirs, mteb.get_task(f"{NANO_TASK}Reranking"), cache=mteb.ResultCache(tmp / "results-large"),
                  show_progress_bar=False)
    union = len({d for ids in data.candidates["hybrid"].values() for d in ids})
    print(f"2. reranking {len(data.candidates['hybrid'])} queries x 100 candidates over {data.corpus.height} documents")
    print(f"   texts encoded: ours {ours.encoded_texts} (candidate union {union} + queries), mteb top_ranked path {theirs.encoded_texts}")
    print(f"   ratio {theirs.encoded_texts / ours.encoded_texts:.1f}x fewer texts (target: at least 5x)")


def main() -> None:
    logging.disable(logging.WARNING)
    os.environ["R2MED_ACCEPT_DRIFT"] = "1"
    with tempfile.TemporaryDirectory() as tmp:
        plugin_overhead(Path(tmp))
        candidate_encoding(Path(tmp))


if __name__ == "__main__":
    main()
