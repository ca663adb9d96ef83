"""The prompts and how answers are read (r2med_plugin.llm.prompting): RankGPT's permutations and windows, the
published source of every prompt."""

from __future__ import annotations

import pytest

from r2med_plugin.llm.prompting import apply_permutation, llm_prompts, parse_permutation, windows


@pytest.mark.parametrize("answer, expected", [
    ("[2] > [1] > [3]", [1, 0, 2]),
    ("[2] > [2] > [1] > [3]", [1, 0, 2]),       # repeated: counted once
    ("[5] > [1] > [0]", [0, 1, 2]),             # out of range: dropped
    ("[3]", [2, 0, 1]),                          # missing: the rest follow in their order
    ("I cannot rank these passages.", [0, 1, 2]),  # no identifier: the window keeps its order
    ("", [0, 1, 2]),
    ("<think>[1] looks best</think>\n[3] > [2]", [2, 1, 0]),
    ("［２］ > ［３］", [1, 2, 0]),                # full-width digits, as RankGPT normalises them
])
def test_permutations_are_parsed_as_rankgpt_does(answer: str, expected: list[int]):
    assert parse_permutation(answer, 3) == expected


def test_sliding_windows_go_from_the_bottom_to_the_top():
    assert windows(30, 20, 10) == [(10, 30), (0, 20)]
    assert windows(25, 20, 10) == [(5, 25), (0, 15)]
    assert windows(10, 20, 10) == [(0, 10)]
    assert windows(0, 20, 10) == []
    spans = windows(100, 20, 10)
    assert spans[0] == (80, 100) and spans[-1] == (0, 20) and len(spans) == 9
    assert apply_permutation(list("abcde"), 1, 4, [2, 0, 1]) == list("adbce")


def test_every_prompt_names_its_published_source():
    prompts = llm_prompts()
    assert set(prompts) == {"listwise", "pointwise", "pointwise_graded", "reasoning", "setwise", "listwise_scores", "groupwise"}
    assert all(len(prompt["source"]) > 40 for prompt in prompts.values())
