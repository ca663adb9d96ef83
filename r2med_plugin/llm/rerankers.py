"""LLM rerankers behind any OpenAI-compatible endpoint, as Rerankers (r2med_plugin.evaluation.rerankers):

- ``llm-listwise:<model>`` — RankGPT (Sun et al., 2023): sliding windows (20, step 10) from the bottom of the first
  stage's top k to the top, each window permuted by the LLM; the final order gives the scores (k, k-1, ..., 1).
- ``llm-pointwise:<model>`` — one request per (query, passage): P(Yes) from the answer token's log-probabilities,
  or, where the endpoint returns none, a 0-3 relevance label / 3.
- ``llm-setwise:<model>`` — Setwise (Zhuang et al., SIGIR 2024): the LLM names the most relevant of a set of c
  passages (``set_size``, default 3); a heap sort (default) or bubble sort of the first stage's top k driven by those
  picks puts the best ``setwise_k`` (default 10) on top, in order; the others follow in the first stage's order.
- ``llm-reasoning:<model>`` — Rank1 style (Weller et al., 2025): the model reasons, then answers true or false;
  the score is P(true) from the answer token's log-probabilities (the said word where there are none). The
  reasoning traces are kept (``last_report.traces``) and written beside the result.

A pair whose answer says neither word (an empty answer, a reasoning budget spent before the answer) scores 0.5 and
is counted as ``undecided``; a listwise answer with no usable identifier keeps its window's order and is counted
as ``unparsed_answers``; a setwise answer that names no passage of its set picks the set's first passage (as
llm-rankers reads it: "A") and is counted as ``unparsed_answers`` (``empty_answers`` when empty). Prompts:
prompts.json (each with its published source).
"""

from __future__ import annotations

import asyncio
import difflib
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from tqdm import tqdm

from r2med_plugin.llm.client import endpoint_host, host_label
from r2med_plugin.llm.config import DEFAULT_REASONING_TOKENS, LLMRerankerConfig, extra_body_label
from r2med_plugin.llm.prompting import (
    answer_tokens,
    apply_permutation,
    graded_label,
    listwise_messages,
    pair_messages,
    parse_permutation,
    parse_pick,
    prompts_sha256,
    setwise_messages,
    two_way_probability,
    windows,
    word_answer,
)
from r2med_plugin.llm.requests import Requester, ResponseCache
from r2med_plugin.models.protocols import RerankerBase
from r2med_plugin.retrieval.rerank import top_document_ids
from r2med_plugin.types import Run

TOP_LOGPROBS = 20  # what vLLM serves by default (--max-logprobs 20) and the OpenAI API's maximum
UNDECIDED = 0.5
ANSWER_COUNTS = ("scored_by_logprobs", "scored_by_label", "scored_by_answer", "undecided", "unparsed_answers", "empty_answers")

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class RerankReport:
    """What the last ``rerank`` cost and noticed (``usage``), and the reasoning traces of a reasoning reranker."""

    usage: dict[str, Any]
    traces: list[dict[str, Any]] | None = None


@dataclass
class _Counts:
    notes: dict[str, int] = field(default_factory=dict)

    def add(self, name: str, count: int = 1) -> None:
        self.notes[name] = self.notes.get(name, 0) + count


class LLMReranker(RerankerBase):
    """What the three kinds share: the checks, the requests, the report. ``kind`` is set by each subclass."""

    kind = ""
    option = ""
    counted: tuple[str, ...] = ()  # how its answers are counted (ANSWER_COUNTS), each reported even when 0

    def __init__(self, model: str, config: LLMRerankerConfig) -> None:
        if not isinstance(model, str) or not model.strip():
            raise ValueError(f"--rerank llm-{self.kind}:<model> needs the model id the endpoint serves, e.g. "
                             f"llm-{self.kind}:Qwen/Qwen3-8B")
        if not isinstance(config, LLMRerankerConfig):
            raise TypeError("config must be an LLMRerankerConfig(Endpoint(base_url), ...)")
        self.model = model.strip()
        self.config = config
        # what it is names it: the model, how it asks, and where (one model id on two servers, or with another window,
        # is another reranker, a row of its own); the revision is the prompts' version
        setup = " ".join(part for part in (self.kind, f"@{host_label(config.endpoint.base_url)}", self._settings(),
                                           extra_body_label(config.extra_body)) if part)
        self.name = f"{self.model} ({setup})"
        self.revision = self._revision()
        self.last_report: RerankReport | None = None

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.model!r}, {self.config!r})"

    def _revision(self) -> str:
        """The prompts' version (their hash)."""
        return f"{self.kind}-prompt-{prompts_sha256(*self.prompt_names)[:8]}"

    def _settings(self) -> str:
        """What this kind asks with, beyond the prompt (window and step, budget), for its name."""
        return ""

    prompt_names: tuple[str, ...] = ()

    def rerank(self, first_stage: Run, queries: Mapping[str, str], documents: Mapping[str, str], *, depth: int,
               show_progress: bool = True) -> Run:
        lists = top_document_ids(first_stage, depth)
        missing = [query_id for query_id in lists if query_id not in queries]
        if missing:
            raise ValueError(f"no text for query {missing[0]!r} ({len(missing)} such queries in the first stage)")
        unknown = [doc_id for doc_ids in lists.values() for doc_id in doc_ids if doc_id not in documents]
        if unknown:
            raise ValueError(f"no text for document {unknown[0]!r} ({len(unknown)} such documents in the first stage)")
        requester = Requester(self.model, self.config.endpoint, ResponseCache(self.config.cache_path), extra_body=self.config.extra_body)
        counts, traces = _Counts({name: 0 for name in self.counted}), []
        with tqdm(total=self._total(lists), desc=f"Reranking ({self.name})", unit="request", disable=not show_progress) as bar:
            try:
                run = requester.run(lambda: self._rerank_all(requester, lists, queries, documents, bar, counts, traces))
            finally:
                sent = {"extra_body": dict(self.config.extra_body)} if self.config.extra_body else {}
                if requester.rules.refused:  # the model refused parameters (HTTP 400): recorded with the scores
                    sent["unsupported_parameters"] = sorted(requester.rules.refused)
                asked = self._asked(lists, counts)
                self.last_report = RerankReport(usage={"endpoint": endpoint_host(self.config.endpoint.base_url)} | sent
                                                | asked | requester.usage.as_dict() | counts.notes,
                                                traces=traces if self.kind == "reasoning" else None)
        if requester.rules.refused:
            logger.warning(self._refused_note(requester.rules))
        warning = fallback_warning(self.kind, self.name, self.last_report.usage)
        if warning:
            logger.warning(warning)
        return run

    def _refused_note(self, rules) -> str:
        """The one message for a model that refused request parameters (OpenAI's reasoning models)."""
        scored = {"pointwise": "pairs are scored by the 0-3 label question, as for a server that returns none",
                  "reasoning": "pairs are scored by the word the answer says (true/false)"}.get(self.kind)
        logprobs = f"; without log-probabilities, {scored}" if scored and not rules.logprobs else ""
        return f"{self.name}: {rules.summary()}{logprobs}."

    def _total(self, lists: Mapping[str, list[str]]) -> int | None:
        return sum(len(doc_ids) for doc_ids in lists.values())

    def _asked(self, lists: Mapping[str, list[str]], counts: _Counts) -> dict[str, int]:
        """What the rerank asked, for its usage: its windows (listwise) or pairs."""
        return {"windows" if self.kind == "listwise" else "pairs": self._total(lists)}

    async def _rerank_all(self, requester: Requester, lists: Mapping[str, list[str]], queries: Mapping[str, str],
                          documents: Mapping[str, str], bar: tqdm, counts: _Counts, traces: list) -> Run:
        raise NotImplementedError


class ListwiseLLMReranker(LLMReranker):
    """RankGPT's sliding-window listwise reranking (window and step from the config)."""

    kind = "listwise"
    prompt_names = ("listwise",)
    counted = ("unparsed_answers", "empty_answers")

    def _settings(self) -> str:
        budget = f" max{self.config.max_tokens}" if self.config.max_tokens else ""
        return f"w{self.config.window}s{self.config.step}{budget}"

    def _parameters(self) -> dict[str, Any]:
        parameters: dict[str, Any] = {"temperature": 0}
        if self.config.max_tokens:
            parameters["max_tokens"] = self.config.max_tokens
        return parameters

    def _spans(self, count: int) -> list[tuple[int, int]]:
        return [(start, end) for start, end in windows(count, self.config.window, self.config.step) if end - start > 1]

    def _total(self, lists: Mapping[str, list[str]]) -> int:
        return sum(len(self._spans(len(doc_ids))) for doc_ids in lists.values())

    async def _rerank_all(self, requester, lists, queries, documents, bar, counts, traces) -> Run:
        parameters = self._parameters()

        async def one(query_id: str) -> tuple[str, list[str]]:
            order = list(lists[query_id])
            for start, end in self._spans(len(order)):
                passages = [documents[doc_id] for doc_id in order[start:end]]
                answer = await requester.ask(listwise_messages(queries[query_id], passages, self.config.window), parameters)
                bar.update(1)
                if answer is None:  # failed every retry: the run stops once the others are done
                    break
                permutation = parse_permutation(answer.content, end - start)
                if not answer.content.strip():
                    counts.add("empty_answers")
                elif permutation == list(range(end - start)) and not any(ch.isdigit() for ch in answer.content):
                    counts.add("unparsed_answers")
                order = apply_permutation(order, start, end, permutation)
            return query_id, order

        ranked = await asyncio.gather(*(one(query_id) for query_id in lists))
        return {query_id: {doc_id: float(len(order) - rank) for rank, doc_id in enumerate(order)} for query_id, order in ranked}

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
    prompt_names = ("setwise",)
    counted = ("unparsed_answers", "empty_answers")
    _comparisons = 0  # questions the last rerank's sorts asked (repeated ones included)

    def _settings(self) -> str:
        budget = f" max{self.config.max_tokens}" if self.config.max_tokens else ""
        return f"{self.config.setwise_method} c{self.config.set_size} k{self.config.setwise_k}{budget}"

    def _parameters(self) -> dict[str, Any]:
        parameters: dict[str, Any] = {"temperature": 0}
        if self.config.max_tokens:
            parameters["max_tokens"] = self.config.max_tokens
        return parameters

    def _total(self, lists: Mapping[str, list[str]]) -> int | None:
        return None  # how many questions a sort asks depends on the answers

    def _asked(self, lists: Mapping[str, list[str]], counts: _Counts) -> dict[str, int]:
        return {"comparisons": self._comparisons}

    async def _rerank_all(self, requester, lists, queries, documents, bar, counts, traces) -> Run:
        self._comparisons = 0
        parameters = self._parameters()

        async def one(query_id: str) -> tuple[str, list[str]]:
            first_stage = list(lists[query_id])

            async def pick(doc_ids: list[str]) -> int | None:
                """The position of the set's most relevant passage (0 when the answer names none); None: the request
                failed every retry (the sort stops; the run fails once the other queries are done)."""
                self._comparisons += 1
                answer = await requester.ask(setwise_messages(queries[query_id], [documents[d] for d in doc_ids]), parameters)
                bar.update(1)
                if answer is None:
                    return None
                position = parse_pick(answer.content, len(doc_ids))
                if position is None:
                    counts.add("unparsed_answers" if answer.content.strip() else "empty_answers")
                    return 0
                return position

            top = await self._sort(first_stage, pick)
            if top is None:
                return query_id, first_stage
            placed = set(top)
            return query_id, [*top, *(doc_id for doc_id in first_stage if doc_id not in placed)]

        ranked = await asyncio.gather(*(one(query_id) for query_id in lists))
        return {query_id: {doc_id: float(len(order) - rank) for rank, doc_id in enumerate(order)} for query_id, order in ranked}

    async def _sort(self, order: list[str], pick) -> list[str] | None:
        """The best ``setwise_k`` of ``order`` by the picks, best first (None when a request failed)."""
        items, k = list(order), min(self.config.setwise_k, len(order))
        if self.config.setwise_method == "heapsort":
            return await heap_top(items, k, self.config.set_size - 1, pick)
        return await bubble_top(items, k, self.config.set_size, pick)


class _Failed(Exception):
    """A request failed every retry: the sort of this query stops."""


async def heap_top(items: list[str], k: int, children: int, pick) -> list[str] | None:
    """Heap sort with ``children`` children per node, the root the best: built bottom-up, then the root taken off
    ``k`` times (llm-rankers' heapSort: the same questions in the same order)."""
    async def sift(node: int, size: int) -> None:
        while children * node + 1 < size:
            members = [node, *range(children * node + 1, min(children * node + children + 1, size))]
            chosen = await pick([items[member] for member in members])
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
            await sift(node, size)
        for end in range(size - 1, 0, -1):
            items[0], items[end] = items[end], items[0]
            if size - end == k:
                break
            await sift(0, end)
    except _Failed:
        return None
    return items[::-1][:k]


async def bubble_top(items: list[str], k: int, set_size: int, pick) -> list[str] | None:
    """Bubble sort over sets: for each top place i < k, windows of ``set_size`` passages from the bottom of the list
    up to i, each next window one passage over the last (its top), the pick of each window swapped to its top."""
    step = set_size - 1
    for place in range(k):
        start, end = len(items) - set_size, len(items)
        while True:
            start = max(start, place)
            if end - start > 1:  # a single passage is its own pick: nothing to ask
                chosen = await pick(items[start:end])
                if chosen is None:
                    return None
                items[start], items[start + chosen] = items[start + chosen], items[start]
            if start == place:
                break
            start, end = start - step, end - step
    return items[:k]


class _PairwiseScored(LLMReranker):
    """One request per (query, passage), all concurrent; scores per query sorted descending."""

    async def _rerank_all(self, requester, lists, queries, documents, bar, counts, traces) -> Run:
        async def one(query_id: str, doc_id: str) -> tuple[str, str, float | None]:
            score = await self._score(requester, query_id, queries[query_id], doc_id, documents[doc_id], counts, traces)
            bar.update(1)
            return query_id, doc_id, score

        scored = await asyncio.gather(*(one(query_id, doc_id) for query_id, doc_ids in lists.items() for doc_id in doc_ids))
        run: Run = {query_id: {} for query_id in lists}
        for query_id, doc_id, score in scored:
            if score is not None:
                run[query_id][doc_id] = score
        return {query_id: dict(sorted(ranked.items(), key=lambda item: item[1], reverse=True)) for query_id, ranked in run.items()}

    async def _score(self, requester, query_id, query, doc_id, passage, counts, traces) -> float | None:
        raise NotImplementedError


class PointwiseLLMReranker(_PairwiseScored):
    """P(Yes) of a yes/no relevance question; a 0-3 label / 3 where the endpoint returns no log-probabilities."""

    kind = "pointwise"
    prompt_names = ("pointwise", "pointwise_graded")
    counted = ("scored_by_logprobs", "scored_by_label", "undecided")
    YES_NO = {"temperature": 0, "max_tokens": 1, "logprobs": True, "top_logprobs": TOP_LOGPROBS}
    GRADED = {"temperature": 0, "max_tokens": 8}

    def __init__(self, model: str, config: LLMRerankerConfig) -> None:
        super().__init__(model, config)
        self._no_logprobs = False  # the endpoint answered without log-probabilities: ask for labels from then on

    def _graded(self, requester: Requester) -> dict[str, Any]:
        """The label question's parameters: 8 tokens, or the reasoning budget where the model counts its hidden
        reasoning in the budget (it takes max_completion_tokens: OpenAI's reasoning models), which 8 tokens never cover."""
        if requester.rules.completion_tokens:
            return {"temperature": 0, "max_tokens": DEFAULT_REASONING_TOKENS}
        return dict(self.GRADED)

    async def _rerank_all(self, requester, lists, queries, documents, bar, counts, traces) -> Run:
        self._no_logprobs = False
        first = next(((query_id, doc_ids[0]) for query_id, doc_ids in lists.items() if doc_ids), None)
        if first is not None:  # one question first: does the endpoint return log-probabilities at all?
            probe = await requester.ask(pair_messages("pointwise", queries[first[0]], documents[first[1]]), dict(self.YES_NO),
                                        probe=True)  # counted apart unless the first pair's own question reuses it
            self._no_logprobs = probe is not None and not probe.logprobs
        return await super()._rerank_all(requester, lists, queries, documents, bar, counts, traces)

    async def _score(self, requester, query_id, query, doc_id, passage, counts, traces) -> float | None:
        if not self._no_logprobs:
            answer = await requester.ask(pair_messages("pointwise", query, passage), dict(self.YES_NO))
            if answer is None:
                return None
            probability = two_way_probability(own_logprobs(answer), "yes", "no")
            if probability is not None:
                counts.add("scored_by_logprobs")
                return probability
            if not answer.logprobs:
                self._no_logprobs = True
        graded = await requester.ask(pair_messages("pointwise_graded", query, passage), self._graded(requester))
        if graded is None:
            return None
        label = graded_label(graded.content)
        if label is None:
            counts.add("undecided")
            return UNDECIDED
        counts.add("scored_by_label")
        return label / 3


class ReasoningLLMReranker(_PairwiseScored):
    """Rank1: reasoning, then true/false; P(true) from the answer token's log-probabilities."""

    kind = "reasoning"
    prompt_names = ("reasoning",)
    counted = ("scored_by_logprobs", "scored_by_answer", "undecided")

    def _settings(self) -> str:
        return f"max{self.budget}"

    @property
    def budget(self) -> int:
        return self.config.max_tokens or DEFAULT_REASONING_TOKENS

    async def _score(self, requester, query_id, query, doc_id, passage, counts, traces) -> float | None:
        parameters = {"temperature": 0, "max_tokens": self.budget, "logprobs": True, "top_logprobs": TOP_LOGPROBS}
        answer = await requester.ask(pair_messages("reasoning", query, passage), parameters)
        if answer is None:
            return None
        text = answer.content
        thought_inline = "</think>" in text
        # the answer is what follows the thought; a thought never closed (the budget spent, no separate reasoning
        # part) is all thought: no answer, undecided
        unfinished = answer.reasoning is None and not thought_inline and (
            answer.finish_reason == "length" or text.lstrip().startswith("<think>"))
        if unfinished:
            reasoning, final = text, ""
        else:
            reasoning = answer.reasoning if answer.reasoning is not None else (text.split("</think>")[0] if thought_inline else "")
            final = text.split("</think>")[-1].strip()
        # scored at the answer's own tokens only: vLLM's reasoning parser still returns the thought's tokens first
        score = two_way_probability(answer_tokens(answer.logprobs, final), "true", "false") if final else None
        if score is not None:
            counts.add("scored_by_logprobs")
        else:
            said = word_answer(final, ("true", "false")) if final else None
            score = {"true": 1.0, "false": 0.0}.get(said or "", UNDECIDED)
            counts.add("undecided" if said is None else "scored_by_answer")
        traces.append({"query_id": query_id, "doc_id": doc_id, "score": score, "answer": final, "reasoning": reasoning.strip(),
                       "finish_reason": answer.finish_reason, "completion_tokens": answer.completion_tokens})
        return score


def own_logprobs(answer) -> list | None:
    """The log-probabilities of an answer's own tokens: all of them where nothing came before the answer (no reasoning
    part, no ``<think>`` thought in the content), else only the answer's (``answer_tokens``; none for an answer never
    given): behind vLLM's reasoning parser the log-probabilities cover the reasoning's tokens first."""
    content = answer.content
    if answer.reasoning is None and "</think>" not in content and not content.lstrip().startswith("<think>"):
        return answer.logprobs
    final = content.split("</think>")[-1] if "</think>" in content else ("" if content.lstrip().startswith("<think>") else content)
    return answer_tokens(answer.logprobs, final)


_FALLBACK_CHECKS = {
    "listwise": "that the model answers with passage identifiers ([2] > [1] > ...) and that --max-tokens, if given, "
                "leaves room for them",
    "setwise": "that the model answers with a passage label (Passage B, or B) and that --max-tokens, if given, leaves "
               "room for it",
    "pointwise": "that the endpoint returns log-probabilities (vLLM: --max-logprobs 20) or answers the 0-3 label question, "
                 "and that the model answers without reasoning first (a reasoning model: llm-reasoning, or its thinking "
                 "turned off, Qwen3: --extra-body '{\"chat_template_kwargs\": {\"enable_thinking\": false}}')",
    "reasoning": "that --max-tokens (the reasoning budget) leaves room for the answer after the reasoning, that the "
                 "server's --reasoning-parser fits the model, and the answers in the traces (<Task>.reasoning.jsonl)",
}


def fallback_warning(kind: str, name: str, usage: Mapping[str, Any]) -> str | None:
    """What to say when most of a rerank fell back (more than half of the pairs undecided, or of the listwise windows
    unparsed or empty), or None: the scores are then mostly the fallback, not the model's judgement."""
    if kind in ("listwise", "setwise"):
        failed = usage.get("unparsed_answers", 0) + usage.get("empty_answers", 0)
        total = usage.get("requests", 0) + usage.get("cached_answers", 0) + usage.get("repeated_questions", 0)
        what, fallback = (("windows", "were unparsed or empty (each kept the first stage's order)") if kind == "listwise" else
                          ("comparisons", "were unparsed or empty (each picked its set's first passage)"))
    else:
        failed = usage.get("undecided", 0)
        total = failed + sum(usage.get(key, 0) for key in ANSWER_COUNTS if key.startswith("scored_by_"))
        what, fallback = "pairs", f"were undecided (each scored {UNDECIDED})"
    if not total or 2 * failed <= total:
        return None
    return (f"{name}: {failed} of {total} {what} ({failed / total:.0%}) {fallback}: the model or endpoint is not giving "
            "usable answers, so the scores are mostly the fallback, not the model's ranking. Check that --rerank names "
            f"the model the endpoint serves, {_FALLBACK_CHECKS[kind]}.")


LLM_RERANKER_KINDS: dict[str, type[LLMReranker]] = {
    "llm-listwise": ListwiseLLMReranker, "llm-pointwise": PointwiseLLMReranker, "llm-reasoning": ReasoningLLMReranker,
    "llm-setwise": SetwiseLLMReranker,
}


def is_llm_reranker_name(value: object) -> bool:
    """Whether ``value`` names an LLM reranker ("llm-listwise:<model>", or a near miss of one)."""
    return isinstance(value, str) and value.split(":", 1)[0].lower().startswith("llm-")


def llm_reranker(spec: str, config: LLMRerankerConfig | None) -> LLMReranker:
    """The reranker ``spec`` names ("llm-listwise:<model>", "llm-pointwise:<model>", "llm-reasoning:<model>",
    "llm-setwise:<model>")."""
    kind, _, model = spec.partition(":")
    if kind not in LLM_RERANKER_KINDS:
        close = difflib.get_close_matches(kind.lower(), list(LLM_RERANKER_KINDS), n=1, cutoff=0.5)
        hint = f" (did you mean {close[0]}:<model>?)" if close else ""
        raise ValueError(f"unknown LLM reranker {kind!r} in --rerank {spec}{hint}: choose llm-listwise:<model>, "
                         "llm-pointwise:<model>, llm-reasoning:<model> or llm-setwise:<model>")
    if not model.strip():
        raise ValueError(f"--rerank {spec} names no model: write {kind}:<model id the endpoint serves>, e.g. {kind}:Qwen/Qwen3-8B")
    if config is None:
        raise ValueError(f"--rerank {spec} needs an endpoint: add --base-url URL (e.g. http://localhost:8000/v1 for vLLM); "
                         f"in Python pass rerank=as_reranker({spec!r}, llm=LLMRerankerConfig(Endpoint(base_url)))")
    return LLM_RERANKER_KINDS[kind](model, config)
