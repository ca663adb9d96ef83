"""bm25-lucene against the official pipeline (gensim) and rank_bm25; bm25-robertson against bm25s.

Same synthetic 61k-document task, same run, same tokens where the alternative takes tokens.

    python benchmarks/bm25.py [--docs 61379] [--queries 150] [--rank-bm25-queries 10]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from synthetic import synthetic_task  # noqa: E402

from r2med_plugin.retrieval.analyzer import analyze_many  # noqa: E402
from r2med_plugin.retrieval.bm25 import (  # noqa: E402
    LuceneBM25Index,
    _bm25_weights,
    _term_frequencies,
    bm25_search,
)
from r2med_plugin.retrieval.ranking import top_k_run  # noqa: E402


def timed(label: str, function, *args, **kwargs):
    start = time.perf_counter()
    value = function(*args, **kwargs)
    elapsed = time.perf_counter() - start
    print(f"  {label:<58} {elapsed:8.2f} s")
    return value, elapsed


def ours_from_tokens(doc_ids, doc_tokens, query_ids, query_tokens, top_k=1000):
    import polars as pl

    vocabulary = pl.Series([t for terms in doc_tokens for t in terms]).unique(maintain_order=True).to_list()
    vocab = dict(zip(vocabulary, range(len(vocabulary))))
    counts = _term_frequencies(doc_tokens, vocab)
    df = np.bincount(counts.indices, minlength=len(vocab))
    idf = np.log(len(doc_tokens) + 1.0) - np.log(df + 0.5)
    avgdl = float(counts.sum()) / len(doc_tokens)
    index = LuceneBM25Index(tuple(doc_ids), vocab, idf, avgdl, _bm25_weights(counts, idf, avgdl, 0.9, 0.4))
    query_weights = _bm25_weights(_term_frequencies(query_tokens, vocab), idf, avgdl, 0.9, 0.4)
    scores = np.asarray((query_weights @ index.weights.T).toarray(), dtype=np.float32)
    return top_k_run(query_ids, doc_ids, scores, top_k)


def gensim_pipeline(doc_ids, doc_tokens, query_ids, query_tokens, top_k=1000):
    """The official R2MED scoring: LuceneBM25Model + SparseMatrixSimilarity + a Python sort per query."""
    from gensim.corpora import Dictionary
    from gensim.models import LuceneBM25Model
    from gensim.similarities import SparseMatrixSimilarity

    dictionary = Dictionary(doc_tokens)
    model = LuceneBM25Model(dictionary=dictionary, k1=0.9, b=0.4)
    index = SparseMatrixSimilarity(model[list(map(dictionary.doc2bow, doc_tokens))], num_docs=len(doc_tokens),
                                   num_terms=len(dictionary), normalize_queries=False, normalize_documents=False)
    run = {}
    for query_id, tokens in zip(query_ids, query_tokens):
        similarities = index[model[dictionary.doc2bow(tokens)]].tolist()
        ranked = sorted(zip(doc_ids, similarities), key=lambda pair: pair[1], reverse=True)[:top_k]
        run[query_id] = dict(ranked)
    return run


def rank_bm25_pipeline(doc_tokens, query_tokens):
    from rank_bm25 import BM25Okapi

    model = BM25Okapi(doc_tokens, k1=0.9, b=0.4)
    return [model.get_scores(tokens) for tokens in query_tokens]


def top100_agreement(ours, reference) -> float:
    same = sum(set(list(ours[q])[:100]) == set(list(reference[q])[:100]) for q in ours)
    return same / len(ours)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=int, default=61_379)
    parser.add_argument("--queries", type=int, default=150)
    parser.add_argument("--rank-bm25-queries", type=int, default=10, help="rank_bm25 is timed on this many queries, then scaled")
    args = parser.parse_args()
    corpus, queries, _ = synthetic_task(args.docs, args.queries)
    words = sum(len(t.split()) for t in corpus["text"].to_list())
    print(f"synthetic task: {corpus.height} documents ({words / corpus.height:.0f} words each), {queries.height} queries")
    doc_ids, query_ids = corpus["id"].to_list(), queries["id"].to_list()

    print("bm25-lucene")
    ours_run, ours_total = timed("ours end to end (analyse + index + score + top-1000)", bm25_search, corpus, queries,
                                 variant="lucene", show_progress=False)
    doc_tokens, analyse_time = timed("Lucene analyzer alone on the corpus (separate pass)", analyze_many, corpus["text"].to_list())
    megabytes = sum(len(t.encode()) for t in corpus["text"].to_list()) / 1e6
    print(f"  analyzer throughput: {megabytes / analyse_time:.1f} MB/s")
    query_tokens = analyze_many(queries["text"].to_list())
    ours_tokens_run, ours_scoring = timed("ours from tokens (index + score + top-1000)", ours_from_tokens, doc_ids, doc_tokens, query_ids, query_tokens)
    gensim_run, gensim_time = timed("gensim official pipeline from the same tokens", gensim_pipeline, doc_ids, doc_tokens, query_ids, query_tokens)
    n = min(args.rank_bm25_queries, len(query_tokens))
    _, rank_time = timed(f"rank_bm25 BM25Okapi from tokens, {n} queries", rank_bm25_pipeline, doc_tokens, query_tokens[:n])
    rank_scaled = rank_time / n * len(query_tokens)
    print(f"  rank_bm25 scaled to {len(query_tokens)} queries: {rank_scaled:.1f} s")
    print(f"  ratio gensim / ours (from tokens):   {gensim_time / ours_scoring:6.1f}x")
    print(f"  ratio gensim / ours (ours end to end, gensim without analysis): {gensim_time / ours_total:6.1f}x")
    print(f"  ratio rank_bm25 / ours (from tokens): {rank_scaled / ours_scoring:6.1f}x")
    print(f"  identical top-100 sets vs gensim: {top100_agreement(ours_tokens_run, gensim_run):.1%} of queries")
    print(f"  identical top-100 sets, ours end to end vs ours from tokens: {top100_agreement(ours_run, ours_tokens_run):.1%}")

    print("bm25-robertson")
    texts = corpus["text"].to_list()

    def ours_robertson():
        return bm25_search(corpus, queries, variant="robertson", show_progress=False)

    def bm25s_direct():
        import bm25s
        import Stemmer

        stemmer = Stemmer.Stemmer("porter")
        model = bm25s.BM25(method="robertson", k1=1.5, b=0.75)
        model.index(bm25s.tokenize(texts, stopwords="en", stemmer=stemmer, show_progress=False), show_progress=False)
        tokens = bm25s.tokenize(queries["text"].to_list(), stopwords="en", stemmer=stemmer, show_progress=False)
        return model.retrieve(tokens, k=1000, show_progress=False)

    _, ours_rob = timed("ours (bm25s underneath, top-1000 in pytrec order)", ours_robertson)
    _, direct = timed("bm25s called directly (retrieve k=1000)", bm25s_direct)
    print(f"  ratio ours / bm25s: {ours_rob / direct:6.2f}x")


if __name__ == "__main__":
    main()
