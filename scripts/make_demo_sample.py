"""Generate the SYNTHETIC demo sample shipped in r2med_plugin/demo_sample/ (deterministic).

It is laid out exactly like the NanoR2MED hub repo (hakari-bench/NanoR2MED: corpus, queries, qrels,
bm25, harrier_oss_v1_270m and reranking_hybrid configs, one split per task) so that the demo runs
through the real loading and MTEB code paths, but every text is made up here from a small medical
vocabulary: it is NOT R2MED data and its scores say nothing about R2MED. Its README says so, and
its front matter carries `synthetic_sample: true`, which the loader reports as the revision
"synthetic-sample".

Candidate lists: `bm25` from bm25-robertson over the sample, `harrier_oss_v1_270m` from a hashing
encoder (no model is downloaded), `reranking_hybrid` built from both with NanoR2MED's construction.

    python scripts/make_demo_sample.py [--out r2med_plugin/demo_sample]
"""

from __future__ import annotations

import argparse
import random
import shutil
import sys
from pathlib import Path

import polars as pl

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))

from r2med_plugin.catalog import list_tasks  # noqa: E402
from r2med_plugin.data.mirror import candidate_frame, write_nano_repo  # noqa: E402
from r2med_plugin.models.hashing import HashingEncoder  # noqa: E402
from r2med_plugin.retrieval.bm25 import bm25_search  # noqa: E402
from r2med_plugin.retrieval.candidates import build_reranking_hybrid  # noqa: E402
from r2med_plugin.retrieval.dense import search_vectors  # noqa: E402

DOCS_PER_TASK = 150
QUERIES_PER_TASK = 6
LIST_DEPTH = 100
PRETTY_NAME = "SYNTHETIC demo sample made by r2med-plugin (NOT R2MED data)"

CONDITIONS = {
    "type 2 diabetes": ["insulin resistance", "hyperglycaemia", "metformin", "HbA1c", "polyuria"],
    "heart failure": ["reduced ejection fraction", "dyspnoea", "oedema", "diuretics", "BNP"],
    "pneumonia": ["productive cough", "fever", "consolidation", "antibiotics", "hypoxia"],
    "hypothyroidism": ["fatigue", "weight gain", "levothyroxine", "TSH", "cold intolerance"],
    "iron deficiency anaemia": ["ferritin", "microcytosis", "pallor", "oral iron", "menorrhagia"],
    "migraine": ["aura", "photophobia", "triptans", "unilateral headache", "nausea"],
    "chronic kidney disease": ["creatinine", "proteinuria", "eGFR", "dialysis", "hyperkalaemia"],
    "rheumatoid arthritis": ["synovitis", "morning stiffness", "methotrexate", "anti-CCP", "joint erosion"],
    "asthma": ["wheeze", "bronchodilator", "inhaled corticosteroids", "peak flow", "nocturnal cough"],
    "sepsis": ["lactate", "hypotension", "blood cultures", "broad-spectrum antibiotics", "tachycardia"],
    "atrial fibrillation": ["irregular pulse", "anticoagulation", "palpitations", "rate control", "stroke risk"],
    "tuberculosis": ["night sweats", "haemoptysis", "acid-fast bacilli", "isoniazid", "weight loss"],
}
FILLER = (
    "the patient was reviewed in clinic and the history was taken with care before the examination "
    "laboratory results were discussed with the team and a plan was agreed for follow up in weeks"
).split()


def _sentence(rng: random.Random, words: list[str], length: int) -> str:
    return " ".join(rng.choice(words) for _ in range(length))


def _task_tables(split: str, seed: str) -> dict[str, pl.DataFrame]:
    rng = random.Random(seed)
    conditions = list(CONDITIONS)
    doc_ids = [f"{split.lower()}-doc-{i:04d}" for i in range(DOCS_PER_TASK)]
    texts = {}
    for doc_id in doc_ids:  # background passages mention random findings of random conditions
        condition = rng.choice(conditions)
        findings = rng.sample(CONDITIONS[condition], 2)
        texts[doc_id] = f"A note on {' and '.join(findings)}: {_sentence(rng, FILLER, 18)}."
    query_ids = [f"{split.lower()}-q-{i:03d}" for i in range(QUERIES_PER_TASK)]
    queries, qrels = {}, []
    free = list(doc_ids)
    rng.shuffle(free)
    for index, query_id in enumerate(query_ids):
        condition = conditions[(index * 5 + len(split)) % len(conditions)]
        findings = CONDITIONS[condition]
        shown = rng.sample(findings, 3)
        queries[query_id] = (
            f"A patient presents with {shown[0]} and {shown[1]}; tests show {shown[2]}. "
            f"What is the most likely diagnosis and how should it be managed? {_sentence(rng, FILLER, 10)}"
        )
        for _ in range(rng.randint(2, 4)):  # multi-positive: passages that explain the condition
            doc_id = free.pop()
            texts[doc_id] = (
                f"{condition.capitalize()} typically presents with {rng.choice(findings)} and {rng.choice(findings)}; "
                f"management includes {rng.choice(findings)}. {_sentence(rng, FILLER, 12)}."
            )
            qrels.append((query_id, doc_id))
    corpus = pl.DataFrame({"id": doc_ids, "text": [texts[d] for d in doc_ids]})
    query_frame = pl.DataFrame({"id": query_ids, "text": [queries[q] for q in query_ids]})
    qrels_dict: dict[str, dict[str, int]] = {}
    for query_id, doc_id in qrels:
        qrels_dict.setdefault(query_id, {})[doc_id] = 1
    bm25 = {q: list(docs) for q, docs in bm25_search(corpus, query_frame, variant="robertson", top_k=LIST_DEPTH, show_progress=False).items()}
    encoder = HashingEncoder(dim=32, name="demo-hashing-encoder")
    dense_run = search_vectors(
        query_ids, _unit(encoder.encode(query_frame["text"].to_list(), kind="query")),
        doc_ids, _unit(encoder.encode(corpus["text"].to_list(), kind="document")), LIST_DEPTH,
    )
    dense = {q: list(docs) for q, docs in dense_run.items()}
    hybrid = build_reranking_hybrid(bm25, dense, qrels_dict, set(doc_ids), split=split)
    return {
        "corpus": corpus.rename({"id": "_id"}),
        "queries": query_frame.rename({"id": "_id"}),
        "qrels": pl.DataFrame({"query-id": [q for q, _ in qrels], "corpus-id": [d for _, d in qrels]}),
        "bm25": candidate_frame(bm25),
        "harrier_oss_v1_270m": candidate_frame(dense),
        "reranking_hybrid": candidate_frame(hybrid),
    }


def _unit(vectors):
    import numpy as np

    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors / np.where(norms == 0, 1.0, norms)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=REPO_ROOT / "r2med_plugin" / "demo_sample")
    args = parser.parse_args()
    specs = list_tasks("nano")
    repo = args.out / specs[0].hub_repo
    if repo.exists():
        shutil.rmtree(repo)
    splits = {spec.configs["corpus"]["split"]: _task_tables(spec.configs["corpus"]["split"], f"demo-{spec.name}") for spec in specs}
    write_nano_repo(repo, splits, pretty_name=PRETTY_NAME)
    readme = repo / "README.md"
    text = readme.read_text(encoding="utf-8").replace("---\nconfigs:", "---\nsynthetic_sample: true\nconfigs:", 1)
    readme.write_text(
        text + "\nEvery text in this folder was generated by `scripts/make_demo_sample.py` from a small medical "
        "vocabulary. It only mimics the NanoR2MED hub layout so that the demo exercises the real code paths. "
        "It is not R2MED data; its scores mean nothing about R2MED.\n",
        encoding="utf-8",
    )
    print(f"wrote the synthetic demo sample to {repo}")


if __name__ == "__main__":
    main()
