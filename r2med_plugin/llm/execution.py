"""How an LLM reranker kind's questions are asked: the one place that sends, counts progress and gathers.

A kind writes its questions as a generator (``LLMReranker.questions``) that yields:

- ``Ask(messages, parameters)``: one question; the generator receives the answer (``client.Answer``), or None when
  the request failed every retry (the run then stops once the other questions are done);
- ``Together(jobs)``: generators to run concurrently (queries, pairs, groups); it receives their results, in order;
- ``TICK``: one unit of the progress bar done (a window, a pair, a comparison, a group).

Its return value is the run. ``drive`` runs such a generator against a requester: the real one
(r2med_plugin.llm.requests.Requester: client, concurrency, cache, retries, usage) for a rerank, or the cost
estimate's stand-in (r2med_plugin.llm.cost.DryRequester: records each question, answers it blankly). The run and
the estimate therefore ask through the same code and cannot disagree on what is asked.
"""

from __future__ import annotations

import asyncio
from collections.abc import Generator, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from r2med_plugin.types import Run


@dataclass(frozen=True)
class Ask:
    """One question: the chat messages and the request parameters. ``probe``: asked to learn about the endpoint,
    counted apart unless a later question is the same (r2med_plugin.llm.requests.Usage)."""

    messages: list[dict[str, str]]
    parameters: dict[str, Any]
    probe: bool = False


@dataclass(frozen=True)
class Together:
    """Generators (each yielding ``Ask``, ``Together`` or ``TICK``) run concurrently; their results come back in order."""

    jobs: list[Generator]


class _Tick:
    def __repr__(self) -> str:
        return "TICK"


TICK = _Tick()  # one unit of progress done
Step = Ask | Together | _Tick
Questions = Generator[Step, Any, Any]


@dataclass
class RerankTask:
    """What one rerank works on, and what it notices as it goes: ``lists`` (each query's top documents, in the first
    stage's order), the texts, the first stage's scores, the answer counts (``count``), the traces, the questions
    asked (probes not included) and the requester's ``rules`` (what the model refused, learned as the run goes)."""

    lists: Mapping[str, list[str]]
    queries: Mapping[str, str]
    documents: Mapping[str, str]
    first_stage: Run
    counts: dict[str, int] = field(default_factory=dict)
    traces: list[dict[str, Any]] = field(default_factory=list)
    asked: int = 0
    rules: Any = None

    def count(self, name: str, count: int = 1) -> None:
        self.counts[name] = self.counts.get(name, 0) + count

    def fresh(self, counted: tuple[str, ...] = ()) -> RerankTask:
        """The same lists and texts with nothing noticed yet (each of ``counted`` at 0)."""
        return RerankTask(self.lists, self.queries, self.documents, self.first_stage, {name: 0 for name in counted})


class Asker(Protocol):
    rules: Any

    async def ask(self, messages: list[dict[str, str]], parameters: dict[str, Any], *, probe: bool = False) -> Any: ...


class Progress(Protocol):
    def update(self, n: int = 1) -> Any: ...


async def drive(questions: Questions, asker: Asker, task: RerankTask, progress: Progress) -> Any:
    """Run ``questions`` to its end against ``asker``: each ``Ask`` asked, each ``Together`` gathered, each ``TICK``
    shown on ``progress``; returns what the generator returns."""
    reply: Any = None
    while True:
        try:
            step = questions.send(reply)
        except StopIteration as finished:
            return finished.value
        if isinstance(step, Ask):
            task.asked += not step.probe
            reply = await asker.ask(step.messages, step.parameters, probe=step.probe)
        elif isinstance(step, Together):
            reply = list(await asyncio.gather(*(drive(job, asker, task, progress) for job in step.jobs)))
        elif step is TICK:
            progress.update(1)
            reply = None
        else:
            raise TypeError(f"a reranker's questions yield Ask, Together or TICK, not {step!r}")

