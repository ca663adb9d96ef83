"""Lucene's English analyzer (as pyserini uses it for the official R2MED BM25), in pure Python.

StandardTokenizer (UAX#29 word boundaries, as Lucene's grammar applies them) -> EnglishPossessiveFilter
-> LowerCaseFilter -> StopFilter (Lucene's 33 English stop words) -> PorterStemFilter (Lucene's
PorterStemmer, Martin Porter's reference implementation: nltk's MARTIN_EXTENSIONS mode).

Tokenising is one compiled regular expression; stems are cached per distinct word, so a corpus
costs one stemmer call per vocabulary entry, not per occurrence.
"""

from __future__ import annotations

import re
import sys
import unicodedata
from collections.abc import Iterable
from functools import lru_cache

MAX_TOKEN_LENGTH = 255
ENGLISH_STOP_WORDS = frozenset(
    "a an and are as at be but by for if in into is it no not of on or such that the their then there "
    "these they this to was will with".split()
)

# UAX#29 word-break classes, as Lucene's StandardTokenizer grammar uses them.
_HAN = "\u2e80-\u2fdf\u3005\u3007\u3021-\u3029\u3038-\u303b\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0003ffff"
_HIRAGANA = "\u3041-\u309f"
_KATAKANA = "\u30a0-\u30fa\u30fc-\u30ff\u31f0-\u31ff\u32d0-\u32fe\u3300-\u3357\uff66-\uff9f"
_SOUTHEAST_ASIAN = "\u0e00-\u0eff\u1000-\u109f\u1780-\u17ff\u19e0-\u19ff\uaa60-\uaa7f"
_EXTEND_NUM_LET = "_\u202f\u203f\u2040\u2054\ufe33\ufe34\ufe4d-\ufe4f\uff3f"
_MID_NUM_LET = ".\u2018\u2019\u2024\ufe52\uff07\uff0e'"
_MID_LETTER = ":\u00b7\u0387\u055f\u05f4\u2027\ufe13\ufe55\uff1a" + _MID_NUM_LET
_MID_NUM = ",;\u037e\u0589\u060c\u060d\u066c\u07f8\u2044\ufe10\ufe14\ufe50\ufe54\uff0c\uff1b" + _MID_NUM_LET
_POSSESSIVE_APOSTROPHES = "'\u2019\uff07"
# Emoji: characters shown as emoji by default (Emoji_Presentation), or any pictographic character
# followed by VARIATION SELECTOR-16; modifiers and ZWJ sequences stay in one token.
_EMOJI_PRESENTATION = (
    "\u231a\u231b\u23e9-\u23ec\u23f0\u23f3\u25fd\u25fe\u2614\u2615\u2648-\u2653\u267f\u2693\u26a1"
    "\u26aa\u26ab\u26bd\u26be\u26c4\u26c5\u26ce\u26d4\u26ea\u26f2\u26f3\u26f5\u26fa\u26fd\u2705"
    "\u270a\u270b\u2728\u274c\u274e\u2753-\u2755\u2757\u2795-\u2797\u27b0\u27bf\u2b1b\u2b1c\u2b50"
    "\u2b55\U0001f004\U0001f0cf\U0001f18e\U0001f191-\U0001f19a\U0001f1e6-\U0001f1ff\U0001f201"
    "\U0001f21a\U0001f22f\U0001f232-\U0001f236\U0001f238-\U0001f23a\U0001f250\U0001f251"
    "\U0001f300-\U0001f320\U0001f32d-\U0001f335\U0001f337-\U0001f37c\U0001f37e-\U0001f393"
    "\U0001f3a0-\U0001f3ca\U0001f3cf-\U0001f3d3\U0001f3e0-\U0001f3f0\U0001f3f4\U0001f3f8-\U0001f43e"
    "\U0001f440\U0001f442-\U0001f4fc\U0001f4ff-\U0001f53d\U0001f54b-\U0001f54e\U0001f550-\U0001f567"
    "\U0001f57a\U0001f595\U0001f596\U0001f5a4\U0001f5fb-\U0001f64f\U0001f680-\U0001f6c5\U0001f6cc"
    "\U0001f6d0-\U0001f6d2\U0001f6d5-\U0001f6d7\U0001f6eb\U0001f6ec\U0001f6f4-\U0001f6fc"
    "\U0001f7e0-\U0001f7eb\U0001f90c-\U0001f93a\U0001f93c-\U0001f945\U0001f947-\U0001f9ff"
    "\U0001fa70-\U0001faff"
)
_PICTOGRAPHIC = "\u00a9\u00ae\u203c\u2049\u2122\u2139\u2194-\u2199\u21a9\u21aa\u2300-\u23ff\u24c2\u25aa-\u27bf\u2934\u2935\u2b05-\u2b55\u3030\u303d\u3297\u3299\U0001f000-\U0001faff"


def _extend_class() -> str:
    """Extend and Format characters (combining marks, soft hyphen, ...), ZWJ excepted: they join the character before."""
    ranges: list[list[int]] = []
    for code in range(sys.maxunicode + 1):
        if code in (0x200B, 0x200D) or 0xD800 <= code <= 0xDFFF:
            continue
        if unicodedata.category(chr(code)) in ("Mn", "Mc", "Me", "Cf"):
            if ranges and ranges[-1][1] == code - 1:
                ranges[-1][1] = code
            else:
                ranges.append([code, code])
    return "".join(re.escape(chr(a)) if a == b else f"{re.escape(chr(a))}-{re.escape(chr(b))}" for a, b in ranges)


@lru_cache(maxsize=2)
def _token_pattern(with_extend: bool) -> re.Pattern[str]:
    """The tokenizer as one regular expression.

    ``with_extend=False`` is the fast form for texts without Extend/Format characters (combining
    marks, soft hyphens, ZWJ, variation selectors) or exotic connectors: it avoids testing for them
    after every character, which makes it about five times faster on ordinary text.
    """
    extend_class = _extend_class()
    extend = f"[{extend_class}\\u200d]*" if with_extend else ""
    letter = f"[^\\W\\d_{_HAN}{_HIRAGANA}{_KATAKANA}{_SOUTHEAST_ASIAN}]"
    if with_extend:
        unit = f"(?:(?:[^\\W{_HAN}{_HIRAGANA}{_KATAKANA}{_SOUTHEAST_ASIAN}]|[{_EXTEND_NUM_LET}]){extend})+"
    else:
        unit = f"[^\\W{_HAN}{_HIRAGANA}{_KATAKANA}{_SOUTHEAST_ASIAN}]+"
    joiner = f"(?:(?<={letter})[{re.escape(_MID_LETTER)}](?={letter})|(?<=\\d)[{re.escape(_MID_NUM)}](?=\\d))"
    word = f"{unit}(?:{joiner}{unit})*"
    katakana = f"(?:[{_KATAKANA}{_EXTEND_NUM_LET}]{extend})+"
    single = f"[{_HAN}{_HIRAGANA}]{extend}"
    southeast_asian = f"(?:[{_SOUTHEAST_ASIAN}]{extend})+"
    emoji_char = f"(?:[{_EMOJI_PRESENTATION}]|[{_PICTOGRAPHIC}](?=\\ufe0f))[\\U0001f3fb-\\U0001f3ff]?[{extend_class}]*"
    emoji = f"{emoji_char}(?:\\u200d{emoji_char})*"
    return re.compile(f"{emoji}|{word}|{katakana}|{single}|{southeast_asian}")


@lru_cache(maxsize=1)
def _needs_full_pattern() -> re.Pattern[str]:
    return re.compile(f"[{_extend_class()}\\u200d{_EXTEND_NUM_LET.replace('_', '')}]")


_ONLY_JOINERS = re.compile(f"^[{_EXTEND_NUM_LET}]+$")


def tokenize(text: str) -> list[str]:
    """Lucene StandardTokenizer tokens (original case), long tokens cut into 255-character pieces."""
    with_extend = not text.isascii() and _needs_full_pattern().search(text) is not None
    tokens = _token_pattern(with_extend).findall(text)
    if "_" in text or with_extend:  # a run of connectors alone (e.g. "___") is no token
        tokens = [token for token in tokens if not _ONLY_JOINERS.match(token)]
    if tokens and max(map(len, tokens)) > MAX_TOKEN_LENGTH:
        tokens = [
            token[start : start + MAX_TOKEN_LENGTH] for token in tokens for start in range(0, len(token), MAX_TOKEN_LENGTH)
        ]
    return tokens


def _strip_possessive(token: str) -> str:
    if len(token) >= 2 and token[-1] in "sS" and token[-2] in _POSSESSIVE_APOSTROPHES:
        return token[:-2]
    return token


@lru_cache(maxsize=None)
def _java_lower_char(char: str) -> str:
    lowered = char.lower()  # one character alone: no final-sigma context, as in Java
    if len(lowered) == 1:
        return lowered
    return "i" if char == "\u0130" else char


def java_lower(token: str) -> str:
    """Java's per-character Character.toLowerCase (no multi-character expansions)."""
    if token.isascii():
        return token.lower()
    return "".join(map(_java_lower_char, token))


class _TermCache(dict):
    """token -> analysed term ("" for a stop word), filled on first sight of each distinct token."""

    def __missing__(self, token: str) -> str:
        term = java_lower(_strip_possessive(token))
        term = "" if term in ENGLISH_STOP_WORDS else porter_stem(term)
        self[token] = term
        return term


def _analyze_with(cache: _TermCache, text: str) -> list[str]:
    # Lower-casing first changes no token boundary; for ASCII it equals Java's per-character rule.
    tokens = tokenize(text.lower()) if text.isascii() else tokenize(text)
    return [term for term in map(cache.__getitem__, tokens) if term]


def analyze(text: str) -> list[str]:
    """The terms Lucene's EnglishAnalyzer produces for ``text``."""
    return _analyze_with(_TermCache(), text)


def analyze_many(texts: Iterable[str]) -> list[list[str]]:
    """``analyze`` over many texts, sharing one cache of analysed tokens."""
    cache = _TermCache()
    return [_analyze_with(cache, text) for text in texts]


# --- Lucene's PorterStemmer (Martin Porter's reference implementation) -----------------------------

_VOWELS = frozenset("aeiou")


class _Stemmer:
    __slots__ = ("b", "k", "j")

    def __init__(self, word: str) -> None:
        self.b = list(word)
        self.k = len(word) - 1
        self.j = 0

    def cons(self, i: int) -> bool:
        char = self.b[i]
        if char in _VOWELS:
            return False
        if char == "y":
            return i == 0 or not self.cons(i - 1)
        return True

    def m(self) -> int:
        """The measure of b[0..j]: how many vowel runs are followed by a consonant ([C](VC)^m[V])."""
        measure, after_vowel = 0, False
        for i in range(self.j + 1):
            consonant = self.cons(i)
            measure += consonant and after_vowel
            after_vowel = not consonant
        return measure

    def vowel_in_stem(self) -> bool:
        return any(not self.cons(i) for i in range(self.j + 1))

    def double_consonant(self, j: int) -> bool:
        return j >= 1 and self.b[j] == self.b[j - 1] and self.cons(j)

    def cvc(self, i: int) -> bool:
        if i < 2 or not self.cons(i) or self.cons(i - 1) or not self.cons(i - 2):
            return False
        return self.b[i] not in "wxy"

    def ends(self, suffix: str) -> bool:
        length = len(suffix)
        if length > self.k + 1 or "".join(self.b[self.k - length + 1 : self.k + 1]) != suffix:
            return False
        self.j = self.k - length
        return True

    def set_to(self, suffix: str) -> None:
        self.b[self.j + 1 :] = list(suffix)
        self.k = self.j + len(suffix)

    def replace_if_measure(self, suffix: str) -> None:
        if self.m() > 0:
            self.set_to(suffix)

    def step1(self) -> None:
        if self.b[self.k] == "s":
            if self.ends("sses"):
                self.k -= 2
            elif self.ends("ies"):
                self.set_to("i")
            elif self.b[self.k - 1] != "s":
                self.k -= 1
        if self.ends("eed"):
            if self.m() > 0:
                self.k -= 1
        elif (self.ends("ed") or self.ends("ing")) and self.vowel_in_stem():
            self.k = self.j
            if self.ends("at"):
                self.set_to("ate")
            elif self.ends("bl"):
                self.set_to("ble")
            elif self.ends("iz"):
                self.set_to("ize")
            elif self.double_consonant(self.k):
                if self.b[self.k - 1] not in "lsz":
                    self.k -= 1
            elif self.m() == 1 and self.cvc(self.k):
                self.set_to("e")

    def step2(self) -> None:
        if self.ends("y") and self.vowel_in_stem():
            self.b[self.k] = "i"

    _STEP3 = {
        "a": (("ational", "ate"), ("tional", "tion")),
        "c": (("enci", "ence"), ("anci", "ance")),
        "e": (("izer", "ize"),),
        "l": (("bli", "ble"), ("alli", "al"), ("entli", "ent"), ("eli", "e"), ("ousli", "ous")),
        "o": (("ization", "ize"), ("ation", "ate"), ("ator", "ate")),
        "s": (("alism", "al"), ("iveness", "ive"), ("fulness", "ful"), ("ousness", "ous")),
        "t": (("aliti", "al"), ("iviti", "ive"), ("biliti", "ble")),
        "g": (("logi", "log"),),
    }
    _STEP4 = {
        "e": (("icate", "ic"), ("ative", ""), ("alize", "al")),
        "i": (("iciti", "ic"),),
        "l": (("ical", "ic"), ("ful", "")),
        "s": (("ness", ""),),
    }
    _STEP5 = {
        "a": ("al",), "c": ("ance", "ence"), "e": ("er",), "i": ("ic",), "l": ("able", "ible"),
        "n": ("ant", "ement", "ment", "ent"), "o": ("ion", "ou"), "s": ("ism",), "t": ("ate", "iti"),
        "u": ("ous",), "v": ("ive",), "z": ("ize",),
    }

    def _apply(self, rules: tuple[tuple[str, str], ...]) -> None:
        for suffix, replacement in rules:
            if self.ends(suffix):
                self.replace_if_measure(replacement)
                return

    def step3(self) -> None:
        if self.k == 0:
            return
        self._apply(self._STEP3.get(self.b[self.k - 1], ()))

    def step4(self) -> None:
        self._apply(self._STEP4.get(self.b[self.k], ()))

    def step5(self) -> None:
        if self.k == 0:
            return
        for suffix in self._STEP5.get(self.b[self.k - 1], ()):
            if self.ends(suffix):
                if suffix == "ion" and not (self.j >= 0 and self.b[self.j] in "st"):
                    return
                break
        else:
            return
        if self.m() > 1:
            self.k = self.j

    def step6(self) -> None:
        self.j = self.k
        if self.b[self.k] == "e":
            measure = self.m()
            if measure > 1 or (measure == 1 and not self.cvc(self.k - 1)):
                self.k -= 1
        if self.b[self.k] == "l" and self.double_consonant(self.k) and self.m() > 1:
            self.k -= 1

    def stem(self) -> str:
        if self.k > 1:
            for step in (self.step1, self.step2, self.step3, self.step4, self.step5, self.step6):
                step()
        return "".join(self.b[: self.k + 1])


@lru_cache(maxsize=1 << 20)
def porter_stem(word: str) -> str:
    """Lucene's PorterStemmer on one lower-cased word (words of 1 or 2 characters are left alone)."""
    return _Stemmer(word).stem()
