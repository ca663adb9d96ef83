"""The analyzer against real Lucene 9.9.1: committed fuzz vectors and a live differential fuzz."""

from __future__ import annotations

import gzip
import json
import os
import random
import sys
from collections import Counter
from pathlib import Path

import pytest

from r2med_plugin.retrieval.analyzed import analyze_texts
from r2med_plugin.retrieval.analyzer import analyze, analyze_many, porter_stem, tokenize
from tests.support.lucene_oracle import lucene_tokens, oracle_unavailable

ROOT = Path(__file__).resolve().parents[2]
FUZZ_VECTORS = Path(__file__).parents[1] / "fixtures" / "lucene_fuzz_vectors.jsonl.gz"


def _fuzz_rows() -> list[dict]:
    with gzip.open(FUZZ_VECTORS, "rt", encoding="utf-8") as stream:
        return [json.loads(line) for line in stream]


@pytest.mark.slow
def test_reproduces_every_committed_fuzz_vector():
    rows = _fuzz_rows()
    assert len(rows) >= 100_000
    classes = Counter(row["class"].split(":")[0] for row in rows)
    for klass in ("codepoint", "class", "pairs", "triples", "medical", "numbers", "urls", "emoji", "joiners", "long", "random"):
        assert classes[klass] > 0, klass
    results = analyze_many(row["text"] for row in rows)
    wrong = [(row["class"], row["text"], row["tokens"], got) for row, got in zip(rows, results, strict=True) if got != row["tokens"]]
    assert wrong[:5] == [] and len(wrong) == 0
    # the batched form bm25-lucene indexes with (texts joined per regex call) gives the same terms
    compact = analyze_texts([row["text"] for row in rows], workers=1).terms()
    assert [i for i, (row, got) in enumerate(zip(rows, compact, strict=True)) if got != row["tokens"]] == []


@pytest.mark.parametrize(
    ("text", "terms"),
    [  # real Lucene 9.9.1's terms (the oracle), symbols, units, super- and subscripts
        ("kg/m² PaCO₂ 10⁹ ½", ["kg", "m", "paco", "10"]),
        ("© 2020 Elsevier Ltd. Tylenol® Ozempic™", ["©", "2020", "elsevi", "ltd", "tylenol", "®", "ozemp", "™"]),
        ("Barre\u0301's syndrome", ["barre\u0301", "syndrom"]),
    ],
)
def test_issue_cases(text: str, terms: list[str]):
    assert analyze(text) == terms


def test_long_tokens_are_cut_at_255_utf16_units():
    # 200 supplementary letters are 400 UTF-16 units: Lucene cuts after 127 of them (254 units)
    token = "\U0001d400" * 200
    assert [len(piece) for piece in tokenize(token)] == [127, 73]
    assert [len(piece) for piece in tokenize("x" * 600)] == [255, 255, 90]


def test_stemmer_counts_utf16_units():
    # "\U0001d41as" is 3 UTF-16 units: long enough for Lucene's stemmer to drop the plural s
    assert porter_stem("\U0001d41as") == "\U0001d41a"
    assert porter_stem("es") == "es"


def test_live_oracle_on_a_fresh_seeded_sample(capsys):
    reason = oracle_unavailable()
    if reason and os.environ.get("R2MED_REQUIRE_LUCENE_ORACLE") == "1":
        pytest.fail(f"R2MED_REQUIRE_LUCENE_ORACLE=1 but {reason}")
    if reason:  # only outside CI: a clone without ../shared/tools cannot reach real Lucene
        with capsys.disabled():
            print(f"\nSKIPPED live Lucene oracle test: {reason}")
        pytest.skip(reason)
    sys.path.insert(0, str(ROOT / "scripts"))
    from lucene_fuzz import Generator

    seed = int(os.environ.get("LUCENE_FUZZ_SEED") or random.SystemRandom().randrange(1 << 30))
    lines = list(Generator(seed, 0.02).lines())
    texts = [text for _, text in lines]
    expected = lucene_tokens(texts)
    wrong = [(klass, text, terms, analyze(text)) for (klass, text), terms in zip(lines, expected, strict=True) if analyze(text) != terms]
    assert wrong[:5] == [], f"LUCENE_FUZZ_SEED={seed}: {len(wrong)} of {len(lines)} lines differ"
