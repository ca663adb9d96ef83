"""``llm-pointwise:<model>`` and ``llm-reasoning:<model>``: one question per (query, passage), all concurrent; each
kind is one strategy class (``questions``), scores per query sorted descending."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from r2med_plugin.llm.cost import PlannedRequest, RequestPlan, TokenCounter
from r2med_plugin.llm.execution import TICK, Ask, Questions, RerankTask, Together
from r2med_plugin.llm.prompting import answer_tokens, graded_label, pair_messages, two_way_probability, word_answer
from r2med_plugin.llm.report import UNDECIDED
from r2med_plugin.llm.strategy import TOP_LOGPROBS, LLMReranker, own_logprobs
from r2med_plugin.llm_settings import DEFAULT_REASONING_TOKENS, PointwiseSettings, ReasoningSettings
from r2med_plugin.types import Run

PairScore = Callable[[str, str], Questions]  # (query id, doc id) -> questions returning the pair's score (None: failed)


def scored_pairs(task: RerankTask, score: PairScore) -> Questions:
    """Every pair of ``task`` scored by ``score``, concurrently (a ``TICK`` per pair); each query's scores sorted
    descending, a pair whose request failed left out."""
    def one(query_id: str, doc_id: str) -> Questions:
        value = yield from score(query_id, doc_id)
        yield TICK
        return query_id, doc_id, value

    scored = yield Together([one(query_id, doc_id) for query_id, doc_ids in task.lists.items() for doc_id in doc_ids])
    run: Run = {query_id: {} for query_id in task.lists}
    for query_id, doc_id, value in scored:
        if value is not None:
            run[query_id][doc_id] = value
    return {query_id: dict(sorted(ranked.items(), key=lambda item: item[1], reverse=True)) for query_id, ranked in run.items()}


@dataclass
class _Logprobs:
    missing: bool = False  # the endpoint answered without log-probabilities: ask for labels from then on


class PointwiseLLMReranker(LLMReranker):
    """P(Yes) of a yes/no relevance question; a 0-3 label / 3 where the endpoint returns no log-probabilities."""

    kind = "pointwise"
    settings_class = PointwiseSettings
    settings: PointwiseSettings
    prompt_names = ("pointwise", "pointwise_graded")
    counted = ("scored_by_logprobs", "scored_by_label", "undecided")
    YES_NO = {"temperature": 0, "max_tokens": 1, "logprobs": True, "top_logprobs": TOP_LOGPROBS}
    GRADED = {"temperature": 0, "max_tokens": 8}

    def _graded(self, rules: Any) -> dict[str, Any]:
        """The label question's parameters: 8 tokens, or the reasoning budget where the model counts its hidden
        reasoning in the budget (it takes max_completion_tokens: OpenAI's reasoning models), which 8 tokens never cover."""
        if rules.completion_tokens:
            return {"temperature": 0, "max_tokens": DEFAULT_REASONING_TOKENS}
        return dict(self.GRADED)

    def questions(self, task: RerankTask) -> Questions:
        """One question first (does the endpoint return log-probabilities at all?), then every pair's."""
        logprobs = _Logprobs()
        first = next(((query_id, doc_ids[0]) for query_id, doc_ids in task.lists.items() if doc_ids), None)
        if first is not None:  # counted apart unless the first pair's own question reuses it
            probe = yield Ask(pair_messages("pointwise", task.queries[first[0]], task.documents[first[1]]), dict(self.YES_NO),
                              probe=True)
            logprobs.missing = probe is not None and not probe.logprobs
        return (yield from scored_pairs(task, lambda query_id, doc_id: self._score(task, query_id, doc_id, logprobs)))

    def _score(self, task: RerankTask, query_id: str, doc_id: str, logprobs: _Logprobs) -> Questions:
        query, passage = task.queries[query_id], task.documents[doc_id]
        if not logprobs.missing:
            answer = yield Ask(pair_messages("pointwise", query, passage), dict(self.YES_NO))
            if answer is None:
                return None
            probability = two_way_probability(own_logprobs(answer), "yes", "no")
            if probability is not None:
                task.count("scored_by_logprobs")
                return probability
            if not answer.logprobs:
                logprobs.missing = True
        graded = yield Ask(pair_messages("pointwise_graded", query, passage), self._graded(task.rules))
        if graded is None:
            return None
        label = graded_label(graded.content)
        if label is None:
            task.count("undecided")
            return UNDECIDED
        task.count("scored_by_label")
        return label / 3

    def request_plan(self, asked: list[PlannedRequest], task: RerankTask, counter: TokenCounter) -> RequestPlan:
        """One question per pair where the endpoint returns log-probabilities holding yes or no; at most two (the 0-3
        label question too) where they hold neither."""
        bound = [PlannedRequest(pair_messages(kind, task.queries[query_id], task.documents[doc_id]), self._sent_parameters(parameters))
                 for query_id, doc_ids in task.lists.items() for doc_id in doc_ids
                 for kind, parameters in (("pointwise", self.YES_NO), ("pointwise_graded", self.GRADED))]
        return RequestPlan(asked, count_exact=True, messages_exact=True, bound=bound,
                           bound_rule="each pair also asked the 0-3 label question",
                           count_rule="one per pair, exact where the endpoint returns log-probabilities (vLLM, OpenAI); "
                                      "where it returns none, one probe more and each pair asks the 0-3 label question "
                                      "instead; at most two per pair (log-probabilities that hold neither yes nor no)")


class ReasoningLLMReranker(LLMReranker):
    """Rank1: reasoning, then true/false; P(true) from the answer token's log-probabilities."""

    kind = "reasoning"
    settings_class = ReasoningSettings
    settings: ReasoningSettings
    prompt_names = ("reasoning",)
    counted = ("scored_by_logprobs", "scored_by_answer", "undecided")

    def _settings(self) -> str:
        effort = f" effort-{self.settings.reasoning_effort}" if self.settings.reasoning_effort else ""
        return f"max{self.budget}{effort}"

    @property
    def budget(self) -> int:
        return self.settings.budget

    def questions(self, task: RerankTask) -> Questions:
        return (yield from scored_pairs(task, lambda query_id, doc_id: self._score(task, query_id, doc_id)))

    def _score(self, task: RerankTask, query_id: str, doc_id: str) -> Questions:
        parameters: dict[str, Any] = {"temperature": 0, "max_tokens": self.budget, "logprobs": True, "top_logprobs": TOP_LOGPROBS}
        if self.settings.reasoning_effort:
            parameters["reasoning_effort"] = self.settings.reasoning_effort
        answer = yield Ask(pair_messages("reasoning", task.queries[query_id], task.documents[doc_id]), parameters)
        if answer is None:
            return None
        reasoning, final = _thought_and_answer(answer)
        # scored at the answer's own tokens only: vLLM's reasoning parser still returns the thought's tokens first
        score = two_way_probability(answer_tokens(answer.logprobs, final), "true", "false") if final else None
        if score is not None:
            task.count("scored_by_logprobs")
        else:
            said = word_answer(final, ("true", "false")) if final else None
            score = {"true": 1.0, "false": 0.0}.get(said or "", UNDECIDED)
            task.count("undecided" if said is None else "scored_by_answer")
        task.traces.append({"query_id": query_id, "doc_id": doc_id, "score": score, "answer": final, "reasoning": reasoning.strip(),
                            "finish_reason": answer.finish_reason, "completion_tokens": answer.completion_tokens})
        return score


def _thought_and_answer(answer) -> tuple[str, str]:
    """(reasoning, answer): the answer is what follows the thought; a thought never closed (the budget spent, no
    separate reasoning part) is all thought: no answer, undecided."""
    text = answer.content
    thought_inline = "</think>" in text
    unfinished = answer.reasoning is None and not thought_inline and (
        answer.finish_reason == "length" or text.lstrip().startswith("<think>"))
    if unfinished:
        return text, ""
    reasoning = answer.reasoning if answer.reasoning is not None else (text.split("</think>")[0] if thought_inline else "")
    return reasoning, text.split("</think>")[-1].strip()
