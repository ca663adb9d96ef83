"""What every LLM reranker kind shares (``LLMReranker``), and what a kind writes: one class.

A kind (listwise, pointwise, reasoning, setwise, groupwise: r2med_plugin.llm.<kind>) subclasses ``LLMReranker`` and
gives its ``kind``, its ``prompt_names`` and its ``questions(task)``: a generator that yields its questions and
receives their answers (r2med_plugin.llm.execution). A rerank drives that generator against the endpoint; the cost
estimate (``estimate_cost``, ``plan_requests``, ``--estimate-cost``) drives the same generator against a stand-in
that answers blankly. Where the questions depend on the answers, the kind's ``request_plan`` adds a worst case.
Checks, naming, the requester (client, concurrency, cache, retries), progress, counts, traces and the report live
here, once. A kind is registered in one place: ``r2med_plugin.llm.reranker_kinds.register_llm_reranker``.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping
from typing import Any, ClassVar

from tqdm.auto import tqdm

from r2med_plugin.endpoints.client import endpoint_host, host_label
from r2med_plugin.endpoints.extra_body import extra_body_label
from r2med_plugin.errors import UserError
from r2med_plugin.llm.config import LLMRerankerConfig
from r2med_plugin.llm.cost import CostEstimate, DryRequester, PlannedRequest, RequestPlan, TokenCounter, estimate, token_counter
from r2med_plugin.llm.execution import Questions, RerankTask, drive
from r2med_plugin.llm.prompting import answer_tokens, prompts_sha256
from r2med_plugin.llm.report import RerankReport, fallback_warning, out_of_scale_warning, trace_order
from r2med_plugin.llm.requests import Requester, ResponseCache, run_coroutine
from r2med_plugin.llm_settings import AnswerSettings, KindSettings
from r2med_plugin.models.protocols import RerankerBase
from r2med_plugin.quiet import bar_disabled
from r2med_plugin.retrieval.rerank import top_document_ids
from r2med_plugin.rules import SettingError
from r2med_plugin.types import Run

TOP_LOGPROBS = 20  # what vLLM serves by default (--max-logprobs 20) and the OpenAI API's maximum

logger = logging.getLogger(__name__)


def _pairs(task: RerankTask) -> int:
    """The (query, document) pairs of a rerank."""
    return sum(len(doc_ids) for doc_ids in task.lists.values())


class LLMReranker(RerankerBase):
    """What the kinds share: the checks, the name, the requests, the report, the cost estimate. A kind sets ``kind``,
    ``prompt_names`` and ``counted``, and writes ``questions``; ``_settings`` (its name's settings), ``_total`` (its
    progress bar's length), ``_asked`` (what it asked, for the usage) and ``request_plan`` have defaults."""

    kind = ""
    settings_class: ClassVar[type[KindSettings]] = KindSettings  # what it reads of the config (r2med_plugin.llm_settings): none by default
    prompt_names: tuple[str, ...] = ()
    own_prompts: ClassVar[Mapping[str, Any]] = {}  # prompts it writes itself (name -> text), hashed into its revision
    counted: tuple[str, ...] = ()  # how its answers are counted (report.ANSWER_COUNTS), each reported even when 0
    traces_name = "reasoning"  # the traces file beside the result: <Task>.<traces_name>.jsonl

    def __init__(self, model: str, config: LLMRerankerConfig) -> None:
        if not isinstance(model, str) or not model.strip():
            raise SettingError(f"{{rerank}} llm-{self.kind}:<model> needs the model id the endpoint serves, e.g. "
                               f"llm-{self.kind}:Qwen/Qwen3-8B", field="rerank")
        if not isinstance(config, LLMRerankerConfig):
            raise TypeError("config must be an LLMRerankerConfig(Endpoint(base_url), ...)")
        self.model = model.strip()
        self.config = config
        self.settings = config.for_kind(self.settings_class)
        # what it is names it: the model, how it asks, and where (one model id on two servers, or with another window,
        # is another reranker, a row of its own); the revision is the prompts' version
        setup = " ".join(part for part in (self.kind, f"@{host_label(config.endpoint.sending().base_url)}", self._settings(),
                                           extra_body_label(config.extra_body)) if part)
        self.name = f"{self.model} ({setup})"
        self.revision = self._revision()
        self.last_report: RerankReport | None = None

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.model!r}, {self.config!r})"

    # --- what a kind writes ----------------------------------------------------------------------------------------

    def questions(self, task: RerankTask) -> Questions:
        """This kind's questions (yield ``Ask``, ``Together``, ``TICK``; r2med_plugin.llm.execution), returning the run."""
        raise NotImplementedError(f"{type(self).__name__} must define questions(task), a generator of its questions")

    def request_plan(self, asked: list[PlannedRequest], task: RerankTask, counter: TokenCounter) -> RequestPlan:
        """The questions a dry run asked (``asked``) and how far they hold for any answers. The default: the same
        questions whatever the answers."""
        return RequestPlan(asked, count_rule=f"one per {'pair' if self.kind in ('pointwise', 'reasoning') else 'question'}, "
                                             "the same whatever the answers")

    def _settings(self) -> str:
        """What this kind asks with, beyond the prompt (window and step, budget), for its name. The default: each of its
        settings as ``name=value`` ("answer_tokens=2"; none for a kind without settings); the built-in kinds write their
        own short forms ("w20s10")."""
        return " ".join(f"{item.name}={getattr(self.settings, item.name)}" for item in dataclasses.fields(self.settings))

    def _shown(self) -> dict[str, Any]:
        """What the prompts showed beyond the texts, for the usage (InsertRank: the first-stage scores' format)."""
        return {}

    def _total(self, task: RerankTask) -> int | None:
        """The progress bar's length (its ``TICK``s); None where it depends on the answers."""
        return _pairs(task)

    def _asked(self, task: RerankTask) -> dict[str, int]:
        """What the rerank asked, for its usage: its pairs (other kinds: their windows, comparisons, groups)."""
        return {"pairs": _pairs(task)}

    # --- what the kinds share ---------------------------------------------------------------------------------------

    def _revision(self) -> str:
        """The prompts' version (their hash)."""
        return f"{self.kind}-prompt-{prompts_sha256(*self.prompt_names, own=self.own_prompts)[:8]}"

    def _budget_label(self) -> str:
        """The completion budget and reasoning effort as name parts (" max64 effort-high"), "" for neither."""
        if not isinstance(self.settings, AnswerSettings):
            return ""
        budget = f" max{self.settings.max_tokens}" if self.settings.max_tokens else ""
        effort = f" effort-{self.settings.reasoning_effort}" if self.settings.reasoning_effort else ""
        return budget + effort

    def _answer_parameters(self) -> dict[str, Any]:
        """Greedy, with the completion budget (``max_tokens``) and the reasoning effort where they are given."""
        parameters: dict[str, Any] = {"temperature": 0}
        if isinstance(self.settings, AnswerSettings) and self.settings.max_tokens:
            parameters["max_tokens"] = self.settings.max_tokens
        if isinstance(self.settings, AnswerSettings) and self.settings.reasoning_effort:
            parameters["reasoning_effort"] = self.settings.reasoning_effort
        return parameters

    def _sent_parameters(self, parameters: Mapping[str, Any]) -> dict[str, Any]:
        """``parameters`` as the requester sends them (``extra_body`` merged in): a worst case's questions."""
        return dict(parameters) | ({"extra_body": dict(self.config.extra_body)} if self.config.extra_body else {})

    def rerank_task(self, first_stage: Run, queries: Mapping[str, str], documents: Mapping[str, str], *,
                    depth: int) -> RerankTask:
        """What a rerank of ``first_stage``'s top ``depth`` works on: each query's top documents, every text present (else
        a clear error)."""
        lists = top_document_ids(first_stage, depth)
        missing = [query_id for query_id in lists if query_id not in queries]
        if missing:
            raise UserError(f"no text for query {missing[0]!r} ({len(missing)} such queries in the first stage)")
        unknown = [doc_id for doc_ids in lists.values() for doc_id in doc_ids if doc_id not in documents]
        if unknown:
            raise UserError(f"no text for document {unknown[0]!r} ({len(unknown)} such documents in the first stage)")
        return RerankTask(lists, queries, documents, first_stage, {name: 0 for name in self.counted})

    def _host(self) -> str:
        return endpoint_host(self.config.endpoint.sending().base_url)

    # --- a rerank ---------------------------------------------------------------------------------------------------

    def rerank(self, first_stage: Run, queries: Mapping[str, str], documents: Mapping[str, str], *, depth: int,
               show_progress: bool = True) -> Run:
        task = self.rerank_task(first_stage, queries, documents, depth=depth)
        estimated = self._estimate_before_run(task, show_progress)
        requester = Requester(self.model, self.config.endpoint, ResponseCache(self.config.cache_path), extra_body=self.config.extra_body)
        task.rules = requester.rules
        with tqdm(total=self._total(task), desc=f"Reranking ({self.name})", unit="request", disable=bar_disabled(show_progress)) as bar:
            try:
                run = requester.run(lambda: drive(self.questions(task), requester, task, bar))
            finally:
                self.last_report = self._report(task, requester, estimated)
        if requester.rules.refused:
            logger.warning(self._refused_note(requester.rules))
        for warning in (fallback_warning(self.kind, self.name, self.last_report.usage),
                        out_of_scale_warning(self.name, self.last_report.usage)):
            if warning:
                logger.warning(warning)
        return run

    def _report(self, task: RerankTask, requester: Requester, estimated: dict[str, Any] | None) -> RerankReport:
        """The usage (endpoint, what was sent and refused, shown, asked, the requester's counts, the answers' counts,
        the estimate) and the traces, in their order."""
        sent: dict[str, Any] = {"extra_body": dict(self.config.extra_body)} if self.config.extra_body else {}
        if requester.rules.refused:  # the model refused parameters (HTTP 400): recorded with the scores
            sent["unsupported_parameters"] = sorted(requester.rules.refused)
        usage = ({"endpoint": self._host()} | sent | self._shown() | self._asked(task) | requester.usage.as_dict()
                 | task.counts | ({"estimate": estimated} if estimated is not None else {}))
        return RerankReport(usage=usage, traces=sorted(task.traces, key=trace_order) or None, traces_name=self.traces_name)

    def _refused_note(self, rules) -> str:
        """The one message for a model that refused request parameters (OpenAI's reasoning models)."""
        scored = {"pointwise": "pairs are scored by the 0-3 label question, as for a server that returns none",
                  "reasoning": "pairs are scored by the word the answer says (true/false)"}.get(self.kind)
        logprobs = f"; without log-probabilities, {scored}" if scored and not rules.logprobs else ""
        return f"{self.name}: {rules.summary()}{logprobs}."

    # --- what a rerank would cost (r2med_plugin.llm.cost): the same questions, nothing sent ---------------------------

    def estimate_cost(self, first_stage: Run, queries: Mapping[str, str], documents: Mapping[str, str], *, depth: int,
                      tokenizer: str | None = None, show_progress: bool = True) -> CostEstimate:
        """What reranking ``first_stage``'s top ``depth`` would cost (requests, prompt tokens, completion budget),
        without sending a request. ``tokenizer``: a local tokenizer folder or cached hub name (default: the model's
        own where it is local, else tiktoken, else 4 characters per token)."""
        task = self.rerank_task(first_stage, queries, documents, depth=depth)
        return self._estimate(task, token_counter(self.model, tokenizer), show_progress)

    def plan_requests(self, first_stage: Run, queries: Mapping[str, str], documents: Mapping[str, str], *, depth: int,
                      tokenizer: str | None = None) -> RequestPlan:
        """The requests a rerank would send, asked by this kind's own ``questions`` with nothing sent (RequestPlan:
        the questions, whether they are exact, and a worst case where they depend on the answers)."""
        task = self.rerank_task(first_stage, queries, documents, depth=depth)
        return self._plan(task, token_counter(self.model, tokenizer))

    def _estimate_before_run(self, task: RerankTask, show_progress: bool) -> dict[str, Any] | None:
        """The estimate a run records beside its usage; a run is not stopped by an estimate that cannot be made (a
        chat template that refuses the messages says so again, from the server)."""
        try:
            return self._estimate(task, token_counter(self.model), show_progress).as_dict()
        except ValueError as error:
            logger.warning("%s: no cost estimate (%s)", self.name, error)
            return None

    def _estimate(self, task: RerankTask, counter: TokenCounter, show_progress: bool = True) -> CostEstimate:
        cache = ResponseCache(self.config.cache_path)
        plan = self._plan(task, counter)
        return estimate(self.name, plan, model=self.model, host=self._host(), counter=counter,
                        cached=lambda key: cache.enabled and cache.path(key).is_file(), show_progress=show_progress)

    def _plan(self, task: RerankTask, counter: TokenCounter) -> RequestPlan:
        """A dry run of ``questions`` (each answered blankly by the stand-in) and this kind's ``request_plan``."""
        dry = task.fresh(self.counted)
        requester = DryRequester(self.config.extra_body, ResponseCache(self.config.cache_path).get_rules(self._host(), self.model))
        dry.rules = requester.rules
        with tqdm(disable=True) as bar:
            run_coroutine(drive(self.questions(dry), requester, dry, bar))
        return self.request_plan(requester.asked, task, counter)


def positional_scores(order: list[str]) -> dict[str, float]:
    """Scores by place: len(order), ..., 1."""
    return {doc_id: float(len(order) - rank) for rank, doc_id in enumerate(order)}


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


def own_logprobs(answer) -> list | None:
    """The log-probabilities of an answer's own tokens: all of them where nothing came before the answer (no reasoning
    part, no ``<think>`` thought in the content), else only the answer's (``answer_tokens``; none for an answer never
    given): behind vLLM's reasoning parser the log-probabilities cover the reasoning's tokens first."""
    content = answer.content
    if answer.reasoning is None and "</think>" not in content and not content.lstrip().startswith("<think>"):
        return answer.logprobs
    final = content.split("</think>")[-1] if "</think>" in content else ("" if content.lstrip().startswith("<think>") else content)
    return answer_tokens(answer.logprobs, final)
