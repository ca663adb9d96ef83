"""Lucene's English analyzer (as pyserini uses it for the official R2MED BM25), in pure Python.

StandardTokenizer -> EnglishPossessiveFilter -> LowerCaseFilter (Java's per-code-point
Character.toLowerCase) -> StopFilter (Lucene's 33 English stop words) -> PorterStemFilter (Lucene's
PorterStemmer, Martin Porter's reference implementation; lengths counted in UTF-16 units).

The tokenizer is exact for every input: ``wordbreak.py`` runs Lucene 9.9.1's JFlex grammar as a DFA
over per-code-point classes probed from real Lucene. Most texts never need it: when every character
is a plain letter, digit, joiner, space-like character or lone pictograph (one regex search tells),
one compiled regular expression built from the same class table gives exactly the grammar's
tokens; otherwise the DFA runs only on the stretches between spaces that hold another character. Stems are cached per distinct token, so a corpus costs one filter
chain per vocabulary entry, not per occurrence.
"""

from __future__ import annotations

import gzip
import json
import os
import re
from collections.abc import Iterable, Iterator
from functools import lru_cache
from importlib import resources

import numpy as np

from r2med_plugin.retrieval.wordbreak import DFA, MAX_TOKEN_UNITS, CharClass, build_dfa, scan

MAX_TOKEN_LENGTH = MAX_TOKEN_UNITS
ENGLISH_STOP_WORDS = frozenset(
    "a an and are as at be but by for if in into is it no not of on or such that the their then there "
    "these they this to was will with".split()
)
_POSSESSIVE_APOSTROPHES = "'\u2019\uff07"
_DATA = "lucene_wordbreak.json.gz"

# Fast-path letters: plain classes whose grammar a regular expression reproduces exactly. " " is a
# character no token can contain (a safe cut); "#" (keycap bases # and *) is none either, but a
# keycap sequence may start there, so it is no safe cut.
_FAST_LETTERS = {
    CharClass("Other"): " ", CharClass("Other", special="keycap_base"): "#",
    CharClass("ALetter"): "a", CharClass("Numeric"): "0", CharClass("Numeric", special="keycap_base"): "0",
    CharClass("MidLetter"): ":", CharClass("MidNum"): ",", CharClass("MidNumLet"): ".",
    CharClass("Single_Quote"): "'", CharClass("ExtendNumLet"): "_", CharClass("Other", emoji=True): "E",
}
_COMPLEX = "\x80"


class _Tables:
    """The probed class of every code point, the DFA over those classes, and the fast path."""

    def __init__(self) -> None:
        with resources.files("r2med_plugin.retrieval").joinpath("data", _DATA).open("rb") as raw:
            payload = json.loads(gzip.decompress(raw.read()))
        self.classes = [CharClass._make([wb, *map(bool, flags), special]) for wb, *flags, special in payload["classes"]]
        ids = np.zeros(0x110000, dtype=np.uint8)
        for first, last, cid in payload["runs"]:
            ids[first : last + 1] = cid
        self.class_ids = ids
        self.dfa: DFA = build_dfa(self.classes)
        letters = np.array([ord(_FAST_LETTERS.get(k, _COMPLEX)) for k in self.classes], dtype=np.uint8)
        bmp_letters = letters[ids[:0x10000]]
        fast_or_safe = _char_set(bmp_letters, "".join(set(_FAST_LETTERS.values())))
        self.dfa_only = re.compile(f"[^{fast_or_safe[1:-1]}]")  # any character only the DFA handles
        # the run of characters no safe cut separates (characters no token contains), read forwards
        # from a DFA-only character and backwards over the reversed text
        self.unsafe_run = re.compile(f"[^{_char_set(bmp_letters, ' ')[1:-1]}]*")
        self.fast_token = re.compile(_fast_token_pattern(bmp_letters))
        self.ascii_token = re.compile(_fast_token_pattern(bmp_letters[:128]))  # small sets: faster on ASCII text
        # the same with NUL as a token of its own: many texts joined by NUL in one call
        self.fast_joined = re.compile("\0|" + self.fast_token.pattern)
        self.ascii_joined = re.compile("\0|" + self.ascii_token.pattern)
        self.lower = {int(k): chr(v) for k, v in payload["lower"].items()}


def _char_set(bmp_letters: np.ndarray, letters: str) -> str:
    """A regex character class of the BMP code points mapped to any of ``letters``."""
    codes = np.flatnonzero(np.isin(bmp_letters, [ord(letter) for letter in letters]))
    if not len(codes):
        return "(?!)"
    breaks = np.flatnonzero(np.diff(codes) != 1)
    starts, ends = np.concatenate([[codes[0]], codes[breaks + 1]]), np.concatenate([codes[breaks], [codes[-1]]])
    return "[" + "".join(re.escape(chr(a)) if a == b else f"{re.escape(chr(a))}-{re.escape(chr(b))}"
                         for a, b in zip(starts, ends, strict=True)) + "]"


def _fast_token_pattern(bmp_letters: np.ndarray) -> str:
    """The grammar restricted to the fast letters, on the text itself: letters and digits (with
    ExtendNumLet) joined by one MidLetter between letters or one MidNum between digits, or a lone
    pictograph.

    Written for Python's regex engine: every branch starts with a character set (so the engine skips
    non-token characters in its fast search loop), a join is tried only at a mid character, its
    neighbours checked by one two-character lookbehind and a lookahead, and the repetitions are
    possessive (a mid character is no word character, so giving one back never helps a match)."""
    emoji, letter, digit = (_char_set(bmp_letters, x) for x in ("E", "a", "0"))
    word, extend, start = _char_set(bmp_letters, "a0_"), _char_set(bmp_letters, "_"), _char_set(bmp_letters, "a0")
    mid_letter, mid_num, mid = _char_set(bmp_letters, ":.'"), _char_set(bmp_letters, ",.'"), _char_set(bmp_letters, ":,.'")
    joins = f"(?:{mid}(?:(?<={letter}{mid_letter})(?={letter})|(?<={digit}{mid_num})(?={digit})){word}+)*+"
    branches = [f"{start}{word}*+{joins}", f"{extend}+{start}{word}*+{joins}"]
    if emoji != "(?!)":
        branches.append(emoji)
    return "|".join(branches)


@lru_cache(maxsize=1)
def tables() -> _Tables:
    return _Tables()


def _dfa_spans(text: str) -> list[tuple[int, int]]:
    t = tables()
    code_points = np.frombuffer(text.encode("utf-32-le", "surrogatepass"), dtype=np.uint32)
    class_ids = t.class_ids[code_points].tolist()
    units = (1 + (code_points > 0xFFFF)).tolist()
    return scan(t.dfa, class_ids, units)


def _dfa_tokens(text: str) -> list[str]:
    return [text[a:b] for a, b in _dfa_spans(text)]


def _run_end(run: re.Pattern[str], text: str, start: int) -> int:
    """Where ``run`` (a pattern that also matches the empty string) stops matching from ``start``."""
    match = run.match(text, start)
    return start if match is None else match.end()


def _complex_runs(text: str) -> Iterator[tuple[int, int]]:
    """(start, end) of every run between safe cuts that holds a DFA-only character."""
    t = tables()
    reversed_text, size, pos = text[::-1], len(text), 0
    while (hit := t.dfa_only.search(text, pos)) is not None:
        first = hit.start()
        start = size - _run_end(t.unsafe_run, reversed_text, size - first)
        pos = _run_end(t.unsafe_run, text, first)
        yield start, pos


def _segmented_tokens(text: str, find) -> list[str]:
    """The DFA only on the runs holding a DFA-only character (they never share a token with the
    rest: safe cuts surround them), ``find`` (the fast regex's findall) everywhere else."""
    tokens, pos = [], 0
    for start, end in _complex_runs(text):
        tokens += find(text, pos, start)
        tokens += _dfa_tokens(text[start:end])
        pos = end
    tokens += find(text, pos)
    return tokens


def tokenize(text: str) -> list[str]:
    """Lucene StandardTokenizer tokens (original case); tokens over 255 UTF-16 units are cut as Lucene cuts them."""
    t = tables()
    if text.isascii():
        tokens = t.ascii_token.findall(text)
    elif t.dfa_only.search(text) is None:
        tokens = t.fast_token.findall(text)
    else:
        tokens = _segmented_tokens(text, t.fast_token.findall)
    if tokens and max(map(len, tokens)) > MAX_TOKEN_LENGTH:
        return _dfa_tokens(text)
    return tokens


def strip_possessive(token: str) -> str:
    if len(token) >= 2 and token[-1] in "sS" and token[-2] in _POSSESSIVE_APOSTROPHES:
        return token[:-2]
    return token


@lru_cache(maxsize=None)
def _java_lower_char(char: str) -> str:
    exception = tables().lower.get(ord(char))
    if exception is not None:
        return exception
    lowered = char.lower()  # one character alone: no final-sigma context, as in Java
    return lowered if len(lowered) == 1 else char


def java_lower(token: str) -> str:
    """Java's per-code-point Character.toLowerCase (no multi-character expansions)."""
    if token.isascii():
        return token.lower()
    return "".join(map(_java_lower_char, token))


def filter_token(token: str) -> str:
    """One token through the possessive, lower-case, stop and Porter filters ("" for a stop word)."""
    term = java_lower(strip_possessive(token))
    return "" if term in ENGLISH_STOP_WORDS else porter_stem(term)


class _TermCache(dict):
    """token -> analysed term ("" for a stop word), filled on first sight of each distinct token."""

    def __missing__(self, token: str) -> str:
        term = filter_token(token)
        self[token] = term
        return term


def _analyze_with(cache: _TermCache, text: str) -> list[str]:
    # ASCII: lower-casing first changes no boundary and equals Java's, and it lets the cache share entries
    tokens = tokenize(text.lower()) if text.isascii() else tokenize(text)
    return [term for term in map(cache.__getitem__, tokens) if term]


def analyze(text: str) -> list[str]:
    """The terms Lucene's EnglishAnalyzer produces for ``text``."""
    return _analyze_with(_TermCache(), text)


class _LongToken(Exception):
    """A fast-path token over 255 UTF-16 units: Lucene cuts it, so its texts go the per-text way."""


class _TokenIds(dict):
    """token -> id of its analysed term in ``terms`` (-1 for a stop word), for one analysis session."""

    def __init__(self, session: object) -> None:
        super().__init__()
        self.session = session
        self.terms: list[str] = []
        self.term_ids: dict[str, int] = {}

    def __missing__(self, token: str) -> int:
        if len(token) > MAX_TOKEN_LENGTH:  # never cached: every text holding one is re-tokenized alone
            raise _LongToken
        term = filter_token(token)
        if not term:
            value = -1
        else:
            value = self.term_ids.setdefault(term, len(self.terms))
            if value == len(self.terms):
                self.terms.append(term)
        self[token] = value
        return value


_SESSION: list[_TokenIds] = []  # the current session of this process (worker processes keep theirs across chunks)


def analyze_compact(texts: list[str], session: object = None) -> tuple[int, int, list[str], np.ndarray, np.ndarray]:
    """Analyse ``texts`` in compact form: (process id, index of the first new term, the terms this call
    added to the session's vocabulary, int32 term ids of all texts concatenated, int64 term count of
    each text). Calls with the same ``session`` share one vocabulary and one token cache, so a
    worker process returns each distinct term once, not millions of Python strings.

    Texts are joined (NUL between them) and tokenized in one pass per group (ASCII texts, lower-cased
    first; the others with the DFA on their runs of DFA-only characters); NUL is no token character
    and a safe cut, so it separates the texts' tokens, and a text holding one goes the per-text way.
    """
    token_ids = _session_token_ids(session)
    first_new = len(token_ids.terms)
    t = tables()
    plain, other, single = [], [], []
    for i, text in enumerate(texts):
        if "\0" in text:
            single.append(i)
        elif text.isascii():
            plain.append(i)
        else:
            other.append(i)
    pieces = []  # (text indices, their term ids with -1 for stop words, term count of each)
    for indices, lower in ((plain, True), (other, False)):
        if not indices:
            continue
        if lower:
            tokens = t.ascii_joined.findall("\0".join(texts[i].lower() for i in indices))
        else:
            tokens = _segmented_tokens("\0".join(texts[i] for i in indices), t.fast_joined.findall)
        try:
            ids = np.fromiter(map(token_ids.__getitem__, tokens), dtype=np.int32, count=len(tokens))
        except _LongToken:
            single += indices
            continue
        separators = np.flatnonzero(ids == -2)
        counts = np.diff(np.concatenate([[-1], separators, [len(ids)]])) - 1
        pieces.append((np.asarray(indices, dtype=np.int64), ids[ids != -2], counts))
    if single:
        pieces.append(_one_by_one(texts, single, token_ids))
    all_ids, all_counts = _in_text_order(pieces, len(texts))
    kept = all_ids >= 0
    bounds = np.concatenate([[0], np.cumsum(all_counts)])
    kept_before = np.concatenate([[0], np.cumsum(kept)])
    lengths = kept_before[bounds[1:]] - kept_before[bounds[:-1]]
    return os.getpid(), first_new, token_ids.terms[first_new:], all_ids[kept], lengths.astype(np.int64)


def _session_token_ids(session: object) -> _TokenIds:
    """The token cache of ``session``: this process's current one, or a new one (NUL, the text separator, is -2)."""
    if not _SESSION or _SESSION[0].session != session or session is None:
        _SESSION[:] = [_TokenIds(session)]
        _SESSION[0]["\0"] = -2
    return _SESSION[0]


def _one_by_one(texts: list[str], single: list[int], token_ids: _TokenIds) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The piece of the texts tokenized one at a time (those holding NUL, or a token too long for the joined pass)."""
    ids_single: list[int] = []
    counts = np.empty(len(single), dtype=np.int64)
    for n, i in enumerate(single):
        text = texts[i]
        tokens = tokenize(text.lower()) if text.isascii() else tokenize(text)
        counts[n] = len(tokens)
        ids_single.extend(map(token_ids.__getitem__, tokens))
    return np.asarray(single, dtype=np.int64), np.asarray(ids_single, dtype=np.int32), counts


def _in_text_order(pieces: list[tuple[np.ndarray, np.ndarray, np.ndarray]], text_count: int) -> tuple[np.ndarray, np.ndarray]:
    """The pieces' term ids (concatenated) and term counts, put back in the order of the texts."""
    order_of_text = np.concatenate([p[0] for p in pieces]) if pieces else np.zeros(0, dtype=np.int64)
    all_ids = np.concatenate([p[1] for p in pieces]) if pieces else np.zeros(0, dtype=np.int32)
    all_counts = np.concatenate([p[2] for p in pieces]) if pieces else np.zeros(0, dtype=np.int64)
    if len(pieces) > 1 or (len(order_of_text) and np.any(np.diff(order_of_text) < 0)):
        owner = np.repeat(order_of_text, all_counts)
        all_ids = all_ids[np.argsort(owner, kind="stable")]
        counts_by_text = np.zeros(text_count, dtype=np.int64)
        counts_by_text[order_of_text] = all_counts
        all_counts = counts_by_text
    return all_ids, all_counts


def analyze_many(texts: Iterable[str]) -> list[list[str]]:
    """``analyze`` over many texts, sharing one cache of analysed tokens."""
    cache = _TermCache()
    return [_analyze_with(cache, text) for text in texts]


# --- Lucene's PorterStemmer (Martin Porter's reference implementation) -----------------------------

_VOWELS = frozenset("aeiou")


class _Stemmer:
    __slots__ = ("b", "k", "j")

    def __init__(self, word: str) -> None:
        # Lucene stems UTF-16 units: a supplementary character is two consonant units (NUL stands for the second)
        self.b = word if word.isascii() or max(word) <= "\uffff" else "".join(ch + "\0" if ch > "\uffff" else ch for ch in word)
        self.k = len(self.b) - 1
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
        if not self.b.endswith(suffix, 0, self.k + 1):
            return False
        self.j = self.k - len(suffix)
        return True

    def set_to(self, suffix: str) -> None:
        self.b = self.b[: self.j + 1] + suffix
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
            self.b = self.b[: self.k] + "i" + self.b[self.k + 1 :]

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
        return self.b[: self.k + 1].replace("\0", "")


@lru_cache(maxsize=1 << 20)
def porter_stem(word: str) -> str:
    """Lucene's PorterStemmer on one lower-cased word (words of 1 or 2 UTF-16 units are left alone)."""
    return _Stemmer(word).stem()
