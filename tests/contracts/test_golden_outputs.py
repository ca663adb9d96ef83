"""Golden result files of every evaluation mode, pinned before the stage redesign.

Every mode runs on the fixture mirror: plain, hybrid, candidate subsets, candidates-only, a released
and a local expansion, a query prompt, and reranking from each first-stage kind (BM25 name, encoder,
TREC file, topk_docs file, a folder of run files, a run dict). Each writes the MTEB JSON, the official
JSON and the TREC runs. The files must stay identical, apart from evaluation times and dates (and the
temporary folder's path), to the ones pinned in tests/fixtures/golden_outputs.json.

The encoder and the reranker are deterministic stand-ins that hash words with hashlib (no library whose
hash could change between versions). To pin new files after an intended change of scores, run this
test with R2MED_PIN_GOLDEN=1 and say why in CHANGELOG.md ("Scores changed").
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from pathlib import Path

import numpy as np

from r2med_plugin.data.expansions import list_expansions
from r2med_plugin.data.runs import write_topk_docs
from r2med_plugin.evaluation.runner import evaluate_task
from r2med_plugin.evaluation.writers import write_outputs

GOLDEN = Path(__file__).parents[1] / "fixtures" / "golden_outputs.json"
NANO, R2MED = "NanoR2MEDBiology", "R2MEDBiology"


def _bucket(word: str) -> int:
    return int(hashlib.md5(word.encode()).hexdigest()[:8], 16) % 64


class WordHashEncoder:
    """Sets of words hashed with md5 into 64 buckets: each text gets exactly 16 buckets of 1.0 (its words'
    buckets in order of first use, padded with buckets drawn from the text's md5), so a unit vector holds only
    0.25s and every cosine is a multiple of 1/16, computed exactly in float32 in any summation order. Rankings
    then do not depend on the BLAS kernel of the machine (ties are exact and go to the document id), as counts
    normalised by irrational norms did: those were pinned on one processor and differed in the 7th digit on
    another. Identical on every machine and library version."""

    name = "golden-encoder"
    revision = "md5-64-16hot"

    def encode(self, texts, *, kind):
        matrix = np.zeros((len(texts), 64), dtype=np.float32)
        for row, text in enumerate(texts):
            buckets = list(dict.fromkeys(_bucket(word) for word in re.findall(r"[a-z0-9]+", text.lower())))[:16]
            salt = 0
            while len(buckets) < 16:
                extra = _bucket(f"{text}\0{salt}")
                salt += 1
                if extra not in buckets:
                    buckets.append(extra)
            matrix[row, buckets] = 1.0
        return matrix


class WordOverlapReranker:
    """Scores a (query, document) pair by shared words, with a hashed tie-break: deterministic."""

    name = "golden-reranker"
    revision = "overlap-1"

    def predict(self, pairs):
        scores = []
        for query, document in pairs:
            shared = set(re.findall(r"[a-z0-9]+", query.lower())) & set(re.findall(r"[a-z0-9]+", document.lower()))
            scores.append(len(shared) + int(hashlib.md5(document.encode()).hexdigest()[:4], 16) / 65536.0)
        return np.asarray(scores, dtype=np.float64)


def _local_expansion(root: Path) -> str:
    """A local expansion folder as `r2med generate` writes it (hyde by "golden-llm")."""
    from r2med_plugin.data.loader import load_task

    data = load_task(R2MED)
    folder = root / "exp" / data.spec.hub_name / "hyde" / "golden-llm"
    folder.mkdir(parents=True)
    rows = [{"id": q, "text": t, "hy_doc": f"A passage about {t.split()[-1]} and its mechanism."}
            for q, t in zip(data.queries["id"].to_list(), data.queries["text"].to_list(), strict=True)]
    (folder / "query_with_hydoc.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    return f"local:{root / 'exp' / 'hyde' / 'golden-llm'}"


def _modes(root: Path) -> dict[str, dict]:
    encoder, reranker = WordHashEncoder(), WordOverlapReranker()
    released = list_expansions(R2MED)[0]
    bm25_run = evaluate_task(R2MED, "bm25-lucene", show_progress=False).run
    runs = root / "first-stage"
    runs.mkdir()
    trec = runs / "bm25.trec"
    trec.write_text("".join(f"{q} Q0 {d} {rank} {score:.6f} bm25\n" for q, ranked in bm25_run.items()
                            for rank, (d, score) in enumerate(list(ranked.items())[:100], start=1)))
    topk = write_topk_docs(runs / "topk" / "golden-retriever" / f"{R2MED}.jsonl", bm25_run, depth=100)
    rerank = {"rerank": reranker, "rerank_depth": 10}
    return {
        "bm25-nano": {"task": NANO, "retriever": "bm25-lucene"},
        "bm25-r2med": {"task": R2MED, "retriever": "bm25-lucene"},
        "robertson-nano-hybrid-candidates": {"task": NANO, "retriever": "bm25-robertson", "hybrid": True,
                                             "candidates": ["bm25", "dense", "hybrid"]},
        "bm25-candidates-only": {"task": NANO, "retriever": "bm25-lucene", "candidates": ["hybrid"], "candidates_only": True},
        "encoder-r2med": {"task": R2MED, "retriever": encoder},
        "encoder-nano-hybrid-candidates": {"task": NANO, "retriever": encoder, "hybrid": True,
                                           "candidates": ["bm25", "dense", "hybrid"], "top_k": 100},
        "encoder-candidates-only": {"task": NANO, "retriever": encoder, "candidates": ["bm25", "hybrid"], "candidates_only": True},
        "encoder-prompt": {"task": R2MED, "retriever": encoder, "query_prompt": "Represent the question: "},
        "bm25-released-expansion": {"task": R2MED, "retriever": "bm25-lucene", "expansion": released, "hybrid": True},
        "encoder-released-expansion": {"task": R2MED, "retriever": encoder, "expansion": released},
        "bm25-local-expansion": {"task": R2MED, "retriever": "bm25-lucene", "expansion": _local_expansion(root)},
        "encoder-local-expansion": {"task": R2MED, "retriever": encoder, "expansion": _local_expansion_twin(root)},
        "rerank-bm25": {"task": R2MED, "first_stage": "bm25-lucene", **rerank},
        "rerank-encoder": {"task": R2MED, "first_stage": encoder, **rerank},
        "rerank-trec-file": {"task": R2MED, "first_stage": str(trec), **rerank},
        "rerank-topk-file": {"task": R2MED, "first_stage": str(topk), **rerank},
        "rerank-folder": {"task": R2MED, "first_stage": str(topk.parent), "rerank": reranker, "rerank_depth": 100},
        "rerank-run-dict": {"task": R2MED, "first_stage": {q: dict(list(r.items())[:20]) for q, r in bm25_run.items()},
                            **rerank},
    }


def _local_expansion_twin(root: Path) -> str:
    return f"local:{root / 'exp' / 'hyde' / 'golden-llm'}"


def _normalised(text: str, root: Path) -> str:
    """Evaluation times, dates and the temporary folder's path taken out; everything else as written."""
    text = text.replace(str(root), "<tmp>")
    folder_id = hashlib.sha256(str((root / "exp").resolve()).encode()).hexdigest()[:8]
    text = text.replace(folder_id, "<folder-id>")
    text = re.sub(r'"evaluation_time": "[0-9.]+ minutes"', '"evaluation_time": "<t> minutes"', text)
    text = re.sub(r'"evaluation_time": [0-9.e+-]+', '"evaluation_time": 0', text)
    return re.sub(r'"date": [0-9.e+-]+', '"date": 0', text)


def _trec_normalised(text: str) -> str:
    """A TREC run with scores at 5 decimals and each query's lines re-sorted by (that score, doc id): what an
    expanded query's cosines (normalised by an irrational norm) leave of float noise between processors."""
    by_query: dict[str, list[tuple[float, str, str]]] = {}
    for line in text.splitlines():
        query_id, _, doc_id, _, score, tag = line.split()
        by_query.setdefault(query_id, []).append((round(float(score), 5), doc_id, tag))
    lines = []
    for query_id, rows in by_query.items():
        for rank, (score, doc_id, tag) in enumerate(sorted(rows, key=lambda row: (-row[0], row[1]), reverse=False), start=1):
            lines.append(f"{query_id} Q0 {doc_id} {rank} {score:.5f} {tag}")
    return "\n".join(lines)


def _fingerprints(text: str) -> str:
    """The fixture files' fingerprints named, not spelled: parquet bytes differ between polars releases."""
    from r2med_plugin.data.loader import load_task

    for task in (NANO, R2MED):
        fingerprint = load_task(task).files_fingerprint
        if fingerprint:
            text = text.replace(fingerprint, f"<{task}-files>")
    return text


def _outputs(root: Path) -> dict[str, str]:
    written: dict[str, str] = {}
    for mode, options in _modes(root).items():
        options = dict(options)
        task = options.pop("task")
        result = evaluate_task(task, options.pop("retriever", None), show_progress=False, **options)
        out = root / "out" / mode
        for kind, path in write_outputs(result, out, trec=True).items():
            if kind in {"per_query", "hakari"}:  # binary sidecars added after the pin: tested in
                continue                         # test_per_query, test_hakari_record and test_venues
            text = _fingerprints(_normalised(path.read_text(encoding="utf-8"), root))
            if path.suffix == ".trec":
                text = _trec_normalised(text)
            key = f"{mode}/{_normalised(path.relative_to(out).as_posix(), root)}"
            written[key] = text if path.suffix == ".json" else "sha256:" + hashlib.sha256(text.encode()).hexdigest()
    return written


def test_every_mode_writes_the_pinned_files(mirror_env: Path, tmp_path: Path):
    written = _outputs(tmp_path)
    if os.environ.get("R2MED_PIN_GOLDEN") == "1":
        GOLDEN.write_text(json.dumps(written, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    pinned = json.loads(GOLDEN.read_text(encoding="utf-8"))
    assert sorted(written) == sorted(pinned)
    for key in sorted(pinned):
        assert written[key] == pinned[key], key
    kinds = {key.rsplit("/", 1)[-1].split(".", 1)[-1] for key in pinned}
    assert {"json", "trec", "first_stage.trec", "metadata.json"} <= kinds
    assert len({key.split("/", 1)[0] for key in pinned}) == 18
