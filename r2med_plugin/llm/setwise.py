"""``llm-setwise:<model>``: Setwise (Zhuang et al., SIGIR 2024), one strategy class (``questions``), and the two
sorts it drives by picks (written as generators of the sets they ask about, so the reranker, the tests and
benchmarks/setwise_parity.py run the same code)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Generator
from typing import Any, TypeVar

from r2med_plugin.llm.cost import PlannedRequest, RequestPlan, TokenCounter, longest_first
from r2med_plugin.llm.execution import TICK, Ask, Questions, RerankTask, Together
from r2med_plugin.llm.prompting import parse_pick, setwise_messages
from r2med_plugin.llm.strategy import LLMReranker, positional_scores
from r2med_plugin.llm_settings import SetwiseSettings

Item = TypeVar("Item")
Sort = Generator[list, Any, Any]  # yields a set (list of items), receives the position picked (None: failed)


class SetwiseLLMReranker(LLMReranker):
    """Setwise (Zhuang et al., SIGIR 2024), as llm-rankers' OpenAI setwise ranker asks: each question shows the LLM a
    set of ``set_size`` passages labelled A, B, C, ... and it names the most relevant one.

    - heapsort (the default): a heap over the first stage's list in which each node has ``set_size - 1`` children, so
      a question holds a parent and its children; the best ``setwise_k`` are taken off the top one by one, and the
      order of the comparisons is llm-rankers' (same questions, same final ranking).
    - bubblesort: the textbook bubble sort over sets: for each of the ``setwise_k`` top places, windows of
      ``set_size`` passages overlapping by one move from the bottom of the list up, each window's pick swapped to
      its top, so the best remaining passage reaches the place. llm-rankers ships this one commented out (as the
      "standard" variant) beside a faster one that can leave a wrong top k even when every pick is right
      (benchmarks/setwise_parity.py counts it), so the standard variant is the one built here.

    The top ``setwise_k`` (at most the rerank depth) are in the order the picks give; the rest keep the first stage's
    order. Scores: depth, depth - 1, ..., 1. A query's questions depend on the answers before them (asked in turn);
    queries run concurrently. An answer that names no passage of its set picks the set's first (llm-rankers: "A").
    """

    kind = "setwise"
    settings_class = SetwiseSettings
    settings: SetwiseSettings
    prompt_names = ("setwise",)
    counted = ("unparsed_answers", "empty_answers")

    def _settings(self) -> str:
        return f"{self.settings.setwise_method} c{self.settings.set_size} k{self.settings.setwise_k}{self._budget_label()}"

    def _total(self, task: RerankTask) -> int | None:
        return None  # how many questions a sort asks depends on the answers

    def _asked(self, task: RerankTask) -> dict[str, int]:
        return {"comparisons": task.asked}

    def questions(self, task: RerankTask) -> Questions:
        parameters = self._answer_parameters()
        ranked = yield Together([self._query_sorted(task, query_id, parameters) for query_id in task.lists])
        return {query_id: positional_scores(order) for query_id, order in ranked}

    def _sort(self, order: list[str]) -> Sort:
        """The sort of ``order`` for the best ``setwise_k``, as the sets it asks about."""
        k = min(self.settings.setwise_k, len(order))
        if self.settings.setwise_method == "heapsort":
            return heap_sets(order, k, self.settings.set_size - 1)
        return bubble_sets(order, k, self.settings.set_size)

    def _query_sorted(self, task: RerankTask, query_id: str, parameters: dict[str, Any]) -> Questions:
        first_stage = list(task.lists[query_id])
        sort, chosen = self._sort(list(first_stage)), None
        while True:
            try:
                doc_ids = sort.send(chosen)
            except StopIteration as finished:
                top = finished.value
                break
            chosen = yield from self._pick(task, query_id, doc_ids, parameters)
        if top is None:
            return query_id, first_stage
        placed = set(top)
        return query_id, [*top, *(doc_id for doc_id in first_stage if doc_id not in placed)]

    @staticmethod
    def _pick(task: RerankTask, query_id: str, doc_ids: list[str], parameters: dict[str, Any]) -> Questions:
        """The position of the set's most relevant passage (0 when the answer names none); None: the request failed
        every retry (the sort stops; the run fails once the other queries are done)."""
        answer = yield Ask(setwise_messages(task.queries[query_id], [task.documents[d] for d in doc_ids]), parameters)
        yield TICK
        if answer is None:
            return None
        position = parse_pick(answer.content, len(doc_ids))
        if position is None:
            task.count("unparsed_answers" if answer.content.strip() else "empty_answers")
            return 0
        return position

    def request_plan(self, asked: list[PlannedRequest], task: RerankTask, counter: TokenCounter) -> RequestPlan:
        """How many questions a sort asks, and which passages each holds, depend on the picks: the dry run's (each set
        picks its first passage) and a worst case (bubblesort: every window asked, heapsort: every sift to the bottom
        of the heap; each set holding its query's longest passages)."""
        parameters = self._sent_parameters(self._answer_parameters())
        bound = []
        for query_id, doc_ids in task.lists.items():
            count, k = len(doc_ids), min(self.settings.setwise_k, len(doc_ids))
            texts = [task.documents[doc_id] for doc_id in doc_ids]
            passages = [texts[index] for index in longest_first(texts, counter)]
            if self.settings.setwise_method == "heapsort":
                sizes = [min(self.settings.set_size, count)] * heap_question_bound(count, k, self.settings.set_size - 1)
            else:
                sizes = [end - start for start, end in bubble_windows(count, k, self.settings.set_size)]
            bound += [PlannedRequest(setwise_messages(task.queries[query_id], passages[:size]), parameters) for size in sizes]
        worst = ("every window of the bubble sort asked"
                 if self.settings.setwise_method == "bubblesort" else
                 "every sift of the heap sort going down to the bottom of the heap")
        return RequestPlan(asked, count_exact=False, messages_exact=False,
                           assumption="each question picks its set's first passage (the list is never reordered)",
                           bound=bound, bound_rule=f"{worst}, each set holding its query's longest passages",
                           count_rule=f"how many questions the {self.settings.setwise_method} asks depends on the picks",
                           answer_sketch=_setwise_answer)


def _setwise_answer(request: PlannedRequest) -> str:
    return "Passage A"


class _Failed(Exception):
    """A request failed every retry: the sort of this query stops."""


def heap_sets(items: list, k: int, children: int) -> Sort:
    """Heap sort with ``children`` children per node, the root the best: built bottom-up, then the root taken off
    ``k`` times (llm-rankers' heapSort: the same questions in the same order). Yields each set, receives its pick;
    returns the top ``k``, best first (None when a pick was None). Sorts ``items`` in place."""
    def sift(node: int, size: int) -> Sort:
        while children * node + 1 < size:
            members = [node, *range(children * node + 1, min(children * node + children + 1, size))]
            chosen = yield [items[member] for member in members]
            if chosen is None:
                raise _Failed
            best = members[chosen]
            if best == node:
                return
            items[node], items[best] = items[best], items[node]
            node = best

    size = len(items)
    try:
        for node in range(size // children, -1, -1):
            yield from sift(node, size)
        for end in range(size - 1, 0, -1):
            items[0], items[end] = items[end], items[0]
            if size - end == k:
                break
            yield from sift(0, end)
    except _Failed:
        return None
    return items[::-1][:k]


def bubble_sets(items: list, k: int, set_size: int) -> Sort:
    """Bubble sort over sets (``bubble_windows``): the pick of each window swapped to its top. Yields each set,
    receives its pick; returns the top ``k`` (None when a pick was None). Sorts ``items`` in place."""
    for start, end in bubble_windows(len(items), k, set_size):
        chosen = yield items[start:end]
        if chosen is None:
            return None
        items[start], items[start + chosen] = items[start + chosen], items[start]
    return items[:k]


async def _sorted_by(sort: Sort, pick: Callable[[list], Awaitable[int | None]]) -> list | None:
    chosen = None
    while True:
        try:
            members = sort.send(chosen)
        except StopIteration as finished:
            return finished.value
        chosen = await pick(members)


async def heap_top(items: list[Item], k: int, children: int, pick: Callable[[list[Item]], Awaitable[int | None]]) -> list[Item] | None:
    """``heap_sets`` with each set picked by ``await pick(set)``."""
    return await _sorted_by(heap_sets(items, k, children), pick)


async def bubble_top(items: list[Item], k: int, set_size: int, pick: Callable[[list[Item]], Awaitable[int | None]]) -> list[Item] | None:
    """``bubble_sets`` with each set picked by ``await pick(set)``."""
    return await _sorted_by(bubble_sets(items, k, set_size), pick)


def heap_question_bound(size: int, k: int, children: int) -> int:
    """The most questions ``heap_sets`` can ask for a list of ``size`` and the top ``k``: every sift going down to the
    bottom of the heap (a node's longest path to a leaf follows its first children)."""
    def levels(node: int, end: int) -> int:
        count = 0
        while children * node + 1 < end:
            node, count = children * node + 1, count + 1
        return count

    total = sum(levels(node, size) for node in range(size // children, -1, -1))
    for end in range(size - 1, 0, -1):
        if size - end == k:
            break
        total += levels(0, end)
    return total


def bubble_windows(count: int, k: int, set_size: int) -> list[tuple[int, int]]:
    """The windows (start, end) ``bubble_sets`` asks about, in order: for each top place i < k, windows of ``set_size``
    passages from the bottom of the list up to i, each next one a passage over the last (its top); a window of a
    single passage is its own pick and is not asked. They do not depend on the picks (which passages they hold do)."""
    step, spans = set_size - 1, []
    for place in range(k):
        start, end = count - set_size, count
        while True:
            start = max(start, place)
            if end - start > 1:
                spans.append((start, end))
            if start == place:
                break
            start, end = start - step, end - step
    return spans
