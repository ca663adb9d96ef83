"""`r2med audit` at scale: 1 million training texts against the 8 R2MED tasks' 876 queries and their relevant
documents, streamed; time and peak memory, LSH recall against brute-force exact Jaccard on a sample.

    python benchmarks/audit_scale.py                 # 500,000 rows x (query, positive) = 1,000,000 texts
    python benchmarks/audit_scale.py --rows 50000    # a quicker look

The mirror holds the 8 R2MED tasks at their real query counts (synthetic texts, R2MED lengths; each task's
corpus is 2,000 documents, its relevant ones among them). The training set is JSON Lines (sentence-transformers
anchor/positive pairs of ~20 and ~100 words); one row in 500 is planted: an evaluation query or relevant
document copied exactly or with a share of its words changed (2% to 30%), as the query or as the positive,
and some rows are whole leaked pairs. The audit runs as `r2med audit` in a fresh process (its peak RSS is
that process's). The brute force computes, for a sample of training texts (every planted one and 1,000
others), exact Jaccard on word 3-gram sets against every evaluation text, with Python sets; the LSH recall
is the share of the pairs at or above the threshold that the audit reported.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import subprocess
import sys
import tempfile
import time
import unicodedata
from pathlib import Path

import numpy as np
import polars as pl

sys.path.insert(0, str(Path(__file__).resolve().parent))
from synthetic import synthetic_task, vocabulary  # noqa: E402

from r2med_plugin.catalog import list_tasks  # noqa: E402
from r2med_plugin.data.mirror import write_r2med_repo  # noqa: E402

THRESHOLD, NGRAM = 0.5, 3
PLANT_EVERY = 500
RATES = (0.0, 0.02, 0.05, 0.08, 0.1, 0.12, 0.15, 0.2, 0.3)

CHILD = r"""
import json, resource, sys, time
from r2med_plugin.cli import main
start = time.perf_counter()
code = main(sys.argv[1:])
seconds = time.perf_counter() - start
print(json.dumps({"code": code, "seconds": seconds, "peak_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}))
"""


def build_mirror(root: Path) -> list[tuple[str, str, str, str]]:
    """All 8 R2MED tasks at their real query counts; returns (task, kind, id, text) of every evaluation text."""
    evaluation = []
    for number, spec in enumerate(list_tasks("r2med")):
        corpus, queries, qrels = synthetic_task(n_docs=2_000, n_queries=spec.expected_counts["queries"], seed=100 + number)
        corpus = corpus.with_columns(pl.concat_str([pl.lit(f"{spec.slug}-"), pl.col("id")]).alias("id"))
        qrels = {q: {f"{spec.slug}-{d}": g for d, g in docs.items()} for q, docs in qrels.items()}
        pairs = [(q, d) for q, docs in qrels.items() for d in docs]
        write_r2med_repo(root / spec.hub_repo, corpus=corpus, queries=queries, pretty_name="synthetic audit benchmark",
                         qrels=pl.DataFrame({"q_id": [q for q, _ in pairs], "p_id": [d for _, d in pairs], "score": [1] * len(pairs)}))
        texts = dict(zip(corpus["id"].to_list(), corpus["text"].to_list(), strict=True))
        evaluation += [(spec.name, "query", q, text) for q, text in zip(queries["id"].to_list(), queries["text"].to_list(), strict=True)]
        evaluation += [(spec.name, "relevant_doc", d, texts[d]) for d in sorted({d for _, d in pairs})]
    return evaluation


def _edit(words: list[str], rate: float, rng: random.Random) -> list[str]:
    words = list(words)
    for _ in range(round(rate * len(words))):
        words[rng.randrange(len(words))] = f"edit{rng.randrange(10**7)}"
    return words


def write_training(path: Path, rows: int, evaluation: list[tuple[str, str, str]], seed: int = 34) -> dict[int, str]:
    """JSON Lines of ``rows`` anchor/positive pairs, written in chunks; returns row -> what was planted."""
    rng, generator = random.Random(seed), np.random.default_rng(seed)
    vocab = vocabulary(60_000, seed=seed)
    planted: dict[int, str] = {}
    with path.open("w", encoding="utf-8") as handle:
        for start in range(0, rows, 50_000):
            count = min(50_000, rows - start)
            anchors, positives = _random_texts(generator, vocab, count, 20), _random_texts(generator, vocab, count, 100)
            for offset in range(count):
                row = start + offset
                anchor, positive = anchors[offset], positives[offset]
                if row % PLANT_EVERY == PLANT_EVERY - 1:
                    anchor, positive, planted[row] = _plant(rng, evaluation, anchor, positive)
                handle.write(json.dumps({"anchor": anchor, "positive": positive}) + "\n")
    return planted


def _plant(rng: random.Random, evaluation, anchor: str, positive: str) -> tuple[str, str, str]:
    task, kind, _, text = evaluation[rng.randrange(len(evaluation))]
    rate = rng.choice(RATES)
    copy = " ".join(_edit(text.split(), rate, rng))
    if kind == "query":
        return copy, positive, f"{kind} rate {rate}"
    return anchor, copy, f"{kind} rate {rate}"


def _random_texts(generator: np.random.Generator, vocab: np.ndarray, count: int, mean: float) -> list[str]:
    lengths = np.maximum(3, generator.poisson(mean, size=count))
    ranks = np.minimum(generator.zipf(1.3, size=int(lengths.sum())) - 1, len(vocab) - 1)
    words, bounds = vocab[ranks], np.concatenate([[0], np.cumsum(lengths)])
    return [" ".join(words[bounds[i]:bounds[i + 1]]) for i in range(count)]


def _grams(text: str) -> frozenset:
    words = re.findall(r"\w+", " ".join(unicodedata.normalize("NFKC", text).lower().split()))
    return frozenset([tuple(words)] if len(words) < NGRAM else (tuple(words[i:i + NGRAM]) for i in range(len(words) - NGRAM + 1)))


def brute_force(path: Path, sample: set[int], evaluation) -> tuple[dict[tuple[int, str, int], float], int, float]:
    """(row, field, evaluation text) -> exact Jaccard >= THRESHOLD for the sampled rows; pairs compared; seconds."""
    grams = [_grams(text) for *_, text in evaluation]
    sizes = np.array([len(g) for g in grams])
    found, compared, start = {}, 0, time.perf_counter()
    with path.open(encoding="utf-8") as handle:
        for row, line in enumerate(handle):
            if row not in sample:
                continue
            record = json.loads(line)
            for field in ("anchor", "positive"):
                mine = _grams(record[field])
                for index, other in enumerate(grams):  # every pair is compared (no length filter: the brute force)
                    compared += 1
                    shared = len(mine & other)
                    similarity = shared / (len(mine) + sizes[index] - shared)
                    if similarity >= THRESHOLD:
                        found[(row, field, index)] = similarity
    return found, compared, time.perf_counter() - start


def audit_pairs(out: Path, evaluation, sample: set[int]) -> set[tuple[int, str, int]]:
    """(row, field, evaluation text) the audit reported, for the sampled rows (texts matched by task and kind)."""
    fields = {"query": "anchor", "positive": "positive"}
    hits = set()
    with (out / "hits.jsonl").open(encoding="utf-8") as handle:
        for line in handle:
            hit = json.loads(line)
            if hit["row"] in sample and hit["kind"] != "pair":
                hits.add((hit["row"], fields[hit["field"]], hit["task"], hit["kind"], hit["eval_id"]))
    return hits


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=500_000, help="training rows (2 texts each; default 500,000)")
    parser.add_argument("--sample", type=int, default=1_000, help="unplanted rows in the brute-force sample")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        started = time.perf_counter()
        evaluation = build_mirror(tmp / "mirror")
        planted = write_training(tmp / "train.jsonl", args.rows, evaluation)
        print(f"data: {len(evaluation)} evaluation texts, {args.rows:,} rows ({2 * args.rows:,} texts, "
              f"{(tmp / 'train.jsonl').stat().st_size / 2**20:.0f} MiB), {len(planted)} planted; built in {time.perf_counter() - started:.0f} s")
        env = os.environ | {"R2MED_DATA_DIR": str(tmp / "mirror"), "R2MED_ACCEPT_DRIFT": "1", "HF_HUB_OFFLINE": "1"}
        command = [sys.executable, "-c", CHILD, "audit", str(tmp / "train.jsonl"), "--task", "r2med", "--out", str(tmp / "out"),
                   "--threshold", str(THRESHOLD), "--ngram", str(NGRAM), "--quiet"]
        run = subprocess.run(command, capture_output=True, text=True, env=env, check=True)
        stats = json.loads(run.stdout.strip().splitlines()[-1])
        summary = json.loads((tmp / "out" / "audit.json").read_text())
        sample = set(random.Random(1).sample(range(args.rows), args.sample)) | set(planted)
        truth, compared, brute_seconds = brute_force(tmp / "train.jsonl", sample, evaluation)
        _report(args, stats, summary, truth, compared, brute_seconds, evaluation, tmp / "out", sample, planted)


def _report(args, stats, summary, truth, compared, brute_seconds, evaluation, out, sample, planted) -> None:
    ids = {index: (task, kind, ident) for index, (task, kind, ident, _) in enumerate(evaluation)}
    reported = audit_pairs(out, evaluation, sample)
    expected = {(row, field, *ids[index]) for row, field, index in truth if ids.get(index)}
    caught = expected & reported
    texts = 2 * args.rows
    per_pair = brute_seconds / compared
    bins = {}
    for (row, field, index), similarity in truth.items():
        key = f"{min(int(similarity * 10) / 10, 0.9):.1f}"
        total, hit = bins.get(key, (0, 0))
        bins[key] = (total + 1, hit + ((row, field, *ids[index]) in reported if ids.get(index) else 0))
    result = {
        "texts": texts, "audit_seconds": round(stats["seconds"], 1), "texts_per_second": round(texts / stats["seconds"]),
        "peak_rss_mib": round(stats["peak_kib"] / 1024), "hits": summary["hits"],
        "lsh": summary["lsh"], "brute_force_pairs": compared, "brute_force_seconds": round(brute_seconds, 1),
        "brute_force_all_pairs_estimate_hours": round(per_pair * texts * len(evaluation) / 3600, 1),
        "pairs_at_or_above_threshold": len(expected), "found_by_audit": len(caught),
        "lsh_recall": round(len(caught) / len(expected), 4) if expected else None,
        "false_hits_in_sample": len(reported - expected), "recall_by_jaccard": {k: f"{h}/{t}" for k, (t, h) in sorted(bins.items())},
        "planted_rows": len(planted), "planted_rows_in_sample": len(set(planted) & sample),
    }
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
