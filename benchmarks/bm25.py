"""bm25-lucene end to end against the official pipeline; also gensim and rank_bm25 from the same
tokens; bm25-robertson against bm25s.

The synthetic 61k-document task (R2MED lengths) gets medical/chemical fragments and samples of every
word-break class mixed in (superscripts, ©®™, emoji sequences, Hebrew, Thai, ...). End to end means
analysis + indexing + scoring + top-1000:
- ours: ``bm25_search(variant="lucene")`` (analysis in --workers processes, default all cores), first
  with an empty analysed-corpus cache, then again with it warm (what another query set costs);
- the official pipeline stand-in: real Lucene 9.9.1 through the lucene-oracle's per-text path (one
  Java call per text, as pyserini's analyzer is called) + gensim LuceneBM25Model +
  SparseMatrixSimilarity + a Python sort per query. Skipped (with the reason) without the oracle.

    python benchmarks/bm25.py [--docs 61379] [--queries 150] [--workers N] [--rank-bm25-queries 10]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from synthetic import synthetic_task  # noqa: E402

from r2med_plugin.retrieval.analyzed import analyze_texts, merge_analyzed, resolve_workers  # noqa: E402
from r2med_plugin.retrieval.analyzer import analyze_many  # noqa: E402
from r2med_plugin.retrieval.bm25 import (  # noqa: E402
    LuceneBM25Index,
    bm25_search,
    bm25_weights,
    term_frequencies,
)

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))
from r2med_plugin.retrieval.ranking import top_k_run  # noqa: E402


def timed(label: str, function, *args, **kwargs):
    start = time.perf_counter()
    value = function(*args, **kwargs)
    elapsed = time.perf_counter() - start
    print(f"  {label:<58} {elapsed:8.2f} s")
    return value, elapsed


def _compact(token_lists):
    vocabulary: dict[str, int] = {}
    ids = [vocabulary.setdefault(t, len(vocabulary)) for terms in token_lists for t in terms]
    return merge_analyzed([(0, 0, list(vocabulary), np.asarray(ids, dtype=np.int32), np.array([len(t) for t in token_lists], dtype=np.int64))])


def with_unicode_classes(corpus, queries, seed: int = 13):
    """Mix medical/chemical fragments and samples of every word-break class into ~30% of the texts."""
    import polars as pl
    from lucene_fuzz import MEDICAL, Generator

    rng = np.random.default_rng(seed)
    generator = Generator(seed, 1.0)
    samples = [generator.pick(cid) for cid in sorted(generator.members) for _ in range(50)]

    def mix(texts):
        out = []
        for text in texts:
            if rng.random() < 0.3:
                extra = [MEDICAL[i] for i in rng.integers(0, len(MEDICAL), size=rng.integers(1, 4))]
                extra += [samples[i] for i in rng.integers(0, len(samples), size=rng.integers(0, 3))]
                text = text + " " + " ".join(extra)
            out.append(text)
        return out

    return (corpus.with_columns(text=pl.Series(mix(corpus["text"].to_list()))),
            queries.with_columns(text=pl.Series(mix(queries["text"].to_list()))))


def peak_rss_mib() -> tuple[float, float]:
    import resource

    return (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024)


def lucene_speed(texts, megabytes: float = 10.0) -> dict:
    """Lucene's own single-thread speed (the oracle's --bench: ~1 MB chunks, MB/s wall and per CPU second)
    on the first ``megabytes`` of the corpus."""
    import json
    import subprocess

    from tests.support.lucene_oracle import oracle_script

    lines, size = [], 0
    for text in texts:
        lines.append(json.dumps({"text": text}))
        size += len(text.encode("utf-8", "surrogatepass"))
        if size > megabytes * 1e6:
            break
    done = subprocess.run([sys.executable, str(oracle_script()), "--bench"], input="\n".join(lines) + "\n",
                          capture_output=True, text=True, check=True)
    return json.loads(done.stderr.strip().splitlines()[-1])


def our_speed(texts) -> tuple[float, float]:
    """Our analyzer in this process (the form bm25-lucene indexes with): MB/s wall and per CPU second."""
    from r2med_plugin.retrieval.analyzer import analyze_compact

    size = sum(len(t.encode("utf-8", "surrogatepass")) for t in texts) / 1e6
    started, started_cpu = time.perf_counter(), time.process_time()
    analyze_compact(list(texts), object())
    return size / (time.perf_counter() - started), size / (time.process_time() - started_cpu)


def official_pipeline(doc_ids, doc_texts, query_ids, query_texts, top_k=1000):
    """Real Lucene per text (the oracle's per-text path) + gensim scoring: the official pipeline's work."""
    from tests.support.lucene_oracle import lucene_tokens

    tokens = lucene_tokens(list(doc_texts) + list(query_texts))
    doc_tokens, query_tokens = tokens[: len(doc_texts)], tokens[len(doc_texts) :]
    return gensim_pipeline(doc_ids, doc_tokens, query_ids, query_tokens, top_k), doc_tokens, query_tokens


def ours_from_tokens(doc_ids, doc_tokens, query_ids, query_tokens, top_k=1000):
    analyzed = _compact(doc_tokens)
    vocab = {term: i for i, term in enumerate(analyzed.vocabulary)}
    counts = term_frequencies(analyzed, vocab)
    df = np.bincount(counts.indices, minlength=len(vocab))
    idf = np.log(len(doc_tokens) + 1.0) - np.log(df + 0.5)
    avgdl = float(counts.sum()) / len(doc_tokens)
    index = LuceneBM25Index(tuple(doc_ids), vocab, idf, avgdl, bm25_weights(counts, idf, avgdl, 0.9, 0.4))
    query_weights = bm25_weights(term_frequencies(_compact(query_tokens), vocab), idf, avgdl, 0.9, 0.4)
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
    for query_id, tokens in zip(query_ids, query_tokens, strict=True):
        similarities = index[model[dictionary.doc2bow(tokens)]].tolist()
        ranked = sorted(zip(doc_ids, similarities, strict=True), key=lambda pair: pair[1], reverse=True)[:top_k]
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
    import os
    import tempfile

    from tests.support.lucene_oracle import oracle_unavailable

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=int, default=61_379)
    parser.add_argument("--queries", type=int, default=150)
    parser.add_argument("--workers", type=int, default=None, help="analysis processes (default: all cores)")
    parser.add_argument("--rank-bm25-queries", type=int, default=10, help="rank_bm25 is timed on this many queries, then scaled")
    parser.add_argument("--skip-robertson", action="store_true")
    args = parser.parse_args()
    corpus, queries, _ = synthetic_task(args.docs, args.queries)
    corpus, queries = with_unicode_classes(corpus, queries)
    texts = corpus["text"].to_list()
    words = sum(len(t.split()) for t in texts)
    megabytes = sum(len(t.encode("utf-8", "surrogatepass")) for t in texts) / 1e6
    workers = resolve_workers(args.workers)
    print(f"synthetic task: {corpus.height} documents ({words / corpus.height:.0f} words each, {megabytes:.1f} MB, "
          f"{sum(not t.isascii() for t in texts)} with non-ASCII text), {queries.height} queries; {workers} workers")
    doc_ids, query_ids = corpus["id"].to_list(), queries["id"].to_list()

    print("bm25-lucene end to end (analyse + index + score 150 queries + top-1000)")
    os.environ["R2MED_CACHE_DIR"] = tempfile.mkdtemp(prefix="r2med-bm25-bench-")
    ours_run, ours_first = timed("ours, first run (empty analysed-corpus cache)", bm25_search, corpus, queries,
                                 variant="lucene", show_progress=False, workers=args.workers)
    rss_self, rss_children = peak_rss_mib()
    other_queries = queries.with_columns(text=queries["text"].str.to_uppercase())
    _, ours_second = timed("ours, second run, other queries (cache warm)", bm25_search, corpus, other_queries,
                           variant="lucene", show_progress=False, workers=args.workers)
    reason = oracle_unavailable()
    if reason:
        print(f"  official pipeline: SKIPPED ({reason})")
        official_total, official_run = None, None
    else:
        (official_run, doc_tokens, query_tokens), official_total = timed(
            "official stand-in: Lucene per text (oracle) + gensim scoring", official_pipeline, doc_ids, texts, query_ids,
            queries["text"].to_list())
    _, parallel_time = timed(f"our analyzer alone on the corpus, {workers} processes", analyze_texts, texts, workers=workers)
    _, single_time = timed("our analyzer alone on the corpus, 1 process", analyze_texts, texts, workers=1)
    print(f"  our analyzer: {megabytes / parallel_time:.1f} MB/s with {workers} processes, {megabytes / single_time:.1f} MB/s in one")
    if not reason:
        subset = texts[: max(1, len(texts) * 10 // max(1, int(megabytes)))]  # ~10 MB
        ours_wall, ours_cpu = our_speed(subset)
        lucene = lucene_speed(subset)
        print(f"  same ~10 MB, one thread: ours {ours_wall:.1f} MB/s ({ours_cpu:.1f} MB per CPU second); Lucene alone "
              f"{lucene['lucene_1mb_chunks_mb_per_s']:.1f} MB/s ({lucene['lucene_1mb_chunks_mb_per_cpu_s']:.1f} MB per CPU "
              f"second); the oracle per text {lucene['oracle_per_text_mb_per_s']:.1f} MB/s")
        print(f"  our aggregate per CPU second x {workers} cores: {ours_cpu * workers:.1f} MB/s")
    print(f"  peak RSS of our first run: {rss_self:.0f} MiB (main process), {rss_children:.0f} MiB (largest worker)")
    if official_total is not None:
        print(f"  ratio official / ours end to end: first run {official_total / ours_first:6.1f}x, "
              f"second run {official_total / ours_second:6.1f}x")
        print(f"  identical top-100 sets vs the official pipeline: {top100_agreement(ours_run, official_run):.1%} of queries")
        ours_terms = analyze_many(texts)
        print(f"  documents whose terms equal Lucene's: {sum(a == b for a, b in zip(ours_terms, doc_tokens, strict=True))} of {len(texts)}")
    else:
        doc_tokens, query_tokens = analyze_many(texts), analyze_many(queries["text"].to_list())
    print("bm25-lucene from the same tokens")
    ours_tokens_run, ours_scoring = timed("ours from tokens (index + score + top-1000)", ours_from_tokens, doc_ids, doc_tokens, query_ids, query_tokens)
    gensim_run, gensim_time = timed("gensim official scoring from the same tokens", gensim_pipeline, doc_ids, doc_tokens, query_ids, query_tokens)
    n = min(args.rank_bm25_queries, len(query_tokens))
    _, rank_time = timed(f"rank_bm25 BM25Okapi from tokens, {n} queries", rank_bm25_pipeline, doc_tokens, query_tokens[:n])
    rank_scaled = rank_time / n * len(query_tokens)
    print(f"  rank_bm25 scaled to {len(query_tokens)} queries: {rank_scaled:.1f} s")
    print(f"  ratio gensim / ours (from tokens):   {gensim_time / ours_scoring:6.1f}x")
    print(f"  ratio rank_bm25 / ours (from tokens): {rank_scaled / ours_scoring:6.1f}x")
    print(f"  identical top-100 sets vs gensim: {top100_agreement(ours_tokens_run, gensim_run):.1%} of queries")
    if args.skip_robertson:
        return

    print("bm25-robertson")

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
