"""Dense retrieval: any encoder, cosine similarity, exact top-k, embeddings cached on disk.

An encoder is an ``r2med_plugin.models.protocols.Encoder``: ours (r2med_plugin.models: sentence-transformers, mteb's
registry, embedding endpoints, the official profiles, ``HashingEncoder``) or a user's object with ``name``,
``revision`` and ``encode(texts, kind=...)``, which the public functions here adapt once (``as_encoder``).

Embeddings are cached by (model name, model identity, encoder settings, dataset revision, kind, prompt,
text hash), so a second run of the same model on the same task encodes nothing, and anything that
changes an embedding (weights, tokenizer, max length, pooling, prompt, text) changes the key. The query
prompt is resolved in one place (``effective_prompt``): the one passed in, else the encoder's own
``query_prompt``; that is what the encoder gets, what the key holds and what a result records.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Generator, Mapping, Sequence
from contextlib import closing
from dataclasses import dataclass
from functools import partial
from typing import Literal

import numpy as np
import polars as pl
from tqdm.auto import tqdm

from r2med_plugin.cache import cached_array, key_of, read_cached_array, remove_array, store_array
from r2med_plugin.errors import UserError
from r2med_plugin.models import protocols
from r2med_plugin.models.fast_encode import FastEncoder
from r2med_plugin.quiet import bar_disabled
from r2med_plugin.retrieval.ranking import descending_id_rank, top_k_indices, top_k_run
from r2med_plugin.types import Run

FAISS_MIN_DOCUMENTS = 5000
E5_TEMPLATE = "Instruct: {instruction}\nQuery: "
CHUNK_ENV = "R2MED_ENCODE_CHUNK_TEXTS"
DEFAULT_CHUNK_TEXTS = 4096
CHUNK_CACHE = "embedding-chunks"


def _validated(embeddings: np.ndarray, count: int, encoder: protocols.Encoder, kind: str) -> np.ndarray:
    array = np.asarray(embeddings, dtype=np.float32)
    if array.ndim != 2 or array.shape[0] != count:
        raise UserError(
            f"model {encoder.name!r} returned {kind} embeddings of shape {array.shape} for {count} texts; "
            "expected one row per text"
        )
    if not np.isfinite(array).all():
        raise UserError(f"model {encoder.name!r} returned NaN or infinite {kind} embeddings; check the model and its dtype")
    return array


def effective_prompt(encoder: protocols.Encoder, kind: protocols.EncodeKind, prompt: str | None = None) -> str | None:
    """The prompt ``encoder`` gets for ``kind``: ``prompt`` when given, else (queries) its own ``query_prompt``."""
    if prompt is None and kind == "query":
        return protocols.as_encoder(encoder).query_prompt
    return prompt


def encode_cached(
    encoder: protocols.Encoder, texts: Sequence[str], *, kind: protocols.EncodeKind, dataset_revision: str, prompt: str | None = None
) -> np.ndarray:
    """L2-normalised embeddings of ``texts`` (with ``effective_prompt``), from the cache when this model already encoded them."""
    encoder = protocols.as_encoder(encoder)
    return normalise(encode_cached_raw(encoder, texts, kind=kind, dataset_revision=dataset_revision, prompt=prompt))


def distinct_texts(texts: Sequence[str]) -> tuple[list[str], np.ndarray]:
    """(each distinct text once, in order of first use; for every text, its row in that list). Real corpora
    repeat texts under other ids (7,925 rows of R2MED Biology): each is encoded once."""
    position: dict[str, int] = {}
    rows = np.fromiter((position.setdefault(text, len(position)) for text in texts), dtype=np.int64, count=len(texts))
    return list(position), rows


def encode_chunk_size() -> int:
    """Texts per checkpointed chunk of a local encoding ($R2MED_ENCODE_CHUNK_TEXTS, default 4096)."""
    raw = os.environ.get(CHUNK_ENV, "")
    if not raw:
        return DEFAULT_CHUNK_TEXTS
    if not raw.isdigit() or int(raw) < 1:
        raise UserError(f"${CHUNK_ENV}={raw!r}: give a positive number of texts per checkpointed chunk (default "
                        f"{DEFAULT_CHUNK_TEXTS})")
    return int(raw)


def chunk_keys(texts: Sequence[str], key: str, size: int | None = None) -> list[str]:
    """The cache keys of the checkpointed chunks of ``texts`` (``size`` texts each, default ``encode_chunk_size()``)
    encoded under the embedding key ``key``: the key, the chunk's place and its texts (so another text list, model or
    prompt never meets them); none for one chunk."""
    size = size or encode_chunk_size()
    if len(texts) <= size:
        return []
    return [key_of(key, "chunk", start, _digest(texts[start:start + size])) for start in range(0, len(texts), size)]


def encode_in_chunks(texts: list[str], keys: list[str], encode_part: Callable[[list[str]], np.ndarray]) -> np.ndarray:
    """``encode_part`` over ``texts`` a chunk at a time, each chunk stored as soon as it is encoded, so a killed run
    resumes at the first chunk it had not finished (``keys``: ``chunk_keys``; none: one call)."""
    if not keys:
        return encode_part(texts)
    size = encode_chunk_size()
    parts: list[np.ndarray] = []
    with tqdm(total=len(texts), desc="encoding (checkpointed chunks)", unit="text", disable=bar_disabled(True), leave=False) as bar:
        for start, chunk_key in zip(range(0, len(texts), size), keys, strict=True):
            part = cached_array(CHUNK_CACHE, chunk_key, partial(encode_part, texts[start:start + size]))
            parts.append(part)
            bar.update(part.shape[0])
    return np.concatenate(parts, axis=0)


def _encode_sorted_in_chunks(texts: list[str], key: str, fast: FastEncoder, chunks: list[str],
                             validated: Callable[[np.ndarray], np.ndarray]) -> np.ndarray:
    """``texts`` encoded through ``fast`` in the length order sentence-transformers sorts them in, across the whole
    list, by one stream (one pool of tokenizing workers); the checkpointed chunks (``encode_in_chunks``) are cut from
    that order, and their keys added to ``chunks``. Returned in the order of ``texts``."""
    if not texts:
        return validated(fast.encode(texts))
    inputs = fast.inputs(texts)
    order = fast.order(inputs)
    ordered_texts = [texts[index] for index in order]
    # whole batches per chunk, so that a resumed run batches (and pads) every text as an uninterrupted one does
    aligned = max(fast.batch_size, encode_chunk_size() // fast.batch_size * fast.batch_size)
    chunks.extend(chunk_keys(ordered_texts, key, aligned))
    size = aligned if chunks else len(texts)
    starts = range(0, len(texts), size)
    found = [read_cached_array(CHUNK_CACHE, chunk_key) for chunk_key in chunks] or [None]  # one chunk: not checkpointed
    missing = [start for start, part in zip(starts, found, strict=True) if part is None]
    stream = fast.stream([inputs[index] for start in missing for index in order[start:start + size]])
    pending: list[np.ndarray] = []
    parts: list[np.ndarray] = []
    with closing(stream), tqdm(total=len(texts), desc="encoding (checkpointed chunks)", unit="text",
                               disable=bar_disabled(fast.show_progress and bool(chunks)), leave=False) as bar:
        for start, part in zip(starts, found, strict=True):
            if part is None:
                part = validated(_take(stream, pending, len(order[start:start + size])))
                if chunks:
                    store_array(CHUNK_CACHE, chunks[start // size], part)
            parts.append(part)
            bar.update(part.shape[0])
    ordered = np.concatenate(parts, axis=0)
    vectors = np.empty_like(ordered)
    vectors[order] = ordered
    return vectors


def _take(stream: Generator[np.ndarray, None, None], pending: list[np.ndarray], count: int) -> np.ndarray:
    """The next ``count`` rows of ``stream`` (batches), keeping the rest of the last batch in ``pending``."""
    have = sum(len(batch) for batch in pending)
    while have < count:
        batch = next(stream)
        pending.append(batch)
        have += len(batch)
    rows = np.concatenate(pending, axis=0)
    pending[:] = [rows[count:]] if have > count else []
    return rows[:count]


def _digest(texts: Sequence[str]) -> str:
    return hashlib.sha256("\0".join(texts).encode("utf-8", "surrogatepass")).hexdigest()


def encode_cached_raw(
    encoder: protocols.Encoder, texts: Sequence[str], *, kind: protocols.EncodeKind | Literal["expansion"], dataset_revision: str,
    prompt: str | None = None,
) -> np.ndarray:
    """The embeddings of ``texts`` as the encoder gives them (cached); kind "expansion": ``encode_expansions``."""
    encoder = protocols.as_encoder(encoder)
    prompt = effective_prompt(encoder, "query" if kind == "expansion" else kind, prompt)
    key = key_of(encoder.name, encoder.revision, encoder.cache_identity, dataset_revision, kind, prompt, len(texts),
                 _digest(texts))

    def encode_part(part: list[str]) -> np.ndarray:
        if kind == "expansion":
            return _validated(encoder.encode_expansions(part), len(part), encoder, "expansion")
        # no prompt: encode(texts, kind=...) as ever, so that a subclass's encode without prompt= still works
        embeddings = encoder.encode(part, kind=kind) if prompt is None else encoder.encode(part, kind=kind, prompt=prompt)
        return _validated(embeddings, len(part), encoder, kind)

    chunks: list[str] = []

    def compute() -> np.ndarray:
        distinct, rows = distinct_texts(texts)
        fast = None if kind == "expansion" else encoder.fast_encoder(kind, prompt)
        if fast is not None:
            vectors = _encode_sorted_in_chunks(distinct, key, fast, chunks, lambda part: _validated(part, len(part), encoder, kind))
        else:
            chunks.extend(chunk_keys(distinct, key))
            vectors = encode_in_chunks(distinct, chunks, encode_part)
        return vectors if len(distinct) == len(texts) else vectors[rows]

    embeddings = cached_array("embeddings", key, compute)
    for chunk_key in chunks:  # the whole array is stored now: its chunks are not needed again
        remove_array(CHUNK_CACHE, chunk_key)
    if embeddings.shape[0] != len(texts):
        raise ValueError(f"cached embeddings for {encoder.name!r} have {embeddings.shape[0]} rows, expected {len(texts)}")
    return embeddings


def _faiss_top_k(query_vectors: np.ndarray, doc_vectors: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """(indices, scores) of the k best documents per query by exact inner product (faiss IndexFlatIP)."""
    import faiss

    index = faiss.IndexFlatIP(doc_vectors.shape[1])
    index.add(np.ascontiguousarray(doc_vectors, dtype=np.float32))
    scores, indices = index.search(np.ascontiguousarray(query_vectors, dtype=np.float32), k)
    return indices, scores


def search_vectors(
    query_ids: Sequence[str], query_vectors: np.ndarray, doc_ids: Sequence[str], doc_vectors: np.ndarray, top_k: int,
    *, query_norms: np.ndarray | None = None, same_text: np.ndarray | None = None,
) -> Run:
    """Inner-product top_k per query (cosine for normalised vectors), in pytrec_eval order. ``query_norms``: each
    query vector's norm, for vectors not normalised yet; every score is divided by its query's norm after the
    product (the same order of documents), so documents whose products tie exactly keep tying. ``same_text``: for each
    document, the first document with its text (``text_groups``): such documents are scored once and share the score
    exactly (a matrix product may round two identical rows apart), so they rank by document id as ties do."""
    if query_vectors.shape[1] != doc_vectors.shape[1]:
        raise ValueError(f"queries have {query_vectors.shape[1]} dimensions but documents {doc_vectors.shape[1]}")
    divisor = np.ones((len(query_ids), 1), dtype=np.float32) if query_norms is None else query_norms.reshape(-1, 1)
    groups = TextGroups.of(same_text, len(doc_ids))
    unique_vectors = doc_vectors if groups is None else doc_vectors[groups.first_rows]
    if len(doc_ids) < FAISS_MIN_DOCUMENTS:
        scores = (query_vectors @ unique_vectors.T) / divisor
        return top_k_run(query_ids, doc_ids, scores if groups is None else scores[:, groups.inverse], top_k)
    k = min(top_k, len(unique_vectors))
    indices, scores = _faiss_top_k(query_vectors, unique_vectors, k)
    scores = scores / divisor
    tie_rank = descending_id_rank(doc_ids)
    ids = np.asarray(doc_ids, dtype=object)
    run: Run = {}
    for row, query_id in enumerate(query_ids):
        found, found_scores = (indices[row], scores[row]) if groups is None else groups.expand(indices[row], scores[row])
        order = top_k_indices(found_scores, tie_rank[found], min(top_k, len(found)))
        chosen = found[order]
        run[query_id] = dict(zip(ids[chosen].tolist(), found_scores[order].astype(np.float64).tolist(), strict=True))
    return run


@dataclass(frozen=True)
class TextGroups:
    """Documents grouped by text: ``first_rows`` (one row per distinct text), ``inverse`` (each document's group)."""

    first_rows: np.ndarray
    inverse: np.ndarray
    members: tuple[np.ndarray, ...]

    @classmethod
    def of(cls, same_text: np.ndarray | None, count: int) -> TextGroups | None:
        if same_text is None:
            return None
        same_text = np.asarray(same_text, dtype=np.int64)
        first_rows, inverse = np.unique(same_text, return_inverse=True)
        if len(first_rows) == count:
            return None  # every text distinct: nothing to share
        order = np.argsort(inverse, kind="stable")
        members = tuple(np.split(order, np.cumsum(np.bincount(inverse))[:-1]))
        return cls(first_rows, inverse, members)

    def expand(self, groups: np.ndarray, scores: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Every document of the given groups, each with its group's score."""
        groups = groups[groups >= 0]  # faiss pads with -1 when k exceeds what it found
        sizes = np.array([len(self.members[group]) for group in groups], dtype=np.int64)
        docs = np.concatenate([self.members[group] for group in groups]) if len(groups) else np.zeros(0, np.int64)
        return docs, np.repeat(scores[: len(groups)], sizes)


def text_groups(texts: Sequence[str]) -> np.ndarray:
    """For each text, the row of its first occurrence (what ``search_vectors(same_text=...)`` takes)."""
    frame = pl.DataFrame({"text": pl.Series(texts, dtype=pl.Utf8)}).with_row_index("row")
    return frame.select(pl.col("row").min().over("text")).to_series().to_numpy().astype(np.int64)


def _same_dimension(encoder: protocols.Encoder, queries: np.ndarray, documents: np.ndarray) -> None:
    if queries.shape[1] != documents.shape[1]:
        raise UserError(
            f"model {encoder.name!r} returned {queries.shape[1]}-dimensional query embeddings but "
            f"{documents.shape[1]}-dimensional document embeddings; both must have the same dimension"
        )


def normalise(vectors: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors / np.where(norms == 0, 1.0, norms)


def dense_search(
    encoder: protocols.Encoder,
    corpus: pl.DataFrame,
    queries: pl.DataFrame,
    *,
    dataset_revision: str,
    query_prompt: str | None = None,
    top_k: int = 1000,
    mix_with: Sequence[str] | None = None,
) -> Run:
    """Cosine top_k per query over the whole corpus, in pytrec_eval order (score desc, doc id desc).

    ``mix_with`` (one text per query, e.g. an LLM expansion) is encoded without prompt and averaged
    with the query embedding before the search.
    """
    if top_k < 1:
        raise UserError(f"top_k must be a positive integer, got {top_k}")
    encoder = protocols.as_encoder(encoder)
    doc_vectors = encode_cached(encoder, corpus["text"].to_list(), kind="document", dataset_revision=dataset_revision)
    if mix_with is None:
        query_vectors = encode_cached(encoder, queries["text"].to_list(), kind="query", dataset_revision=dataset_revision,
                                      prompt=query_prompt)
    elif len(mix_with) != queries.height:
        raise ValueError(f"mix_with has {len(mix_with)} texts for {queries.height} queries")
    else:
        query_vectors, norms = _mixed_query_vectors(encoder, queries, list(mix_with), dataset_revision, query_prompt)
        _same_dimension(encoder, query_vectors, doc_vectors)
        return search_vectors(queries["id"].to_list(), query_vectors, corpus["id"].to_list(), doc_vectors, top_k,
                              query_norms=norms, same_text=text_groups(corpus["text"].to_list()))
    _same_dimension(encoder, query_vectors, doc_vectors)
    return search_vectors(queries["id"].to_list(), query_vectors, corpus["id"].to_list(), doc_vectors, top_k,
                          same_text=text_groups(corpus["text"].to_list()))


def _mixed_query_vectors(encoder: protocols.Encoder, queries: pl.DataFrame, expansions: list[str], dataset_revision: str,
                         query_prompt: str | None) -> tuple[np.ndarray, np.ndarray]:
    """The mean of each query's embedding and its expansion's, and the mean's norm (the search divides by it after
    the product). An encoder with an ``expansion_mean_dtype`` (the official profiles) encodes the expansion its own way
    (``encode_expansions``) and the mean is of its raw embeddings in that dtype, as the official classes average them;
    otherwise (None) the expansion is encoded as a document without prompt and the unit vectors are averaged."""
    raw_queries = encode_cached_raw(encoder, queries["text"].to_list(), kind="query", dataset_revision=dataset_revision,
                                    prompt=query_prompt)
    if encoder.expansion_mean_dtype is not None:
        extra = encode_cached_raw(encoder, expansions, kind="expansion", dataset_revision=dataset_revision)
        _same_dimension(encoder, raw_queries, extra)
        # the dtype the model's embeddings come in: NV-Embed's float16 vectors are averaged in float16, as officially
        dtype = np.dtype(encoder.expansion_mean_dtype)
        mixed = (raw_queries.astype(dtype) + extra.astype(dtype)) / dtype.type(2)
        return _unit_with_norms(normalise(mixed.astype(np.float32)))
    extra = encode_cached(encoder, expansions, kind="document", dataset_revision=dataset_revision)
    _same_dimension(encoder, raw_queries, extra)
    # not normalised here: a mean of two unit vectors has an irrational norm, and products with a vector divided by it
    # round in the order the BLAS kernel sums them, so documents tied in exact arithmetic would split by machine
    mixed = ((normalise(raw_queries) + extra) / 2.0).astype(np.float32)
    return mixed, np.linalg.norm(mixed, axis=1).astype(np.float32)


def _unit_with_norms(vectors: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    return vectors, np.ones(len(vectors), dtype=np.float32)


def score_candidates(
    encoder: protocols.Encoder,
    corpus: pl.DataFrame,
    queries: pl.DataFrame,
    candidates: Mapping[str, Sequence[str]],
    *,
    dataset_revision: str,
    query_prompt: str | None = None,
) -> Run:
    """Cosine scores of each query's candidates only; encodes just the union of the candidate documents."""
    encoder = protocols.as_encoder(encoder)
    wanted = pl.Series("id", sorted({doc_id for ids in candidates.values() for doc_id in ids}), dtype=pl.Utf8)
    subset = corpus.filter(pl.col("id").is_in(wanted.implode()))
    missing = len(wanted) - subset.height
    if missing:
        raise UserError(f"{missing} candidate document(s) are not in the corpus; the candidate lists do not belong to it")
    listed = queries.filter(pl.col("id").is_in(list(candidates)))
    doc_vectors = encode_cached(encoder, subset["text"].to_list(), kind="document", dataset_revision=dataset_revision)
    query_vectors = encode_cached(encoder, listed["text"].to_list(), kind="query", dataset_revision=dataset_revision, prompt=query_prompt)
    _same_dimension(encoder, query_vectors, doc_vectors)
    position = dict(zip(subset["id"].to_list(), range(subset.height), strict=True))
    run: Run = {}
    for row, query_id in enumerate(listed["id"].to_list()):
        ids = list(dict.fromkeys(candidates[query_id]))
        scores = doc_vectors[[position[doc_id] for doc_id in ids]] @ query_vectors[row]
        run[query_id] = dict(zip(ids, scores.astype(np.float64).tolist(), strict=True))
    return run
