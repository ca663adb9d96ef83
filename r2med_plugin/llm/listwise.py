"""``llm-listwise:<model>``: RankGPT (Sun et al., 2023) sliding windows, one strategy class (``questions``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from r2med_plugin.llm.cost import PlannedRequest, RequestPlan, TokenCounter, longest_first
from r2med_plugin.llm.execution import TICK, Ask, Questions, RerankTask, Together
from r2med_plugin.llm.prompting import apply_permutation, listwise_messages, llm_prompts, parse_permutation, score_format, windows
from r2med_plugin.llm.strategy import LLMReranker, positional_scores, split_reasoning
from r2med_plugin.llm_settings import ListwiseSettings


class ListwiseLLMReranker(LLMReranker):
    """RankGPT's sliding-window listwise reranking (window and step from the config); with ``show_scores`` each
    passage's first-stage score is in the prompt (InsertRank). A reasoning model's reasoning is set apart before the
    ranking is read, and kept (one trace per window)."""

    kind = "listwise"
    settings_class = ListwiseSettings
    settings: ListwiseSettings
    counted = ("unparsed_answers", "empty_answers", "no_ranking_after_reasoning")

    @property
    def prompt_names(self) -> tuple[str, ...]:  # type: ignore[override]
        return ("listwise", "listwise_scores") if self.settings.show_scores else ("listwise",)

    def _settings(self) -> str:
        scores = f" scores{score_format()}" if self.settings.show_scores else ""
        return f"w{self.settings.window}s{self.settings.step}{scores}{self._budget_label()}"

    def _shown(self) -> dict[str, Any]:
        return {"first_stage_scores": score_format()} if self.settings.show_scores else {}

    def _spans(self, count: int) -> list[tuple[int, int]]:
        return [(start, end) for start, end in windows(count, self.settings.window, self.settings.step) if end - start > 1]

    def _total(self, task: RerankTask) -> int:
        return sum(len(self._spans(len(doc_ids))) for doc_ids in task.lists.values())

    def _asked(self, task: RerankTask) -> dict[str, int]:
        return {"windows": self._total(task)}

    def window_messages(self, query: str, doc_ids: list[str], documents: Mapping[str, str],
                        scores: Mapping[str, float] | None = None) -> list[dict[str, str]]:
        """The messages of one window's request (``scores``: the first-stage scores, shown when ``show_scores``)."""
        shown = [scores[doc_id] for doc_id in doc_ids] if self.settings.show_scores and scores is not None else None
        if self.settings.show_scores and shown is None:
            raise ValueError("show_scores needs the first stage's scores of the window's documents")
        return listwise_messages(query, [documents[doc_id] for doc_id in doc_ids], self.settings.window, shown)

    def questions(self, task: RerankTask) -> Questions:
        """Each query's windows in turn, from the bottom up; the queries concurrently."""
        parameters = self._answer_parameters()
        ranked = yield Together([self._query_windows(task, query_id, parameters) for query_id in task.lists])
        return {query_id: positional_scores(order) for query_id, order in ranked}

    def _query_windows(self, task: RerankTask, query_id: str, parameters: dict[str, Any]) -> Questions:
        order = list(task.lists[query_id])
        scores = task.first_stage.get(query_id)
        for index, (start, end) in enumerate(self._spans(len(order))):
            window = order[start:end]
            answer = yield Ask(self.window_messages(task.queries[query_id], window, task.documents, scores), parameters)
            yield TICK
            if answer is None:  # failed every retry: the run stops once the others are done
                break
            permutation = self._read_window(task, query_id, index, window, answer)
            order = apply_permutation(order, start, end, permutation)
        return query_id, order

    @staticmethod
    def _read_window(task: RerankTask, query_id: str, index: int, window: list[str], answer) -> list[int]:
        """The window's permutation from its answer (its order where none is read), counted and traced."""
        reasoning, final = split_reasoning(answer)
        permutation = parse_permutation(final, len(window))
        ranked = not (permutation == list(range(len(window))) and not any(ch.isdigit() for ch in final))
        if reasoning is not None:
            task.traces.append({"query_id": query_id, "window": index, "doc_ids": window, "ranked": ranked,
                                "answer": final.strip(), "reasoning": reasoning.strip(),
                                "finish_reason": answer.finish_reason, "completion_tokens": answer.completion_tokens})
            if not ranked:
                task.count("no_ranking_after_reasoning")
        elif not final.strip():
            task.count("empty_answers")
        elif not ranked:
            task.count("unparsed_answers")
        return permutation

    def request_plan(self, asked: list[PlannedRequest], task: RerankTask, counter: TokenCounter) -> RequestPlan:
        """The windows are fixed (depth, window, step); the passages a window holds depend on the answers before it."""
        parameters = self._sent_parameters(self._answer_parameters())
        bound = []
        for query_id, doc_ids in task.lists.items():
            ranked: dict[int, list[str]] = {}  # words kept per passage -> the query's documents, longest passage first
            for start, end in self._spans(len(doc_ids)):
                words = llm_prompts()["listwise"]["words_per_passage"] * max(1, self.settings.window // (end - start))
                if words not in ranked:
                    cut = [" ".join(task.documents[doc_id].strip().split()[:words]) for doc_id in doc_ids]
                    ranked[words] = [doc_ids[index] for index in longest_first(cut, counter)]
                window = ranked[words][:end - start]
                bound.append(PlannedRequest(self.window_messages(task.queries[query_id], window, task.documents,
                                                                 task.first_stage.get(query_id)), parameters))
        return RequestPlan(asked, count_exact=True, messages_exact=False, assumption="each window keeps its order",
                           bound=bound, bound_rule="each window holding its query's longest passages",
                           count_rule=f"exact: RankGPT's windows ({self.settings.window}, step {self.settings.step}) over each "
                                      "query's top depth; which passages a window holds depends on the answers before it",
                           answer_sketch=_listwise_answer)


def _listwise_answer(request: PlannedRequest) -> str:
    """A bare RankGPT answer for a window ([1] > [2] > ... > [n]): system, 3 opening turns, 2 per passage, 1 closing."""
    count = (len(request.messages) - 4) // 2
    return " > ".join(f"[{rank}]" for rank in range(1, count + 1))
