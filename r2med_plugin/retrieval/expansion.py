"""The official rules for combining a query with a released LLM expansion (hy_doc).

Reasoning LLMs (the catalog's ``reasoning_llms``) contribute only their final answer, cut from the
raw output by their family's marker as the official code cuts it; when the marker is absent, the raw
text is used. For them the method's rule is not applied (official ``r1_mode``): BM25 uses the answer
alone and dense averages the query and answer embeddings, for every method.

BM25 query text, by method:
- hyde (and search-r1, search-o1): the expansion alone;
- query2doc: ``text * 2 + " " + hy_doc`` (the query twice, no separator, as the official code does);
- lamer: ``text + " " + hy_doc``.

Dense, by method:
- query2doc: one query string ``text + "[SEP]" + hy_doc``;
- the others: the mean of the embedding of the (instructed) query and the embedding of the
  expansion (no instruction), then cosine.
"""

from __future__ import annotations

import re
from collections.abc import Collection

from r2med_plugin.errors import UserError
from r2med_plugin.identifiers import EXPANSION_METHODS

THINK_END = "</think>"
# The official families (R2MED/R2MED src/base.py, split_response_for_r1): which marker each LLM's
# output is cut at. A reasoning LLM outside them (a local generation) is cut like the <think> family.
THINK_FAMILY = ("r1-llama-8b", "r1-qwen-32b", "r1-llama-70b", "qwq-32b", "qwen3-32b", "qwen3-8b")
HUATUO_FAMILY = ("huatuo-o1-8b", "huatuo-o1-70b")
SKY_FAMILY = ("sky-32b",)
SEARCH_R1_FAMILY = ("qwen-7b-ins", "qwen-3b-ins")
_ANSWER_TAG = re.compile(r"<answer>(.*?)</answer>", flags=re.DOTALL)
_SKY_SOLUTION = re.compile(r"<\|begin_of_solution\|>\s*([\s\S]*?)\s*<\|end_of_solution\|>")
_FINAL_RESPONSE = re.compile(r"Final Response\s*(.*)", flags=re.DOTALL)

METHODS = EXPANSION_METHODS
BM25_EXPANSION_ALONE = ("hyde", "search-r1", "search-o1")


def extract_answer(hy_doc: str, llm: str) -> str:
    """The final answer of reasoning LLM ``llm``'s output, cut as the official code cuts it; the raw
    text when the LLM's marker is absent.

    ``<think>`` family: what follows the FIRST ``</think>``, stripped (possibly empty). Huatuo-o1: what
    follows the first "Final Response", stripped. Sky-T1: the first complete solution block.
    Search-R1 (qwen-*-ins): the first ``<answer>...</answer>``, stripped (possibly empty).
    """
    if llm in HUATUO_FAMILY:
        found = _FINAL_RESPONSE.search(hy_doc)
        return found.group(1).strip() if found else hy_doc
    if llm in SKY_FAMILY:
        found = _SKY_SOLUTION.search(hy_doc)
        return found.group(1).strip() if found else hy_doc
    if llm in SEARCH_R1_FAMILY:
        answers = _ANSWER_TAG.findall(hy_doc)
        return answers[0].strip() if answers else hy_doc
    if THINK_END in hy_doc:
        return hy_doc.split(THINK_END, 1)[1].strip()
    return hy_doc


def expansion_text(hy_doc: str, llm: str, reasoning_llms: Collection[str]) -> str:
    """The part of ``hy_doc`` that is used: the extracted answer for reasoning LLMs, else all of it."""
    return extract_answer(hy_doc, llm) if llm in reasoning_llms else hy_doc


def bm25_query(method: str, text: str, expansion: str, *, reasoning: bool = False) -> str:
    """The BM25 query text for one query and its (already extracted) expansion.

    For a reasoning LLM the official code uses the extracted answer alone, whatever the method.
    """
    if method not in METHODS:
        raise UserError(f"unknown expansion method {method!r}; known: {', '.join(METHODS)}")
    if reasoning or method in BM25_EXPANSION_ALONE:
        return expansion
    if method == "query2doc":
        return text * 2 + " " + expansion
    return text + " " + expansion  # lamer


def dense_query(method: str, text: str, expansion: str, *, reasoning: bool = False) -> str | None:
    """For query2doc, the single query string to encode; None when the embeddings are averaged instead.

    For a reasoning LLM the official code always averages (query2doc included).
    """
    if method not in METHODS:
        raise UserError(f"unknown expansion method {method!r}; known: {', '.join(METHODS)}")
    if method == "query2doc" and not reasoning:
        return text + "[SEP]" + expansion
    return None
