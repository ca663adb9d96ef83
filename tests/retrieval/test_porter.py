"""Our Porter stemmer (r2med_plugin.retrieval.porter) against nltk's PorterStemmer() (NLTK_EXTENSIONS), word for word.

nltk is a test dependency only: bm25-hakari stems with our code, and these tests prove it gives nltk's stems on every
token of the test corpora, on a generated vocabulary built to reach every rule, and on nltk's irregular forms."""

from __future__ import annotations

import json
import random
import re
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path

import polars as pl
import pytest
from nltk.stem.porter import PorterStemmer

from r2med_plugin.retrieval.porter import IRREGULAR_FORMS, STEP2_RULES, STEP3_RULES, STEP4_SUFFIXES, stem

DEMO_SAMPLE = Path(__file__).resolve().parents[2] / "r2med_plugin" / "demo_sample"
# every suffix a rule looks at, step 1a to step 5b
RULE_SUFFIXES = (
    ["sses", "ies", "ss", "s", "ied", "eed", "ed", "ing", "at", "bl", "iz", "y", "alli", "e", "ll"]
    + [suffix for suffix, _ in STEP2_RULES] + [suffix for suffix, _ in STEP3_RULES] + list(STEP4_SUFFIXES)
)
ALPHABET = "abcdefghijklmnopqrstuvwxyz"


def _mismatches(words: Iterable[str]) -> list[tuple[str, str, str]]:
    reference = PorterStemmer().stem
    return [(word, ours, theirs) for word in sorted(words) if (ours := stem(word)) != (theirs := reference(word))]


def _parquet_tokens(root: Path) -> set[str]:
    """Every distinct token of every text column under ``root``: \\w+, [A-Za-z0-9]+ and white-space pieces."""
    tokens: set[str] = set()
    for path in sorted(root.rglob("*.parquet")):
        frame = pl.read_parquet(path)
        for column in (name for name, dtype in frame.schema.items() if dtype == pl.String):
            for text in frame[column].drop_nulls().unique().to_list():
                tokens.update(re.findall(r"\w+", text), re.findall(r"[A-Za-z0-9]+", text), text.split())
    return tokens


def _random_stem(rng: random.Random, length: int) -> str:
    # vowels, y and the letters step 1b and *o single out, weighted so y-runs and double consonants are common
    return "".join(rng.choice("aeiouyybcdlmnprstwxzyy") for _ in range(length))


def _generated_vocabulary(seed: int = 41) -> set[str]:
    rng = random.Random(seed)
    words: set[str] = set(ALPHABET) | {a + b for a in ALPHABET for b in ALPHABET}
    words |= {a + b + c for a in ALPHABET for b in ALPHABET for c in "aeiouyslbdgz"}  # short words, 3 letters
    for _ in range(3500):  # every suffix of every rule on random stems, once and twice stacked
        base = _random_stem(rng, rng.randint(0, 7))
        words.update(base + suffix for suffix in RULE_SUFFIXES)
        words.add(base + rng.choice(RULE_SUFFIXES) + rng.choice(RULE_SUFFIXES))
    for _ in range(20000):  # double consonants before ed/ing, e endings, y endings
        base = _random_stem(rng, rng.randint(1, 6))
        double = rng.choice("bdglmnprstzy") * 2
        words.update({base + double + "ed", base + double + "ing", base + "e", base + "y", base + double})
    words |= {"".join(rng.choice(ALPHABET) for _ in range(rng.randint(1, 14))) for _ in range(30000)}
    return words


def test_known_stems():
    cases = {"caresses": "caress", "ponies": "poni", "ties": "tie", "cats": "cat", "agreed": "agre",
             "plastered": "plaster",
             "motoring": "motor", "sing": "sing", "hopping": "hop", "falling": "fall", "filing": "file", "cried": "cri",
             "died": "die", "happy": "happi", "enjoy": "enjoy", "relational": "relat", "generalizations": "gener",
             "analogically": "analog", "controlling": "control", "dying": "die", "skies": "sky", "innings": "inning",
             "Running": "run", "IS": "is", "a": "a", "": "", "is": "is", "news": "news", "succeed": "succeed"}
    assert {word: stem(word) for word in cases} == cases


def test_irregular_forms_are_nltks_pool():
    assert IRREGULAR_FORMS == PorterStemmer().pool
    forms = {variant for form in IRREGULAR_FORMS for variant in (form, form.upper(), form.title())}
    assert _mismatches(forms) == []


def test_generated_vocabulary_equals_nltk():
    words = _generated_vocabulary()
    assert len(words) >= 200_000
    assert {suffix for suffix in RULE_SUFFIXES if any(word.endswith(suffix) for word in words)} == set(RULE_SUFFIXES)
    assert _mismatches(words) == []


def test_odd_characters_equal_nltk():
    # upper case (lower-cased first; the short-word rule counts the word as given), digits, non-ASCII letters,
    # İ (lower-cases to two characters) and NLTK's literal "*d" rule marker
    rng = random.Random(5)
    words = {"".join(rng.choice("aeiyyylsstbdİKÉé1*") for _ in range(rng.randint(0, 9))) for _ in range(20000)}
    words |= {"İs", "İ", "a*ding", "xa*ded", "Dying", "SKIES", "2nd", "1990s", "covid19", "ﬁling"}
    assert _mismatches(words) == []


def test_demo_sample_tokens_equal_nltk():
    tokens = _parquet_tokens(DEMO_SAMPLE)
    assert len(tokens) > 1_500 and "patient" in tokens
    assert _mismatches(tokens) == []


def test_fixture_mirror_tokens_equal_nltk(fixture_mirror: Path):
    tokens = _parquet_tokens(fixture_mirror)
    assert {"insulin", "chemotherapy", "metastasis"} <= tokens
    assert _mismatches(tokens) == []


@pytest.mark.parametrize("tokenizer", ["english_porter_stop", "english_porter"])
def test_hakari_stems_without_nltk(tokenizer: str):
    code = (
        "import json, sys\n"
        "from r2med_plugin.retrieval.hakari import hakari_tokens, hakari_versions\n"
        f"terms = hakari_tokens(['The running runners generalizations'], {tokenizer!r})\n"
        "print(json.dumps([terms, 'nltk' in sys.modules, hakari_versions()]))\n"
    )
    output = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    terms, nltk_loaded, versions = json.loads(output)
    expected = ["run", "runner", "gener"] if tokenizer == "english_porter_stop" else ["the", "run", "runner", "gener"]
    assert terms == [expected] and nltk_loaded is False
    assert "porter=1" in versions and "nltk" not in versions
