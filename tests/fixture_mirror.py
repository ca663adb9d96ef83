"""Tiny but complete mirrors of the R2MED and NanoR2MED hub repos, in the exact hub layouts.

Deterministic: the same files every time. Each task gets multi-positive queries; each R2MED task has
one query without positives (the loader reports and drops it) and GAR files for one LLM of each
method; each NanoR2MED task has bm25/harrier lists and a reranking_hybrid list with a safeguard row.
"""

from __future__ import annotations

import random
from pathlib import Path

import polars as pl

from r2med_plugin.catalog import list_tasks
from r2med_plugin.data.mirror import candidate_frame, write_nano_repo, write_r2med_repo
from r2med_plugin.retrieval.candidates import build_reranking_hybrid

TOPICS = [
    ["insulin", "glucose", "pancreas", "diabetes"],
    ["tumor", "chemotherapy", "metastasis", "oncology"],
    ["neuron", "synapse", "dopamine", "cortex"],
    ["antibiotic", "bacteria", "resistance", "infection"],
    ["genome", "sequencing", "alignment", "variant"],
    ["cardiac", "arrhythmia", "ventricle", "ecg"],
    ["kidney", "nephron", "dialysis", "creatinine"],
    ["vaccine", "antibody", "immune", "antigen"],
]
FILLER = (
    "patient history presented with symptoms clinical findings treatment outcome study protocol "
    "laboratory results imaging review cohort analysis therapy dose response follow up"
).split()
R2MED_DOCS = 24
R2MED_QUERIES = 6  # the last one has no positives
NANO_DOCS = 200
NANO_LIST_POOL = 150  # candidate lists draw from the first 150 documents; the rest are never candidates
NANO_QUERIES = 5
SAFEGUARD_QUERY = 1  # in every Nano task, this query's positives are kept out of the hybrid top 100


def _sentence(rng: random.Random, words: list[str], length: int) -> str:
    return " ".join(rng.choice(words) for _ in range(length))


def _topic_doc(rng: random.Random, topic: list[str]) -> str:
    return f"{' '.join(topic)} {_sentence(rng, topic + FILLER, 14)}."


# Ids shaped as in the real files (R2MED/PMC-Treatment: queries q_PMC7884024, documents PMC6931112_1).
REAL_ID_SHAPES = {
    "pmc-treatment": (lambda index: f"PMC{6931112 + 7919 * index}_{1 + index % 3}", lambda index: f"q_PMC{7884024 + 104729 * index}"),
}
# Rows that repeat an earlier row's id with the same text (the real PMC-Treatment has 145, one id three times):
# (row index of the original, where the copy goes). The copies land mid-file and at the end, as in a real dump.
REPEATED_ROWS = {"pmc-treatment": [(2, 9), (7, 15), (7, 26)]}
# Near-empty documents (the real Biology has a 1-character one) and a text repeated under another id (7,925
# rows of the real Biology repeat an earlier row's text): appended to the corpus as (id suffix, text).
EXTRA_DOCUMENTS = {"biology": [("0024", "  "), ("0025", "?"), ("0026", None)]}
REPEATED_TEXT_OF = {"biology": 3}  # biology-doc-0026 holds biology-doc-0003's text


def fixture_document_count(slug: str) -> int:
    """Unique document ids of an R2MED fixture task (repeated rows folded; extra documents counted)."""
    return R2MED_DOCS + len(EXTRA_DOCUMENTS.get(slug, []))


def fixture_query_id(slug: str, index: int) -> str:
    return REAL_ID_SHAPES[slug][1](index) if slug in REAL_ID_SHAPES else f"{slug}-q-{index:03d}"


def _content(slug: str, n_docs: int, n_queries: int, with_unjudged: bool) -> dict:
    """Documents, queries and positives for one task: query i is about TOPICS[i]; its positives too."""
    rng = random.Random(f"fixture-{slug}-{n_docs}")
    doc_id, query_id = REAL_ID_SHAPES.get(slug, (lambda index: f"{slug}-doc-{index:04d}", lambda index: f"{slug}-q-{index:03d}"))
    doc_ids = [doc_id(index) for index in range(n_docs)]
    query_ids = [query_id(index) for index in range(n_queries)]
    positives: dict[str, list[str]] = {}
    texts = {doc_id: _sentence(rng, FILLER, 16) + "." for doc_id in doc_ids}
    for distractor in doc_ids[n_docs * 3 // 4 :]:  # share topic words with a query; positives below overwrite
        topic = TOPICS[rng.randrange(len(TOPICS))]
        texts[distractor] = f"{' '.join(rng.sample(topic, 2))} {_sentence(rng, FILLER, 14)}."
    judged = query_ids[:-1] if with_unjudged else query_ids
    for index, query_id in enumerate(judged):
        count = 1 + index % 3  # 1, 2, 3, 1, ... positives
        chosen = [doc_ids[(index * 5 + 3 * offset + 2) % n_docs] for offset in range(count)]
        positives[query_id] = chosen
        for doc_id in chosen:
            texts[doc_id] = _topic_doc(rng, TOPICS[index % len(TOPICS)])
    queries = {
        query_id: f"Question {index}: how do {' and '.join(TOPICS[index % len(TOPICS)][:3])} relate "
        f"in this {slug} case? {_sentence(rng, FILLER, 8)}"
        for index, query_id in enumerate(query_ids)
    }
    return {"doc_ids": doc_ids, "texts": texts, "queries": queries, "positives": positives}


def _texts_frame(ids: list[str], texts: dict[str, str], id_column: str) -> pl.DataFrame:
    return pl.DataFrame({id_column: ids, "text": [texts[i] for i in ids]})


def _r2med_repo(root: Path, spec) -> None:
    slug, hub_name = spec.slug, spec.hub_name
    content = _content(slug, R2MED_DOCS, R2MED_QUERIES, with_unjudged=True)
    pairs = [(q, d) for q, docs in content["positives"].items() for d in docs]
    qrels = pl.DataFrame({"q_id": [q for q, _ in pairs], "p_id": [d for _, d in pairs], "score": [1] * len(pairs)})
    queries = pl.DataFrame({"id": list(content["queries"]), "text": list(content["queries"].values())})
    expansions = {
        method: {split: _expansion_frame(content, split) for split in splits} for method, splits in spec.gar_configs.items()
    }
    write_r2med_repo(
        root,
        corpus=_with_real_shapes(slug, _texts_frame(content["doc_ids"], content["texts"], "id")),
        queries=queries,
        qrels=qrels,
        expansions=expansions,
        pretty_name=f"R2MED {hub_name} (test fixture)",
    )


def _with_real_shapes(slug: str, corpus: pl.DataFrame) -> pl.DataFrame:
    """The corpus with the shapes the real files have: repeated rows (same id, same text), blank and
    1-character documents, and a text repeated under another id."""
    rows = corpus.rows()
    for original, position in REPEATED_ROWS.get(slug, []):
        rows.insert(position, rows[original])
    for suffix, text in EXTRA_DOCUMENTS.get(slug, []):
        rows.append((f"{slug}-doc-{suffix}", text if text is not None else rows[REPEATED_TEXT_OF[slug]][1]))
    return pl.DataFrame(rows, schema=corpus.schema, orient="row")


def hy_doc_for(split: str, query_index: int) -> str:
    """A fixture LLM output in the format of that LLM: the answer names the query's topic; any
    reasoning part talks about another topic, so using it instead of the answer hurts retrieval."""
    answer = f"The answer involves {' and '.join(TOPICS[query_index % len(TOPICS)])}."
    noise = f"Let me think about {' '.join(TOPICS[(query_index + 3) % len(TOPICS)])} first."
    if split.startswith(("r1_", "qwq", "qwen3")):
        return f"<think>{noise}</think>{answer}"
    if split.startswith("huatuo"):
        return f"## Thinking\n{noise}\n\n## Final Response\n{answer}"
    if split.endswith("_ins"):  # Search-R1
        return f"<think>{noise}</think><search>{noise}</search><information>{noise}</information><answer>{answer}</answer>"
    return f"{answer} {noise}" if split == "gpt4" else answer


def _expansion_frame(content: dict, split: str) -> pl.DataFrame:
    ids = list(content["queries"])
    return pl.DataFrame(
        {
            "id": ids,
            "text": [content["queries"][q] for q in ids],
            "hy_doc": [hy_doc_for(split, index) for index in range(len(ids))],
            "doc_id": [content["positives"].get(q, []) for q in ids],
        },
        schema={"id": pl.Utf8, "text": pl.Utf8, "hy_doc": pl.Utf8, "doc_id": pl.List(pl.Utf8)},
    )


def _nano_tables(slug: str) -> dict[str, pl.DataFrame]:
    content = _content(f"nano-{slug}", NANO_DOCS, NANO_QUERIES, with_unjudged=False)
    doc_ids, positives = content["doc_ids"], content["positives"]
    rng = random.Random(f"fixture-lists-{slug}")
    bm25, dense = {}, {}
    for index, query_id in enumerate(content["queries"]):
        mine = positives[query_id]
        others = [d for d in doc_ids[:NANO_LIST_POOL] if d not in mine]
        rng.shuffle(others)
        if index == SAFEGUARD_QUERY:  # no positive in either list: the hybrid list gets a safeguard row
            bm25[query_id] = others[:60]
            dense[query_id] = others[50:110]
        else:
            bm25[query_id] = mine[:1] + others[: 60 - len(mine)] + mine[1:]
            dense[query_id] = others[50:53] + mine + others[53 : 110 - len(mine)]
    split = f"NanoR2MED{slug_to_domain(slug)}"
    qrels = {q: dict.fromkeys(docs, 1) for q, docs in positives.items()}
    hybrid = build_reranking_hybrid(bm25, dense, qrels, doc_ids, split=split)
    pairs = [(q, d) for q, docs in positives.items() for d in docs]
    return {
        "corpus": _texts_frame(doc_ids, content["texts"], "_id"),
        "queries": pl.DataFrame({"_id": list(content["queries"]), "text": list(content["queries"].values())}),
        "qrels": pl.DataFrame({"query-id": [q for q, _ in pairs], "corpus-id": [d for _, d in pairs]}),
        "bm25": candidate_frame(bm25),
        "harrier_oss_v1_270m": candidate_frame(dense),
        "reranking_hybrid": candidate_frame(hybrid),
    }


def slug_to_domain(slug: str) -> str:
    return next(spec.domain for spec in list_tasks("nano") if spec.slug == slug)


def build_fixture_mirror(root: Path) -> Path:
    """Write the mirror of all 16 tasks under ``root`` (<root>/<org>/<repo>/...) and return ``root``."""
    nano_splits = {}
    for spec in list_tasks():
        if spec.kind == "r2med":
            _r2med_repo(root / spec.hub_repo, spec)
        else:
            nano_splits[spec.configs["corpus"]["split"]] = _nano_tables(spec.slug)
    nano_repo = next(spec.hub_repo for spec in list_tasks("nano"))
    write_nano_repo(root / nano_repo, nano_splits, pretty_name="NanoR2MED (test fixture)")
    return root


def fixture_positives(slug: str, kind: str) -> dict[str, list[str]]:
    """The positives the fixture wrote for a task (for expected values in tests)."""
    if kind == "r2med":
        return _content(slug, R2MED_DOCS, R2MED_QUERIES, with_unjudged=True)["positives"]
    return _content(f"nano-{slug}", NANO_DOCS, NANO_QUERIES, with_unjudged=False)["positives"]


def record_download_metadata(repo: Path, commit: str) -> None:
    """Write what `huggingface-cli download --local-dir` records: one metadata file per downloaded file
    (commit, etag, timestamp) under <repo>/.cache/huggingface/download/."""
    import time

    metadata_root = repo / ".cache" / "huggingface" / "download"
    for path in sorted(repo.rglob("*")):
        if path.is_file() and ".cache" not in path.relative_to(repo).parts:
            target = metadata_root / f"{path.relative_to(repo).as_posix()}.metadata"
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(f"{commit}\netag\n{max(time.time(), path.stat().st_mtime)}\n")
