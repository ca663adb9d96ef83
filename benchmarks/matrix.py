"""Wall-clock of the reproduction matrix's 14 BM25 rows against 14 separate `r2med evaluate` runs.

The data: a synthetic mirror of the 8 R2MED tasks at their real sizes (task_metadata's document and query
counts, R2MED-like lengths; ``--scale`` shrinks every count), with the 13 released expansion files the matrix
reads (reasoning LLMs' outputs carry a thinking part). Both sides start from an empty cache folder of their own;
the 14 `r2med evaluate` runs share theirs, as one user's would (the analysed corpus is cached after the first).

    python benchmarks/matrix.py [--scale 1.0] [--only R2MEDIIYiClinical]

``--only TASK``: that task at ``--scale`` of its real size, the 7 others at 50 documents and 5 queries (both sides
still run all 8 tasks), for a machine where the whole exact-size mirror takes too long.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import polars as pl

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))


def _expansion(texts: list[str], llm: str) -> list[str]:
    if llm in ("qwq-32b", "qwen3-32b", "r1-llama-70b", "r1-qwen-32b"):
        return [f"<think>{text[::-1][:400]}</think>{text[:600]}" for text in texts]
    if llm.endswith("-ins"):
        return [f"<search>{text[:80]}</search><answer>{text[:500]}</answer>" for text in texts]
    return [text[:800] for text in texts]


def build_mirror(root: Path, scale: float, only: str | None = None) -> Path:
    from benchmarks.synthetic import synthetic_task
    from r2med_plugin.catalog import list_tasks
    from r2med_plugin.data.mirror import write_r2med_repo
    from r2med_plugin.evaluation.matrix import leaderboard_expansions

    files = [entry["expansion"].split("/") for entry in leaderboard_expansions().values()]
    for position, spec in enumerate(list_tasks("r2med")):
        documents, queries_count = task_size(spec, scale, only)
        corpus, queries, qrels = synthetic_task(documents, queries_count, seed=20260524 + position)
        pairs = [(q, d) for q, docs in qrels.items() for d in docs]
        qrels_frame = pl.DataFrame({"q_id": [q for q, _ in pairs], "p_id": [d for _, d in pairs], "score": [1] * len(pairs)})
        expansions: dict[str, dict[str, pl.DataFrame]] = {}
        for method, llm in files:
            frame = queries.with_columns(pl.Series("hy_doc", _expansion(queries["text"].to_list(), llm)))
            expansions.setdefault(method, {})[llm.replace("-", "_")] = frame
        write_r2med_repo(root / spec.hub_repo, corpus=corpus, queries=queries, qrels=qrels_frame, expansions=expansions,
                         pretty_name=f"R2MED {spec.hub_name} (exact-size synthetic)")
    return root


def task_size(spec, scale: float, only: str | None) -> tuple[int, int]:
    """(documents, queries) of a task in the mirror."""
    if only is not None and spec.name != only:
        return 50, 5
    counts = spec.expected_counts
    return max(50, int(counts["documents"] * scale)), max(5, int(counts["queries"] * scale))


def _timed(command: list[str], env: dict[str, str]) -> float:
    started = time.perf_counter()
    done = subprocess.run(command, env=env, capture_output=True, text=True)
    if done.returncode not in (0, 1):  # 1: a row differs from the published numbers, as it must on synthetic data
        raise SystemExit(f"{' '.join(command)} failed:\n{done.stderr[-3000:]}")
    return time.perf_counter() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", type=float, default=1.0, help="fraction of the real document and query counts")
    parser.add_argument("--only", default=None, help="this task at --scale, the others at 50 documents")
    args = parser.parse_args()
    from r2med_plugin.catalog import list_tasks
    from r2med_plugin.evaluation.matrix import matrix_rows

    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        mirror = build_mirror(root / "mirror", args.scale, args.only)
        base = {**os.environ, "R2MED_DATA_DIR": str(mirror), "R2MED_ACCEPT_DRIFT": "1", "HF_HUB_OFFLINE": "1"}
        cli = [sys.executable, "-m", "r2med_plugin.cli"]
        matrix = _timed([*cli, "reproduce", "--matrix", "--quiet", "--output", str(root / "matrix")],
                        {**base, "R2MED_CACHE_DIR": str(root / "cache-matrix")})
        separate = 0.0
        tasks = [spec.name for spec in list_tasks("r2med")]
        for row in (row for row in matrix_rows() if row.on_cpu):
            command = [*cli, "evaluate", "--task", *tasks, "--retriever", "bm25-lucene", "--quiet", "--output", str(root / "separate")]
            separate += _timed(command + (["--expansion", row.expansion] if row.expansion else []),
                               {**base, "R2MED_CACHE_DIR": str(root / "cache-separate")})
        resumed = _timed([*cli, "reproduce", "--matrix", "--quiet", "--output", str(root / "matrix")],
                         {**base, "R2MED_CACHE_DIR": str(root / "cache-matrix")})
    sizes = [task_size(spec, args.scale, args.only) for spec in list_tasks("r2med")]
    data = f"{args.only} at scale {args.scale:g}, 7 tasks of 50" if args.only else f"8 tasks at scale {args.scale:g}"
    print("| data | 14 separate `r2med evaluate` runs | `r2med reproduce --matrix` | ratio | matrix rerun (resume) |")
    print("|---|---|---|---|---|")
    print(f"| {data} ({sum(d for d, _ in sizes):,} documents, {sum(q for _, q in sizes):,} queries), {os.cpu_count()} cores | {separate:.1f} s | "
          f"{matrix:.1f} s | {separate / matrix:.2f}x | {resumed:.1f} s |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
