"""The Porter stemmer as NLTK's ``PorterStemmer()`` computes it in its default mode (NLTK_EXTENSIONS).

HAKARI-Bench's Porter tokenizers stem with ``nltk.stem.porter.PorterStemmer().stem``; bm25-hakari needs the same
stem for every word, without nltk in the base install. This is Porter's 1980 algorithm (steps 1a to 5b) with the
departures NLTK's default mode makes from it, each one reproduced here on purpose:

- a word is lower-cased first; a word of at most 2 characters (counted before lower-casing) is returned lower-cased;
- a small pool of irregular forms is looked up, lower-cased, before any rule (``IRREGULAR_FORMS``; nltk 3.9 looked
  the word up as written, so ``Dying`` became ``dy`` there and is ``die`` here and in nltk 3.10; HAKARI-Bench
  lower-cases every token before stemming, so its stems are the same with either);
- step 1a: a 4-letter word ending ``ies`` ends ``ie`` (``ties`` -> ``tie``);
- step 1b: ``ied`` becomes ``ie`` in a 4-letter word and ``i`` otherwise, and nothing else of step 1b runs;
- condition *o also holds for a 2-letter stem vowel + consonant (any consonant, w, x and y included);
- step 1c: ``y`` becomes ``i`` only after a consonant, and only when more than one letter precedes it;
- step 2: ``bli`` -> ``ble`` (Porter's later rule, not ``abli``), ``fulli`` -> ``ful``, ``logi`` -> ``log`` (its measure
  taken on the stem with its ``l``), and an ``alli`` -> ``al`` rewrite tried before the rule list;
- step 5b: the measure is taken on the word less one ``l``.

As in NLTK, the first rule of a step whose suffix the word ends with decides that step: if its condition fails, the
word leaves the step unchanged (no later, shorter suffix is tried). A vowel is a, e, i, o or u, or a ``y`` that
follows a consonant; every other character, digits and non-ASCII letters included, is a consonant.
"""

from __future__ import annotations

# Part of bm25-hakari's cache key: raise it whenever a stem this module gives changes.
PORTER_REVISION = 1

# NLTK_EXTENSIONS' irregular forms: the word on the left stems to the word on the right, no rule applied.
IRREGULAR_FORMS: dict[str, str] = {
    "sky": "sky",
    "skies": "sky",
    "dying": "die",
    "lying": "lie",
    "tying": "tie",
    "news": "news",
    "innings": "inning",
    "inning": "inning",
    "outings": "outing",
    "outing": "outing",
    "cannings": "canning",
    "canning": "canning",
    "howe": "howe",
    "proceed": "proceed",
    "exceed": "exceed",
    "succeed": "succeed",
}

_VOWELS = frozenset("aeiou")

# (suffix, replacement) in the order NLTK tries them; every rule needs a measure > 0 (``logi``: see _step2).
STEP2_RULES: tuple[tuple[str, str], ...] = (
    ("ational", "ate"), ("tional", "tion"), ("enci", "ence"), ("anci", "ance"), ("izer", "ize"), ("bli", "ble"),
    ("alli", "al"), ("entli", "ent"), ("eli", "e"), ("ousli", "ous"), ("ization", "ize"), ("ation", "ate"),
    ("ator", "ate"), ("alism", "al"), ("iveness", "ive"), ("fulness", "ful"), ("ousness", "ous"), ("aliti", "al"),
    ("iviti", "ive"), ("biliti", "ble"), ("fulli", "ful"), ("logi", "log"),
)  # fmt: skip
STEP3_RULES: tuple[tuple[str, str], ...] = (
    ("icate", "ic"), ("ative", ""), ("alize", "al"), ("iciti", "ic"), ("ical", "ic"), ("ful", ""), ("ness", ""),
)  # fmt: skip
# Step 4 removes the suffix when the measure is > 1 (``ion``: and the stem ends in s or t).
STEP4_SUFFIXES: tuple[str, ...] = (
    "al", "ance", "ence", "er", "ic", "able", "ible", "ant", "ement", "ment", "ent", "ion", "ou", "ism", "ate", "iti",
    "ous", "ive", "ize",
)  # fmt: skip


def _by_last_letter(rules: tuple[tuple[str, str], ...]) -> dict[str, tuple[tuple[str, str], ...]]:
    """The rules grouped by their suffix's last letter, each group in the original order (first match decides)."""
    groups: dict[str, list[tuple[str, str]]] = {}
    for suffix, replacement in rules:
        groups.setdefault(suffix[-1], []).append((suffix, replacement))
    return {letter: tuple(group) for letter, group in groups.items()}


_STEP2_BY_LETTER = _by_last_letter(STEP2_RULES)
_STEP3_BY_LETTER = _by_last_letter(STEP3_RULES)
_STEP4_BY_LETTER = _by_last_letter(tuple((suffix, "") for suffix in STEP4_SUFFIXES))


def _shape(word: str) -> str:
    """``c`` or ``v`` for each character: consonant or vowel (a ``y`` is a vowel after a consonant)."""
    if "y" not in word:
        return "".join("v" if char in _VOWELS else "c" for char in word)
    shape: list[str] = []
    previous = "v"  # a leading y counts as a consonant
    for char in word:
        if char in _VOWELS:
            previous = "v"
        elif char == "y":
            previous = "v" if previous == "c" else "c"
        else:
            previous = "c"
        shape.append(previous)
    return "".join(shape)


def _measure(stem: str) -> int:
    """Porter's m: how many vowel-run -> consonant-run transitions the stem has."""
    return _shape(stem).count("vc")


def _ends_cvc(stem: str) -> bool:
    """Condition *o, NLTK's form: consonant-vowel-consonant, the last not w, x or y; or a 2-letter vowel-consonant."""
    if len(stem) == 2:
        return _shape(stem) == "vc"
    return len(stem) >= 3 and stem[-1] not in "wxy" and _shape(stem).endswith("cvc")


def _step1a(word: str) -> str:
    if word.endswith("ies") and len(word) == 4:
        return word[:-1]
    if word.endswith("sses") or word.endswith("ies"):
        return word[:-2]
    if word.endswith("ss") or not word.endswith("s"):
        return word
    return word[:-1]


def _step1b(word: str) -> str:
    if word.endswith("ied"):
        return word[:-1] if len(word) == 4 else word[:-2]
    if word.endswith("eed"):
        return word[:-1] if _measure(word[:-3]) > 0 else word
    if word.endswith("ed") and "v" in _shape(word[:-2]):
        return _after_ed_or_ing(word[:-2])
    if word.endswith("ing") and "v" in _shape(word[:-3]):
        return _after_ed_or_ing(word[:-3])
    return word


def _after_ed_or_ing(stem: str) -> str:
    """Step 1b's tidy-up once ``ed`` or ``ing`` went: restore an ``e``, undouble a consonant."""
    if stem.endswith("at") or stem.endswith("bl") or stem.endswith("iz"):
        return stem + "e"
    if len(stem) >= 2 and stem[-1] == stem[-2] and _shape(stem)[-1] == "c":
        return stem if stem[-1] in "lsz" else stem[:-1]
    if stem.endswith("*d"):
        # NLTK marks its double-consonant rule with the suffix "*d", which a stem that literally ends "*d" matches
        return stem[:-2] + "d"
    return stem + "e" if _measure(stem) == 1 and _ends_cvc(stem) else stem


def _step1c(word: str) -> str:
    if word.endswith("y") and len(word) > 2 and _shape(word)[-2] == "c":
        return word[:-1] + "i"
    return word


def _step2(word: str) -> str:
    if word.endswith("alli") and _measure(word[:-4]) > 0:
        word = word[:-2]
    for suffix, replacement in _STEP2_BY_LETTER.get(word[-1:], ()):
        if word.endswith(suffix):
            stem = word[: -len(suffix)]
            measured = word[:-3] if suffix == "logi" else stem
            return stem + replacement if _measure(measured) > 0 else word
    return word


def _step3(word: str) -> str:
    for suffix, replacement in _STEP3_BY_LETTER.get(word[-1:], ()):
        if word.endswith(suffix):
            stem = word[: -len(suffix)]
            return stem + replacement if _measure(stem) > 0 else word
    return word


def _step4(word: str) -> str:
    for suffix, _ in _STEP4_BY_LETTER.get(word[-1:], ()):
        if word.endswith(suffix):
            stem = word[: -len(suffix)]
            removable = _measure(stem) > 1 and (suffix != "ion" or stem[-1] in "st")
            return stem if removable else word
    return word


def _step5(word: str) -> str:
    if word.endswith("e"):
        stem = word[:-1]
        measure = _measure(stem)
        if measure > 1 or (measure == 1 and not _ends_cvc(stem)):
            word = stem
    if word.endswith("ll") and _measure(word[:-1]) > 1:
        return word[:-1]
    return word


def stem(word: str) -> str:
    """The stem of ``word``, equal to ``nltk.stem.porter.PorterStemmer().stem(word)`` of nltk 3.10.4 (and to 3.9.4's
    for every lower-case word)."""
    lowered = word.lower()
    if lowered in IRREGULAR_FORMS:
        return IRREGULAR_FORMS[lowered]
    if len(word) <= 2:
        return lowered
    return _step5(_step4(_step3(_step2(_step1c(_step1b(_step1a(lowered)))))))
