"""LLM reranker requests: throughput and the wall-time ratio of --concurrency 16 to --concurrency 1, against a
loopback OpenAI-compatible server that answers every request after a fixed 200 ms (an LLM's latency, no compute).

    python benchmarks/llm_rerank.py            # pointwise: 192 (query, passage) pairs; listwise: 16 queries x depth 100

Pointwise sends one request per pair, all independent: concurrency multiplies throughput up to the limit. Listwise
windows of one query depend on each other (each starts from the last one's order), so only queries run in parallel.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from r2med_plugin.llm import Endpoint, ListwiseLLMReranker, LLMRerankerConfig, PointwiseLLMReranker  # noqa: E402
from tests.support.loopback_openai import LoopbackOpenAI, logprobs_of  # noqa: E402

LATENCY = 0.2


def yes(body: dict) -> dict:
    return {"content": "Yes", "logprobs": logprobs_of([("Yes", -0.2, {"Yes": -0.2, "No": -1.7})])}


def ranked(body: dict) -> str:
    return "[2] > [1]"


def toy(queries: int, depth: int) -> tuple[dict, dict, dict]:
    documents = {f"d{i:03d}": f"passage {i} on gene {i % 13}" for i in range(depth)}
    texts = {f"q{j}": f"query {j} about gene {j}" for j in range(queries)}
    run = {query_id: {doc_id: float(depth - rank) for rank, doc_id in enumerate(documents)} for query_id in texts}
    return run, texts, documents


def timed(kind: type, reply, concurrency: int, queries: int, depth: int) -> tuple[float, int]:
    run, texts, documents = toy(queries, depth)
    with LoopbackOpenAI(reply=reply, delay=LATENCY) as server, tempfile.TemporaryDirectory() as cache:
        os.environ["OPENAI_API_KEY"] = server.api_key
        reranker = kind("test-llm", LLMRerankerConfig(Endpoint(server.base_url, concurrency=concurrency), cache_dir=cache))
        started = time.perf_counter()
        reranker.rerank(run, texts, documents, depth=depth, show_progress=False)
        seconds = time.perf_counter() - started
        return seconds, reranker.last_report.usage["requests"]


def main() -> None:
    rows = []
    for label, kind, reply, queries, depth in [("pointwise", PointwiseLLMReranker, yes, 8, 24),
                                                ("listwise (window 20, step 10)", ListwiseLLMReranker, ranked, 16, 100)]:
        results = {c: timed(kind, reply, c, queries, depth) for c in (1, 16)}
        (slow, requests), (fast, _) = results[1], results[16]
        rows.append(f"| {label} | {requests} | {slow:.2f} s ({requests / slow:.1f} req/s) | {fast:.2f} s ({requests / fast:.1f} req/s) "
                    f"| {slow / fast:.1f}x |")
    print(f"Loopback server, fixed {LATENCY * 1000:.0f} ms per answer")
    print("| reranker | requests | --concurrency 1 | --concurrency 16 | wall-time ratio |")
    print("|---|---|---|---|---|")
    print("\n".join(rows))


if __name__ == "__main__":
    main()
