"""Lucene 9.9.1 StandardTokenizer as a DFA over word-break classes (the exact path of the analyzer).

Every code point belongs to one *class*: a tuple of the properties Lucene's JFlex grammar tests
(its UAX#29 word-break value in Lucene's Unicode 9 tables, Line_Break=Complex_Context, Han/Hiragana
script, its emoji roles, and the few code points the grammar names literally). The grammar's token
rules are written below as regular expressions over those properties, compiled once into a DFA, and
run with JFlex's semantics: at each position the longest match of any token rule wins; where no
token rule matches, one code point is skipped; a match never grows past the scanner buffer of
255 UTF-16 units (a longer token is cut at its last accepting point and the rest is rescanned).

The per-code-point classes come from ``data/lucene_wordbreak.json.gz``, made by
``scripts/probe_lucene_classes.py`` from real Lucene (see that script for provenance).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import NamedTuple

MAX_TOKEN_UNITS = 255

# Word-break values the grammar distinguishes (Lucene's Unicode 9 tables; "F" is Extend | Format | ZWJ).
WB_VALUES = ("Other", "ALetter", "Hebrew_Letter", "Numeric", "Katakana", "MidLetter", "MidNum", "MidNumLet",
             "Single_Quote", "Double_Quote", "ExtendNumLet", "F", "Regional_Indicator")
# Code points the grammar names literally.
SPECIALS = ("", "keycap_base", "keycap", "text_selector", "emoji_selector", "zwj", "tag_spec", "tag_term")


class CharClass(NamedTuple):
    wb: str
    complex_context: bool = False  # Line_Break=Complex_Context (Thai, Lao, Myanmar, Khmer, Tai Tham, ...)
    ideographic: bool = False  # Script Han or Hiragana: one token per character (+ its Extend marks)
    emoji: bool = False  # Extended_Pictographic, or Emoji that is no RI / keycap base / "accidental" / modifier
    modifier_base: bool = False  # Emoji_Modifier_Base
    modifier: bool = False  # Emoji_Modifier
    special: str = ""


def special_of(code: int) -> str:
    """The grammar's literal code points (JFlex macros KeyCapBaseChar, KeyCap, \\uFE0E/F, ZWJ, tags)."""
    if 0x30 <= code <= 0x39 or code in (0x23, 0x2A):
        return "keycap_base"
    return {0x20E3: "keycap", 0xFE0E: "text_selector", 0xFE0F: "emoji_selector", 0x200D: "zwj",
            0xE007F: "tag_term"}.get(code, "tag_spec" if 0xE0020 <= code <= 0xE007E else "")


# --- a tiny regular-expression algebra over class predicates -------------------------------------

Pred = Callable[[CharClass], bool]


def _sym(pred: Pred):
    return ("sym", pred)


def _cat(*parts):
    return ("cat", parts)


def _alt(*parts):
    return ("alt", parts)


def _star(part):
    return ("star", part)


def _plus(part):
    return _cat(part, _star(part))


def _opt(part):
    return _alt(part, ("eps",))


def _grammar():
    """Lucene 9.9.1's StandardTokenizerImpl token rules (emoji, numeric, word, SE Asian, Han/Hiragana)."""
    F = _sym(lambda c: c.wb == "F")
    sans_selectors = _sym(lambda c: c.wb == "F" and c.special not in ("text_selector", "emoji_selector"))
    zwj = _sym(lambda c: c.special == "zwj")
    F_star, sans_star = _star(F), _star(sans_selectors)

    def ex(pred: Pred):  # X (Extend | Format | ZWJ)*   (UAX#29 WB4)
        return _cat(_sym(pred), F_star)

    emoji_char = _cat(_sym(lambda c: c.emoji), sans_star)
    modifier_base = _cat(_sym(lambda c: c.modifier_base), sans_star)
    modifier = _cat(_sym(lambda c: c.modifier), sans_star)
    selector = _sym(lambda c: c.special == "emoji_selector")
    element = _alt(
        _cat(_star(zwj), emoji_char, _opt(selector)),
        _cat(_opt(_cat(_star(zwj), modifier_base)), modifier),
    )
    emoji = _alt(
        _cat(element, _alt(_star(_cat(zwj, element)),
                           _cat(_plus(_sym(lambda c: c.special == "tag_spec")), _sym(lambda c: c.special == "tag_term")))),
        _cat(_sym(lambda c: c.special == "keycap_base"), sans_star, _opt(selector),
             _sym(lambda c: c.special == "keycap"), sans_star),
        _cat(ex(lambda c: c.wb == "Regional_Indicator"), ex(lambda c: c.wb == "Regional_Indicator")),
    )
    ahletter = ex(lambda c: c.wb in ("ALetter", "Hebrew_Letter"))
    hebrew = ex(lambda c: c.wb == "Hebrew_Letter")
    numeric = ex(lambda c: c.wb == "Numeric")
    katakana = ex(lambda c: c.wb == "Katakana")
    mid_letter = ex(lambda c: c.wb in ("MidLetter", "MidNumLet", "Single_Quote"))
    mid_num = ex(lambda c: c.wb in ("MidNum", "MidNumLet", "Single_Quote"))
    extend_num_let = ex(lambda c: c.wb == "ExtendNumLet")
    single_quote = ex(lambda c: c.wb == "Single_Quote")
    double_quote = ex(lambda c: c.wb == "Double_Quote")
    enl_star = _star(extend_num_let)
    numbers = _cat(numeric, _star(_cat(_alt(enl_star, mid_num), numeric)))
    core = _alt(
        _cat(katakana, _star(_cat(enl_star, katakana))),
        _plus(_alt(
            _cat(hebrew, _alt(single_quote, _cat(double_quote, hebrew))),
            numbers,
            _cat(ahletter, _star(_cat(_alt(enl_star, mid_letter), ahletter))),
        )),
    )
    word = _cat(enl_star, core, _star(_cat(_plus(extend_num_let), core)), enl_star)
    numeric_rule = _cat(enl_star, numbers, enl_star)
    south_east_asian = _plus(ex(lambda c: c.complex_context))
    ideographic = ex(lambda c: c.ideographic)
    return _alt(emoji, numeric_rule, word, south_east_asian, ideographic)


class DFA:
    """The grammar's DFA over ``classes``, built lazily: a state's move on a class is computed on first use.

    (Subset construction of the whole automaton over every class combination explodes; a text only
    ever visits a few hundred states.)
    """

    def __init__(self, classes: Sequence[CharClass]) -> None:
        self.edges: list[list[tuple[Pred | None, int]]] = []  # NFA: state -> [(pred, or None for epsilon, target)]
        start = self._new()
        self.final = self._build(_grammar(), start)
        preds = list({id(p): p for state in self.edges for p, _ in state if p is not None}.values())
        self.column = {id(p): i for i, p in enumerate(preds)}
        signatures = [tuple(pred(c) for pred in preds) for c in classes]
        self.symbols = list(dict.fromkeys(signatures))  # classes no predicate tells apart share a symbol
        self.symbol_of = [self.symbols.index(sig) for sig in signatures]
        self.sets: list[frozenset[int]] = []
        self.index: dict[frozenset[int], int] = {}
        self.rows: list[list[int]] = []
        self.accepting: list[bool] = []
        self._state(self._closure(frozenset([start])))

    def _new(self) -> int:
        self.edges.append([])
        return len(self.edges) - 1

    def _build(self, node, start: int) -> int:
        kind = node[0]
        if kind == "eps":
            return start
        if kind == "sym":
            end = self._new()
            self.edges[start].append((node[1], end))
            return end
        if kind == "cat":
            for part in node[1]:
                start = self._build(part, start)
            return start
        if kind == "alt":
            end = self._new()
            for part in node[1]:
                self.edges[self._build(part, start)].append((None, end))
            return end
        loop = self._new()  # star
        self.edges[start].append((None, loop))
        self.edges[self._build(node[1], loop)].append((None, loop))
        return loop

    def _closure(self, states: frozenset[int]) -> frozenset[int]:
        todo, seen = list(states), set(states)
        while todo:
            for pred, target in self.edges[todo.pop()]:
                if pred is None and target not in seen:
                    seen.add(target)
                    todo.append(target)
        return frozenset(seen)

    def _state(self, nfa_states: frozenset[int]) -> int:
        if nfa_states not in self.index:
            self.index[nfa_states] = len(self.sets)
            self.sets.append(nfa_states)
            self.rows.append([-2] * len(self.symbols))
            self.accepting.append(self.final in nfa_states)
        return self.index[nfa_states]

    def move(self, state: int, symbol: int) -> int:
        """The state after ``symbol`` (-1: no token rule can continue)."""
        signature = self.symbols[symbol]
        nxt = frozenset(t for s in self.sets[state] for p, t in self.edges[s] if p is not None and signature[self.column[id(p)]])
        target = self._state(self._closure(nxt)) if nxt else -1
        self.rows[state][symbol] = target
        return target


def build_dfa(classes: Sequence[CharClass]) -> DFA:
    return DFA(classes)


def scan(dfa: DFA, class_ids: Sequence[int], units: Sequence[int]) -> list[tuple[int, int]]:
    """Token spans (code point offsets) of a text given per-code-point class ids and UTF-16 lengths."""
    rows, accepting, move, symbol_of = dfa.rows, dfa.accepting, dfa.move, dfa.symbol_of
    symbols = [symbol_of[c] for c in class_ids]
    spans: list[tuple[int, int]] = []
    n, pos = len(symbols), 0
    while pos < n:
        state, last, i, used = 0, -1, pos, 0
        while i < n:
            used += units[i]
            if used > MAX_TOKEN_UNITS:
                break
            nxt = rows[state][symbols[i]]
            if nxt == -2:
                nxt = move(state, symbols[i])
            if nxt < 0:
                break
            state = nxt
            i += 1
            if accepting[state]:
                last = i
        if last > pos:
            spans.append((pos, last))
            pos = last
        else:
            pos += 1
    return spans
