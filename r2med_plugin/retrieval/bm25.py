"""BM25 retrievers.

``lucene`` (`bm25-lucene`): the official R2MED BM25 — Lucene's English analyzer feeding gensim's
LuceneBM25Model (k1=0.9, b=0.4; idf = ln(N+1) - ln(df+0.5); term weight idf*tf/(tf + k1*(1-b+b*len/avgdl))
applied to the documents and to the query bag of words alike; score = dot product, in float32 as
gensim's SparseMatrixSimilarity computes it). Query terms unknown to the corpus are dropped.

``robertson`` (`bm25-robertson`): bm25s (k1=1.5, b=0.75) over bm25s's own tokenizer (``\\w\\w+``, bm25s's
English stop words, PyStemmer's Porter stemmer). It is NOT how HAKARI-Bench built or scores NanoR2MED: that is
``hakari`` (`bm25-hakari`, r2med_plugin.retrieval.hakari), with HAKARI-Bench's tokenizer.

``hakari`` / ``hakari:<tokenizer>`` (`bm25-hakari`, `bm25-hakari:<tokenizer>`): HAKARI-Bench's BM25, NanoR2MED's own.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import polars as pl
import scipy.sparse as sp
from tqdm.auto import tqdm

from r2med_plugin.errors import UserError
from r2med_plugin.identifiers import BM25_VARIANTS, Bm25Variant, TieOrder
from r2med_plugin.quiet import bar_disabled
from r2med_plugin.retrieval.analyzed import AnalyzedTexts, analyze_corpus, analyze_texts
from r2med_plugin.retrieval.ranking import top_k_run
from r2med_plugin.types import Run

VARIANTS = tuple(BM25_VARIANTS.values())
LUCENE_K1, LUCENE_B = 0.9, 0.4
ROBERTSON_K1, ROBERTSON_B = 1.5, 0.75
_QUERY_CHUNK = 256


@dataclass(frozen=True)
class LuceneBM25Index:
    """Document term weights (documents x terms, float32 CSR) and what scoring a query needs."""

    doc_ids: tuple[str, ...]
    vocabulary: dict[str, int]
    idf: np.ndarray
    avgdl: float
    weights: sp.csr_matrix
    k1: float = LUCENE_K1
    b: float = LUCENE_B


def term_frequencies(analyzed: AnalyzedTexts, vocabulary: dict[str, int]) -> sp.csr_matrix:
    """rows x terms counts; terms missing from ``vocabulary`` are dropped."""
    local_to_global = np.fromiter((vocabulary.get(term, -1) for term in analyzed.vocabulary), dtype=np.int64,
                                  count=len(analyzed.vocabulary))
    term_ids = local_to_global[analyzed.term_ids] if len(analyzed.term_ids) else np.zeros(0, dtype=np.int64)
    rows = np.repeat(np.arange(len(analyzed.lengths)), analyzed.lengths)
    known = term_ids >= 0
    counts = sp.coo_matrix(
        (np.ones(int(known.sum()), dtype=np.float64), (rows[known], term_ids[known])),
        shape=(len(analyzed.lengths), len(vocabulary)),
    ).tocsr()
    counts.sum_duplicates()
    return counts


def bm25_weights(counts: sp.csr_matrix, idf: np.ndarray, avgdl: float, k1: float, b: float) -> sp.csr_matrix:
    lengths = np.asarray(counts.sum(axis=1)).ravel()
    row_of_entry = np.repeat(np.arange(counts.shape[0]), np.diff(counts.indptr))
    tf = counts.data
    norm = k1 * (1.0 - b + b * lengths[row_of_entry] / avgdl)
    data = idf[counts.indices] * (tf / (tf + norm))
    return sp.csr_matrix((data.astype(np.float32), counts.indices, counts.indptr), shape=counts.shape)


def index_from_analyzed(
    doc_ids: Sequence[str], analyzed: AnalyzedTexts, *, k1: float = LUCENE_K1, b: float = LUCENE_B,
    row_counts: np.ndarray | None = None,
) -> LuceneBM25Index:
    """The BM25 index of an already analysed corpus (terms as ``analyze`` gives them).

    ``row_counts`` (one per document) counts a document that fills several identical rows of the corpus file
    that many times in N, the document frequencies and the average length, as the official code, which indexes
    every row, does; each id is still scored once.
    """
    if len(doc_ids) != len(analyzed.lengths):
        raise ValueError(f"doc_ids ({len(doc_ids)}) and analysed documents ({len(analyzed.lengths)}) must have the same length")
    if not len(doc_ids):
        raise UserError("the corpus is empty: there is nothing to index")
    rows = _row_counts(row_counts, len(doc_ids))
    vocabulary_map = {term: i for i, term in enumerate(analyzed.vocabulary)}
    counts = term_frequencies(analyzed, vocabulary_map)
    row_of_entry = np.repeat(np.arange(counts.shape[0]), np.diff(counts.indptr))
    document_frequency = np.bincount(counts.indices, weights=rows[row_of_entry], minlength=len(vocabulary_map))
    total_rows = int(rows.sum())
    idf = np.log(total_rows + 1.0) - np.log(document_frequency + 0.5)
    lengths = np.asarray(counts.sum(axis=1)).ravel().astype(np.int64)
    avgdl = float(int((lengths * rows).sum())) / total_rows
    return LuceneBM25Index(
        doc_ids=tuple(doc_ids),
        vocabulary=vocabulary_map,
        idf=idf,
        avgdl=avgdl,
        weights=bm25_weights(counts, idf, avgdl, k1, b),
        k1=k1,
        b=b,
    )


def _row_counts(row_counts: np.ndarray | None, documents: int) -> np.ndarray:
    if row_counts is None:
        return np.ones(documents, dtype=np.int64)
    rows = np.asarray(row_counts, dtype=np.int64)
    if rows.shape != (documents,) or (rows < 1).any():
        raise ValueError(f"row_counts must hold one count of at least 1 per document ({documents}), got shape {rows.shape}")
    return rows


def build_lucene_index(
    doc_ids: Sequence[str],
    documents: Sequence[str],
    *,
    k1: float = LUCENE_K1,
    b: float = LUCENE_B,
    show_progress: bool = True,
    workers: int | None = None,
) -> LuceneBM25Index:
    """Analyse and index a corpus for the official R2MED BM25 (analysis in ``workers`` processes, default all cores)."""
    if len(doc_ids) != len(documents):
        raise ValueError(f"doc_ids ({len(doc_ids)}) and documents ({len(documents)}) must have the same length")
    if not documents:
        raise UserError("the corpus is empty: there is nothing to index")
    analyzed = analyze_texts(documents, workers=workers, show_progress=show_progress, desc="bm25-lucene: analysing documents")
    return index_from_analyzed(doc_ids, analyzed, k1=k1, b=b)


def lucene_query_weights(index: LuceneBM25Index, queries: Sequence[str]) -> sp.csr_matrix:
    """Queries x terms BM25 weights: the same formula as the documents, on the query bag of words."""
    counts = term_frequencies(analyze_texts(queries, workers=1, show_progress=False), index.vocabulary)
    return bm25_weights(counts, index.idf, index.avgdl, index.k1, index.b)


def lucene_scores(index: LuceneBM25Index, queries: Sequence[str]) -> np.ndarray:
    """Dense queries x documents float32 score matrix."""
    query_weights = lucene_query_weights(index, queries)
    return np.asarray((query_weights @ index.weights.T).toarray(), dtype=np.float32)


def bm25_search(
    corpus: pl.DataFrame,
    queries: pl.DataFrame,
    *,
    variant: Bm25Variant = "lucene",
    top_k: int = 1000,
    show_progress: bool = True,
    ties: TieOrder = "doc_id",
    workers: int | None = None,
    row_counts: np.ndarray | None = None,
    index: LuceneBM25Index | None = None,
) -> Run:
    """BM25 run over ``corpus`` (columns id, text) for ``queries`` (columns id, text): top_k per query.

    ``row_counts`` (bm25-lucene): how many identical rows of the corpus file each document fills
    (``TaskData.document_row_counts``); they count in BM25's statistics as in the official code.

    Ties are broken as pytrec_eval breaks them (document id descending), so the cut at top_k keeps
    the documents an evaluator would rank first; ``ties="corpus"`` keeps corpus order instead (the
    official R2MED BM25's stable sort). ``hakari`` variants ignore ``ties``: their runs are bm25s's own
    ranking, in the dict's order (r2med_plugin.retrieval.hakari.hakari_search).
    ``bm25-lucene`` analyses the corpus in ``workers``
    processes (default: all cores) and caches the analysed corpus on disk by its fingerprint, so a
    second run with other queries skips corpus analysis. ``index`` (bm25-lucene): the corpus's index, already
    built (``lucene_index_of``), for callers that search one corpus with many query sets (the reproduction matrix).
    """
    _check_frames(corpus, queries)
    if variant not in VARIANTS:
        raise UserError(f"variant must be one of {VARIANTS}, got {variant!r}")
    if top_k < 1:
        raise UserError(f"top_k must be a positive integer, got {top_k}")
    doc_ids = corpus["id"].to_list()
    query_ids = queries["id"].to_list()
    query_texts = queries["text"].to_list()
    if variant.startswith("hakari"):
        from r2med_plugin.retrieval.hakari import DEFAULT_TOKENIZER, hakari_search

        tokenizer = variant.partition(":")[2] or DEFAULT_TOKENIZER
        return hakari_search(doc_ids, corpus["text"].to_list(), query_ids, query_texts, tokenizer=tokenizer, top_k=top_k,
                             show_progress=show_progress)
    if variant == "lucene":
        if index is None:
            index = lucene_index_of(corpus, row_counts=row_counts, workers=workers, show_progress=show_progress)
        elif index.doc_ids != tuple(doc_ids):
            raise UserError("the given BM25 index was built on another corpus: build it with lucene_index_of(corpus)")
        score = lambda chunk: lucene_scores(index, chunk)  # noqa: E731
    else:
        retriever = build_robertson_index(corpus["text"].to_list(), show_progress=show_progress)
        score = lambda chunk: robertson_scores(retriever, chunk)  # noqa: E731
    run: Run = {}
    progress = tqdm(total=len(query_ids), desc=f"bm25-{variant}: scoring queries", disable=bar_disabled(show_progress), unit="query")
    for start in range(0, len(query_ids), _QUERY_CHUNK):
        chunk_ids = query_ids[start : start + _QUERY_CHUNK]
        run.update(top_k_run(chunk_ids, doc_ids, score(query_texts[start : start + _QUERY_CHUNK]), top_k, ties=ties))
        progress.update(len(chunk_ids))
    progress.close()
    return run


def lucene_index_of(corpus: pl.DataFrame, *, row_counts: np.ndarray | None = None, workers: int | None = None,
                    show_progress: bool = True) -> LuceneBM25Index:
    """The bm25-lucene index of a corpus frame (its analysis read from or written to the on-disk cache)."""
    analyzed = analyze_corpus(corpus, workers=workers, show_progress=show_progress)
    return index_from_analyzed(corpus["id"].to_list(), analyzed, row_counts=row_counts)


def _check_frames(corpus: pl.DataFrame, queries: pl.DataFrame) -> None:
    for name, frame in (("corpus", corpus), ("queries", queries)):
        if not isinstance(frame, pl.DataFrame) or not {"id", "text"} <= set(frame.columns):
            raise TypeError(f"{name} must be a polars DataFrame with columns 'id' and 'text' (as load_task returns)")


# --- bm25-robertson: bm25s -------------------------------------------------------------------------


_TOKENIZE_CHUNK = 2000


def robertson_tokens(texts: Sequence[str], show_progress: bool) -> list[list[str]]:
    """bm25s tokens of each text; one progress bar of our own (bm25s' several nested bars stay off)."""
    import bm25s
    import Stemmer

    stemmer = Stemmer.Stemmer("porter")
    texts = list(texts)
    tokens: list[list[str]] = []
    with tqdm(total=len(texts), desc="bm25-robertson: analysing documents", disable=bar_disabled(show_progress), unit="doc") as progress:
        for start in range(0, len(texts), _TOKENIZE_CHUNK):
            chunk = texts[start : start + _TOKENIZE_CHUNK]
            tokens += bm25s.tokenize(chunk, stopwords="en", stemmer=stemmer, show_progress=False, return_ids=False)
            progress.update(len(chunk))
    return tokens


def build_robertson_index(documents: Sequence[str], *, show_progress: bool = True):
    """A bm25s index (Robertson BM25, k1=1.5, b=0.75) over English-stopworded, Porter-stemmed tokens."""
    import bm25s

    if not documents:
        raise UserError("the corpus is empty: there is nothing to index")
    retriever = bm25s.BM25(method="robertson", k1=ROBERTSON_K1, b=ROBERTSON_B)
    retriever.index(robertson_tokens(documents, show_progress), show_progress=False)
    return retriever


def robertson_scores(retriever, queries: Sequence[str]) -> np.ndarray:
    """Dense queries x documents scores from bm25s (query terms unknown to the corpus are dropped)."""
    num_docs = retriever.scores["num_docs"]
    rows = []
    for terms in robertson_tokens(queries, show_progress=False):
        known = [term for term in terms if term in retriever.vocab_dict]
        rows.append(retriever.get_scores(known) if known else np.zeros(num_docs, dtype=np.float32))
    return np.vstack(rows).astype(np.float32) if rows else np.zeros((0, num_docs), dtype=np.float32)
