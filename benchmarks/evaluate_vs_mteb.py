"""`r2med evaluate` beside `mteb.evaluate` with the same MiniLM on the same NanoR2MED-shaped task, in one run.

    python benchmarks/evaluate_vs_mteb.py [--docs 2000] [--queries 50] [--rounds 2]

A new user timed 13 min through `r2med evaluate` and 8 min 40 s through `mteb run` for all-MiniLM-L6-v2 on
NanoR2MEDIIYiClinical (10,000 documents), in two separate runs on a loaded machine. Here both paths run on one
synthetic NanoR2MED task (``common.nano_mirror``), the cache switched off, in alternating rounds (r2med, mteb,
r2med, mteb, ...) so that a change in the machine's load falls on both. For each path: wall time, the texts handed
to sentence-transformers and the seconds spent inside its ``encode``, so that what is not encoding shows apart.
The model is the packaged MiniLM: ours loads it by its alias, mteb by its hub name from a Hugging Face cache that
``cache_packaged_model`` lays out (as README's offline `mteb run` path does). The nDCG@10 of both is printed too.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import NANO_TASK, nano_mirror  # noqa: E402


class EncodeMeter:
    """Counts the texts and seconds inside SentenceTransformer.encode (every path's encoding goes through it)."""

    def __init__(self) -> None:
        import sentence_transformers

        self.texts, self.seconds = 0, 0.0
        self._original = sentence_transformers.SentenceTransformer.encode
        meter = self

        def encode(model, inputs=None, *args, **kwargs):
            start = time.perf_counter()
            try:
                return meter._original(model, inputs, *args, **kwargs)
            finally:
                meter.seconds += time.perf_counter() - start
                meter.texts += len(inputs) if isinstance(inputs, list) else 1

        sentence_transformers.SentenceTransformer.encode = encode

    def reset(self) -> None:
        self.texts, self.seconds = 0, 0.0


def run_r2med(output: Path) -> float:
    from r2med_plugin.cli import main

    if main(["evaluate", "--task", NANO_TASK, "--retriever", "minilm-packaged", "--output", str(output), "--quiet"]):
        raise SystemExit("r2med evaluate failed")
    import json

    (result,) = output.glob(f"results/*/*/{NANO_TASK}.json")
    return json.loads(result.read_text())["scores"]["test"][0]["ndcg_at_10"]


def run_mteb(output: Path) -> float:
    import mteb

    model = mteb.get_model("sentence-transformers/all-MiniLM-L6-v2")
    results = mteb.evaluate(model, tasks=mteb.get_tasks(tasks=[NANO_TASK]), cache=None, show_progress_bar=False)
    return results.task_results[0].scores["test"][0]["ndcg_at_10"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=int, default=2000)
    parser.add_argument("--queries", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="r2med-vs-mteb-"))
    os.environ.update(R2MED_DATA_DIR=str(nano_mirror(work / "mirror", n_docs=args.docs, n_queries=args.queries)),
                      R2MED_ACCEPT_DRIFT="1", R2MED_NO_CACHE="1", HF_HOME=str(work / "hf"), HF_HUB_OFFLINE="1")
    from r2med_plugin.models.identity import cache_packaged_model

    cache_packaged_model("minilm-packaged", work / "hf")
    import r2med_plugin.integrations.mteb  # noqa: F401  (registers the tasks)

    meter = EncodeMeter()
    rows: dict[str, list[tuple[float, int, float, float]]] = {"r2med evaluate": [], "mteb.evaluate": []}
    for round_number in range(args.rounds):
        for label, run in (("r2med evaluate", run_r2med), ("mteb.evaluate", run_mteb)):
            meter.reset()
            start = time.perf_counter()
            ndcg = run(work / f"out-{round_number}-{label.split()[0]}")
            rows[label].append((time.perf_counter() - start, meter.texts, meter.seconds, ndcg))
    print(f"{NANO_TASK}-shaped task: {args.docs} documents, {args.queries} queries; all-MiniLM-L6-v2, cache off, "
          f"{args.rounds} alternating rounds")
    print(f"{'path':<16} {'wall s':>8} {'texts encoded':>14} {'in encode s':>12} {'other s':>8} {'ndcg@10':>9}")
    for label, measured in rows.items():
        for wall, texts, seconds, ndcg in measured:
            print(f"{label:<16} {wall:8.1f} {texts:14d} {seconds:12.1f} {wall - seconds:8.1f} {ndcg:9.5f}")
    best = {label: min(wall for wall, *_ in measured) for label, measured in rows.items()}
    print(f"r2med evaluate / mteb.evaluate (best of each): {best['r2med evaluate'] / best['mteb.evaluate']:.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
