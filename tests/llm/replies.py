"""What the loopback servers of the LLM reranker tests answer, and their toy data."""

from __future__ import annotations

import hashlib
from pathlib import Path

from tests.support.loopback_openai import LoopbackOpenAI, listwise_passages, logprobs_of, reranker_config

TASK = "NanoR2MEDBiology"


def hidden_order(text: str) -> str:
    """The server's hidden relevance order: a hash of the passage (any fixed total order will do)."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def server_host(server: LoopbackOpenAI) -> str:
    """The server's host as LLM reranker names hold it: host-port."""
    return server.base_url.split("://", 1)[1].split("/", 1)[0].replace(":", "-")


def rankgpt_reply(body: dict) -> str:
    """A well-behaved RankGPT answer: the window's passages by the hidden order."""
    passages = listwise_passages(body)
    order = sorted(range(len(passages)), key=lambda i: hidden_order(passages[i]))
    return " > ".join(f"[{i + 1}]" for i in order)


def asked_passage(body: dict) -> str:
    return body["messages"][-1]["content"].split("Passage: ", 1)[1].split("\n")[0]


def yes_no_logprobs(passage: str) -> tuple[float, float, float]:
    """The log-probabilities the server gives "Yes", " yes" and "No" for a passage (from its hash)."""
    digest = hashlib.sha256(passage.encode("utf-8")).digest()
    return -digest[0] / 40 - 0.01, -digest[1] / 30 - 2.0, -digest[2] / 40 - 0.01


def pointwise_reply(body: dict) -> dict:
    yes, yes_spaced, no = yes_no_logprobs(asked_passage(body))
    top = {"Yes": yes, " yes": yes_spaced, "No": no, "Maybe": -6.0}
    first = "Yes" if yes >= no else "No"
    return {"content": first, "logprobs": logprobs_of([(first, top[first], top)])}


config_for = reranker_config


def toy_data(count: int = 30, queries: int = 2) -> tuple[dict, dict, dict]:
    documents = {f"d{i:02d}": f"passage {i} about gene {i * 7 % 11} and protein [{i}]" for i in range(count)}
    query_texts = {f"q{j}": f"which gene [{j}] binds protein {j}" for j in range(queries)}
    first_stage = {query_id: {doc_id: float(count - rank) for rank, doc_id in enumerate(documents)} for query_id in query_texts}
    return first_stage, query_texts, documents


def true_false_logprobs(passage: str) -> tuple[float, float]:
    digest = hashlib.sha256(passage.encode("utf-8")).digest()
    return -digest[0] / 50 - 0.01, -digest[1] / 50 - 0.01


def reasoning_reply(body: dict) -> dict:
    passage = asked_passage(body)
    if "budget" in passage:  # thinks past the budget: no answer
        return {"reasoning_content": "Let me think about " + passage, "content": "", "finish_reason": "length"}
    true, false = true_false_logprobs(passage)
    word = "true" if true >= false else "false"
    return {"reasoning_content": f"The query asks about genes; {passage} mentions one.", "content": word,
            "logprobs": logprobs_of([(word, max(true, false), {"true": true, "false": false, "True": -9.0})])}


def rank1_tokens(body: dict) -> dict:
    """What a Rank1 model generates: reasoning whose tokens also weigh true against false (a top-20 list holds many
    words: "True"/"False" at the first token, " true"/" false" later), "</think>", then the answer token."""
    true, false = true_false_logprobs(asked_passage(body))
    word = "true" if true >= false else "false"
    return {"tokens": [
        ("Okay", -0.3, {"Okay": -0.3, "Alright": -1.5, "True": -6.0, "False": -5.0}), (",", -0.1, {}), (" the", -0.2, {}),
        (" passage", -0.1, {}), (" says", -0.4, {}), (" true", -0.5, {" true": -0.5, " false": -1.3}), (".\n", -0.2, {}),
        ("</think>", -0.01, {}), ("\n\n", -0.01, {}), (word, max(true, false), {"true": true, "false": false, "True": -9.0}),
    ]}


def write_sweep_spec(tmp_path: Path, reranker: dict) -> Path:
    import yaml

    path = tmp_path / "sweep.yaml"
    path.write_text(yaml.safe_dump({"output": str(tmp_path / "sweep-out"), "tasks": [TASK], "rerankers": [reranker]}))
    return path
