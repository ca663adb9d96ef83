from __future__ import annotations

import json
import random
import re
from pathlib import Path

import pytest

from r2med_plugin.retrieval.analyzer import ENGLISH_STOP_WORDS, analyze, analyze_many, porter_stem, tokenize

VECTORS = Path(__file__).parents[1] / "fixtures" / "lucene_english_analyzer_vectors.jsonl"


def _vectors() -> list[dict]:
    return [json.loads(line) for line in VECTORS.read_text(encoding="utf-8").splitlines()]


def test_reproduces_every_lucene_vector():
    rows = _vectors()
    assert len(rows) == 3116
    mismatches = [row["text"] for row in rows if analyze(row["text"]) != row["tokens"]]
    assert mismatches == []


def test_analyze_many_equals_analyze():
    texts = [row["text"] for row in _vectors()[:400]]
    assert analyze_many(texts) == [analyze(text) for text in texts]


@pytest.mark.parametrize(
    ("text", "tokens"),
    [
        ("U.S.A. e-mail 3.14 1,000,000", ["U.S.A", "e", "mail", "3.14", "1,000,000"]),
        ("don't x__y ___ a:b", ["don't", "x__y", "a:b"]),
        ("a/b+c#d&e@f%g×h", ["a", "b", "c", "d", "e", "f", "g", "h"]),
        ("漢字 ひらがな", ["漢", "字", "ひ", "ら", "が", "な"]),
        ("x" * 600, ["x" * 255, "x" * 255, "x" * 90]),
    ],
)
def test_tokenizer_rules(text: str, tokens: list[str]):
    assert tokenize(text) == tokens


def test_filters_in_lucene_order():
    # possessive before lower-case (JOHN'S), stop words before stemming ("as" is a stop word, "was" too;
    # "has" is not and stems to "ha"), Java lower-casing (no dotted-I expansion).
    assert analyze("JOHN'S dog was running as it has İstanbul") == ["john", "dog", "run", "ha", "istanbul"]
    assert len(ENGLISH_STOP_WORDS) == 33


def test_porter_equals_nltk_martin_extensions():
    from nltk.stem.porter import PorterStemmer

    reference = PorterStemmer(mode=PorterStemmer.MARTIN_EXTENSIONS)
    words = {word.lower() for row in _vectors() for word in re.findall(r"[A-Za-z]+", row["text"])}
    rng = random.Random(7)
    suffixes = ["ational", "ization", "fulness", "iveness", "ement", "ing", "ed", "ies", "sses", "logi", "bli", "alli", "e", "ll", "y"]
    words |= {stem + suffix for stem in ("rel", "gener", "hop", "fil", "troubl", "condit", "sky", "cr") for suffix in suffixes}
    words |= {"".join(rng.choice("abcdeiloprstuy") for _ in range(rng.randint(1, 12))) for _ in range(3000)}
    assert [porter_stem(w) for w in sorted(words)] == [reference.stem(w) for w in sorted(words)]
