"""Loopback answers by a fixed key (groupwise scores, RankGPT orders), and toy data, for the groupwise,
InsertRank and listwise reasoning tests."""

from __future__ import annotations

import hashlib
import json

from tests.support.loopback_openai import LoopbackOpenAI, listwise_passages, reranker_config

TASK = "NanoR2MEDBiology"


def text_digest(text: str) -> int:
    return int(hashlib.sha256(text.encode("utf-8")).hexdigest()[:12], 16)


def key(text: str) -> float:
    """The server's fixed relevance key of a passage: 0 to 6 (many ties among 30 passages)."""
    return float(text_digest(text) % 7)


def server_host(server: LoopbackOpenAI) -> str:
    return server.base_url.split("://", 1)[1].split("/", 1)[0].replace(":", "-")


config_for = reranker_config


def toy_data(count: int = 30, queries: int = 2) -> tuple[dict, dict, dict]:
    documents = {f"d{i:02d}": f"passage {i} about gene {i * 7 % 11} and protein {i * 3}" for i in range(count)}
    texts = {f"q{j}": f"which gene {j} binds protein {j}" for j in range(queries)}
    first_stage = {query_id: {doc_id: 12.345678 - rank / 3 for rank, doc_id in enumerate(documents)} for query_id in texts}
    return first_stage, texts, documents


def group_passages(body: dict) -> list[str]:
    """The passages of a groupwise question, in their [1], [2], ... order."""
    content = body["messages"][-1]["content"]
    listed = content.split("\n\n", 2)[2].rsplit("\n\nGive every one of the", 1)[0]
    return [part.split("] ", 1)[1] for part in listed.split("\n\n")]


def keyed_scores(body: dict) -> str:
    """A well-behaved groupwise answer: every passage's key, as a JSON object."""
    return json.dumps({str(number): key(passage) for number, passage in enumerate(group_passages(body), start=1)})


def keyed_order(first_stage: dict, documents: dict, query_id: str) -> list[str]:
    """The key's order of a query's documents, ties in the first stage's order."""
    return sorted(first_stage[query_id], key=lambda doc_id: -key(documents[doc_id]))


def rankgpt_reply(body: dict) -> str:
    passages = listwise_passages(body)
    order = sorted(range(len(passages)), key=lambda i: text_digest(passages[i].split(") ", 1)[-1]))
    return " > ".join(f"[{i + 1}]" for i in order)
