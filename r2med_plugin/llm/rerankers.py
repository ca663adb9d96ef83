"""LLM rerankers behind any OpenAI-compatible endpoint, as Rerankers (r2med_plugin.evaluation.rerankers):

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
"""

from __future__ import annotations

import asyncio
import difflib
import logging
import json
import math
import random
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from tqdm import tqdm

from r2med_plugin.llm.client import endpoint_host, host_label
from r2med_plugin.llm.config import DEFAULT_REASONING_TOKENS, LLMRerankerConfig, extra_body_label
from r2med_plugin.llm.cost import (
    CostEstimate,
    DryRequester,
    PlannedRequest,
    RequestPlan,
    TokenCounter,
    estimate,
    longest_first,
    token_counter,
)
from r2med_plugin.llm.prompting import (
    answer_tokens,
    apply_permutation,
    graded_label,
    groupwise_messages,
    groupwise_scale,
    listwise_messages,
    llm_prompts,
    pair_messages,
    parse_group_scores,
    parse_permutation,
    parse_pick,
    prompts_sha256,
    score_format,
    setwise_messages,
    two_way_probability,
    windows,
    word_answer,
)
from r2med_plugin.llm.requests import Requester, ResponseCache, run_coroutine
from r2med_plugin.models.protocols import RerankerBase
from r2med_plugin.retrieval.rerank import top_document_ids
from r2med_plugin.types import Run

TOP_LOGPROBS = 20  # what vLLM serves by default (--max-logprobs 20) and the OpenAI API's maximum
UNDECIDED = 0.5
ANSWER_COUNTS = ("scored_by_logprobs", "scored_by_label", "scored_by_answer", "undecided", "unparsed_answers", "empty_answers",
                 "no_ranking_after_reasoning", "missing_scores", "out_of_scale_scores")

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class RerankReport:
    """What the last ``rerank`` cost and noticed (``usage``), and its traces (a reasoning reranker's reasoning, a
    listwise reasoning model's windows, a groupwise reranker's answers), written beside the result as
    ``<Task>.<traces_name>.jsonl``."""

    usage: dict[str, Any]
    traces: list[dict[str, Any]] | None = None
    traces_name: str = "reasoning"


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
    traces_name = "reasoning"  # the traces file beside the result: <Task>.<traces_name>.jsonl

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
        self._first_stage: Run = {}

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.model!r}, {self.config!r})"

    def _revision(self) -> str:
        """The prompts' version (their hash)."""
        return f"{self.kind}-prompt-{prompts_sha256(*self.prompt_names)[:8]}"

    def _settings(self) -> str:
        """What this kind asks with, beyond the prompt (window and step, budget), for its name."""
        return ""

    def _budget_label(self) -> str:
        """The completion budget and reasoning effort as name parts (" max64 effort-high"), "" for neither."""
        budget = f" max{self.config.max_tokens}" if self.config.max_tokens else ""
        effort = f" effort-{self.config.reasoning_effort}" if self.config.reasoning_effort else ""
        return budget + effort

    def _answer_parameters(self) -> dict[str, Any]:
        """Greedy, with the completion budget (``max_tokens``) and the reasoning effort where they are given."""
        parameters: dict[str, Any] = {"temperature": 0}
        if self.config.max_tokens:
            parameters["max_tokens"] = self.config.max_tokens
        if self.config.reasoning_effort:
            parameters["reasoning_effort"] = self.config.reasoning_effort
        return parameters

    prompt_names: tuple[str, ...] = ()

    def _lists(self, first_stage: Run, queries: Mapping[str, str], documents: Mapping[str, str], depth: int) -> dict[str, list[str]]:
        """Each query's top ``depth`` documents, every text present (else a clear error)."""
        lists = top_document_ids(first_stage, depth)
        missing = [query_id for query_id in lists if query_id not in queries]
        if missing:
            raise ValueError(f"no text for query {missing[0]!r} ({len(missing)} such queries in the first stage)")
        unknown = [doc_id for doc_ids in lists.values() for doc_id in doc_ids if doc_id not in documents]
        if unknown:
            raise ValueError(f"no text for document {unknown[0]!r} ({len(unknown)} such documents in the first stage)")
        return lists

    def rerank(self, first_stage: Run, queries: Mapping[str, str], documents: Mapping[str, str], *, depth: int,
               show_progress: bool = True) -> Run:
        lists = self._lists(first_stage, queries, documents, depth)
        self._first_stage = first_stage  # its scores: what InsertRank shows
        estimated = self._estimate_before_run(lists, queries, documents, show_progress)
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
                                                | self._shown() | asked | requester.usage.as_dict() | counts.notes
                                                | ({"estimate": estimated} if estimated is not None else {}),
                                                traces=sorted(traces, key=trace_order) or None, traces_name=self.traces_name)
        if requester.rules.refused:
            logger.warning(self._refused_note(requester.rules))
        for warning in (fallback_warning(self.kind, self.name, self.last_report.usage),
                        out_of_scale_warning(self.name, self.last_report.usage)):
            if warning:
                logger.warning(warning)
        return run

    # --- what a rerank would cost (r2med_plugin.llm.cost): a dry run of the kind's own request code ---------------

    def estimate_cost(self, first_stage: Run, queries: Mapping[str, str], documents: Mapping[str, str], *, depth: int,
                      tokenizer: str | None = None, show_progress: bool = True) -> CostEstimate:
        """What reranking ``first_stage``'s top ``depth`` would cost (requests, prompt tokens, completion budget),
        without sending a request. ``tokenizer``: a local tokenizer folder or cached hub name (default: the model's
        own where it is local, else tiktoken, else 4 characters per token)."""
        lists = self._lists(first_stage, queries, documents, depth)
        self._first_stage = first_stage
        return self._estimate(lists, queries, documents, token_counter(self.model, tokenizer), show_progress)

    def plan_requests(self, first_stage: Run, queries: Mapping[str, str], documents: Mapping[str, str], *, depth: int,
                      tokenizer: str | None = None) -> RequestPlan:
        """The requests a rerank would send, built by this kind's own request code with nothing sent (RequestPlan:
        the questions, whether they are exact, and a worst case where they depend on the answers)."""
        lists = self._lists(first_stage, queries, documents, depth)
        self._first_stage = first_stage
        return self._plan(lists, queries, documents, token_counter(self.model, tokenizer))

    def _estimate_before_run(self, lists: Mapping[str, list[str]], queries: Mapping[str, str], documents: Mapping[str, str],
                             show_progress: bool) -> dict[str, Any] | None:
        """The estimate a run records beside its usage; a run is not stopped by an estimate that cannot be made (a
        chat template that refuses the messages says so again, from the server)."""
        try:
            return self._estimate(lists, queries, documents, token_counter(self.model), show_progress).as_dict()
        except ValueError as error:
            logger.warning("%s: no cost estimate (%s)", self.name, error)
            return None

    def _estimate(self, lists: Mapping[str, list[str]], queries: Mapping[str, str], documents: Mapping[str, str],
                  counter: TokenCounter, show_progress: bool = True) -> CostEstimate:
        cache = ResponseCache(self.config.cache_path)
        plan = self._plan(lists, queries, documents, counter)
        return estimate(self.name, plan, model=self.model, host=endpoint_host(self.config.endpoint.base_url), counter=counter,
                        cached=lambda key: cache.enabled and cache.path(key).is_file(), show_progress=show_progress)

    def _plan(self, lists: Mapping[str, list[str]], queries: Mapping[str, str], documents: Mapping[str, str],
              counter: TokenCounter) -> RequestPlan:
        rules = ResponseCache(self.config.cache_path).get_rules(endpoint_host(self.config.endpoint.base_url), self.model)
        requester = DryRequester(self.config.extra_body, rules)
        with tqdm(disable=True) as bar:
            run_coroutine(self._rerank_all(requester, lists, queries, documents, bar, _Counts(), []))
        return self._request_plan(requester.asked, lists, queries, documents, counter)

    def _request_plan(self, asked: list[PlannedRequest], lists: Mapping[str, list[str]], queries: Mapping[str, str],
                      documents: Mapping[str, str], counter: TokenCounter) -> RequestPlan:
        """This kind's questions (``asked``, by a dry run) and how far they hold for any answers: one method per kind.
        The default: the same questions whatever the answers."""
        return RequestPlan(asked, count_rule=f"one per {'pair' if self.kind in ('pointwise', 'reasoning') else 'question'}, "
                                             "the same whatever the answers")

    def _refused_note(self, rules) -> str:
        """The one message for a model that refused request parameters (OpenAI's reasoning models)."""
        scored = {"pointwise": "pairs are scored by the 0-3 label question, as for a server that returns none",
                  "reasoning": "pairs are scored by the word the answer says (true/false)"}.get(self.kind)
        logprobs = f"; without log-probabilities, {scored}" if scored and not rules.logprobs else ""
        return f"{self.name}: {rules.summary()}{logprobs}."

    def _shown(self) -> dict[str, Any]:
        """What the prompts showed beyond the texts, for the usage (InsertRank: the first-stage scores' format)."""
        return {}

    def _total(self, lists: Mapping[str, list[str]]) -> int | None:
        return sum(len(doc_ids) for doc_ids in lists.values())

    def _asked(self, lists: Mapping[str, list[str]], counts: _Counts) -> dict[str, int]:
        """What the rerank asked, for its usage: its windows (listwise) or pairs."""
        return {"windows" if self.kind == "listwise" else "pairs": self._total(lists)}

    async def _rerank_all(self, requester: Requester, lists: Mapping[str, list[str]], queries: Mapping[str, str],
                          documents: Mapping[str, str], bar: tqdm, counts: _Counts, traces: list) -> Run:
        raise NotImplementedError


class ListwiseLLMReranker(LLMReranker):
    """RankGPT's sliding-window listwise reranking (window and step from the config); with ``show_scores`` each
    passage's first-stage score is in the prompt (InsertRank). A reasoning model's reasoning is set apart before the
    ranking is read, and kept (one trace per window)."""

    kind = "listwise"
    counted = ("unparsed_answers", "empty_answers", "no_ranking_after_reasoning")

    @property
    def prompt_names(self) -> tuple[str, ...]:  # type: ignore[override]
        return ("listwise", "listwise_scores") if self.config.show_scores else ("listwise",)

    def _settings(self) -> str:
        scores = f" scores{score_format()}" if self.config.show_scores else ""
        return f"w{self.config.window}s{self.config.step}{scores}{self._budget_label()}"

    def _shown(self) -> dict[str, Any]:
        return {"first_stage_scores": score_format()} if self.config.show_scores else {}

    def _parameters(self) -> dict[str, Any]:
        return self._answer_parameters()

    def _spans(self, count: int) -> list[tuple[int, int]]:
        return [(start, end) for start, end in windows(count, self.config.window, self.config.step) if end - start > 1]

    def _total(self, lists: Mapping[str, list[str]]) -> int:
        return sum(len(self._spans(len(doc_ids))) for doc_ids in lists.values())

    def window_messages(self, query: str, doc_ids: list[str], documents: Mapping[str, str],
                        scores: Mapping[str, float] | None = None) -> list[dict[str, str]]:
        """The messages of one window's request (``scores``: the first-stage scores, shown when ``show_scores``)."""
        shown = [scores[doc_id] for doc_id in doc_ids] if self.config.show_scores and scores is not None else None
        if self.config.show_scores and shown is None:
            raise ValueError("show_scores needs the first stage's scores of the window's documents")
        return listwise_messages(query, [documents[doc_id] for doc_id in doc_ids], self.config.window, shown)

    async def _rerank_all(self, requester, lists, queries, documents, bar, counts, traces) -> Run:
        parameters = self._parameters()

        async def one(query_id: str) -> tuple[str, list[str]]:
            order = list(lists[query_id])
            scores = self._first_stage.get(query_id)
            for index, (start, end) in enumerate(self._spans(len(order))):
                window = order[start:end]
                answer = await requester.ask(self.window_messages(queries[query_id], window, documents, scores), parameters)
                bar.update(1)
                if answer is None:  # failed every retry: the run stops once the others are done
                    break
                reasoning, final = split_reasoning(answer)
                permutation = parse_permutation(final, end - start)
                ranked = not (permutation == list(range(end - start)) and not any(ch.isdigit() for ch in final))
                if reasoning is not None:
                    traces.append({"query_id": query_id, "window": index, "doc_ids": window, "ranked": ranked,
                                   "answer": final.strip(), "reasoning": reasoning.strip(),
                                   "finish_reason": answer.finish_reason, "completion_tokens": answer.completion_tokens})
                    if not ranked:
                        counts.add("no_ranking_after_reasoning")
                elif not final.strip():
                    counts.add("empty_answers")
                elif not ranked:
                    counts.add("unparsed_answers")
                order = apply_permutation(order, start, end, permutation)
            return query_id, order

        ranked = await asyncio.gather(*(one(query_id) for query_id in lists))
        return {query_id: {doc_id: float(len(order) - rank) for rank, doc_id in enumerate(order)} for query_id, order in ranked}

    def _request_plan(self, asked, lists, queries, documents, counter) -> RequestPlan:
        """The windows are fixed (depth, window, step); the passages a window holds depend on the answers before it."""
        parameters = self._parameters() | ({"extra_body": dict(self.config.extra_body)} if self.config.extra_body else {})
        bound = []
        for query_id, doc_ids in lists.items():
            ranked: dict[int, list[str]] = {}  # words kept per passage -> the query's documents, longest passage first
            for start, end in self._spans(len(doc_ids)):
                words = llm_prompts()["listwise"]["words_per_passage"] * max(1, self.config.window // (end - start))
                if words not in ranked:
                    cut = [" ".join(documents[doc_id].strip().split()[:words]) for doc_id in doc_ids]
                    ranked[words] = [doc_ids[index] for index in longest_first(cut, counter)]
                window = ranked[words][:end - start]
                bound.append(PlannedRequest(self.window_messages(queries[query_id], window, documents,
                                                                 self._first_stage.get(query_id)), parameters))
        return RequestPlan(asked, count_exact=True, messages_exact=False, assumption="each window keeps its order",
                           bound=bound, bound_rule="each window holding its query's longest passages",
                           count_rule=f"exact: RankGPT's windows ({self.config.window}, step {self.config.step}) over each "
                                      "query's top depth; which passages a window holds depends on the answers before it",
                           answer_sketch=_listwise_answer)


def _listwise_answer(request: PlannedRequest) -> str:
    """A bare RankGPT answer for a window ([1] > [2] > ... > [n]): system, 3 opening turns, 2 per passage, 1 closing."""
    count = (len(request.messages) - 4) // 2
    return " > ".join(f"[{rank}]" for rank in range(1, count + 1))


def _setwise_answer(request: PlannedRequest) -> str:
    return "Passage A"


def trace_order(trace: Mapping[str, Any]) -> tuple:
    """The order of a rerank's traces: by query, then (reasoning: a pair's) score descending and document, (listwise)
    window, (groupwise) regrouping and group."""
    return (str(trace["query_id"]), -float(trace.get("score", 0.0)), str(trace.get("doc_id", "")), trace.get("window", 0),
            trace.get("regrouping", 0), trace.get("group", 0))


def split_reasoning(answer) -> tuple[str | None, str]:
    """(reasoning, answer) of a reply: the reasoning part the server split off (``reasoning_content``), else the
    ``<think>...</think>`` part of the content (a ``<think>`` never closed: all reasoning, no answer, as when the
    budget ran out while thinking); None for a reply without reasoning."""
    content = answer.content
    if answer.reasoning is not None:
        return answer.reasoning, content.split("</think>")[-1]
    if "</think>" in content:
        thought, _, final = content.rpartition("</think>")
        return thought.replace("<think>", "", 1), final
    if content.lstrip().startswith("<think>"):
        return content.lstrip()[len("<think>"):], ""
    return None, content


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
        return f"{self.config.setwise_method} c{self.config.set_size} k{self.config.setwise_k}{self._budget_label()}"

    def _parameters(self) -> dict[str, Any]:
        return self._answer_parameters()

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

    def _request_plan(self, asked, lists, queries, documents, counter) -> RequestPlan:
        """How many questions a sort asks, and which passages each holds, depend on the picks: the dry run's (each set
        picks its first passage) and a worst case (bubblesort: every window asked, heapsort: every sift to the bottom
        of the heap; each set holding its query's longest passages)."""
        parameters = self._parameters() | ({"extra_body": dict(self.config.extra_body)} if self.config.extra_body else {})
        bound = []
        for query_id, doc_ids in lists.items():
            count, k = len(doc_ids), min(self.config.setwise_k, len(doc_ids))
            texts = [documents[doc_id] for doc_id in doc_ids]
            passages = [texts[index] for index in longest_first(texts, counter)]
            if self.config.setwise_method == "heapsort":
                sizes = [min(self.config.set_size, count)] * heap_question_bound(count, k, self.config.set_size - 1)
            else:
                sizes = [end - start for start, end in bubble_windows(count, k, self.config.set_size)]
            bound += [PlannedRequest(setwise_messages(queries[query_id], passages[:size]), parameters) for size in sizes]
        worst = ("every window of the bubble sort asked"
                 if self.config.setwise_method == "bubblesort" else
                 "every sift of the heap sort going down to the bottom of the heap")
        return RequestPlan(asked, count_exact=False, messages_exact=False,
                           assumption="each question picks its set's first passage (the list is never reordered)",
                           bound=bound, bound_rule=f"{worst}, each set holding its query's longest passages",
                           count_rule=f"how many questions the {self.config.setwise_method} asks depends on the picks",
                           answer_sketch=_setwise_answer)

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


def heap_question_bound(size: int, k: int, children: int) -> int:
    """The most questions ``heap_top`` can ask for a list of ``size`` and the top ``k``: every sift going down to the
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
    """The windows (start, end) ``bubble_top`` asks about, in order: for each top place i < k, windows of ``set_size``
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


async def bubble_top(items: list[str], k: int, set_size: int, pick) -> list[str] | None:
    """Bubble sort over sets (``bubble_windows``): the pick of each window swapped to its top."""
    for start, end in bubble_windows(len(items), k, set_size):
        chosen = await pick(items[start:end])
        if chosen is None:
            return None
        items[start], items[start + chosen] = items[start + chosen], items[start]
    return items[:k]


def _groupwise_answer(request: PlannedRequest) -> str:
    """A bare groupwise answer: a JSON object of one score per passage ({"1": 10, "2": 10, ...})."""
    found = re.search(r"The (\d+) passages below", request.messages[-1]["content"])
    count = int(found.group(1)) if found else 1
    return json.dumps({str(number): 10 for number in range(1, count + 1)})


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
    prompt_names = ("groupwise",)
    counted = ("unparsed_answers", "empty_answers", "missing_scores", "out_of_scale_scores")
    traces_name = "groupwise"

    def _settings(self) -> str:
        grouping = f"random seed{self.config.seed}" if self.config.grouping == "random" else "first-stage"
        regroup = f" regroup{self.config.regroup}" if self.config.regroup > 1 else ""
        return f"g{self.config.group_size} {grouping}{regroup}{self._budget_label()}"

    def groupings(self, query_id: str, doc_ids: list[str]) -> list[list[list[str]]]:
        """The ``regroup`` groupings of one query's documents, each a list of groups (lists of document ids)."""
        if not doc_ids:
            return [[] for _ in range(self.config.regroup)]
        count = math.ceil(len(doc_ids) / self.config.group_size)
        groupings = []
        for regrouping in range(self.config.regroup):
            order = list(doc_ids)
            if self.config.grouping == "random":
                random.Random(f"{self.config.seed}:{regrouping}:{query_id}").shuffle(order)
            groupings.append([order[index * len(order) // count:(index + 1) * len(order) // count] for index in range(count)])
        return groupings

    def group_messages(self, query: str, doc_ids: list[str], documents: Mapping[str, str]) -> list[dict[str, str]]:
        """The messages of one group's request."""
        return groupwise_messages(query, [documents[doc_id] for doc_id in doc_ids])

    def _total(self, lists: Mapping[str, list[str]]) -> int:
        return sum(len(groups) for query_id, doc_ids in lists.items() for groups in self.groupings(query_id, doc_ids))

    def _asked(self, lists: Mapping[str, list[str]], counts: _Counts) -> dict[str, int]:
        return {"groups": self._total(lists)}

    def _request_plan(self, asked, lists, queries, documents, counter) -> RequestPlan:
        """The groups do not depend on the answers (first-stage order, or seeded random groupings): exact."""
        groupings = f" x {self.config.regroup} groupings" if self.config.regroup > 1 else ""
        return RequestPlan(asked, count_rule=f"exact: ceil(depth / {self.config.group_size}) groups per query{groupings}, "
                                             "the same whatever the answers", answer_sketch=_groupwise_answer)

    async def _rerank_all(self, requester, lists, queries, documents, bar, counts, traces) -> Run:
        parameters = self._answer_parameters()
        bottom, top = groupwise_scale()

        async def one(query_id: str, regrouping: int, index: int, group: list[str]) -> tuple[str, dict[str, float]]:
            answer = await requester.ask(self.group_messages(queries[query_id], group, documents), parameters)
            bar.update(1)
            if answer is None:  # failed every retry: the run stops once the others are done
                return query_id, {}
            reasoning, final = split_reasoning(answer)
            given = parse_group_scores(final, len(group))
            read = {position: score for position, score in given.items() if bottom <= score <= top}
            if not given:
                counts.add("unparsed_answers" if final.strip() else "empty_answers")
            counts.add("missing_scores", len(group) - len(given))
            counts.add("out_of_scale_scores", len(given) - len(read))
            fallback = min(read.values()) if read else bottom
            outside = {str(position + 1): score for position, score in given.items() if position not in read}
            traces.append({"query_id": query_id, "regrouping": regrouping, "group": index, "doc_ids": group,
                           "scores": [read.get(position) for position in range(len(group))], "fallback": fallback,
                           **({"out_of_scale": outside} if outside else {}),
                           "answer": final.strip(), "reasoning": (reasoning or "").strip(),
                           "finish_reason": answer.finish_reason, "completion_tokens": answer.completion_tokens})
            return query_id, {doc_id: read.get(position, fallback) for position, doc_id in enumerate(group)}

        asks = [one(query_id, regrouping, index, group) for query_id, doc_ids in lists.items()
                for regrouping, groups in enumerate(self.groupings(query_id, doc_ids)) for index, group in enumerate(groups)]
        totals: dict[str, dict[str, list[float]]] = {query_id: {} for query_id in lists}
        for query_id, scored in await asyncio.gather(*asks):
            for doc_id, score in scored.items():
                totals[query_id].setdefault(doc_id, []).append(score)
        run: Run = {}
        for query_id, doc_ids in lists.items():
            means = {doc_id: math.fsum(scores) / len(scores) for doc_id, scores in totals[query_id].items()}
            order = sorted(doc_ids, key=lambda doc_id: -means.get(doc_id, -math.inf))  # stable: ties in first-stage order
            run[query_id] = {doc_id: float(len(order) - rank) for rank, doc_id in enumerate(order)}
        return run


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

    def _request_plan(self, asked, lists, queries, documents, counter) -> RequestPlan:
        """One question per pair where the endpoint returns log-probabilities holding yes or no; at most two (the 0-3
        label question too) where they hold neither."""
        extra = {"extra_body": dict(self.config.extra_body)} if self.config.extra_body else {}
        bound = [PlannedRequest(pair_messages(kind, queries[query_id], documents[doc_id]), dict(parameters) | extra)
                 for query_id, doc_ids in lists.items() for doc_id in doc_ids
                 for kind, parameters in (("pointwise", self.YES_NO), ("pointwise_graded", self.GRADED))]
        return RequestPlan(asked, count_exact=True, messages_exact=True, bound=bound,
                           bound_rule="each pair also asked the 0-3 label question",
                           count_rule="one per pair, exact where the endpoint returns log-probabilities (vLLM, OpenAI); "
                                      "where it returns none, one probe more and each pair asks the 0-3 label question "
                                      "instead; at most two per pair (log-probabilities that hold neither yes nor no)")

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
        effort = f" effort-{self.config.reasoning_effort}" if self.config.reasoning_effort else ""
        return f"max{self.budget}{effort}"

    @property
    def budget(self) -> int:
        return self.config.max_tokens or DEFAULT_REASONING_TOKENS

    async def _score(self, requester, query_id, query, doc_id, passage, counts, traces) -> float | None:
        parameters = {"temperature": 0, "max_tokens": self.budget, "logprobs": True, "top_logprobs": TOP_LOGPROBS}
        if self.config.reasoning_effort:
            parameters["reasoning_effort"] = self.config.reasoning_effort
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


def out_of_scale_warning(name: str, usage: Mapping[str, Any]) -> str | None:
    """What to say when a groupwise answer gave scores outside the scale its prompt asks for, or None."""
    outside = usage.get("out_of_scale_scores", 0)
    if not outside:
        return None
    low, high = groupwise_scale()
    return (f"{name}: {outside} score(s) outside the {low:g}-{high:g} scale the prompt asks for were read as no score: each "
            "of those documents got its group's fallback (the lowest in-scale score the answer gave, else 0). The "
            "answers are in <Task>.groupwise.jsonl (out_of_scale); check that the model follows the prompt's scale.")


def fallback_warning(kind: str, name: str, usage: Mapping[str, Any]) -> str | None:
    """What to say when most of a rerank fell back (more than half of the pairs undecided, or of the listwise windows
    unparsed or empty), or None: the scores are then mostly the fallback, not the model's judgement."""
    if kind in ("listwise", "setwise", "groupwise"):
        reasoned = usage.get("no_ranking_after_reasoning", 0)
        failed = usage.get("unparsed_answers", 0) + usage.get("empty_answers", 0) + reasoned
        total = usage.get("requests", 0) + usage.get("cached_answers", 0) + usage.get("repeated_questions", 0)
        unusable = "were unparsed or empty" + (f" ({reasoned} held no ranking after the reasoning)" if reasoned else "")
        what, fallback = {"listwise": ("windows", f"{unusable} (each kept the first stage's order)"),
                          "setwise": ("comparisons", "were unparsed or empty (each picked its set's first passage)"),
                          "groupwise": ("groups", "were unparsed or empty (each scored its documents 0)")}[kind]
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
    "llm-setwise": SetwiseLLMReranker, "llm-groupwise": GroupwiseLLMReranker,
}


def llm_reranker_names() -> str:
    """"llm-listwise:<model>, ... or llm-groupwise:<model>": every kind, for messages."""
    names = [f"{kind}:<model>" for kind in LLM_RERANKER_KINDS]
    return ", ".join(names[:-1]) + f" or {names[-1]}"


def is_llm_reranker_name(value: object) -> bool:
    """Whether ``value`` names an LLM reranker ("llm-listwise:<model>", or a near miss of one)."""
    return isinstance(value, str) and value.split(":", 1)[0].lower().startswith("llm-")


def llm_reranker(spec: str, config: LLMRerankerConfig | None) -> LLMReranker:
    """The reranker ``spec`` names ("llm-listwise:<model>", "llm-pointwise:<model>", "llm-reasoning:<model>",
    "llm-setwise:<model>", "llm-groupwise:<model>")."""
    kind, _, model = spec.partition(":")
    if kind not in LLM_RERANKER_KINDS:
        close = difflib.get_close_matches(kind.lower(), list(LLM_RERANKER_KINDS), n=1, cutoff=0.5)
        hint = f" (did you mean {close[0]}:<model>?)" if close else ""
        raise ValueError(f"unknown LLM reranker {kind!r} in --rerank {spec}{hint}: choose {llm_reranker_names()}")
    if not model.strip():
        raise ValueError(f"--rerank {spec} names no model: write {kind}:<model id the endpoint serves>, e.g. {kind}:Qwen/Qwen3-8B")
    if config is None:
        raise ValueError(f"--rerank {spec} needs an endpoint: add --base-url URL (e.g. http://localhost:8000/v1 for vLLM); "
                         f"in Python pass rerank=as_reranker({spec!r}, llm=LLMRerankerConfig(Endpoint(base_url)))")
    return LLM_RERANKER_KINDS[kind](model, config)
