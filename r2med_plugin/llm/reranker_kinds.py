"""LLM rerankers behind any OpenAI-compatible endpoint, as Rerankers (r2med_plugin.evaluation.reranker_stage):

- ``llm-listwise:<model>`` — RankGPT (Sun et al., 2023): sliding windows (20, step 10) from the bottom of the first
  stage's top k to the top, each window permuted by the LLM; the final order gives the scores (k, k-1, ..., 1).
- ``llm-pointwise:<model>`` — one request per (query, passage): P(Yes) from the answer token's log-probabilities,
  or, where the endpoint returns none, a 0-3 relevance label / 3.
- ``llm-setwise:<model>`` — Setwise (Zhuang et al., SIGIR 2024): the LLM names the most relevant of a set of c
  passages (``set_size``, default 3); a heap sort (default) or bubble sort of the first stage's top k driven by those
  picks puts the best ``setwise_k`` (default 10) on top, in order; the others follow in the first stage's order.
- ``llm-groupwise:<model>`` — GroupRank (arXiv 2511.11653): each query's documents are split into groups of at most
  ``group_size`` (default 20; ceil(depth / group_size) groups of near-equal size), drawn at random with a seed
  (``grouping="random"``, the default) or cut from the first stage's order (``"first-stage"``); the LLM scores every
  document of a group (0-10) in one answer; with ``regroup`` R > 1 the scores of R random groupings are averaged.
  Documents are ranked by their (mean) score, ties in the first stage's order; scores: depth, depth - 1, ..., 1.
  Groups of all queries and groupings are asked concurrently. Every group's answer is kept (``last_report.traces``).
- ``llm-reasoning:<model>`` — Rank1 style (Weller et al., 2025): the model reasons, then answers true or false;
  the score is P(true) from the answer token's log-probabilities (the said word where there are none). The
  reasoning traces are kept (``last_report.traces``) and written beside the result.

A pair whose answer says neither word (an empty answer, a reasoning budget spent before the answer) scores 0.5 and
is counted as ``undecided``; a listwise answer with no usable identifier keeps its window's order and is counted
as ``unparsed_answers``; a setwise answer that names no passage of its set picks the set's first passage (as
llm-rankers reads it: "A") and is counted as ``unparsed_answers`` (``empty_answers`` when empty). Prompts:
prompts.json (each with its published source). A groupwise document the answer gives no score (missing, or not a
finite number) gets, in that grouping, the lowest score the answer gave its group, or 0 (the scale's bottom) when the
answer gave none; each such document is counted as ``missing_scores``, each answer without any score as
``unparsed_answers`` (``empty_answers`` when empty). A score outside the scale the prompt asks for (0-10) is no score
either: its document gets the same fallback, and is counted as ``out_of_scale_scores`` (a warning names them).

Reasoning models (listwise, groupwise): the reasoning (a ``reasoning_content`` part, or ``<think>...</think>``
in the answer; a ``<think>`` never closed is all reasoning) is set apart before the answer is read; a listwise window
whose answer held no ranking after the reasoning keeps its order and is counted as ``no_ranking_after_reasoning``, and
the windows' reasoning is kept as traces (written beside the result). ``reasoning_effort`` goes with every request.
InsertRank (listwise, ``show_scores``): each passage's turn shows its first-stage score with four decimals.

Each kind is one class (r2med_plugin.llm.listwise, pairwise, setwise, groupwise) on ``LLMReranker``
(r2med_plugin.llm.strategy): its ``questions`` generator is what a rerank asks and what the cost estimate counts.
The kinds are registered here, in ``LLM_RERANKER_KINDS``; ``register_llm_reranker`` adds one.
"""

from __future__ import annotations

import difflib
from typing import TypeGuard

from r2med_plugin.errors import UserError
from r2med_plugin.llm.config import LLMRerankerConfig
from r2med_plugin.llm.groupwise import GroupwiseLLMReranker
from r2med_plugin.llm.listwise import ListwiseLLMReranker
from r2med_plugin.llm.pairwise import PointwiseLLMReranker, ReasoningLLMReranker
from r2med_plugin.llm.report import (
    ANSWER_COUNTS,
    UNDECIDED,
    RerankReport,
    fallback_warning,
    out_of_scale_warning,
    trace_order,
)
from r2med_plugin.llm.setwise import (
    SetwiseLLMReranker,
    bubble_sets,
    bubble_top,
    bubble_windows,
    heap_question_bound,
    heap_sets,
    heap_top,
)
from r2med_plugin.llm.strategy import TOP_LOGPROBS, LLMReranker, own_logprobs, split_reasoning
from r2med_plugin.llm_settings import add_kind_settings
from r2med_plugin.rules import SettingError

__all__ = [
    "ANSWER_COUNTS", "LLM_RERANKER_KINDS", "TOP_LOGPROBS", "UNDECIDED", "GroupwiseLLMReranker", "LLMReranker",
    "ListwiseLLMReranker", "PointwiseLLMReranker", "ReasoningLLMReranker", "RerankReport", "SetwiseLLMReranker",
    "bubble_sets", "bubble_top", "bubble_windows", "fallback_warning", "heap_question_bound", "heap_sets", "heap_top",
    "is_llm_reranker_name", "llm_reranker", "llm_reranker_names", "out_of_scale_warning", "own_logprobs",
    "register_llm_reranker", "split_reasoning", "trace_order",
]

# The one place the kinds are registered: --rerank llm-<kind>:<model> builds LLM_RERANKER_KINDS["llm-<kind>"].
LLM_RERANKER_KINDS: dict[str, type[LLMReranker]] = {
    "llm-listwise": ListwiseLLMReranker, "llm-pointwise": PointwiseLLMReranker, "llm-reasoning": ReasoningLLMReranker,
    "llm-setwise": SetwiseLLMReranker, "llm-groupwise": GroupwiseLLMReranker,
}


def register_llm_reranker(kind: type[LLMReranker]) -> type[LLMReranker]:
    """Add ``kind`` (an ``LLMReranker`` subclass with its ``kind``, ``questions`` and, where it reads settings, its
    ``settings_class``: r2med_plugin.llm_settings) as ``llm-<kind>:<model>``; returns it, so it can decorate the class.
    Its settings become CLI flags, ``build_reranker_config`` keywords and sweep-spec keys, refused for the other kinds.
    Registering a name twice with another class is refused."""
    if not (isinstance(kind, type) and issubclass(kind, LLMReranker)) or kind.questions is LLMReranker.questions:
        raise TypeError(f"register_llm_reranker takes an LLMReranker subclass that defines questions(task), got {kind!r}")
    if not kind.kind or not kind.kind.replace("-", "").replace("_", "").isalnum() or kind.kind != kind.kind.lower():
        raise UserError(f"{kind.__name__}.kind must be a lower-case word (llm-<kind>:<model> names it), got {kind.kind!r}")
    name = f"llm-{kind.kind}"
    if LLM_RERANKER_KINDS.get(name, kind) is not kind:
        raise UserError(f"{name} is already registered to {LLM_RERANKER_KINDS[name].__name__}: give {kind.__name__} "
                        "another kind")
    add_kind_settings(kind.kind, kind.settings_class)  # its settings: flags, keywords and refusals follow from them
    LLM_RERANKER_KINDS[name] = kind
    return kind


def llm_reranker_names() -> str:
    """"llm-listwise:<model>, ... or llm-groupwise:<model>": every kind, for messages."""
    names = [f"{kind}:<model>" for kind in LLM_RERANKER_KINDS]
    return ", ".join(names[:-1]) + f" or {names[-1]}"


def is_llm_reranker_name(value: object) -> TypeGuard[str]:
    """Whether ``value`` names an LLM reranker ("llm-listwise:<model>", or a near miss of one)."""
    return isinstance(value, str) and value.split(":", 1)[0].lower().startswith("llm-")


def llm_reranker(spec: str, config: LLMRerankerConfig | None) -> LLMReranker:
    """The reranker ``spec`` names ("llm-listwise:<model>", "llm-pointwise:<model>", "llm-reasoning:<model>",
    "llm-setwise:<model>", "llm-groupwise:<model>")."""
    kind, _, model = spec.partition(":")
    if kind not in LLM_RERANKER_KINDS:
        close = difflib.get_close_matches(kind.lower(), list(LLM_RERANKER_KINDS), n=1, cutoff=0.5)
        hint = f" (did you mean {close[0]}:<model>?)" if close else ""
        raise SettingError(f"unknown LLM reranker {kind!r} in {{rerank}} {spec}{hint}: choose {llm_reranker_names()}",
                           field="rerank")
    if not model.strip():
        raise SettingError(f"{{rerank}} {spec} names no model: write {kind}:<model id the endpoint serves>, e.g. "
                           f"{kind}:Qwen/Qwen3-8B", field="rerank")
    if config is None:
        raise SettingError(f"{{rerank}} {spec} needs an endpoint: add {{base_url}} URL (e.g. http://localhost:8000/v1 for "
                           f"vLLM); in Python pass rerank=as_reranker({spec!r}, llm=LLMRerankerConfig(Endpoint(base_url)))",
                           field="base_url")
    return LLM_RERANKER_KINDS[kind](model, config)
