"""Reranking a first-stage run with a cross-encoder, as the official ``eval_reranker`` does.

For each query of the first stage, the first ``depth`` documents (in the first stage's order) are
paired with the query, scored by the cross-encoder, and the query's reranked run holds exactly those
documents with the cross-encoder's scores. Documents below the depth are dropped, so only the
reranked top-k is evaluated.

A cross-encoder is any object with ``predict(pairs) -> scores`` (one score per (query, document)
pair; ``name`` and ``revision`` attributes are used when present): a sentence-transformers
``CrossEncoder``, :class:`SentenceTransformerCrossEncoder`, or mteb's ``CrossEncoderWrapper`` (its
wrapped model is used). Like the official code, scores are the raw logits (no sigmoid), and for a
two-label head the logit of label 1 ("relevant", as for monoBERT).
"""

from __future__ import annotations

import hashlib
import inspect
from collections.abc import Mapping, Sequence
from typing import Protocol, runtime_checkable

import numpy as np
from tqdm.auto import tqdm

from r2med_plugin._moved import Moved
from r2med_plugin.types import Run

__getattr__ = Moved(__name__, {"top_ranked": f"{__name__}.top_document_ids"})  # its earlier name

# The official short names (src/eval_reranker.py, model_path_dict) of the rerankers the paper used.
OFFICIAL_RERANKER_NAMES = {
    "BAAI/bge-reranker-v2-m3": "bge-reranker",
    "castorini/monobert-large-msmarco": "monobert",
    "castorini/rankllama-v1-7b-lora-passage": "rankllama",
}


@runtime_checkable
class PairScorer(Protocol):
    def predict(self, pairs: Sequence[tuple[str, str]]) -> Sequence[float]: ...


class SentenceTransformerCrossEncoder:
    """A sentence-transformers ``CrossEncoder`` that returns raw logits, batched, on one progress bar."""

    def __init__(
        self,
        model_name_or_path: str,
        *,
        revision: str | None = None,
        device: str | None = "cpu",
        batch_size: int = 32,
        max_length: int | None = None,
    ) -> None:
        from sentence_transformers import CrossEncoder

        from r2med_plugin.retrieval.dense import check_device

        check_device(device)
        try:
            self.model = CrossEncoder(model_name_or_path, revision=revision, device=device, max_length=max_length)
        except OSError as error:
            raise ValueError(
                f"could not load the cross-encoder {model_name_or_path!r} ({error}); give a local folder or a hub name "
                "that is in the Hugging Face cache (HF_HUB_OFFLINE=1 needs it cached)"
            ) from error
        if batch_size < 1:
            raise ValueError(f"batch_size must be positive, got {batch_size}")
        _check_trained_head(model_name_or_path, self.model)
        # As for encoders: a hub model is filed under the commit loaded, a folder under a fingerprint of its files.
        from r2med_plugin.retrieval.model_identity import model_revision

        self.name, self.revision, _ = model_revision(model_name_or_path, revision)
        self.batch_size = batch_size

    def predict(self, pairs: Sequence[tuple[str, str]]) -> np.ndarray:
        return raw_logits(self.model, pairs, self.batch_size)


def _check_trained_head(name: str, cross_encoder: object) -> None:
    """A checkpoint saved without a sequence-classification head gets a random one from CrossEncoder (only a load
    report warns): its scores would change from run to run. Refused."""
    config = getattr(getattr(cross_encoder, "model", None), "config", None)
    architectures = list(getattr(config, "architectures", None) or [])
    if architectures and not any(arch.endswith(("ForSequenceClassification", "ForTokenClassification")) for arch in architectures):
        raise ValueError(f"{name!r} was saved as {', '.join(architectures)}, without a trained classification head: a "
                         "cross-encoder would score with a randomly drawn head; give a cross-encoder (a sequence-"
                         "classification checkpoint), or use the model as a first stage (--first-stage)")


def raw_logits(model: object, pairs: Sequence[tuple[str, str]], batch_size: int = 32) -> np.ndarray:
    """A sentence-transformers CrossEncoder's logits for ``pairs`` (no activation), one per pair."""
    import torch

    keyword = "activation_fn" if "activation_fn" in inspect.signature(model.predict).parameters else "activation_fct"
    scores = model.predict(
        [list(pair) for pair in pairs], batch_size=batch_size, show_progress_bar=False, convert_to_numpy=True,
        **{keyword: torch.nn.Identity()},
    )
    return np.asarray(scores, dtype=np.float64)


def _weights_revision(model: object) -> str:
    """A revision for a model loaded without one: a hash of its config and a sample of its weights."""
    inner = getattr(model, "model", model)
    digest = hashlib.sha256(repr(getattr(inner, "config", "")).encode("utf-8"))
    parameters = getattr(inner, "parameters", None)
    if callable(parameters):
        for tensor in parameters():  # every weight: two fine-tunes that share a head still differ
            digest.update(tensor.detach().cpu().float().numpy().tobytes())
    return "local-" + digest.hexdigest()[:12]


def as_pair_scorer(model: object) -> tuple[object, str, str]:
    """(object whose ``predict(pairs)`` scores pairs, query prefix, document prefix).

    mteb's CrossEncoderWrapper is unwrapped to its sentence-transformers model, keeping its prefixes.
    """
    if _wraps_pair_scorer(model):
        return model.model, getattr(model, "query_prefix", "") or "", getattr(model, "passage_prefix", "") or ""
    if not hasattr(model, "predict"):
        raise TypeError(
            f"the reranker must have predict(pairs) -> scores (a sentence-transformers CrossEncoder or "
            f"SentenceTransformerCrossEncoder), got {type(model).__name__}"
        )
    if "inputs1" in _parameters(model.predict):
        raise TypeError(
            f"{type(model).__name__}.predict takes mteb DataLoaders: wrap the model in "
            "r2med_plugin.integrations.mteb.MtebPairScorer(model, task_name)"
        )
    return model, "", ""


def _wraps_pair_scorer(model: object) -> bool:
    """A model wrapper that carries an mteb ModelMeta around a pair scorer (mteb's CrossEncoderWrapper): its
    own predict takes mteb DataLoaders, so the wrapped scorer (and the wrapper's prefixes) are used."""
    return hasattr(model, "mteb_model_meta") and hasattr(getattr(model, "model", None), "predict")


def _is_sentence_transformers_cross_encoder(scorer: object) -> bool:
    try:
        from sentence_transformers import CrossEncoder
    except ImportError:
        return False
    return isinstance(scorer, CrossEncoder)


def _parameters(function: object) -> set[str]:
    try:
        return set(inspect.signature(function).parameters)
    except (TypeError, ValueError):
        return set()


def reranker_name(model: object) -> str:
    """The name a reranker is reported under: its ``name``, else its model's name or path."""
    if _wraps_pair_scorer(model):
        meta = model.mteb_model_meta
        if isinstance(getattr(meta, "name", None), str) and meta.name:
            return meta.name
        model = model.model
    for candidate in (getattr(model, "name", None), getattr(getattr(model, "model", None), "name_or_path", None)):
        if isinstance(candidate, str) and candidate:
            return candidate
    inner = getattr(getattr(model, "model", None), "config", None)
    return getattr(inner, "_name_or_path", None) or type(model).__name__


def reranker_revision(model: object) -> str:
    meta = getattr(model, "mteb_model_meta", None)
    revision = getattr(model, "revision", None) or getattr(meta, "revision", None)
    return revision if isinstance(revision, str) and revision else _weights_revision(getattr(model, "model", model))


def official_reranker_name(name: str) -> str:
    """The official short name (bge-reranker, monobert, rankllama) where one exists, else ``name``: an official
    recipe's results (``<weights>+official-<short>``) on the published weights, or those weights loaded otherwise."""
    weights, mark, short = name.rpartition("+official-")
    if mark:
        return short if OFFICIAL_RERANKER_NAMES.get(weights) == short else name
    return OFFICIAL_RERANKER_NAMES.get(name.rstrip("/"), name)


def top_document_ids(run: Mapping[str, Mapping[str, float]], depth: int) -> dict[str, list[str]]:
    """Each query's first ``depth`` document ids, in the run's own (ranking) order."""
    check_depth(depth)
    return {query_id: list(ranked)[:depth] for query_id, ranked in run.items() if ranked}


def rerank_run(
    first_stage: Mapping[str, Mapping[str, float]],
    queries: Mapping[str, str],
    documents: Mapping[str, str],
    model: object,
    *,
    depth: int,
    batch_size: int = 32,
    show_progress: bool = True,
) -> Run:
    """Rerank each query's top ``depth`` documents of ``first_stage`` (dict order = ranking) with ``model``.

    The result holds, per query, exactly those documents, with the cross-encoder's scores.
    """
    check_depth(depth)
    if batch_size < 1:
        raise ValueError(f"batch_size must be positive, got {batch_size}")
    scorer, query_prefix, document_prefix = as_pair_scorer(model)
    lists = top_document_ids(first_stage, depth)
    missing = [query_id for query_id in lists if query_id not in queries]
    if missing:
        raise ValueError(f"no text for query {missing[0]!r} ({len(missing)} such queries in the first stage)")
    pairs = [(query_id, doc_id) for query_id, doc_ids in lists.items() for doc_id in doc_ids]
    unknown = [doc_id for _, doc_id in pairs if doc_id not in documents]
    if unknown:
        raise ValueError(f"no text for document {unknown[0]!r} ({len(unknown)} such documents in the first stage)")
    texts = [(query_prefix + queries[q], document_prefix + documents[d]) for q, d in pairs]
    # each distinct (query, passage) text is scored once: a passage repeated under another id (the real corpora
    # hold thousands) costs nothing more and scores exactly the same, whatever batch padding it would have met
    distinct = list(dict.fromkeys(texts))
    distinct_scores = _score_pairs(scorer, distinct, batch_size, show_progress).tolist()
    score_of = dict(zip(distinct, distinct_scores))
    scores = [score_of[text] for text in texts]
    reranked: Run = {query_id: {} for query_id in lists}
    for (query_id, doc_id), score in zip(pairs, scores):
        reranked[query_id][doc_id] = score
    return {query_id: dict(sorted(ranked.items(), key=lambda item: item[1], reverse=True)) for query_id, ranked in reranked.items()}


def _score_pairs(scorer: object, texts: list[tuple[str, str]], batch_size: int, show_progress: bool) -> np.ndarray:
    chunks = []
    with tqdm(total=len(texts), desc="Reranking", unit="pair", disable=not show_progress) as bar:
        for start in range(0, len(texts), batch_size):
            chunk = texts[start : start + batch_size]
            chunks.append(_one_score_per_pair(_predict(scorer, chunk, batch_size), len(chunk), scorer))
            bar.update(len(chunk))
    return np.concatenate(chunks) if chunks else np.zeros(0, dtype=np.float64)


def _predict(scorer: object, chunk: list[tuple[str, str]], batch_size: int) -> object:
    if _is_sentence_transformers_cross_encoder(scorer):
        return raw_logits(scorer, chunk, batch_size)  # a bare sentence-transformers model: no sigmoid
    return scorer.predict(chunk)


def _one_score_per_pair(raw: object, count: int, scorer: object) -> np.ndarray:
    array = np.asarray(raw, dtype=np.float64)
    if array.ndim == 2 and array.shape[1] == 2:
        array = array[:, 1]  # a two-label head (monoBERT): the "relevant" logit, as the official code takes
    elif array.ndim == 2 and array.shape[1] == 1:
        array = array[:, 0]
    if array.shape != (count,):
        raise ValueError(
            f"the reranker {type(scorer).__name__} returned scores of shape {array.shape} for {count} pairs; "
            "expected one score per pair (a head with 1 or 2 labels)"
        )
    if not np.isfinite(array).all():
        raise ValueError(f"the reranker {type(scorer).__name__} returned NaN or infinite scores; check the model and its dtype")
    return array


def check_depth(depth: object) -> None:
    if isinstance(depth, bool) or not isinstance(depth, (int, np.integer)) or depth < 1:
        raise ValueError(f"the rerank depth must be a positive integer (the official code uses 10 or 100), got {depth!r}")
