"""NanoR2MED's BM25 against HAKARI-Bench's own code, run unchanged (../shared/tools/hakari-bench/README.md).

    HAKARI_SRC=DIR python benchmarks/hakari_parity.py [--tokenizers all] [--skip-exact-size]

HAKARI_SRC is HAKARI-Bench's source (``fetch github:hakari-bench/hakari-bench``, ``git archive`` into DIR; read at
217c872). For each data set — the demo sample, the test suite's fixture mirror (blank and 1-character documents,
repeated texts) and an exact-size synthetic NanoR2MED task (10,000 documents, texts seasoned with the shapes that
split tokenizers apart: Unicode letters, hyphens, numbers, upper case, possessives) — and each NanoR2MED task in it:

- HAKARI's side: its loader (``load_ir_dataset``, the hub layout through ``datasets``) and its computed BM25
  (``rank_bm25_candidates`` with ``BM25Config(tokenizer=..., top_k=1000)``, as ``run_hakari.py`` asks);
- our side: ``evaluate_task(task, "bm25-hakari[:tokenizer]")`` (what ``r2med evaluate --retriever bm25-hakari``
  runs) written with ``--trec`` (``write_outputs(trec=True)``), read back from the TREC file; once plain (depth
  1000) and once with every candidate subset and hybrid (the default NanoR2MED evaluation: the run ranks every
  document);
- compared: each query's top 100 (ids and order), and HAKARI's own ``compute_ir_metrics`` on both rankings.

Then, on the exact-size task, the time to tokenise, index and rank: HAKARI's ``rank_bm25_candidates`` against our
``hakari_search``, alternately, median of 3. Results go in benchmarks/README.md.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")

METRICS = ["ndcg@10", "hit@10", "recall@100", "map@10", "mrr@10", "ndcg@100"]
SHAPES = ["β-blockers, e.g. a 2-day course", "Patient's HbA1c was 7.2%", "İstanbul KELVIN Kelvin-scale", "naïve T-cells",
          "ACE-inhibitors (ramipril)", "COVID-19 mRNA-1273", "x-ray: 3×10⁹/L", "the of and a is", "Σίσυφος ΣΊΣΥΦΟΣ",
          "yyyy happy ayyy", "caresses ponies ties", "generalizations oscillators"]


def hakari_modules(src: str):
    sys.path.insert(0, src)
    from hakari_bench import bm25, datasets, evaluation, metrics

    return bm25, datasets, evaluation, metrics


def trec_rankings(path: Path) -> dict[str, list[str]]:
    rows: dict[str, list[tuple[int, str]]] = {}
    for line in path.read_text().splitlines():
        query_id, _, doc_id, rank, _score, _tag = line.split()
        rows.setdefault(query_id, []).append((int(rank), doc_id))
    return {query_id: [doc_id for _, doc_id in sorted(items)] for query_id, items in rows.items()}


def exact_size_mirror(root: Path) -> Path:
    """common.nano_mirror (10,000 documents, 100 queries), with real-text shapes sprinkled into a third of the texts."""
    import polars as pl
    from common import NANO_TASK, nano_mirror

    from r2med_plugin.catalog import get_task_spec

    nano_mirror(root)
    split = get_task_spec(NANO_TASK).configs["corpus"]["split"]
    rng = random.Random(11)
    for config in ("corpus", "queries"):
        path = root / get_task_spec(NANO_TASK).hub_repo / config / f"{split}.parquet"
        frame = pl.read_parquet(path)
        texts = [text + " " + rng.choice(SHAPES) if rng.random() < 0.33 else text for text in frame["text"].to_list()]
        frame.with_columns(text=pl.Series(texts)).write_parquet(path)
    return root


def nano_tasks_in(mirror: Path) -> list[str]:
    from r2med_plugin.catalog import list_tasks

    found = []
    for spec in list_tasks("nano"):
        if (mirror / spec.hub_repo / "corpus" / f"{spec.configs['corpus']['split']}.parquet").is_file():
            found.append(spec.name)
    return found


def hakari_loaded(hakari, mirror: Path, task: str):
    """The task as HAKARI-Bench's own loader reads it from the hub-layout folder."""
    _, datasets, evaluation, _ = hakari
    from r2med_plugin.catalog import get_task_spec

    spec = get_task_spec(task)
    split = spec.configs["corpus"]["split"]
    eval_task = datasets.EvalTask(dataset=datasets.infer_dataset_spec(str(mirror / spec.hub_repo)), split_name=split,
                                  task_name=split)
    return evaluation.load_ir_dataset(eval_task)


def compare_task(hakari, mirror: Path, task: str, tokenizer: str, out: Path, full_depth: bool) -> tuple[int, int, float]:
    """(queries whose top 100 is equal, queries, largest metric difference) for one task and tokenizer."""
    bm25, _, _, metrics = hakari
    from r2med_plugin.evaluation.runner import evaluate_task
    from r2med_plugin.evaluation.writers import write_outputs
    from r2med_plugin.identifiers import CANDIDATE_SUBSETS

    data = hakari_loaded(hakari, mirror, task)
    theirs = bm25.rank_bm25_candidates(corpus=data.corpus, queries=data.queries,
                                       config=bm25.BM25Config(tokenizer=tokenizer, top_k=1000))
    name = "bm25-hakari" if tokenizer == "english_porter_stop" else f"bm25-hakari:{tokenizer}"
    options = {"candidates": CANDIDATE_SUBSETS, "hybrid": True} if full_depth else {}
    result = evaluate_task(task, name, data_dir=mirror, show_progress=False, accept_drift=True, **options)
    trec = write_outputs(result, out, trec=True)["trec"]
    ours = trec_rankings(trec)
    equal = sum(ours.get(query_id, [])[:100] == ranking[:100] for query_id, ranking in theirs.items())

    def scored(rankings):
        return metrics.compute_ir_metrics(rankings=rankings, qrels=data.qrels, evaluator_name="x", score_name="y",
                                          metric_names=METRICS)

    ours_for_every_query = {query_id: ours.get(query_id, []) for query_id in data.queries}
    a, b = scored({q: r[:100] for q, r in theirs.items()}), scored({q: r[:100] for q, r in ours_for_every_query.items()})
    return equal, len(theirs), max(abs(a[key] - b[key]) for key in a)


def speed(hakari, mirror: Path, repeats: int = 3) -> None:
    bm25 = hakari[0]
    from common import NANO_TASK

    from r2med_plugin.retrieval.hakari import hakari_search

    data = hakari_loaded(hakari, mirror, NANO_TASK)
    timings: dict[str, list[float]] = {"hakari": [], "ours": []}
    for _ in range(repeats):
        started = time.perf_counter()
        bm25.rank_bm25_candidates(corpus=data.corpus, queries=data.queries,
                                  config=bm25.BM25Config(tokenizer="english_porter_stop", top_k=1000))
        timings["hakari"].append(time.perf_counter() - started)
        started = time.perf_counter()
        hakari_search(list(data.corpus), list(data.corpus.values()), list(data.queries), list(data.queries.values()),
                      top_k=1000, show_progress=False)
        timings["ours"].append(time.perf_counter() - started)
    theirs, ours = statistics.median(timings["hakari"]), statistics.median(timings["ours"])
    print(f"\nspeed, {len(data.corpus):,} documents x {len(data.queries)} queries, english_porter_stop, top 1000 "
          f"(median of {repeats}): HAKARI-Bench {theirs:.2f} s, bm25-hakari {ours:.2f} s, ratio {theirs / ours:.1f}x")


def data_sets(work: Path, exact_size: bool) -> dict[str, Path]:
    from tests.fixture_mirror import build_fixture_mirror

    sets = {"demo sample": REPO / "r2med_plugin" / "demo_sample", "fixture mirror": build_fixture_mirror(work / "fixture")}
    if exact_size:
        sets["exact-size synthetic"] = exact_size_mirror(work / "exact")
    return sets


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hakari-src", default=os.environ.get("HAKARI_SRC"), help="HAKARI-Bench's source folder")
    parser.add_argument("--tokenizers", default="english_porter_stop",
                        help="comma-separated, or 'all' (english_porter_stop, regex, english_regex, english_porter, stemmer, whitespace)")
    parser.add_argument("--skip-exact-size", action="store_true", help="only the demo sample and the fixture mirror")
    parser.add_argument("--only", help=argparse.SUPPRESS)  # one data set, in a process of its own (below)
    parser.add_argument("--work", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if not args.hakari_src:
        parser.error("--hakari-src (or HAKARI_SRC) is required: HAKARI-Bench's source, see ../shared/tools/hakari-bench")
    if args.only is None:
        # Each data set in its own process with its own datasets cache: `datasets` keys its cache by the folder's
        # name (NanoR2MED for all three), and would check one set's split sizes against another's.
        import subprocess

        work = Path(tempfile.mkdtemp(prefix="hakari-parity-"))
        print(f"{'data':<22}{'task':<26}{'tokenizer':<21}{'depth':<7}{'top-100 equal':>15}{'max metric diff':>17}", flush=True)
        for label in data_sets(work, not args.skip_exact_size):
            env = dict(os.environ, HF_DATASETS_CACHE=str(work / "hf" / label.replace(" ", "-")))
            subprocess.run([sys.executable, __file__, *sys.argv[1:], "--only", label, "--work", str(work)], env=env, check=True)
        return
    hakari = hakari_modules(args.hakari_src)
    from r2med_plugin.retrieval.hakari import TOKENIZERS

    tokenizers = list(TOKENIZERS) if args.tokenizers == "all" else args.tokenizers.split(",")
    work = Path(args.work)
    os.environ["R2MED_CACHE_DIR"] = str(work / "cache")
    mirror = data_sets(work, args.only == "exact-size synthetic")[args.only]
    for task in nano_tasks_in(mirror):
        for tokenizer in tokenizers:
            for full in (False, True):
                equal, total, diff = compare_task(hakari, mirror, task, tokenizer, work / "out", full)
                print(f"{args.only:<22}{task:<26}{tokenizer:<21}{'all' if full else '1000':<7}{equal:>9} / {total:<4}{diff:>17.2g}",
                      flush=True)
    if args.only == "exact-size synthetic":
        speed(hakari, mirror)


if __name__ == "__main__":
    main()
