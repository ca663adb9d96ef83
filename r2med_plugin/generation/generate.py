"""generate_expansions: the official ``generate_hydoc`` mode against any OpenAI-compatible endpoint.

One request per evaluated query (queries without positives are never scored, so none is spent on
them), at most ``concurrency`` in flight, each finished query appended to the task's expansion file
at once. Running the same command again continues where a run stopped; a folder holding outputs of
another configuration (model, prompts, sampling, first stage, data revision) is refused.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from tqdm.auto import tqdm

from r2med_plugin.catalog import get_task_spec
from r2med_plugin.endpoints import client as api
from r2med_plugin.errors import UserError
from r2med_plugin.evaluation.first_stages import as_first_stage
from r2med_plugin.generation.config import IDENTITY_KEYS, GenerationConfig, GenerationRequest
from r2med_plugin.generation.first_stage import check_ranking
from r2med_plugin.generation.prompts import lamer_passages, messages, official_prompts
from r2med_plugin.generation.store import ExpansionStore, expansion_dir
from r2med_plugin.llm.config import Sending
from r2med_plugin.llm.cost import CostEstimate, PlannedRequest, RequestPlan, TokenCounter, estimate, token_counter
from r2med_plugin.quiet import bar_disabled
from r2med_plugin.rules import SettingError
from r2med_plugin.types import TaskData, TaskSpec
from r2med_plugin.version import __version__

logger = logging.getLogger(__name__)

MANIFEST_FORMAT = "r2med-plugin local expansion v1"
FIELDS = ("id", "text", "hy_doc", "doc_id")


@dataclass
class GenerationReport:
    task: str
    folder: Path
    total: int
    already_done: int
    generated: int
    prompt_tokens: int
    completion_tokens: int
    seconds: float
    failures: list[tuple[str, str]] = field(default_factory=list)
    estimate: dict[str, Any] | None = None  # what the run was estimated to cost before it sent anything (CostEstimate.as_dict)

    @property
    def complete(self) -> bool:
        return self.already_done + self.generated == self.total


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def sampling_parameters(preset: str, **overrides: Any) -> dict[str, Any]:
    """The preset's official defaults with the given (non-None) overrides, validated."""
    return GenerationConfig("hyde", "-", preset=preset, **overrides).sampling()


def _passages(data: TaskData, method: str, source: str, show_progress: bool) -> dict[str, str]:
    """LaMer's passages: each query's top documents from the same first stages reranking uses (the official
    BM25, ties in corpus order and cached; or a run file read and checked like any run file)."""
    if method != "lamer":
        return {}
    top_k = official_prompts()["lamer_passages"]["top_k"]
    ranked = as_first_stage(source).ranked(data, top_k, show_progress=show_progress).run
    ranking = {query_id: list(docs) for query_id, docs in ranked.items()}
    check_ranking(ranking, data, source)
    doc_text = dict(zip(data.corpus["id"].to_list(), data.corpus["text"].to_list(), strict=True))
    return {query_id: lamer_passages(ranking[query_id], doc_text) for query_id in data.queries["id"].to_list()}


def _check_same_configuration(store: ExpansionStore, previous: dict[str, Any] | None, identity: dict[str, Any]) -> None:
    if previous is None:
        return
    differs = [key for key in IDENTITY_KEYS if previous.get(key) != identity.get(key)]
    if differs:
        details = "; ".join(f"{key}: {previous.get(key)!r} there, {identity.get(key)!r} now" for key in differs)
        raise SettingError(
            f"{store.folder} holds expansions generated with another configuration ({details}). "
            "Use another {name} or {out}, or pass {overwrite} to start that folder again", field="out"
        )


def _totals(store: ExpansionStore, query_ids: list[str]) -> dict[str, int]:
    usage = store.usage()
    done = store.finished(query_ids)
    rows = [usage[q] for q in done if q in usage]
    prompt = sum(int(r.get("prompt_tokens") or 0) for r in rows)
    completion = sum(int(r.get("completion_tokens") or 0) for r in rows)
    truncated = sum(1 for r in rows if r.get("finish_reason") == "length")  # hit --max-tokens (kept, as the official code keeps them)
    return {"prompt": prompt, "completion": completion, "total": prompt + completion, "queries_without_usage": len(done) - len(rows),
            "truncated_outputs": truncated}


def generate_expansions(request: GenerationRequest | str, *args: Any, **settings: Any) -> GenerationReport:
    """Generate the expansions a ``GenerationRequest`` asks for: ``config.method`` expansions of ``task``'s queries
    with the model ``config.llm`` served at ``endpoint.base_url``.

    Writes ``<out>/<HubName>/<method>/<name>/query_with_hydoc.jsonl`` (+ usage.jsonl, manifest.json),
    ready for ``evaluate_task(..., expansion="local:<out>/<method>/<name>")``. The key is read from the
    environment variable ``endpoint.api_key_env`` (default OPENAI_API_KEY; "EMPTY" when that is unset).
    The keyword form ``generate_expansions(task, method, llm, base_url, out=..., concurrency=..., ...)`` builds the
    request (``GenerationRequest.of``).
    """
    request = _request_of(request, args, settings, "generate_expansions")
    if request.endpoint is None or not request.endpoint.base_url:
        raise UserError("generate_expansions sends requests: give the endpoint, "
                        "GenerationRequest(task, config, Endpoint(base_url)) (or base_url in the keyword form)")
    return _generate(request, _generation_spec(request.task), request.endpoint.sending())


def _request_of(request: GenerationRequest | str, args: tuple, settings: dict[str, Any], what: str) -> GenerationRequest:
    if isinstance(request, GenerationRequest):
        if args or settings:
            raise TypeError(f"{what}() takes a GenerationRequest alone, or task, method, llm and keyword settings")
        return request
    return GenerationRequest.of(request, *args, what=what, **settings)


def _generate(request: GenerationRequest, spec: TaskSpec, endpoint: Sending) -> GenerationReport:
    config, base_url, show_progress = request.config, endpoint.base_url, request.show_progress
    key = api.api_key(endpoint.api_key_env)
    config.first_stage_identity()  # a missing run file is refused before the data loads
    _check_budget_fits(config.llm, config.sampling(), config.preset, base_url, key, endpoint.timeout)  # before any data or request
    data = _load(request.task, request.data_dir, request.accept_drift)
    store = ExpansionStore(expansion_dir(request.out, spec, config.method, config.folder_name))
    created = [folder for folder in (store.folder, *store.folder.parents) if not folder.exists()]  # deepest first
    identity = config.identity(spec, data.result_revision)  # other mirror files (or drifted counts): another identity
    with store.locked(), _removed_when_nothing_finished(store, created):
        if request.overwrite:
            store.clear()
        query_ids = data.queries["id"].to_list()
        done = store.finished(query_ids)
        previous = store.read_manifest() if done else None  # a folder with nothing finished starts afresh
        _check_same_configuration(store, previous, identity)
        pending = [q for q in query_ids if q not in done]
        passages = _passages(data, config.method, config.first_stage, show_progress) if pending else {}
        texts = dict(zip(query_ids, data.queries["text"].to_list(), strict=True))
        estimated = _estimate_requests(spec, config, texts, passages, pending, len(done), token_counter(config.llm))
        manifest = _start_manifest(previous, identity, spec, api.endpoint_host(base_url), sampling_preset_name=config.preset,
                                   total=len(query_ids))
        store.write_manifest(manifest)
        report = GenerationReport(spec.name, store.folder, len(query_ids), len(done), 0, 0, 0, 0.0, estimate=estimated.as_dict())
        job = _Job(
            store=store, spec=spec, method=config.method, model=config.llm, texts=texts, passages=passages,
            positives=data.qrels, sampling=config.sampling(), extra_body=config.extra_body,
            key_env=endpoint.api_key_env or api.DEFAULT_KEY_ENV, base_url=base_url, secrets=[key],
            max_failures=request.max_failures, report=report,
        )
        _send(job, store, manifest, query_ids, pending, len(done), endpoint, key, show_progress)
        if report.failures:
            raise _failed(job, store, len(pending), endpoint.max_retries)
    return report


def _send(job: _Job, store: ExpansionStore, manifest: dict[str, Any], query_ids: list[str], pending: list[str], done: int,
          endpoint: Sending, key: str, show_progress: bool) -> None:
    """The pending queries' requests, ``endpoint.concurrency`` at a time; the manifest finished whatever happens."""
    report, started = job.report, time.perf_counter()
    try:
        if pending:
            store.open()
            try:
                client = api.make_client(endpoint.base_url, key, timeout=endpoint.timeout, max_retries=endpoint.max_retries)
                _run_to_end(job.run(pending, client, endpoint.concurrency, show_progress, done_before=done))
            finally:
                store.close()
    finally:
        report.seconds = time.perf_counter() - started
        _finish_manifest(store, manifest, query_ids, report, job.reasoning_seen, job.served_models, job.rules)
        if job.rules.refused:  # OpenAI's reasoning models refuse max_tokens and temperature: said once
            logger.warning("%s, %s: %s (recorded in %s)", job.spec.name, job.model, job.rules.summary(),
                           store.folder / "manifest.json")


def _failed(job: _Job, store: ExpansionStore, pending: int, max_retries: int) -> api.GenerationError:
    """The error of a run some of whose queries failed: the first failure, and what is kept."""
    report = job.report
    query_id, message = report.failures[0]
    finished = report.already_done + report.generated
    if job.refused_only:  # the server refused the requests: the same command sends the same requests
        failed = "were refused by the server (not retried)"
        saved = (f"The {finished} finished queries are saved in {store.folder}. " if finished else
                 "No query finished, so no folder is left behind. ") + REFUSED_FIX
    else:
        failed = f"failed after {max_retries} retries"
        saved = (f"The {finished} finished queries are saved in {store.folder}; run the same command again to retry the rest"
                 if finished else "No query finished, so no folder is left behind; check --base-url and --llm, then run again")
    return api.GenerationError(
        f"{job.spec.name}: {len(report.failures)} of {pending} queries {failed} (first: {query_id!r}: {message}). {saved}"
    )


def _generation_spec(task: str):
    spec = get_task_spec(task)
    if spec.kind != "r2med":
        raise UserError(f"{spec.name}: expansions are generated for the R2MED tasks (R2MED<Domain>), not NanoR2MED")
    return spec


def estimate_generation_cost(request: GenerationRequest | str, *args: Any, tokenizer: str | None = None,
                             **settings: Any) -> CostEstimate:
    """What ``generate_expansions(request)`` would cost, without sending a request: one request per query not yet
    generated in the folder (all of them with ``overwrite``), its prompt tokens (the same messages, built by the same
    code), the completion budget (``max_tokens``, where the preset or the config sets one); priced by
    ``CostEstimate.dollars(price_in, price_out)``. ``tokenizer``: see r2med_plugin.llm.cost.token_counter. The keyword
    form ``estimate_generation_cost(task, method, llm, max_tokens=..., out=...)`` builds the request."""
    request = _request_of(request, args, settings, "estimate_generation_cost")
    config, show_progress = request.config, request.show_progress
    spec = _generation_spec(request.task)
    config.first_stage_identity()  # a missing run file is refused before the data loads
    counter = token_counter(config.llm, tokenizer)
    data = _load(request.task, request.data_dir, request.accept_drift)
    store = ExpansionStore(expansion_dir(request.out, spec, config.method, config.folder_name))
    query_ids = data.queries["id"].to_list()
    done = {} if request.overwrite else store.finished(query_ids)
    if done:  # the run would refuse a folder of another configuration: so does its estimate
        _check_same_configuration(store, store.read_manifest(), config.identity(spec, data.result_revision))
    pending = [query_id for query_id in query_ids if query_id not in done]
    passages = _passages(data, config.method, config.first_stage, show_progress) if pending else {}
    return _estimate_requests(spec, config, dict(zip(query_ids, data.queries["text"].to_list(), strict=True)), passages, pending,
                              len(done), counter)


def _estimate_requests(spec, config: GenerationConfig, texts: dict[str, str], passages: dict[str, str], pending: list[str],
                       done: int, counter: TokenCounter) -> CostEstimate:
    """The requests of the ``pending`` queries, as ``_Job.run`` builds them (``done``: queries generated before)."""
    parameters = config.sampling() | ({"extra_body": dict(config.extra_body)} if config.extra_body else {})
    plan = RequestPlan([PlannedRequest(messages(spec, config.method, texts[query_id], passages.get(query_id)), parameters)
                        for query_id in pending], count_rule="exact: one per query not generated yet")
    return estimate(f"{spec.name}  {config.method}/{config.folder_name} ({config.llm})", plan, model=config.llm, host="",
                    counter=counter, distinct=False, answered=done)


REFUSED_FIX = ("Running the same command again sends the same requests and gets the same answer: change what the server "
               "refused first (its text is above; a context length: lower --max-tokens)")


def _check_budget_fits(llm: str, sampling: dict[str, Any], preset: str, base_url: str, key: str, timeout: float) -> None:
    """Refuse a completion budget the model's context cannot hold, before any request: vLLM reports each model's
    ``max_model_len`` in GET /models and refuses (HTTP 400) every request whose prompt and budget exceed it."""
    budget = sampling.get("max_tokens")
    if budget is None:
        return

    async def lengths() -> dict[str, int]:
        client = api.make_client(base_url, key, timeout=min(timeout, 30.0), max_retries=1)
        try:
            return await api.context_lengths(client)
        finally:
            await client.close()

    found: dict[str, int] = {}
    _run_to_end(lengths(), found)
    context = found.get(llm)
    if context is not None and budget >= context:
        where = f"{{preset}} {preset} sends max_tokens {budget}" if preset == "vllm" and budget == 10240 else f"{{max_tokens}} {budget}"
        raise SettingError(  # --max-model-len is the vLLM server's own flag
            f"{where}, but {api.endpoint_host(base_url)} serves {llm!r} with a context of {context} tokens (max_model_len), "
            f"which must hold the prompt and the completion: every request would be refused (HTTP 400). Lower {{max_tokens}} "
            f"below {context} less the prompt's tokens, e.g. {{max_tokens}} {context // 2}, or serve the model with a longer "
            "--max-model-len", field="max_tokens")


@contextmanager
def _removed_when_nothing_finished(store: ExpansionStore, created: list[Path]) -> Iterator[None]:
    """A run that fails before finishing any query (404, server down) leaves no folder behind."""
    try:
        yield
    except BaseException:
        store.remove_if_nothing_finished(created)
        raise


def _run_to_end(coroutine: Any, into: dict | None = None) -> None:
    """asyncio.run, also from code that already runs an event loop (Jupyter): then in a worker thread (``into``: a dict
    the coroutine's result, a dict, is merged into)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        result = asyncio.run(coroutine)
    else:
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(max_workers=1) as pool:
            result = pool.submit(asyncio.run, coroutine).result()
    if into is not None and isinstance(result, dict):
        into.update(result)


def _load(task: str, data_dir: str | os.PathLike | None, accept_drift: bool | None) -> TaskData:
    from r2med_plugin.data.loader import load_task

    return load_task(task, data_dir=data_dir, accept_drift=accept_drift)


def _start_manifest(previous: dict[str, Any] | None, identity: dict[str, Any], spec, host: str, *, sampling_preset_name: str, total: int) -> dict[str, Any]:
    source = official_prompts()["source"]
    manifest = dict(previous or {})
    manifest.update(identity)
    manifest.update({
        "format": MANIFEST_FORMAT,
        "hub_name": spec.hub_name,
        "fields": list(FIELDS),
        "sampling_preset": sampling_preset_name,
        "prompts_source": {"repository": source["repository"], "commit": source["commit"], "path": "src/instrcution.py"},
        "r2med_plugin_version": __version__,
        "queries": total,
    })
    manifest.setdefault("started", _now())
    manifest.setdefault("runs", [])
    manifest["runs"] = [*manifest["runs"], {"started": _now(), "endpoint_host": host}]
    manifest["endpoint_host"] = host
    manifest.setdefault("reasoning", False)
    manifest.setdefault("served_models", [])
    return manifest


def _finish_manifest(store: ExpansionStore, manifest: dict[str, Any], query_ids: list[str], report: GenerationReport,
                     reasoning_seen: bool, served: set[str], rules: api.RequestRules | None = None) -> None:
    finished = len(store.finished(query_ids))
    complete = finished == len(query_ids)
    if complete:
        store.rewrite_in_order(query_ids)
    last = dict(manifest["runs"][-1])
    last.update({"ended": _now(), "generated": report.generated, "failed": len(report.failures)})
    if rules is not None and rules.refused:  # what the model refused, and how this run's requests were sent instead
        last["unsupported_parameters"] = {"refused": sorted(rules.refused), "sent_max_completion_tokens": rules.completion_tokens,
                                          "left_out": sorted(rules.dropped)}
    manifest["runs"] = [*manifest["runs"][:-1], last]
    manifest["generated"] = finished
    manifest["complete"] = complete
    if complete and not manifest.get("finished"):
        manifest["finished"] = _now()
    manifest["tokens"] = _totals(store, query_ids)
    manifest["reasoning"] = bool(manifest.get("reasoning")) or reasoning_seen or _has_think_marker(store, query_ids)
    manifest["served_models"] = sorted(set(manifest.get("served_models", [])) | served)
    store.write_manifest(manifest)


def _has_think_marker(store: ExpansionStore, query_ids: list[str]) -> bool:
    """A reasoning model served without a reasoning parser leaves its thinking in the text, closed by </think>."""
    return any("</think>" in str(row.get("hy_doc", "")) for row in store.finished(query_ids).values())


@dataclass
class _Job:
    store: ExpansionStore
    spec: Any
    method: str
    model: str
    texts: dict[str, str]
    passages: dict[str, str]
    positives: dict[str, dict[str, int]]
    sampling: dict[str, Any]
    extra_body: Mapping[str, Any] | None
    key_env: str
    base_url: str
    secrets: list[str]
    max_failures: int
    report: GenerationReport
    reasoning_seen: bool = False
    served_models: set[str] = field(default_factory=set)
    rules: api.RequestRules = field(default_factory=lambda: api.RequestRules())  # what the model refused (HTTP 400)
    refused_only: bool = True  # every failure so far was a refused request (HTTP 4xx, not retried)

    async def run(self, pending: list[str], client: Any, concurrency: int, show_progress: bool, *, done_before: int) -> None:
        semaphore = asyncio.Semaphore(concurrency)

        async def one(query_id: str) -> tuple[str, api.Completion | BaseException]:
            async with semaphore:
                chat = messages(self.spec, self.method, self.texts[query_id], self.passages.get(query_id))
                try:
                    return query_id, await api.complete(client, self.model, chat, self.sampling, self.extra_body, self.rules)
                except Exception as error:  # noqa: BLE001 - classified below
                    return query_id, error

        progress = tqdm(
            total=done_before + len(pending), initial=done_before, unit="query", disable=bar_disabled(show_progress),
            desc=f"{self.spec.name} {self.method}/{self.store.folder.name}",
        )
        started = time.perf_counter()
        tasks = [asyncio.create_task(one(query_id)) for query_id in pending]
        try:
            for next_done in asyncio.as_completed(tasks):
                query_id, outcome = await next_done
                if isinstance(outcome, BaseException):
                    await self._failed(client, query_id, outcome)
                    progress.set_postfix(failed=len(self.report.failures), refresh=False)
                    continue
                self._save(query_id, outcome)
                elapsed = max(time.perf_counter() - started, 1e-9)
                progress.set_postfix({"tok/s": f"{self.report.completion_tokens / elapsed:.1f}"}, refresh=False)
                progress.update(1)
        finally:
            progress.close()
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            await client.close()

    def _save(self, query_id: str, completion: api.Completion) -> None:
        record = {
            "id": query_id, "text": self.texts[query_id], "hy_doc": completion.hy_doc, "doc_id": list(self.positives.get(query_id, {})),
        }
        usage = {
            "id": query_id, "prompt_tokens": completion.prompt_tokens, "completion_tokens": completion.completion_tokens,
            "finish_reason": completion.finish_reason, "seconds": round(completion.seconds, 3), "served_model": completion.served_model,
        }
        self.store.append(record, usage)
        self.report.generated += 1
        self.report.prompt_tokens += completion.prompt_tokens or 0
        self.report.completion_tokens += completion.completion_tokens or 0
        self.reasoning_seen |= completion.reasoning
        if completion.served_model:
            self.served_models.add(completion.served_model)

    async def _failed(self, client: Any, query_id: str, error: BaseException) -> None:
        kind = api.classify(error)
        if kind == "other":
            raise error
        message = api.describe(error, model=self.model, key_env=self.key_env, base_url=self.base_url, secrets=self.secrets)
        self.refused_only &= api.refused(error)
        if "context length" in message.lower():
            budget = self.sampling.get("max_tokens")
            message += (f"; lower --max-tokens (this run asks for {budget} completion tokens)" if budget is not None else
                        "; the prompt is longer than the model's context") + ", or serve the model with a longer --max-model-len"
        served = await api.unserved_model(client, self.model, error)
        if served is not None:  # a server pinned to another model refuses every query alike: stop at once
            raise api.GenerationError(api.unserved_message(error, served, model=self.model, secrets=self.secrets)) from None
        if kind == "fatal":
            import openai

            if isinstance(error, openai.NotFoundError):
                models = await api.available_models(client)
                if models:
                    message += f"; the endpoint serves: {', '.join(models[:20])}"
            raise api.GenerationError(api.redact(message, self.secrets)) from None
        self.report.failures.append((query_id, message))
        if len(self.report.failures) >= self.max_failures:
            rerun = REFUSED_FIX if self.refused_only else "run the same command again to continue"
            raise api.GenerationError(
                f"{self.spec.name}: stopping after {len(self.report.failures)} failed queries (last: {message}). "
                f"Finished queries are saved in {self.store.folder}; {rerun}"
            ) from None
