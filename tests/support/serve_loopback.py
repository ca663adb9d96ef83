"""The loopback OpenAI-compatible server (tests/support/loopback_openai.py) as a command, for the docs' examples.

    python -m tests.support.serve_loopback --url-file url.txt [--seconds 120] &

Serves ``/v1/embeddings``, ``/v1/chat/completions`` and ``/v1/models`` on 127.0.0.1 (a free port) for the model ids
``test-embedder`` and ``test-llm``, writes its base URL to ``--url-file`` once it listens, and stops after
``--seconds`` (or when killed). The key it accepts is ``sk-loopback-test``. The docs' offline stand-ins for
``vllm serve`` and OpenAI use it (tests/contracts/test_doc_examples.py).
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from pathlib import Path

from tests.support.loopback_openai import LoopbackOpenAI

MODELS = ("test-embedder", "test-llm")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url-file", required=True, help="where to write the base URL (http://127.0.0.1:PORT/v1)")
    parser.add_argument("--seconds", type=float, default=120.0, help="stop after this long")
    options = parser.parse_args(argv)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    with LoopbackOpenAI(models=MODELS, max_seconds=options.seconds) as server:
        temporary = Path(options.url_file).with_suffix(".partial")
        temporary.write_text(server.base_url, encoding="utf-8")
        temporary.replace(options.url_file)  # whole or absent: a reader never sees half a URL
        stop.wait(options.seconds)
    return 0


if __name__ == "__main__":
    sys.exit(main())
