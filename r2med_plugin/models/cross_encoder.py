"""The cross-encoder family: pair scorers (``predict(pairs) -> scores``), as the official ``eval_reranker`` scores them.

A cross-encoder is any object with ``predict(pairs) -> scores`` (one score per (query, document)
pair; ``name`` and ``revision`` attributes are used when present): a sentence-transformers
``CrossEncoder``, :class:`SentenceTransformerCrossEncoder`, or mteb's ``CrossEncoderWrapper`` (its
wrapped model is used). Like the official code, scores are the raw logits (no sigmoid), and for a
two-label head the logit of label 1 ("relevant", as for monoBERT). The attributes of these third-party
objects are read here, the one module that knows them.
"""

from __future__ import annotations

import hashlib
import inspect
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from r2med_plugin.errors import UserError
from r2med_plugin.models.identity import model_revision
from r2med_plugin.models.placement import one_device
from r2med_plugin.models.protocols import PairScorerBase
from r2med_plugin.rules import SettingError


class SentenceTransformerCrossEncoder(PairScorerBase):
    """A sentence-transformers ``CrossEncoder`` that returns raw logits, batched, on one progress bar."""

    def __init__(
        self,
        model_name_or_path: str,
        *,
        revision: str | None = None,
        device: str | None = "auto",
        batch_size: int = 32,
        max_length: int | None = None,
    ) -> None:
        from sentence_transformers import CrossEncoder

        chosen = one_device(device, "a cross-encoder scores its pairs in one process")  # auto: None, CrossEncoder chooses
        try:
            self.model = CrossEncoder(model_name_or_path, revision=revision, device=chosen, max_length=max_length)
        except OSError as error:
            raise UserError(
                f"could not load the cross-encoder {model_name_or_path!r} ({' '.join(str(error).split())}); give a local "
                "folder or a hub name "
                "that is in the Hugging Face cache (HF_HUB_OFFLINE=1 needs it cached)"
            ) from error
        if batch_size < 1:
            raise UserError(f"batch_size must be positive, got {batch_size}")
        _check_trained_head(model_name_or_path, self.model)
        # As for encoders: a hub model is filed under the commit loaded, a folder under a fingerprint of its files.
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
        raise SettingError(f"{name!r} was saved as {', '.join(architectures)}, without a trained classification head: a "
                           "cross-encoder would score with a randomly drawn head; give a cross-encoder (a sequence-"
                           "classification checkpoint), or use the model as a first stage ({first_stage})", field="rerank")


def raw_logits(model: Any, pairs: Sequence[tuple[str, str]], batch_size: int = 32) -> np.ndarray:
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


def as_pair_scorer(model: Any) -> tuple[Any, str, str]:
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


def _parameters(function: Callable[..., Any]) -> set[str]:
    try:
        return set(inspect.signature(function).parameters)
    except (TypeError, ValueError):
        return set()


def reranker_name(model: Any) -> str:
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


def _predict(scorer: Any, chunk: list[tuple[str, str]], batch_size: int) -> object:
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
        raise UserError(
            f"the reranker {type(scorer).__name__} returned scores of shape {array.shape} for {count} pairs; "
            "expected one score per pair (a head with 1 or 2 labels)"
        )
    if not np.isfinite(array).all():
        raise UserError(f"the reranker {type(scorer).__name__} returned NaN or infinite scores; check the model and its dtype")
    return array


def pair_scores(scorer: object, pairs: list[tuple[str, str]], batch_size: int) -> np.ndarray:
    """One finite score per pair from ``scorer`` (an unwrapped pair scorer: ``as_pair_scorer``)."""
    return _one_score_per_pair(_predict(scorer, pairs, batch_size), len(pairs), scorer)
