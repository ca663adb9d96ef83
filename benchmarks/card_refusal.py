"""Refusing a YAML-bomb dataset card vs reading a real-size card: the refusal scans the front matter's events and never
builds the bomb, so it costs less than reading an ordinary card (a plain YAML loader would expand the bomb to 9**9
strings and not finish). The time limit the test suite once asserted lives here; the test checks that the bomb is
never handed to a YAML loader.

    python benchmarks/card_refusal.py
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

from r2med_plugin.data.layout import DatasetCardError, read_front_matter
from r2med_plugin.data.mirror import front_matter

ROUNDS = 50


def ordinary_card() -> str:
    """The card of an R2MED repo with its corpus, query and qrels configs and 14 expansion configs of 6 splits each."""
    configs = {config: {config: f"{config}.jsonl"} for config in ("corpus", "query", "qrels")}
    for index in range(14):
        configs[f"method{index}"] = {f"llm_{split}": f"method{index}/llm-{split}/query_with_hydoc.jsonl" for split in range(6)}
    return front_matter(configs, "R2MED")


def bomb_card() -> str:
    """Nine levels of aliases of aliases, nine each: 9**9 strings once expanded."""
    lines = ["---", 'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    lines += [f"{chr(98 + i)}: &{chr(98 + i)} [" + ",".join([f"*{chr(97 + i)}"] * 9) + "]" for i in range(8)]
    return "\n".join([*lines, "configs: []", "---", ""])


def seconds_per_read(repo: Path, card: str, refused: bool) -> float:
    total = 0.0
    for round_ in range(ROUNDS):
        # a card text of its own each round: a card already read is remembered by its text, and each first read parses
        (repo / "README.md").write_text(card.replace("---\n", f"---\n# round {round_}\n", 1), encoding="utf-8")
        start = time.perf_counter()
        try:
            read_front_matter(repo)
        except DatasetCardError:
            if not refused:
                raise
        else:
            assert not refused, "the bomb was read"
        total += time.perf_counter() - start
    return total / ROUNDS


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        ordinary, bomb = Path(tmp) / "ordinary", Path(tmp) / "bomb"
        ordinary.mkdir()
        bomb.mkdir()
        read = seconds_per_read(ordinary, ordinary_card(), refused=False)
        refuse = seconds_per_read(bomb, bomb_card(), refused=True)
    size = len(ordinary_card())
    print(f"ordinary card ({size:,} characters) read: {read * 1000:.2f} ms")
    print(f"YAML bomb refused: {refuse * 1000:.2f} ms")
    print(f"ordinary read / refusal: {read / refuse:.0f}x")


if __name__ == "__main__":
    main()
