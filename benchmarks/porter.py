"""Our Porter stemmer against nltk's PorterStemmer() (NLTK_EXTENSIONS): the same stems, and how fast.

bm25-hakari stems each distinct token once, so the work it does is one stem per word of the vocabulary: this
stems the distinct lower-cased ``[A-Za-z0-9]+`` tokens of the synthetic R2MED-size corpus plus a random
vocabulary, with each stemmer (best of ``--repeats``), checks every stem is equal and prints the ratio.
Needs nltk (the ``test`` extra).

    python benchmarks/porter.py [--docs 61379] [--random-words 100000] [--repeats 3]
"""

from __future__ import annotations

import argparse
import random
import re
import time
from collections.abc import Callable

from synthetic import synthetic_task

from r2med_plugin.retrieval.porter import stem


def vocabulary(docs: int, random_words: int) -> list[str]:
    corpus, _, _ = synthetic_task(docs, 10)
    words = {token.lower() for text in corpus["text"].to_list() for token in re.findall(r"[A-Za-z0-9]+", text)}
    rng = random.Random(0)
    letters = "abcdefghijklmnopqrstuvwxyz"
    words |= {"".join(rng.choice(letters) for _ in range(rng.randint(1, 14))) for _ in range(random_words)}
    return sorted(words)


def best_time(stemmer: Callable[[str], str], words: list[str], repeats: int) -> tuple[float, list[str]]:
    best, stems = float("inf"), []
    for _ in range(repeats):
        start = time.perf_counter()
        stems = [stemmer(word) for word in words]
        best = min(best, time.perf_counter() - start)
    return best, stems


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=int, default=61379)
    parser.add_argument("--random-words", type=int, default=100_000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    from nltk.stem.porter import PorterStemmer

    words = vocabulary(args.docs, args.random_words)
    ours_time, ours = best_time(stem, words, args.repeats)
    nltk_time, theirs = best_time(PorterStemmer().stem, words, args.repeats)
    differing = sum(a != b for a, b in zip(ours, theirs, strict=True))
    print(f"{len(words):,} distinct words, best of {args.repeats}")
    print(f"  r2med_plugin.retrieval.porter.stem   {ours_time:6.3f} s  {len(words) / ours_time / 1e3:7.1f} k words/s")
    print(f"  nltk PorterStemmer().stem            {nltk_time:6.3f} s  {len(words) / nltk_time / 1e3:7.1f} k words/s")
    print(f"  ratio (nltk / ours): {nltk_time / ours_time:.1f}x; stems that differ: {differing}")


if __name__ == "__main__":
    main()
