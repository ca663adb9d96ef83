"""llm-groupwise throughput: --concurrency 16 against --concurrency 1, side by side in one run, against a loopback
OpenAI-compatible server that answers every request after a fixed 200 ms (an LLM's latency, no compute).

    python benchmarks/groupwise_concurrency.py          # 16 queries x depth 100, groups of 20, --regroup 2: 160 requests

Groupwise asks every group of every query and regrouping at once (no group waits for another's answer), so the
wall time falls with the concurrency until the limit: the target is 10x at 16. Each run starts from an
empty answer cache; the rankings of both runs are checked to be identical.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from r2med_plugin.llm import Endpoint, GroupwiseLLMReranker, LLMRerankerConfig  # noqa: E402
from tests.support.loopback_openai import LoopbackOpenAI  # noqa: E402

LATENCY = 0.2
TARGET = 10.0


def scores(body: dict) -> str:
    """Every passage of the group scored by its number's digits (any fixed answer will do)."""
    count = int(body["messages"][-1]["content"].split("The ", 1)[1].split(" passages", 1)[0])
    return json.dumps({str(number): (number * 37) % 11 for number in range(1, count + 1)})


def toy(queries: int, depth: int) -> tuple[dict, dict, dict]:
    documents = {f"d{i:03d}": f"passage {i} on gene {i % 13} and protein {i % 7}" for i in range(depth)}
    texts = {f"q{j}": f"query {j} about gene {j}" for j in range(queries)}
    run = {query_id: {doc_id: float(depth - rank) for rank, doc_id in enumerate(documents)} for query_id in texts}
    return run, texts, documents


def timed(concurrency: int, queries: int, depth: int, **settings) -> tuple[float, int, dict]:
    run, texts, documents = toy(queries, depth)
    with LoopbackOpenAI(reply=scores, delay=LATENCY) as server, tempfile.TemporaryDirectory() as cache:
        os.environ["OPENAI_API_KEY"] = server.api_key
        config = LLMRerankerConfig(Endpoint(server.base_url, concurrency=concurrency), cache_dir=cache, **settings)
        reranker = GroupwiseLLMReranker("test-llm", config)
        started = time.perf_counter()
        ranked = reranker.rerank(run, texts, documents, depth=depth, show_progress=False)
        seconds = time.perf_counter() - started
        assert reranker.last_report.usage["requests"] == len(server.completions())
        return seconds, reranker.last_report.usage["requests"], ranked


def main() -> None:
    rows, ratios = [], []
    for label, queries, depth, settings in [
        ("random grouping, g 20, --regroup 2", 16, 100, {"group_size": 20, "regroup": 2}),
        ("first-stage grouping, g 20", 16, 100, {"group_size": 20, "grouping": "first-stage"}),
    ]:
        (slow, requests, slow_run), (fast, _, fast_run) = (timed(c, queries, depth, **settings) for c in (1, 16))
        assert slow_run == fast_run, "the concurrency changed a ranking"
        ratios.append(slow / fast)
        rows.append(f"| {label} | {queries} x {depth} | {requests} | {slow:.2f} s ({requests / slow:.1f} req/s) "
                    f"| {fast:.2f} s ({requests / fast:.1f} req/s) | {slow / fast:.1f}x |")
    print(f"llm-groupwise, loopback server, fixed {LATENCY * 1000:.0f} ms per answer (target: {TARGET:.0f}x at --concurrency 16)")
    print("| setting | queries x depth | requests | --concurrency 1 | --concurrency 16 | wall-time ratio |")
    print("|---|---|---|---|---|---|")
    print("\n".join(rows))
    print("target met" if min(ratios) >= TARGET else f"TARGET MISSED: {min(ratios):.1f}x < {TARGET:.0f}x")


if __name__ == "__main__":
    main()
