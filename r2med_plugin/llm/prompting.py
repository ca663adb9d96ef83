"""Prompts (stored as data, each with its published source, in prompts.json) and the pure logic around them:
RankGPT's sliding windows and permutation parsing, and relevance from log-probabilities or labels."""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from functools import lru_cache
from importlib import resources
from typing import Any

KINDS = ("listwise", "pointwise", "reasoning", "setwise", "groupwise")


@lru_cache(maxsize=1)
def llm_prompts() -> dict[str, dict[str, Any]]:
    """The prompts of the LLM rerankers, each with its "source"."""
    return json.loads((resources.files("r2med_plugin") / "llm" / "prompts.json").read_text(encoding="utf-8"))


def prompts_sha256(*names: str, own: Mapping[str, Any] | None = None) -> str:
    """A hash of the named prompts and a kind's ``own`` ones (name -> text; what a reranker's revision records: another
    prompt, another revision)."""
    chosen = {name: llm_prompts()[name] for name in names} | dict(own or {})
    return hashlib.sha256(json.dumps(chosen, sort_keys=True).encode("utf-8")).hexdigest()


# --- listwise (RankGPT) -----------------------------------------------------------------------------------------

def _no_brackets(text: str) -> str:
    """"[3]" in a passage or query would read as an identifier: RankGPT writes it "(3)"."""
    return re.sub(r"\[(\d+)\]", r"(\1)", text)


def listwise_messages(query: str, passages: Sequence[str], window: int,
                      scores: Sequence[float] | None = None) -> list[dict[str, str]]:
    """RankGPT's conversation for one window: each passage in its own turn, cut to 300 words (more when the
    window is shorter than ``window``, as rank-llm does: 300 x (window // passages)). With ``scores`` (InsertRank),
    each passage's turn shows its first-stage score (``shown_score``) and the first turn says what the scores are."""
    prompt = llm_prompts()["listwise"]
    shown = llm_prompts()["listwise_scores"] if scores is not None else None
    if scores is not None and len(scores) != len(passages):
        raise ValueError(f"a listwise window with scores needs one score per passage, got {len(scores)} for {len(passages)}")
    words = prompt["words_per_passage"] * max(1, window // max(1, len(passages)))
    query = _no_brackets(query)
    num = len(passages)
    messages = [
        {"role": "system", "content": prompt["system"]},
        {"role": "user", "content": prompt["prefix_user"].format(num=num, query=query) + (shown["scores_note"] if shown else "")},
        {"role": "assistant", "content": prompt["prefix_assistant"].format(num=num, query=query)},
    ]
    for rank, passage in enumerate(passages, start=1):
        content = _no_brackets(" ".join(passage.strip().split()[:words]))
        body = (shown["body_user"].format(rank=rank, score=shown_score(scores[rank - 1]), passage=content)
                if shown and scores is not None
                else prompt["body_user"].format(rank=rank, passage=content))
        messages.append({"role": "user", "content": body})
        messages.append({"role": "assistant", "content": prompt["body_assistant"].format(rank=rank)})
    messages.append({"role": "user", "content": prompt["suffix_user"].format(num=num, query=query)})
    return messages


def score_format() -> str:
    """The format of a first-stage score in an InsertRank prompt (``.4f``: four decimals)."""
    return llm_prompts()["listwise_scores"]["score_format"]


def shown_score(score: float) -> str:
    """A first-stage score as the listwise prompt shows it (``score_format``)."""
    return format(float(score), score_format())


_FAKE_DIGITS = str.maketrans("⁰¹²³⁴⁵⁶⁷⁸⁹₀₁₂₃₄₅₆₇₈₉０１２３４５６７８９", "012345678901234567890123456789")


def parse_permutation(answer: str, size: int) -> list[int]:
    """The order (0-based positions) a listwise answer gives a window of ``size`` passages, parsed as RankGPT does:
    every run of digits is an identifier; repeated ones count once, out-of-range ones are dropped, and the
    passages the answer does not mention follow in their original order. An empty or unreadable answer keeps
    the window as it was. A reasoning model's ``<think>...</think>`` part is ignored."""
    if "</think>" in answer:
        answer = answer.split("</think>")[-1]
    numbers = [int(digits) - 1 for digits in re.findall(r"\d+", answer.translate(_FAKE_DIGITS))]
    order = [position for position in dict.fromkeys(numbers) if 0 <= position < size]
    return order + [position for position in range(size) if position not in set(order)]


def windows(count: int, window: int, step: int) -> list[tuple[int, int]]:
    """RankGPT's sliding windows over ``count`` ranked passages, from the bottom up: (start, end) pairs, the last
    one starting at 0 (so the best passages of every window can climb to the top)."""
    size = min(window, count)
    spans, end, start = [], count, count - size
    while end > 0:
        start = max(start, 0)
        spans.append((start, end))
        if start == 0:
            break
        end, start = end - step, start - step
    return spans


def apply_permutation(order: Sequence[str], start: int, end: int, permutation: Sequence[int]) -> list[str]:
    window = list(order[start:end])
    return [*order[:start], *(window[position] for position in permutation), *order[end:]]


# --- setwise (Zhuang et al., 2024) -------------------------------------------------------------------------------

def setwise_labels() -> str:
    """The passage labels of a setwise prompt, in order (A, B, C, ...): at most this many passages in one set."""
    return llm_prompts()["setwise"]["labels"]


def setwise_messages(query: str, passages: Sequence[str]) -> list[dict[str, str]]:
    """The setwise question for one set: the system turn, then the query and the passages labelled A, B, C, ...,
    each text as it is (llm-rankers' OpenAI setwise ranker sends them so)."""
    prompt = llm_prompts()["setwise"]
    labels = prompt["labels"]
    if not 1 <= len(passages) <= len(labels):
        raise ValueError(f"a setwise prompt holds 1 to {len(labels)} passages, got {len(passages)}")
    listed = prompt["separator"].join(prompt["passage"].format(label=label, passage=passage)
                                      for label, passage in zip(labels, passages, strict=False))
    return [{"role": "system", "content": prompt["system"]},
            {"role": "user", "content": prompt["user"].format(query=query, passages=listed)}]


_PASSAGE_LABEL = re.compile(r"Passage ([A-Z])")


def parse_pick(answer: str, size: int) -> int | None:
    """The position (0-based) of the passage a setwise answer names among ``size``, or None when it names none of
    them. Read as llm-rankers reads it: the first "Passage X" in the answer, else the whole answer (stripped) as a
    bare label; a label beyond the set (or any other text) names none. A reasoning model's
    ``<think>...</think>`` part is ignored."""
    if "</think>" in answer:
        answer = answer.split("</think>")[-1]
    match = _PASSAGE_LABEL.search(answer)
    label = match.group(1) if match else answer.strip()
    labels = setwise_labels()[:size]
    return labels.index(label) if len(label) == 1 and label in labels else None


# --- groupwise (GroupRank) ---------------------------------------------------------------------------------------

def groupwise_messages(query: str, passages: Sequence[str]) -> list[dict[str, str]]:
    """The groupwise question for one group: the system turn, then the query and the passages numbered [1], [2], ...,
    each cut to the prompt's words per passage, and the request for one score per passage as a JSON object."""
    prompt = llm_prompts()["groupwise"]
    if not passages:
        raise ValueError("a groupwise prompt holds at least one passage")
    words = prompt["words_per_passage"]
    listed = prompt["separator"].join(
        prompt["passage"].format(number=number, passage=_no_brackets(" ".join(passage.strip().split()[:words])))
        for number, passage in enumerate(passages, start=1))
    return [{"role": "system", "content": prompt["system"]},
            {"role": "user", "content": prompt["user"].format(query=_no_brackets(query), num=len(passages), passages=listed)}]


def groupwise_scale() -> tuple[float, float]:
    """The lowest and highest score the groupwise prompt asks for (0 and 10)."""
    low, high = llm_prompts()["groupwise"]["scale"]
    return float(low), float(high)


_NUMBER = r"[-+]?\d+(?:\.\d+)?"
_SEPARATOR = r"(?:[:=>)\u2013\u2192]|-(?![\d.]))"  # a dash before a digit is the score's sign
# "[3] 7.5", "[3]: 7.5", "[3] -> 7.5", "[3] score: 7.5"; and at a line's start "3: 7.5", "Passage 3 = 7.5", "- 3 - 7.5"
_BRACKETED_SCORE = re.compile(r"\[\s*(\d+)\s*\]\s*(?:" + _SEPARATOR + r"\s*)*(?:score\s*[:=]?\s*)?(" + _NUMBER + r")(?![\d.])",
                              re.IGNORECASE)
# a key of a JSON object that does not parse whole (a trailing comma, a comment): "1": 7.5, "[2]": 3, "passage 3": 1
_QUOTED_SCORE = re.compile(r"[\"']\s*(?:passage|document|doc)?\s*\[?\s*(\d+)\s*\]?\s*[\"']\s*:\s*[\"']?(" + _NUMBER + r")(?![\d.])",
                           re.IGNORECASE)
_LINE_SCORE = re.compile(r"^\s*[-*\u2022]?\s*(?:passage|document|doc)?\s*#?(\d+)\s*(?:" + _SEPARATOR + r"\s*)+(?:score\s*[:=]?\s*)?("
                         + _NUMBER + r")(?![\d.])", re.IGNORECASE | re.MULTILINE)


def parse_group_scores(answer: str, size: int) -> dict[int, float]:
    """The scores a groupwise answer gives the passages of a group of ``size``: position (0-based) -> score. Read, in
    turn, from a JSON object (``{"1": 7.5, "2": 3}``, a key may be "[1]" or "passage 1", a value a number, a numeric
    string or ``{"score": 7.5}``), a JSON list (of ``size`` numbers in passage order, or of ``{"id"/"passage": 1,
    "score": 7.5}`` objects; also one followed by more text), else ``"3": 7.5`` pairs of an object that does not parse,
    else lines such as ``[3] 7.5`` or ``3: 7.5``, else (a group of one) a bare number. A passage number out of range is dropped,
    the first score of a passage counts, a score that is not a finite number (null, "n/a", NaN) is no score. A
    reasoning model's ``<think>...</think>`` part is ignored. {} when the answer holds no score at all."""
    if "</think>" in answer:
        answer = answer.split("</think>")[-1]
    text = answer.translate(_FAKE_DIGITS)
    for parsed in _json_values(text):
        from_json = _scores_of_json(parsed, size)
        if from_json:
            return from_json
    scores: dict[int, float] = {}
    for pattern in (_QUOTED_SCORE, _BRACKETED_SCORE, _LINE_SCORE):
        for number, value in pattern.findall(text):
            position, score = int(number) - 1, _finite(value)
            if 0 <= position < size and score is not None:
                scores.setdefault(position, score)
        if scores:
            return scores
    alone = _finite(text.strip()) if size == 1 and re.fullmatch(_NUMBER, text.strip()) else None
    return {0: alone} if alone is not None else {}


def _json_values(text: str) -> list[Any]:
    """The JSON values an answer may hold: the whole answer (code fences dropped), else the first JSON value that
    starts at its first opening brace (or bracket), whatever text follows it; a list of plain numbers only as the
    whole answer ("[1] 7.5" starts with the list [1], which is a passage number, not a score)."""
    stripped = re.sub(r"^```\w*\s*|\s*```$", "", text.strip())
    values = []
    try:
        values.append(json.loads(stripped))
    except ValueError:
        pass
    decoder = json.JSONDecoder()
    for opening in ("{", "["):
        start = text.find(opening)
        if start >= 0:
            try:
                value = decoder.raw_decode(text, start)[0]
            except ValueError:
                continue
            if not isinstance(value, list) or all(isinstance(item, dict) for item in value):
                values.append(value)
    return values


def _scores_of_json(value: Any, size: int) -> dict[int, float]:
    pairs: list[tuple[Any, Any]] = []
    if isinstance(value, dict):
        pairs = list(value.items())
    elif isinstance(value, list) and value and all(isinstance(item, dict) for item in value):
        for item in value:
            number = next((item[key] for key in ("id", "passage", "index", "number", "doc", "document") if key in item), None)
            score = next((item[key] for key in ("score", "relevance", "rating") if key in item), None)
            pairs.append((number, score))
    elif isinstance(value, list) and len(value) == size:
        pairs = [(number, score) for number, score in enumerate(value, start=1)]
    scores: dict[int, float] = {}
    for number, score in pairs:
        if isinstance(score, dict):
            score = next((score[key] for key in ("score", "relevance", "rating") if key in score), None)
        digits = re.search(r"\d+", str(number)) if not isinstance(number, bool) and number is not None else None
        position, parsed = (int(digits.group()) - 1 if digits else -1), _finite(score)
        if 0 <= position < size and parsed is not None:
            scores.setdefault(position, parsed)
    return scores


def _finite(value: Any) -> float | None:
    """A finite number from a JSON value or a numeric string, else None."""
    if isinstance(value, bool) or value is None:
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


# --- pointwise and reasoning --------------------------------------------------------------------------------------

def pair_messages(kind: str, query: str, passage: str) -> list[dict[str, str]]:
    """The single user turn of a pointwise ("pointwise", "pointwise_graded") or reasoning prompt."""
    return [{"role": "user", "content": llm_prompts()[kind]["user"].format(query=query, passage=passage)}]


def two_way_probability(logprobs: Sequence[dict[str, Any]] | None, positive: str, negative: str) -> float | None:
    """P(positive) / (P(positive) + P(negative)) at the first answer token whose alternatives hold either word
    (case and surrounding spaces ignored; the variants of a word add up), or None when no token does."""
    for item in logprobs or ():
        alternatives = dict(item.get("top") or {})
        alternatives.setdefault(item["token"], item["logprob"])
        mass = {positive: 0.0, negative: 0.0}
        for token, logprob in alternatives.items():
            word = token.strip().lower()
            if word in mass:
                mass[word] += math.exp(logprob)
        if mass[positive] + mass[negative] > 0:
            return mass[positive] / (mass[positive] + mass[negative])
    return None


def answer_tokens(logprobs: Sequence[dict[str, Any]] | None, answer: str) -> list[dict[str, Any]] | None:
    """The log-probabilities of the answer's own tokens: the last tokens, from the one that starts the last place
    where their concatenated text spells ``answer`` (stripped). A reasoning model's thought comes first, whether in
    the content (``<think>...</think>``) or split off by the server: vLLM's reasoning parser moves the thought to
    ``reasoning_content`` but still returns the thought's tokens first. [] for an empty answer; None when there are
    no log-probabilities or their tokens do not spell the answer (then the said word counts)."""
    answer = answer.strip()
    if not logprobs:
        return None
    if not answer:
        return []
    start = "".join(item["token"] for item in logprobs).rfind(answer)
    if start < 0:
        return None
    seen = 0
    for index, item in enumerate(logprobs):
        seen += len(item["token"])
        if seen > start:
            return list(logprobs[index:])
    return None


def word_answer(text: str, words: Iterable[str], *, after: str | None = None) -> str | None:
    """The first of ``words`` the answer says (after ``after`` when it holds it), or None."""
    if after and after in text:
        text = text.split(after)[-1]
    match = re.search(r"\b(" + "|".join(map(re.escape, words)) + r")\b", text, flags=re.IGNORECASE)
    return match.group(1).lower() if match else None


def graded_label(text: str) -> int | None:
    """The 0-3 label of a graded answer, or None when it holds none."""
    match = re.search(r"\b([0-3])\b", text.split("</think>")[-1])
    return int(match.group(1)) if match else None
