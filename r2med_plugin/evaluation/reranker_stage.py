"""Rerankers: what reorders a first stage's top k. One protocol; a new kind of reranker is a new class.

``Reranker.rerank(first_stage, queries, documents, depth=...)`` returns, per query, the first ``depth``
documents of ``first_stage`` (in its order) with the reranker's scores, as the official
``eval_reranker`` keeps them. :class:`CrossEncoderReranker` wraps any pair scorer (``predict(pairs)``):
a sentence-transformers CrossEncoder, :class:`SentenceTransformerCrossEncoder`, mteb's wrapper. The LLM rerankers
(r2med_plugin.llm: "llm-listwise:<model>", "llm-pointwise:<model>", "llm-reasoning:<model>", "llm-setwise:<model>",
"llm-groupwise:<model>") are chosen by name with their endpoint settings (``llm=LLMRerankerConfig(...)``). The protocol,
its defaults (``for_task``, ``last_report``, ``close``) and the adapter of a user's object: r2med_plugin.models.protocols.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from r2med_plugin.errors import UserError
from r2med_plugin.llm.config import LLMRerankerConfig
from r2med_plugin.llm.reranker_kinds import is_llm_reranker_name, llm_reranker
from r2med_plugin.models import protocols
from r2med_plugin.models.cross_encoder import as_pair_scorer, reranker_name, reranker_revision
from r2med_plugin.retrieval.rerank import rerank_run
from r2med_plugin.rules import SettingError
from r2med_plugin.types import Run


class CrossEncoderReranker(protocols.RerankerBase):
    """A pair scorer (``predict(pairs) -> scores``, raw logits as the official code takes them) as a Reranker."""

    def __init__(self, model: object, *, batch_size: int = 32) -> None:
        as_pair_scorer(model)  # refuses, before any data loads, an object that cannot score pairs
        self.model = model
        self.batch_size = batch_size
        self.name = reranker_name(model)
        self.revision = reranker_revision(model)

    def for_task(self, task: str) -> "CrossEncoderReranker":
        """This reranker with its pair scorer bound to ``task`` (a scorer whose prompts depend on the task: mteb's)."""
        bound = protocols.bound_to_task(self.model, task)
        return self if bound is self.model else CrossEncoderReranker(bound, batch_size=self.batch_size)

    def rerank(self, first_stage: Run, queries: Mapping[str, str], documents: Mapping[str, str], *, depth: int,
               show_progress: bool = True) -> Run:
        return rerank_run(first_stage, queries, documents, self.model, depth=depth, batch_size=self.batch_size,
                          show_progress=show_progress)


def as_reranker(value: object, *, batch_size: int = 32, llm: LLMRerankerConfig | None = None) -> protocols.Reranker:
    """A Reranker from what a user gives: a Reranker, a pair scorer, an LLM reranker's name ("llm-listwise:<model>",
    "llm-pointwise:<model>", "llm-reasoning:<model>", "llm-setwise:<model>", "llm-groupwise:<model>", with ``llm`` saying where and how to ask), or
    a cross-encoder's name or folder (loaded here, resolved like every name: r2med_plugin.models.registry, so a name mteb knows
    loads through mteb)."""
    if protocols.is_reranker(value):
        if llm is not None:
            raise UserError("llm (the endpoint settings) configures an LLM reranker named as 'llm-<kind>:<model>'; "
                            f"{type(value).__name__} is already built: drop llm")
        return protocols.as_reranker_model(value)
    if is_llm_reranker_name(value):
        return llm_reranker(value, llm)
    if llm is not None:
        raise SettingError(f"llm (the endpoint settings: {{base_url}}, {{window}}, ...) applies to LLM rerankers only; {value!r} "
                           "is a cross-encoder: name an LLM reranker as llm-listwise:<model> (or pointwise, reasoning), or drop "
                           "llm", field="llm")
    if isinstance(value, (str, os.PathLike)):
        from r2med_plugin.models.registry import resolve

        value = resolve(str(value)).load_cross_encoder(batch_size=batch_size)
        if protocols.is_reranker(value):
            return protocols.as_reranker_model(value)
    return CrossEncoderReranker(value, batch_size=batch_size)
