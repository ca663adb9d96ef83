"""What checking every input before any work adds to `r2med evaluate`, on the largest R2MED task at exact size
(61,379 documents, 150 queries) with a released expansion file (hyde/gpt4).

`validate_inputs` reads and checks each task's files (and expansion files) before the first task runs. The first task's
validated data (and any others' while they fit in 128 MiB of tables) is handed to the run, so it is read once; a task
whose data was dropped to bound memory is read a second time when it runs.

    python benchmarks/preflight.py
"""

from __future__ import annotations

import statistics
import tempfile
import time
from pathlib import Path

import polars as pl
from common import LARGEST_TASK, r2med_mirror

from r2med_plugin import get_task_spec
from r2med_plugin.data.loader import load_task
from r2med_plugin.evaluation.plan import as_request
from r2med_plugin.evaluation.runner import execute, validate_inputs

RUNS = 3


def _with_expansion(root: Path) -> None:
    """Add hyde/gpt4 (one expansion per query) to the mirror's repo, as the hub lays it out."""
    from r2med_plugin.data.mirror import write_r2med_repo

    repo = root / get_task_spec(LARGEST_TASK).hub_repo
    corpus = pl.read_ndjson(repo / "corpus.jsonl")
    queries = pl.read_ndjson(repo / "query.jsonl")
    qrels = pl.read_ndjson(repo / "qrels.jsonl")
    hyde = queries.with_columns(hy_doc=pl.col("text").str.slice(0, 400), doc_id=pl.lit(""))
    write_r2med_repo(repo, corpus=corpus, queries=queries, qrels=qrels, expansions={"hyde": {"gpt4": hyde}},
                     pretty_name="synthetic benchmark mirror")


def _median(action) -> tuple[float, object]:
    times, value = [], None
    for _ in range(RUNS):
        start = time.perf_counter()
        value = action()
        times.append(time.perf_counter() - start)
    return statistics.median(times), value


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = r2med_mirror(Path(tmp) / "mirror")
        _with_expansion(root)
        settings = dict(data_dir=root, accept_drift=True, show_progress=False)
        request = as_request(LARGEST_TASK, "bm25-lucene", dict(expansion="hyde/gpt4", **settings))
        load, data = _median(lambda: load_task(LARGEST_TASK, data_dir=root, accept_drift=True))
        kept, preloaded = _median(lambda: validate_inputs([request]))
        run, _ = _median(lambda: execute(request, preloaded[0]))
    size = (data.corpus.estimated_size() + data.queries.estimated_size()) / 2**20
    print(f"{LARGEST_TASK}: {data.corpus.height:,} documents, {data.queries.height} queries, tables {size:.0f} MiB; "
          f"median of {RUNS}")
    print(f"  load_task (read + validate the task's files)                       {load:6.2f} s")
    print(f"  validate_inputs, task kept (its files + the expansion file checked) {kept:6.2f} s"
          f"   added beyond the run's own read: {kept - load:+.2f} s")
    print(f"  the evaluation itself (bm25-lucene + hyde/gpt4, data handed over)   {run:6.2f} s")
    print(f"  added time: {kept - load:+.2f} s for a kept task ({(kept - load) / run:+.1%} of its evaluation), "
          f"{kept:.2f} s for a task dropped to bound memory (read again when it runs: {kept / run:.1%})")


if __name__ == "__main__":
    main()
