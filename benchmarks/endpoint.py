"""Embedding-endpoint throughput (`--retriever openai:<model>`) against a loopback OpenAI-compatible
/v1/embeddings server (in its own process, as a real server is) that answers each request after a fixed
latency (a stand-in for a remote API),
at --concurrency 1 and 16 (and 4), in one run; the cache is switched off so every batch is a request.
Also: the plugin's own cost per text at zero latency, and a rerun served from the cache (no request).

    python benchmarks/endpoint.py [--texts 8000] [--batch-size 32] [--latency 0.05]
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from r2med_plugin.models.embedding_endpoint import EndpointEncoder  # noqa: E402
from tests.support.loopback_openai import LoopbackOpenAI  # noqa: E402


def _serve(latency: float, dim: int, urls: multiprocessing.Queue, stop: multiprocessing.Event) -> None:
    with LoopbackOpenAI(models=("emb",), delay=latency, embedding_dim=dim, max_seconds=3600) as server:
        urls.put(server.base_url)
        stop.wait()


class Server:
    """The loopback server in another process (in this one it would share the GIL with the client)."""

    def __init__(self, latency: float, dim: int = 64) -> None:
        self.urls, self.stop = multiprocessing.Queue(), multiprocessing.Event()
        self.process = multiprocessing.Process(target=_serve, args=(latency, dim, self.urls, self.stop), daemon=True)

    def __enter__(self) -> str:
        self.process.start()
        return self.urls.get(timeout=60)

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.process.join(timeout=10)


def timed(base_url: str, texts: list[str], concurrency: int, batch_size: int) -> tuple[float, int]:
    encoder = EndpointEncoder("emb", base_url, concurrency=concurrency, batch_size=batch_size, show_progress=False)
    started = time.perf_counter()
    vectors = encoder.encode(texts, kind="document")
    seconds = time.perf_counter() - started
    assert vectors.shape[0] == len(texts)
    return seconds, encoder.requests_sent


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--texts", type=int, default=8000)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--latency", type=float, default=0.05)
    args = parser.parse_args()
    os.environ["OPENAI_API_KEY"] = "sk-loopback-test"
    texts = [f"document {index} about gene {index % 97} and protein {index % 31} in tissue {index % 7}" for index in range(args.texts)]
    os.environ["R2MED_NO_CACHE"] = "1"  # every batch is sent: throughput, not cache hits
    rows = []
    with Server(args.latency) as url:
        for concurrency in (1, 4, 16):
            seconds, requests = timed(url, texts, concurrency, args.batch_size)
            rows.append((concurrency, seconds, requests))
    with Server(0.0) as url:
        zero, _ = timed(url, texts, 16, args.batch_size)
    os.environ.pop("R2MED_NO_CACHE")
    os.environ["R2MED_CACHE_DIR"] = tempfile.mkdtemp(prefix="r2med-endpoint-bench-")
    with Server(args.latency) as url:
        cold, _ = timed(url, texts, 16, args.batch_size)
        warm, sent = timed(url, texts, 16, args.batch_size)
    base = rows[0][1]
    print(f"{args.texts} texts, batch size {args.batch_size}, {args.latency * 1000:.0f} ms per request")
    print("| --concurrency | requests | seconds | texts/s | speed-up vs 1 |")
    print("|---|---|---|---|---|")
    for concurrency, seconds, requests in rows:
        print(f"| {concurrency} | {requests} | {seconds:.2f} | {args.texts / seconds:,.0f} | {base / seconds:.1f}x |")
    print(f"zero latency, --concurrency 16: {zero:.2f} s ({zero / args.texts * 1e6:.0f} us per text, client + loopback server)")
    print(f"cached: first run {cold:.2f} s, rerun {warm:.3f} s with {sent} requests")


if __name__ == "__main__":
    main()
