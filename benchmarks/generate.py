"""`r2med generate` throughput against a loopback OpenAI-compatible server that answers after a fixed
latency (a stand-in for an LLM), side by side for several --concurrency values, plus the plugin's own
cost per query (zero latency) and the cost of 429/500 faults on 10% of the requests.

    python benchmarks/generate.py [--queries 100] [--latency 0.2]
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import tempfile
import time
from pathlib import Path

from common import LARGEST_TASK, r2med_mirror

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from r2med_plugin.generation import generate_expansions  # noqa: E402
from tests.support.loopback_openai import LoopbackOpenAI  # noqa: E402


def timed_run(server: LoopbackOpenAI, out: Path, concurrency: int, method: str = "hyde") -> float:
    started = time.perf_counter()
    report = generate_expansions(LARGEST_TASK, method, "test-llm", server.base_url, out=out, concurrency=concurrency,
                                 show_progress=False, overwrite=True)
    assert report.complete and report.generated == report.total
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--latency", type=float, default=0.2)
    args = parser.parse_args()
    logging.disable(logging.WARNING)
    tmp = Path(tempfile.mkdtemp(prefix="r2med-generate-bench-"))
    os.environ.update(R2MED_DATA_DIR=str(r2med_mirror(tmp / "mirror", n_docs=5_000, n_queries=args.queries)),
                      R2MED_ACCEPT_DRIFT="1", R2MED_CACHE_DIR=str(tmp / "cache"), OPENAI_API_KEY="sk-bench")
    with LoopbackOpenAI(api_key="sk-bench", delay=args.latency, max_seconds=3600) as server:
        timed_run(server, tmp / "warm", 8)  # first-call costs (task load, imports) out of the comparison
        print(f"{args.queries} queries, server latency {args.latency:.2f} s per answer")
        serial = None
        print("| --concurrency | wall time | queries/s | speed-up vs 1 | ideal |")
        print("|---|---|---|---|---|")
        for concurrency in (1, 4, 16, 64):
            seconds = timed_run(server, tmp / f"c{concurrency}", concurrency)
            serial = serial or seconds
            ideal = min(concurrency, args.queries)
            print(f"| {concurrency} | {seconds:.2f} s | {args.queries / seconds:.1f} | {serial / seconds:.1f}x | {ideal}x |")
        server.delay = 0.0
        zero = timed_run(server, tmp / "zero", 16)
        print(f"\nzero latency, --concurrency 16: {zero:.2f} s = {1000 * zero / args.queries:.1f} ms per query "
              "(load, prompts, client, loopback server, append, manifest)")
        server.delay = args.latency
        clean = timed_run(server, tmp / "clean", 16)
        server.add_faults(*(["429", "500"] * (args.queries // 20)))
        faulty = timed_run(server, tmp / "faulty", 16)
        print(f"10% of requests answered 429/500 first, --concurrency 16: {faulty:.2f} s vs {clean:.2f} s clean "
              f"({faulty / clean:.2f}x; the client's backoff starts at 0.5 s, or Retry-After)")


if __name__ == "__main__":
    main()
