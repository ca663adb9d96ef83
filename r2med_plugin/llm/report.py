"""What an LLM rerank reports: its usage and answer counts (``RerankReport``), its traces' order, and the warnings
for a rerank that mostly fell back (the scores then are the fallback's, not the model's)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from r2med_plugin.llm.prompting import groupwise_scale

UNDECIDED = 0.5
ANSWER_COUNTS = ("scored_by_logprobs", "scored_by_label", "scored_by_answer", "undecided", "unparsed_answers", "empty_answers",
                 "no_ranking_after_reasoning", "missing_scores", "out_of_scale_scores")


@dataclass(frozen=True)
class RerankReport:
    """What the last ``rerank`` cost and noticed (``usage``), and its traces (a reasoning reranker's reasoning, a
    listwise reasoning model's windows, a groupwise reranker's answers), written beside the result as
    ``<Task>.<traces_name>.jsonl``."""

    usage: dict[str, Any]
    traces: list[dict[str, Any]] | None = None
    traces_name: str = "reasoning"


def trace_order(trace: Mapping[str, Any]) -> tuple:
    """The order of a rerank's traces: by query, then (reasoning: a pair's) score descending and document, (listwise)
    window, (groupwise) regrouping and group."""
    return (str(trace["query_id"]), -float(trace.get("score", 0.0)), str(trace.get("doc_id", "")), trace.get("window", 0),
            trace.get("regrouping", 0), trace.get("group", 0))


_FALLBACK_CHECKS = {
    "listwise": "that the model answers with passage identifiers ([2] > [1] > ...) and that --max-tokens, if given, "
                "leaves room for them (after the reasoning, for a reasoning model: its windows are in <Task>.reasoning.jsonl)",
    "groupwise": "that the model answers with a score per passage ({\"1\": 7, \"2\": 3} or lines such as [1] 7) and that "
                 "--max-tokens, if given, leaves room for them after any reasoning (the answers are in <Task>.groupwise.jsonl)",
    "setwise": "that the model answers with a passage label (Passage B, or B) and that --max-tokens, if given, leaves "
               "room for it",
    "pointwise": "that the endpoint returns log-probabilities (vLLM: --max-logprobs 20) or answers the 0-3 label question, "
                 "and that the model answers without reasoning first (a reasoning model: llm-reasoning, or its thinking "
                 "turned off, Qwen3: --extra-body '{\"chat_template_kwargs\": {\"enable_thinking\": false}}')",
    "reasoning": "that --max-tokens (the reasoning budget) leaves room for the answer after the reasoning, that the "
                 "server's --reasoning-parser fits the model, and the answers in the traces (<Task>.reasoning.jsonl)",
}
_UNIT_FALLBACKS = {"listwise": "windows", "setwise": "comparisons", "groupwise": "groups"}


def out_of_scale_warning(name: str, usage: Mapping[str, Any]) -> str | None:
    """What to say when a groupwise answer gave scores outside the scale its prompt asks for, or None."""
    outside = usage.get("out_of_scale_scores", 0)
    if not outside:
        return None
    low, high = groupwise_scale()
    return (f"{name}: {outside} score(s) outside the {low:g}-{high:g} scale the prompt asks for were read as no score: each "
            "of those documents got its group's fallback (the lowest in-scale score the answer gave, else 0). The "
            "answers are in <Task>.groupwise.jsonl (out_of_scale); check that the model follows the prompt's scale.")


def _answers_fallen_back(kind: str, usage: Mapping[str, Any]) -> tuple[int, int, str, str]:
    """(failed, total, what was asked, what each failure fell back to) of a rerank's usage."""
    if kind in _UNIT_FALLBACKS:
        reasoned = usage.get("no_ranking_after_reasoning", 0)
        failed = usage.get("unparsed_answers", 0) + usage.get("empty_answers", 0) + reasoned
        total = usage.get("requests", 0) + usage.get("cached_answers", 0) + usage.get("repeated_questions", 0)
        unusable = "were unparsed or empty" + (f" ({reasoned} held no ranking after the reasoning)" if reasoned else "")
        fallback = {"listwise": f"{unusable} (each kept the first stage's order)",
                    "setwise": "were unparsed or empty (each picked its set's first passage)",
                    "groupwise": "were unparsed or empty (each scored its documents 0)"}[kind]
        return failed, total, _UNIT_FALLBACKS[kind], fallback
    failed = usage.get("undecided", 0)
    total = failed + sum(usage.get(key, 0) for key in ANSWER_COUNTS if key.startswith("scored_by_"))
    return failed, total, "pairs", f"were undecided (each scored {UNDECIDED})"


def fallback_warning(kind: str, name: str, usage: Mapping[str, Any]) -> str | None:
    """What to say when most of a rerank fell back (more than half of the pairs undecided, or of the listwise windows
    unparsed or empty), or None: the scores are then mostly the fallback, not the model's judgement."""
    failed, total, what, fallback = _answers_fallen_back(kind, usage)
    if not total or 2 * failed <= total:
        return None
    checks = _FALLBACK_CHECKS.get(kind, "and what the model answers")
    return (f"{name}: {failed} of {total} {what} ({failed / total:.0%}) {fallback}: the model or endpoint is not giving "
            "usable answers, so the scores are mostly the fallback, not the model's ranking. Check that --rerank names "
            f"the model the endpoint serves, {checks}.")
