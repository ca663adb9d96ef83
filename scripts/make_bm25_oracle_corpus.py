"""A small corpus holding every fuzz class, with real Lucene's terms, for the BM25 equality test.

    python scripts/make_bm25_oracle_corpus.py --out tests/fixtures/bm25_oracle_corpus.json.gz

Documents and queries mix medical/chemical fragments (kg/m², PaCO₂, 10⁹, ½, ©, ®, ™, Ⓐ, ˂, Hebrew
geresh, Barre\\u0301's, soft hyphen, emoji sequences, Thai/Tai Tham/Ahom, 々 〆, >255-unit tokens)
with samples of every word-break class of Lucene's tables; the terms come from the Lucene oracle,
so tests/retrieval/test_bm25_oracle.py compares our BM25 with gensim's on real Lucene tokens without Java.
"""

from __future__ import annotations

import argparse
import gzip
import json
import random
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

from lucene_fuzz import ASCII_WORDS, MEDICAL, Generator  # noqa: E402

from tests.support.lucene_oracle import lucene_tokens  # noqa: E402


def corpus_texts(seed: int, n_docs: int, n_queries: int) -> tuple[list[str], list[str]]:
    rng = random.Random(seed)
    generator = Generator(seed, 1.0)
    samples = [generator.pick(cid) * rng.randint(1, 2) for cid in sorted(generator.members) for _ in range(3)]
    rng.shuffle(samples)
    words = ASCII_WORDS * 3 + MEDICAL

    def text(length: int) -> str:
        parts = [rng.choice(words) for _ in range(length)]
        parts += [samples.pop() for _ in range(min(len(samples), rng.randint(0, 4)))]
        if rng.random() < 0.05:
            parts.append(generator.long_token())
        rng.shuffle(parts)
        return " ".join(parts)

    documents = [text(rng.randint(5, 60)) for _ in range(n_docs)]
    queries = [text(rng.randint(2, 12)) for _ in range(n_queries)]
    return documents, queries


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seed", type=int, default=13)
    parser.add_argument("--docs", type=int, default=400)
    parser.add_argument("--queries", type=int, default=40)
    parser.add_argument("--out", type=Path, default=ROOT / "tests" / "fixtures" / "bm25_oracle_corpus.json.gz")
    args = parser.parse_args()
    documents, queries = corpus_texts(args.seed, args.docs, args.queries)
    tokens = lucene_tokens(documents + queries)
    payload = {
        "command": f"python scripts/make_bm25_oracle_corpus.py --seed {args.seed} --docs {args.docs} --queries {args.queries}",
        "lucene": "9.9.1 (lucene-oracle: pyserini 1.0.0's anserini fatjar)",
        "documents": [{"id": f"d{i}", "text": t, "tokens": k} for i, (t, k) in enumerate(zip(documents, tokens, strict=True))],
        "queries": [{"id": f"q{i}", "text": t, "tokens": k} for i, (t, k) in enumerate(zip(queries, tokens[len(documents):], strict=True))],
    }
    with gzip.open(args.out, "wt", encoding="utf-8", compresslevel=9) as stream:
        json.dump(payload, stream, ensure_ascii=False)
    print(f"{len(documents)} documents, {len(queries)} queries -> {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
