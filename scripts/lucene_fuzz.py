"""Seeded differential fuzz of the analyzer against real Lucene 9.9.1 (the lucene-oracle).

    # make the committed vectors (texts from the seeded generator, terms from real Lucene):
    python scripts/lucene_fuzz.py --seed 13 --out tests/fixtures/lucene_fuzz_vectors.jsonl.gz
    # check our analyzer on a fresh sample against the live oracle, table by class:
    python scripts/lucene_fuzz.py --seed 99 --scale 0.2 --compare

Every line is {"class": ..., "text": ...} (+ "tokens" from Lucene). Classes: every assigned code
point in context; every word-break class of Lucene's tables alone, in pairs and in triples; medical
and chemical text; numbers; URLs and e-mail addresses; emoji sequences; South-East Asian and other
scripts; possessives and Extend/Format characters; tokens longer than 255 UTF-16 units; random mixes.
"""

from __future__ import annotations

import argparse
import gzip
import json
import random
import sys
import time
import unicodedata
from collections import Counter, defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from r2med_plugin.retrieval.analyzer import tables  # noqa: E402

ASCII_WORDS = ("patient dose tumour cells therapy acute chronic renal failure insulin glucose the of and "
               "was with is it syndrome hypertension receptor protein gene expression analysis MRI CT HIV "
               "COVID-19 IL-6 p53 BRCA1 don't O'Neil U.S.A. e.g. i.e. vs. mg/kg 3.5 1,000 10.2% x86_64").split()
MEDICAL = [
    "BMI 31 kg/m²", "PaCO₂ 45 mmHg", "SpO₂ 92%", "HbA1c 7.2%", "platelets 150×10⁹/L", "10⁹ cells", "½ tablet",
    "¼ dose", "¾ of patients", "© 2020 Elsevier Ltd.", "Tylenol®", "Ozempic™", "Ⓐ Ⓑ Ⓒ", "①②③", "˂5 mg", "˃10 mm",
    "Barre\u0301's syndrome", "Sjo\u0308gren's", "co\u00adoperation", "hyper\u00adtension", "Ca²⁺", "Na⁺/K⁺-ATPase",
    "H₂O₂", "CO₂", "µg/mL", "μmol/L", "5 °C", "37.5℃", "≥ 18 years", "≤ 0.05", "α-synuclein", "β-blocker",
    "γ-globulin", "TNF-α", "IFN-γ", "Δ9-THC", "1α,25(OH)₂D₃", "m⁶A", "³H-thymidine", "¹⁸F-FDG", "⁹⁹ᵐTc",
    "Crohn’s disease", "Alzheimer＇s", "Hodgkin's", "PATIENT'S", "NIH's", "p<0.001", "n=1,234", "95% CI 1.2–3.4",
    "t½ = 6 h", "2‰", "№ 5", "℞", "✓ done", "☑", "★★★", "▶ play", "❧", "☺", "⚕ staff", "♀ ♂", "→ ←", "⇒",
    "Ⅳ stage", "ⅲ", "Ⅻ", "㎎", "㎖", "㏄", "ﬁbrosis", "ﬂuid", "ǅ", "İstanbul", "ΣΟΦΙΑ", "ΟΔΟΣ", "straße", "ẞ",
    "׳", "״", "צה\"ל", "ת\"א", "ג'ירפה", "מ׳", "שלום", "مرحبا ٫ ٬", "١٢٣٫٤٥", "Ա՚Բ", "Հայաստան՝", "पानी", "০১২",
    "ภาษาไทย ๑๒๓", "ᨠᩣ᩠ᨾ", "ᥐᥣ", "𑜀𑜁𑜂", "ພາສາລາວ", "ကမ္ဘာ", "ភាសាខ្មែរ", "々", "〆", "人々", "〆切", "ヶ月", "ｶﾀｶﾅ",
    "カタカナ・テスト", "ひらがな", "漢字", "한국어", "ﾊﾝｶｸ", "１２３", "ＡＢＣ", "👩‍⚕️", "👨🏽‍⚕️", "👍🏽", "1️⃣", "#⃣",
    "*️⃣", "🇺🇸", "🇬🇧🇫🇷", "🏴󠁧󠁢󠁳󠁣󠁴󠁿", "❤️", "☝🏻", "✌️", "🧬", "💊", "🩺", "🦠", "🫀", "😀\u200d", "\u200d😀",
    "a\u200db", "a\u200cb", "a\u2060b", "x\ufe0fy", "e\u0301", "ñ", "n\u0303", "ǈ", "ꙮ", "𝐀𝐁𝐂", "𝑥²", "𝟙𝟚",
]
URLS = ["https://www.ncbi.nlm.nih.gov/pubmed/12345678", "http://doi.org/10.1016/j.cell.2020.01.001",
        "www.who.int/news-room", "mailto:jane.doe@example.org", "jane_doe@hospital.co.uk", "ftp://x.y/z?q=1&r=2#f",
        "https://example.com/a_b/c-d/e.f?g=h", "10.1001/jama.2020.1234", "PMC7123456", "NCT04280705"]
EMOJI_PARTS = ["😀", "👍", "👩", "⚕", "❤", "☝", "✌", "🧑", "🏳", "🌈", "🇺", "🇸", "🇫", "🏻", "🏽", "🏿", "\u200d",
               "\ufe0f", "\ufe0e", "\u20e3", "#", "*", "1", "7", "\U000e0067", "\U000e0062", "\U000e007f", "©", "®", "™",
               "〰", "〽", "Ⓜ", "ℹ", "↔", "x", " "]
JOINERS = [".", ",", ":", ";", "'", "’", "＇", '"', "_", "-", "/", "@", "·", "\u00ad", "\u0301", "\u200d", "\u200b",
           "\u2060", "\ufe0f", "\u0e31", "\u05f3", "\u05f4", "\u066b", "\u066c", "\u2027", "\u202f", "\u203f", "%", "&"]


class Generator:
    def __init__(self, seed: int, scale: float) -> None:
        self.rng = random.Random(seed)
        self.scale = scale
        t = tables()
        members: dict[int, list[int]] = defaultdict(list)
        for code in range(0x110000):
            if not 0xD800 <= code <= 0xDFFF:
                members[int(t.class_ids[code])].append(code)
        self.class_names = {cid: self._name(k) for cid, k in enumerate(t.classes)}
        self.members = {cid: codes for cid, codes in members.items() if codes}
        assigned = [c for c in range(0x110000) if unicodedata.category(chr(c)) not in ("Cn", "Cs", "Co")]
        self.assigned = assigned

    @staticmethod
    def _name(klass) -> str:
        flags = [name for name, on in zip(("sea", "ideo", "emoji", "ebase", "emod"), klass[1:6], strict=True) if on]
        return "+".join([klass.wb, *flags, *([klass.special] if klass.special else [])])

    def n(self, count: int) -> int:
        return max(1, int(count * self.scale))

    def pick(self, cid: int) -> str:
        return chr(self.rng.choice(self.members[cid]))

    def word(self) -> str:
        return self.rng.choice(ASCII_WORDS)

    def lines(self):
        rng = self.rng
        # every assigned code point (Python's Unicode 14), four contexts each, eight code points a line
        step = max(1, int(round(1 / self.scale))) if self.scale < 1 else 1
        codes = self.assigned[::step]
        for start in range(0, len(codes), 6):
            parts = []
            for code in codes[start : start + 6]:
                c = chr(code)
                parts.append(rng.choice([f"{c}", f"x{c}x", f"1{c}2", f"{c}{c}", f"a{c}", f"{c}b", f"{self.word()}{c}{self.word()}"]))
            yield "codepoint", " ".join(parts)
        cids = sorted(self.members)
        for cid in cids:  # every class alone and in short runs
            for _ in range(self.n(20)):
                yield f"class:{self.class_names[cid]}", "".join(self.pick(cid) for _ in range(rng.randint(1, 4)))
        for a in cids:  # every ordered pair of classes
            for b in cids:
                for _ in range(self.n(6)):
                    ctx = rng.choice(["", "x", "1", " ", "'", "."])
                    yield "pairs", f"{ctx}{self.pick(a)}{self.pick(b)}{ctx}{self.pick(a)}{self.pick(b)}"
        for _ in range(self.n(30000)):  # random triples of classes
            yield "triples", "".join(self.pick(rng.choice(cids)) for _ in range(3)) + rng.choice(["", " ", "x", "1"]) \
                + "".join(self.pick(rng.choice(cids)) for _ in range(3))
        for _ in range(self.n(15000)):
            yield "medical", " ".join(rng.choice(MEDICAL + ASCII_WORDS) for _ in range(rng.randint(2, 8)))
        for _ in range(self.n(6000)):
            yield "numbers", self.number()
        for _ in range(self.n(4000)):
            url = rng.choice(URLS)
            yield "urls", f"{self.word()} {url}{rng.choice(['', '.', ',', ')'])} {self.word()}"
        for _ in range(self.n(10000)):
            yield "emoji", "".join(rng.choice(EMOJI_PARTS) for _ in range(rng.randint(1, 10)))
        for _ in range(self.n(8000)):
            left, right = self.word(), self.word()
            joiner = "".join(rng.choice(JOINERS) for _ in range(rng.randint(1, 3)))
            yield "joiners", rng.choice([f"{left}{joiner}{right}", f"{left}{joiner}s", f"{left}{joiner}", f"1{joiner}2"])
        for _ in range(self.n(3000)):
            yield "long", self.long_token()
        for _ in range(self.n(6000)):  # random code points from anywhere, short strings
            yield "random", "".join(chr(rng.choice(self.assigned)) if rng.random() < 0.7 else rng.choice(" x1'.,_\u200d\u0301")
                                    for _ in range(rng.randint(1, 12)))

    def number(self) -> str:
        rng = self.rng
        digits = rng.choice(["0123456789", "٠١٢٣٤٥٦٧٨٩", "०१२३४५६७८९", "๐๑๒๓๔๕๖๗๘๙", "０１２３４５６７８９", "𝟎𝟏𝟐𝟑𝟒", "¹²³⁴⁵", "₁₂₃"])
        parts = ["".join(rng.choice(digits) for _ in range(rng.randint(1, 5))) for _ in range(rng.randint(1, 4))]
        seps = [rng.choice([".", ",", ":", "'", "_", "-", "/", " ", "٫", "٬", "e", "x", "%", "\u00a0"]) for _ in parts]
        return "".join(p + s for p, s in zip(parts, seps, strict=True)) + rng.choice(["", "mg", "th", "s", "'s"])

    def long_token(self) -> str:
        rng = self.rng
        length = rng.choice([250, 253, 254, 255, 256, 257, 300, 509, 510, 511, 600, 1000])
        alphabet = rng.choice(["x", "ab", "a.b", "1", "1,2", "x_", "é", "𝐀", "x𝐀", "ก", "カ", "😀\u200d", "a\u0301",
                               "x'", "🇺🇸", "a\u00ad"])
        body = (alphabet * (length // len(alphabet) + 1))[:length]
        ending = rng.choice(["", "s", "'s", ".", " end"])
        return f"{self.word()} {body}{ending}"


def write_vectors(lines, out: Path) -> Counter:
    from tests.support.lucene_oracle import lucene_tokens

    classes, texts = zip(*lines, strict=True)
    tokens = lucene_tokens(list(texts))
    counts = Counter(classes)
    with gzip.open(out, "wt", encoding="utf-8", compresslevel=9) as stream:
        for klass, text, terms in zip(classes, texts, tokens, strict=True):
            stream.write(json.dumps({"class": klass, "text": text, "tokens": terms}, ensure_ascii=False) + "\n")
    return counts


def table_class(name: str) -> str:
    return "class (each word-break class alone)" if name.startswith("class:") else name


def compare(lines) -> dict[str, list[int]]:
    """Lines and disagreements by class; a line disagrees when either path of our analyzer (one text
    alone, or many texts joined in one pass as bm25-lucene indexes them) differs from Lucene."""
    from r2med_plugin.retrieval.analyzed import analyze_texts
    from r2med_plugin.retrieval.analyzer import analyze
    from tests.support.lucene_oracle import lucene_tokens

    classes, texts = zip(*lines, strict=True)
    joined = analyze_texts(texts, workers=1).terms()
    result: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for klass, text, terms, compact in zip(classes, texts, lucene_tokens(list(texts)), joined, strict=True):
        row = result[table_class(klass)]
        row[0] += 1
        alone = analyze(text)
        if alone != terms or compact != terms:
            row[1] += 1
            if row[1] <= 3:
                print(f"DIFF {klass}: {text!r}\n  lucene {terms}\n  alone  {alone}\n  joined {compact}", file=sys.stderr)
    return dict(result)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seed", type=int, default=13)
    parser.add_argument("--scale", type=float, default=1.0, help="fraction of the full generator (1.0: ~120k lines)")
    parser.add_argument("--out", type=Path, help="write texts + Lucene's terms here (.jsonl.gz)")
    parser.add_argument("--compare", action="store_true", help="compare our analyzer with live Lucene, table by class")
    args = parser.parse_args()
    started = time.time()
    lines = list(Generator(args.seed, args.scale).lines())
    print(f"{len(lines)} lines generated in {time.time() - started:.0f} s", file=sys.stderr)
    if args.out:
        counts = write_vectors(lines, args.out)
        print(f"wrote {sum(counts.values())} vectors to {args.out}", file=sys.stderr)
    if args.compare:
        table = compare(lines)
        print("| class | lines | disagreements |\n|---|---:|---:|")
        for klass, (total, bad) in sorted(table.items()):
            print(f"| {klass} | {total} | {bad} |")
        total = sum(v[0] for v in table.values())
        bad = sum(v[1] for v in table.values())
        print(f"| **all** | **{total}** | **{bad}** |")


if __name__ == "__main__":
    main()
