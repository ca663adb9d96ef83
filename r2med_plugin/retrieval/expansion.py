"""The official rules for combining a query with a released LLM expansion (hy_doc).

Reasoning LLMs (the catalog's ``reasoning_llms``) contribute only their final answer, extracted
from the raw output; when no marker is found, the raw text is used.

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

THINK_END = "</think>"
_ANSWER_TAG = re.compile(r"<answer>(.*?)</answer>", flags=re.DOTALL | re.IGNORECASE)
_SKY_SOLUTION = re.compile(r"<\|begin_of_solution\|>(.*?)(?:<\|end_of_solution\|>|$)", flags=re.DOTALL)
_FINAL_RESPONSE = re.compile(r"#{1,6}\s*Final Response\s*:?\s*\n?(.*)$", flags=re.DOTALL | re.IGNORECASE)

BM25_EXPANSION_ALONE = ("hyde", "search-r1", "search-o1")


def extract_answer(hy_doc: str) -> str:
    """The final answer of a reasoning LLM's output; the raw text when no known marker is present.

    Markers, in order: Search-R1's ``<answer>...</answer>`` (the last one), Sky-T1's
    ``<|begin_of_solution|>...`` block, Huatuo-o1's ``## Final Response`` section, and the text after
    the last ``</think>``.
    """
    answers = _ANSWER_TAG.findall(hy_doc)
    if answers and answers[-1].strip():
        return answers[-1].strip()
    solution = _SKY_SOLUTION.search(hy_doc)
    if solution and solution.group(1).strip():
        return solution.group(1).strip()
    final = _FINAL_RESPONSE.search(hy_doc)
    if final and final.group(1).strip():
        return final.group(1).strip()
    if THINK_END in hy_doc:
        after = hy_doc.rsplit(THINK_END, 1)[1].strip()
        if after:
            return after
    return hy_doc


def expansion_text(hy_doc: str, llm: str, reasoning_llms: Collection[str]) -> str:
    """The part of ``hy_doc`` that is used: the extracted answer for reasoning LLMs, else all of it."""
    return extract_answer(hy_doc) if llm in reasoning_llms else hy_doc


def bm25_query(method: str, text: str, expansion: str) -> str:
    """The BM25 query text for one query and its (already extracted) expansion."""
    if method in BM25_EXPANSION_ALONE:
        return expansion
    if method == "query2doc":
        return text * 2 + " " + expansion
    if method == "lamer":
        return text + " " + expansion
    raise ValueError(f"unknown expansion method {method!r}; known: hyde, query2doc, lamer, search-r1, search-o1")


def dense_query(method: str, text: str, expansion: str) -> str | None:
    """For query2doc, the single query string to encode; None when the embeddings are averaged instead."""
    if method == "query2doc":
        return text + "[SEP]" + expansion
    if method in ("hyde", "lamer", "search-r1", "search-o1"):
        return None
    raise ValueError(f"unknown expansion method {method!r}; known: hyde, query2doc, lamer, search-r1, search-o1")
