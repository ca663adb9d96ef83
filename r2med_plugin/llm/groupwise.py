"""``llm-groupwise:<model>``: GroupRank (arXiv 2511.11653), one strategy class (``questions``)."""

from __future__ import annotations

import json
import math
import random
import re
from collections.abc import Mapping
from typing import Any

from r2med_plugin.llm.cost import PlannedRequest, RequestPlan, TokenCounter
from r2med_plugin.llm.execution import TICK, Ask, Questions, RerankTask, Together
from r2med_plugin.llm.prompting import groupwise_messages, groupwise_scale, parse_group_scores
from r2med_plugin.llm.strategy import LLMReranker, split_reasoning
from r2med_plugin.llm_settings import GroupwiseSettings
from r2med_plugin.types import Run


class GroupwiseLLMReranker(LLMReranker):
    """Groupwise scoring (GroupRank, arXiv 2511.11653): a query's documents are split into groups of at most
    ``group_size``, and one request per group asks the LLM for a 0-10 score of each of its documents.

    - grouping "random" (the default, the paper's best): the documents are shuffled by Python's ``random.Random``
      seeded with ``"<group_seed>:<regrouping>:<query id>"``, then cut into ceil(depth / group_size) groups of
      near-equal size (sizes differ by at most one); "first-stage": the same cut of the first stage's order.
    - ``regroup`` R: R random groupings (regrouping 0 is the grouping ``regroup=1`` asks, so its answers are reused
      from the cache), each document's scores averaged over them.
    - a document the answer gives no score: the lowest score the answer gave its group (0 when it gave none),
      counted as ``missing_scores``; a score outside the 0-10 scale is no score (the same fallback), counted as
      ``out_of_scale_scores``.

    Documents are ranked by mean score, ties in the first stage's order; run scores: depth, depth - 1, ..., 1. Every
    group of every query and regrouping is asked at once (``--concurrency`` at a time). Every answer is kept as a
    trace (its documents, the scores read, None where the answer gave none, any reasoning).
    """

    kind = "groupwise"
    settings_class = GroupwiseSettings
    settings: GroupwiseSettings
    prompt_names = ("groupwise",)
    counted = ("unparsed_answers", "empty_answers", "missing_scores", "out_of_scale_scores")
    traces_name = "groupwise"

    def _settings(self) -> str:
        grouping = f"random seed{self.settings.seed}" if self.settings.grouping == "random" else "first-stage"
        regroup = f" regroup{self.settings.regroup}" if self.settings.regroup > 1 else ""
        return f"g{self.settings.group_size} {grouping}{regroup}{self._budget_label()}"

    def groupings(self, query_id: str, doc_ids: list[str]) -> list[list[list[str]]]:
        """The ``regroup`` groupings of one query's documents, each a list of groups (lists of document ids)."""
        if not doc_ids:
            return [[] for _ in range(self.settings.regroup)]
        count = math.ceil(len(doc_ids) / self.settings.group_size)
        groupings = []
        for regrouping in range(self.settings.regroup):
            order = list(doc_ids)
            if self.settings.grouping == "random":
                random.Random(f"{self.settings.seed}:{regrouping}:{query_id}").shuffle(order)
            groupings.append([order[index * len(order) // count:(index + 1) * len(order) // count] for index in range(count)])
        return groupings

    def group_messages(self, query: str, doc_ids: list[str], documents: Mapping[str, str]) -> list[dict[str, str]]:
        """The messages of one group's request."""
        return groupwise_messages(query, [documents[doc_id] for doc_id in doc_ids])

    def _total(self, task: RerankTask) -> int:
        return sum(len(groups) for query_id, doc_ids in task.lists.items() for groups in self.groupings(query_id, doc_ids))

    def _asked(self, task: RerankTask) -> dict[str, int]:
        return {"groups": self._total(task)}

    def request_plan(self, asked: list[PlannedRequest], task: RerankTask, counter: TokenCounter) -> RequestPlan:
        """The groups do not depend on the answers (first-stage order, or seeded random groupings): exact."""
        groupings = f" x {self.settings.regroup} groupings" if self.settings.regroup > 1 else ""
        return RequestPlan(asked, count_rule=f"exact: ceil(depth / {self.settings.group_size}) groups per query{groupings}, "
                                             "the same whatever the answers", answer_sketch=_groupwise_answer)

    def questions(self, task: RerankTask) -> Questions:
        """Every group of every query and regrouping at once; documents ranked by their mean score."""
        parameters = self._answer_parameters()
        scored = yield Together([self._group(task, query_id, regrouping, index, group, parameters)
                                 for query_id, doc_ids in task.lists.items()
                                 for regrouping, groups in enumerate(self.groupings(query_id, doc_ids))
                                 for index, group in enumerate(groups)])
        totals: dict[str, dict[str, list[float]]] = {query_id: {} for query_id in task.lists}
        for query_id, scores in scored:
            for doc_id, score in scores.items():
                totals[query_id].setdefault(doc_id, []).append(score)
        run: Run = {}
        for query_id, doc_ids in task.lists.items():
            means = {doc_id: math.fsum(scores) / len(scores) for doc_id, scores in totals[query_id].items()}
            order = sorted(doc_ids, key=lambda doc_id: -means.get(doc_id, -math.inf))  # stable: ties in first-stage order
            run[query_id] = {doc_id: float(len(order) - rank) for rank, doc_id in enumerate(order)}
        return run

    def _group(self, task: RerankTask, query_id: str, regrouping: int, index: int, group: list[str],
               parameters: dict[str, Any]) -> Questions:
        """One group's question: its documents' scores (the group's fallback where the answer gave none)."""
        answer = yield Ask(self.group_messages(task.queries[query_id], group, task.documents), parameters)
        yield TICK
        if answer is None:  # failed every retry: the run stops once the others are done
            return query_id, {}
        bottom, top = groupwise_scale()
        reasoning, final = split_reasoning(answer)
        given = parse_group_scores(final, len(group))
        read = {position: score for position, score in given.items() if bottom <= score <= top}
        if not given:
            task.count("unparsed_answers" if final.strip() else "empty_answers")
        task.count("missing_scores", len(group) - len(given))
        task.count("out_of_scale_scores", len(given) - len(read))
        fallback = min(read.values()) if read else bottom
        outside = {str(position + 1): score for position, score in given.items() if position not in read}
        task.traces.append({"query_id": query_id, "regrouping": regrouping, "group": index, "doc_ids": group,
                            "scores": [read.get(position) for position in range(len(group))], "fallback": fallback,
                            **({"out_of_scale": outside} if outside else {}),
                            "answer": final.strip(), "reasoning": (reasoning or "").strip(),
                            "finish_reason": answer.finish_reason, "completion_tokens": answer.completion_tokens})
        return query_id, {doc_id: read.get(position, fallback) for position, doc_id in enumerate(group)}


def _groupwise_answer(request: PlannedRequest) -> str:
    """A bare groupwise answer: a JSON object of one score per passage ({"1": 10, "2": 10, ...})."""
    found = re.search(r"The (\d+) passages below", request.messages[-1]["content"])
    count = int(found.group(1)) if found else 1
    return json.dumps({str(number): 10 for number in range(1, count + 1)})
