"""What a model is to this package: the encoder and reranker protocols every stage, scorer and runner relies on.

Every member either protocol declares is there on every model the runner gets, so no code asks an encoder or a
reranker what it has. The model families subclass ``EncoderBase`` / ``RerankerBase``, which give the defaults,
and override what they do differently. A user's own object needs only ``name``, ``revision`` and
``encode(texts, *, kind)`` (a reranker: ``rerank``): ``as_encoder`` / ``as_reranker_model`` wrap it once, where the
Python API receives it, in an adapter that gives it the defaults (see ``AdaptedEncoder`` for the members of its own
it keeps).

Encoder members and their defaults:

=======================  =============================================================================================
``name``, ``revision``   what its results are filed under (required)
``encode``               ``encode(texts, *, kind="query" | "document", prompt=None)``: one row per text, with
                         ``prompt`` applied (required)
``query_prompt``         the prompt queries get when none is passed (default None: none)
``cache_identity``       a string that changes whenever its embeddings would (weights, settings): part of the
                         embedding cache key (default "": name and revision say it all)
``for_task(task)``       the encoder bound to a task, for encoders whose prompts depend on it (default: itself)
``instructions()``       the instructions it applies itself on the bound task, recorded with a result (default None)
``expansion_mean_dtype`` how a query's embedding is averaged with its expansion's (default None: the expansion encoded
                         as a document, the two unit vectors averaged; a dtype: ``encode_expansions``, the raw
                         embeddings averaged in that dtype, as the official classes do)
``encode_expansions``    the encoder's own encoding of expansion texts (default: as documents, without prompt)
``close()``              frees what it holds (a multi-process pool; default: nothing)
``fast_encoder(kind,     how ``encode`` would encode ``kind`` texts with ``prompt`` through
prompt)``                ``r2med_plugin.models.fast_encode`` (a sentence-transformers model on a GPU, its tokenizer in
                         worker processes), so dense retrieval can feed it one length-sorted stream per call; None:
                         its own ``encode`` (default)
=======================  =============================================================================================

Reranker members: ``name``, ``revision``, ``rerank(first_stage, queries, documents, *, depth, show_progress)``
(required); ``for_task(task)`` (default: itself), ``last_report`` (usage and traces of its last ``rerank``, recorded with
a result; default None) and ``close()`` (default: nothing).
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal, Protocol, runtime_checkable

import numpy as np

from r2med_plugin.types import Run

if TYPE_CHECKING:
    from r2med_plugin.models.fast_encode import FastEncoder

EncodeKind = Literal["query", "document"]


@runtime_checkable
class Encoder(Protocol):
    """Every member the runner uses (see the module docstring); ``EncoderBase`` gives the defaults. The data members
    are read-only here: a family may hold them as attributes or compute them."""

    @property
    def name(self) -> str: ...

    @property
    def revision(self) -> str: ...

    @property
    def query_prompt(self) -> str | None: ...

    @property
    def cache_identity(self) -> str: ...

    @property
    def expansion_mean_dtype(self) -> str | None: ...

    def encode(self, texts: Sequence[str], *, kind: EncodeKind, prompt: str | None = None) -> np.ndarray: ...

    def encode_expansions(self, texts: Sequence[str]) -> np.ndarray: ...

    def for_task(self, task: str) -> Encoder: ...

    def instructions(self) -> Mapping[str, str | None] | None: ...

    def close(self) -> None: ...

    def fast_encoder(self, kind: EncodeKind, prompt: str | None = None) -> FastEncoder | None: ...


@runtime_checkable
class PlainEncoder(Protocol):
    """What a user's object needs to be used as an encoder (through ``as_encoder``)."""

    @property
    def name(self) -> str: ...

    @property
    def revision(self) -> str: ...

    def encode(self, texts: Sequence[str], *, kind: EncodeKind) -> np.ndarray: ...


def with_prompt(prompt: str | None, texts: Sequence[str]) -> list[str]:
    """``prompt`` prepended to each text (what sentence-transformers does with a prompt); None: the texts."""
    return list(texts) if prompt is None else [prompt + text for text in texts]


class EncoderBase:
    """The defaults of every member ``Encoder`` declares beside ``name``, ``revision`` and ``encode``."""

    name: str
    revision: str
    query_prompt: str | None = None

    @property
    def cache_identity(self) -> str:
        return ""

    @property
    def expansion_mean_dtype(self) -> str | None:
        return None

    def encode(self, texts: Sequence[str], *, kind: EncodeKind, prompt: str | None = None) -> np.ndarray:
        raise NotImplementedError(f"{type(self).__name__} must define encode(texts, *, kind, prompt=None)")

    def encode_expansions(self, texts: Sequence[str]) -> np.ndarray:
        """Expansion texts as documents, without prompt."""
        return self.encode(list(texts), kind="document")

    def for_task(self, task: str) -> Encoder:
        return self

    def instructions(self) -> Mapping[str, str | None] | None:
        return None

    def close(self) -> None:
        return None

    def fast_encoder(self, kind: EncodeKind, prompt: str | None = None) -> FastEncoder | None:
        """None: texts are encoded by ``encode`` (see ``r2med_plugin.models.fast_encode`` for the models that have one)."""
        return None


def _takes_prompt(encode: Any) -> bool:
    try:
        parameters = inspect.signature(encode).parameters
    except (TypeError, ValueError):
        return False
    return "prompt" in parameters or any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values())


class _Adapted:
    """What both adapters share: the user's object (``model``), its name and revision, equality by that object (one
    object adapted twice is one model, so stages compare equal), and ``_own`` (the object's member, else a default)."""

    model: Any

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.model!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Adapted) and type(other) is type(self) and other.model == self.model

    def __hash__(self) -> int:
        return hash(self.model)

    def _own(self, member: str, default: Any) -> Any:
        return getattr(self.model, member, default)

    @property
    def name(self) -> str:
        return self.model.name

    @property
    def revision(self) -> str:
        return self.model.revision


# _Adapted reads name and revision from the user's object (read-only); the families' are attributes they set
class AdaptedEncoder(_Adapted, EncoderBase):  # type: ignore[override]
    """A user's object with ``name``, ``revision`` and ``encode(texts, *, kind)`` as an ``Encoder``.

    A prompt is passed to its ``encode`` when that takes ``prompt=``, else prepended to each text. Members of
    ``Encoder`` the object has itself (an earlier release documented ``query_prompt``, ``cache_identity`` and
    ``for_task`` as optional) are its own; the others are ``EncoderBase``'s defaults. The object is read here, once
    per member use, and nowhere else.
    """

    def __init__(self, model: PlainEncoder) -> None:
        self.model = model
        self._takes_prompt = _takes_prompt(model.encode)

    @property
    def query_prompt(self) -> str | None:  # type: ignore[override]  # the object's own, read-only here; families set theirs
        return self._own("query_prompt", None)

    @property
    def cache_identity(self) -> str:
        return self._own("cache_identity", "")

    @property
    def expansion_mean_dtype(self) -> str | None:
        # an object with its own encode_expansions averages raw embeddings (float32 unless it says otherwise)
        return self._own("expansion_mean_dtype", "float32" if callable(self._own("encode_expansions", None)) else None)

    def encode(self, texts: Sequence[str], *, kind: EncodeKind, prompt: str | None = None) -> np.ndarray:
        if prompt is None:
            return self.model.encode(texts, kind=kind)
        if self._takes_prompt:
            return self.model.encode(texts, kind=kind, prompt=prompt)
        return self.model.encode(with_prompt(prompt, texts), kind=kind)

    def encode_expansions(self, texts: Sequence[str]) -> np.ndarray:
        own = self._own("encode_expansions", None)
        return own(texts) if callable(own) else super().encode_expansions(texts)

    def for_task(self, task: str) -> Encoder:
        own = self._own("for_task", None)
        return as_encoder(own(task)) if callable(own) else self

    def instructions(self) -> Mapping[str, str | None] | None:
        own = self._own("instructions", None)
        return own() if callable(own) else None

    def close(self) -> None:
        own = self._own("close", None)
        if callable(own):
            own()


def is_encoder(value: object) -> bool:
    """Whether ``value`` is one of our encoders or a user's object ``as_encoder`` adapts."""
    return isinstance(value, (EncoderBase, PlainEncoder))


def as_encoder(value: object) -> Encoder:
    """``value`` as an ``Encoder``: ours as they are, a user's object with name, revision and encode adapted once."""
    if isinstance(value, EncoderBase):
        return value
    if isinstance(value, PlainEncoder):
        return AdaptedEncoder(value)
    raise TypeError(f"an encoder needs name, revision and encode(texts, *, kind) -> one row per text; "
                    f"{type(value).__name__} has not all of them")


# --- pair scorers and rerankers -----------------------------------------------------------------------------


class PairScorerBase:
    """Our pair scorers: ``name``, ``revision``, ``predict(pairs)``, and ``for_task(task)`` (default: itself; mteb's
    scorers feed each task's metadata). Third-party scorers (a sentence-transformers CrossEncoder, mteb's wrapper) are
    used as they are."""

    name: str
    revision: str

    def predict(self, pairs: Sequence[tuple[str, str]]) -> np.ndarray:
        raise NotImplementedError(f"{type(self).__name__} must define predict(pairs)")

    def for_task(self, task: str) -> PairScorerBase:
        return self


def bound_to_task(model: object, task: str) -> object:
    """``model`` bound to ``task``: an encoder, reranker or pair scorer of ours through its ``for_task``; anything
    else (a third-party pair scorer) as it is."""
    if isinstance(model, (EncoderBase, RerankerBase, PairScorerBase)):
        return model.for_task(task)
    return model



@runtime_checkable
class RerankReport(Protocol):
    """What a reranker's last ``rerank`` cost and noticed (``usage``), and its traces (None: none), written beside the
    result as ``<Task>.<traces_name>.jsonl``."""

    @property
    def usage(self) -> Mapping[str, Any]: ...

    @property
    def traces(self) -> list[dict[str, Any]] | None: ...

    @property
    def traces_name(self) -> str: ...


@runtime_checkable
class Reranker(Protocol):
    """Every member the runner uses (see the module docstring); ``RerankerBase`` gives the defaults. The data members
    are read-only here, as ``Encoder``'s."""

    @property
    def name(self) -> str: ...

    @property
    def revision(self) -> str: ...

    @property
    def last_report(self) -> RerankReport | None: ...

    def rerank(self, first_stage: Run, queries: Mapping[str, str], documents: Mapping[str, str], *, depth: int,
               show_progress: bool = True) -> Run: ...

    def for_task(self, task: str) -> Reranker: ...

    def close(self) -> None: ...


@runtime_checkable
class PlainReranker(Protocol):
    """What a user's object needs to be used as a reranker (through ``as_reranker_model``)."""

    @property
    def name(self) -> str: ...

    @property
    def revision(self) -> str: ...

    def rerank(self, first_stage: Run, queries: Mapping[str, str], documents: Mapping[str, str], *, depth: int,
               show_progress: bool = True) -> Run: ...


class RerankerBase:
    """The defaults of every member ``Reranker`` declares beside ``name``, ``revision`` and ``rerank``."""

    name: str
    revision: str
    last_report: RerankReport | None = None

    def rerank(self, first_stage: Run, queries: Mapping[str, str], documents: Mapping[str, str], *, depth: int,
               show_progress: bool = True) -> Run:
        raise NotImplementedError(f"{type(self).__name__} must define rerank(first_stage, queries, documents, *, depth)")

    def for_task(self, task: str) -> Reranker:
        return self

    def close(self) -> None:
        return None


# name and revision: as AdaptedEncoder's
class AdaptedReranker(_Adapted, RerankerBase):  # type: ignore[override]
    """A user's object with ``name``, ``revision`` and ``rerank`` as a ``Reranker``; members of ``Reranker`` it has
    itself are its own, the others ``RerankerBase``'s defaults (as ``AdaptedEncoder``)."""

    def __init__(self, model: PlainReranker) -> None:
        self.model = model

    @property
    def last_report(self) -> RerankReport | None:  # type: ignore[override]  # the object's own, read-only here; families set theirs
        return self._own("last_report", None)

    def rerank(self, first_stage: Run, queries: Mapping[str, str], documents: Mapping[str, str], *, depth: int,
               show_progress: bool = True) -> Run:
        return self.model.rerank(first_stage, queries, documents, depth=depth, show_progress=show_progress)

    def for_task(self, task: str) -> Reranker:
        own = self._own("for_task", None)
        return as_reranker_model(own(task)) if callable(own) else self

    def close(self) -> None:
        own = self._own("close", None)
        if callable(own):
            own()


def is_reranker(value: object) -> bool:
    """Whether ``value`` is one of our rerankers or a user's object ``as_reranker_model`` adapts."""
    return isinstance(value, (RerankerBase, PlainReranker))


def as_reranker_model(value: object) -> Reranker:
    """``value`` as a ``Reranker``: ours as they are, a user's object with name, revision and rerank adapted once.
    (r2med_plugin.evaluation.reranker_stage.as_reranker also takes names, pair scorers and LLM reranker names.)"""
    if isinstance(value, RerankerBase):
        return value
    if isinstance(value, PlainReranker):
        return AdaptedReranker(value)
    raise TypeError(f"a reranker needs name, revision and rerank(first_stage, queries, documents, *, depth); "
                    f"{type(value).__name__} has not all of them")
