"""A task's BM25 run, cached on disk: what every BM25 first stage, hybrid partner and LaMer passage list reads.

The key holds the task, its cache revision (the commit, or the mirror files' fingerprint), the variant,
the depth, the tie order, the corpus and query texts (fingerprints) and, for bm25-lucene, the analyzer's
version (for bm25-hakari, the versions of bm25s, numpy and PyStemmer and the revision of our Porter stemmer, which
its stems and its tie order depend on): a changed input never serves an old run.
"""

from __future__ import annotations

import polars as pl

from r2med_plugin.cache import cached_run, fingerprint, key_of
from r2med_plugin.identifiers import BM25_VARIANTS, Bm25Variant, TieOrder
from r2med_plugin.retrieval.analyzed import analyzer_version
from r2med_plugin.retrieval.bm25 import LuceneBM25Index, bm25_search
from r2med_plugin.retrieval.hakari import hakari_versions
from r2med_plugin.types import Run, TaskData

RUN_DEPTH = 1000


def bm25_variant_for(data: TaskData) -> str:
    return BM25_VARIANTS[data.spec.own_bm25]


def bm25_run(
    data: TaskData,
    variant: Bm25Variant | None = None,
    *,
    top_k: int = RUN_DEPTH,
    queries: pl.DataFrame | None = None,
    show_progress: bool = True,
    ties: TieOrder = "doc_id",
    workers: int | None = None,
    index: LuceneBM25Index | None = None,
) -> Run:
    """The task's BM25 run (for ``queries``, default the task's), cached on disk by task, revision,
    variant, depth, tie order, text fingerprints and (bm25-lucene) the analyzer version and the rows each
    document fills in the corpus file (bm25-lucene indexes every row, as the official code; bm25-hakari and
    bm25-robertson index each id once). ``index``: bm25-lucene's index of ``data``'s corpus, already built (with
    ``data.document_row_counts()``), so one index serves many query sets."""
    variant = variant or bm25_variant_for(data)
    queries = data.queries if queries is None else queries
    tie_part = () if ties == "doc_id" else (f"ties={ties}",)
    analyzer = analyzer_version() if variant == "lucene" else hakari_versions() if variant.startswith("hakari") else ""
    row_counts = data.document_row_counts() if variant == "lucene" else None
    rows_part = () if row_counts is None else (f"rows={key_of(*row_counts.tolist())}",)
    key = key_of(data.name, data.cache_revision, variant, top_k, *tie_part, fingerprint(data.corpus), fingerprint(queries),
                 analyzer, *rows_part)
    return cached_run(
        f"bm25-{variant}", key,
        lambda: bm25_search(data.corpus, queries, variant=variant, top_k=top_k, show_progress=show_progress, ties=ties,
                            workers=workers, row_counts=row_counts, index=index),
    )
