"""Requests to an OpenAI-compatible endpoint for the LLM rerankers: concurrent, retried, cached and counted.

Every answer is written to the cache the moment it arrives (one file per request, atomically), keyed by the
model, the messages (which hold the query and passage texts) and the request parameters. A run killed half way
resumes from what it had; a rerun of a finished run sends no request. The endpoint's URL and key are not part of
the key, and the key is never written: the cache holds answers only.

Retries on 429, 5xx, timeouts and dropped connections are the ``openai`` client's own (r2med_plugin.endpoints.client).
A request that still fails stops the run after the others finished (their answers are cached); a rejected key or
an unknown model stops it at once. Usage (requests sent, answers from the cache, tokens, wall time) is counted.

Parameters the model refuses (HTTP 400 "Unsupported parameter", r2med_plugin.endpoints.client.RequestRules) are left out
of every later request; what was learned is kept beside the answers (``rules/<key>.json`` per endpoint host and
model), so a rerun asks as the first run asked and finds its answers.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import hashlib
import json
import time
import zlib
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from r2med_plugin.cache import cache_dir, cache_enabled
from r2med_plugin.endpoints import client as api
from r2med_plugin.io import write_json_atomic
from r2med_plugin.llm.config import Endpoint

T = TypeVar("T")
CACHE_KIND = "llm-responses"
CACHE_FORMAT = 2  # 2: the endpoint's host is part of the key


class ResponseCache:
    """Answers on disk, one JSON file per request under ``folder/<key[:2]>/<key>.json``."""

    def __init__(self, folder: str | Path | None = None) -> None:
        self.folder = Path(folder) if folder is not None else cache_dir() / CACHE_KIND
        self.enabled = folder is not None or cache_enabled()

    @staticmethod
    def key(model: str, messages: list[dict[str, str]], parameters: dict[str, Any], host: str) -> str:
        """Model, messages, request parameters and the endpoint's host (one model id on two servers is two models)."""
        payload = {"format": CACHE_FORMAT, "model": model, "messages": messages, "parameters": parameters, "host": host}
        return hashlib.sha256(json.dumps(payload, sort_keys=True, ensure_ascii=False).encode("utf-8")).hexdigest()

    def path(self, key: str) -> Path:
        return self.folder / key[:2] / f"{key}.json"

    def get(self, key: str) -> api.Answer | None:
        path = self.path(key)
        if not self.enabled or not path.is_file():
            return None
        try:
            return api.Answer.from_json(json.loads(path.read_text(encoding="utf-8")))
        except (OSError, ValueError, TypeError, zlib.error):
            return None  # unreadable: asked again and replaced

    def put(self, key: str, answer: api.Answer) -> None:
        if self.enabled:
            write_json_atomic(self.path(key), answer.to_json(), indent=None)

    def _rules_path(self, host: str, model: str) -> Path:
        digest = hashlib.sha256(json.dumps([CACHE_FORMAT, host, model]).encode("utf-8")).hexdigest()
        return self.folder / "rules" / f"{digest}.json"

    def get_rules(self, host: str, model: str) -> api.RequestRules:
        """What this endpoint's model refused in an earlier run (empty rules when nothing, or the cache is off)."""
        path = self._rules_path(host, model)
        if not self.enabled or not path.is_file():
            return api.RequestRules()
        try:
            payload = json.loads(path.read_text(encoding="utf-8"))
            return api.RequestRules(completion_tokens=bool(payload["completion_tokens"]), dropped=set(payload["dropped"]),
                                    refused=dict(payload["refused"]))
        except (OSError, ValueError, TypeError, KeyError):
            return api.RequestRules()  # unreadable: learned again

    def put_rules(self, host: str, model: str, rules: api.RequestRules) -> None:
        if self.enabled and rules.refused:
            write_json_atomic(self._rules_path(host, model), {"completion_tokens": rules.completion_tokens,
                                                              "dropped": sorted(rules.dropped), "refused": rules.refused})


@dataclass
class Usage:
    """What a rerank cost. Every question a reranker asks is answered one way: sent (``requests``), read from the
    cache (``cached_answers``) or the same question as one asked before in this run (``repeated_questions``: two
    passages of one text; asked once, also when both are asked concurrently), so the three add up to the questions.
    A probe (pointwise: does the endpoint return log-probabilities?) that no pair's question reuses is counted
    apart (``probe_requests``, ``probe_cached_answers``). Tokens (probe's included) and wall time."""

    requests: int = 0
    cached: int = 0
    repeated: int = 0
    probe_requests: int = 0
    probe_cached: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    wall_seconds: float = 0.0

    def as_dict(self) -> dict[str, float | int]:
        return {"requests": self.requests, "cached_answers": self.cached, "repeated_questions": self.repeated,
                "probe_requests": self.probe_requests, "probe_cached_answers": self.probe_cached,
                "prompt_tokens": self.prompt_tokens, "completion_tokens": self.completion_tokens,
                "wall_seconds": round(self.wall_seconds, 3)}


class Requester:
    """Sends chat requests for one model through one client, at most ``endpoint.concurrency`` in flight."""

    def __init__(self, model: str, endpoint: Endpoint, cache: ResponseCache, *, model_option: str = "--rerank",
                 extra_body: Mapping[str, Any] | None = None) -> None:
        self.sending = endpoint.sending()
        api.endpoint_host(self.sending.base_url)  # a malformed URL is refused before anything is sent
        self.model = model
        self.extra_body = dict(extra_body) if extra_body else None  # merged into every request body, and in its key
        self.endpoint = endpoint
        self.cache = cache
        self.model_option = model_option
        self.usage = Usage()
        self.failures: dict[str, str] = {}  # request key -> why it failed (dropped when asked again with success)
        self.refused: set[str] = set()  # request keys the server refused (HTTP 4xx, not retried: a rerun gets the same)
        self._client: Any = None
        self._answered: dict[str, api.Answer] = {}
        self._pending: dict[str, asyncio.Future] = {}  # questions in flight: an identical question waits for the answer
        self._origin: dict[str, str] = {}  # question -> "sent" or "cached": how its answer came
        self._claimed: set[str] = set()  # questions some asker (not a probe) counted already
        self._probes: set[str] = set()
        self._semaphore: asyncio.Semaphore | None = None
        self._key_env = endpoint.api_key_env or api.DEFAULT_KEY_ENV
        self._secrets: list[str] = []
        self.rules = cache.get_rules(api.endpoint_host(self.sending.base_url), model)  # what the model refused (HTTP 400)

    async def ask(self, messages: list[dict[str, str]], parameters: dict[str, Any], *, probe: bool = False) -> api.Answer | None:
        """The answer to ``messages`` (from the cache, else from the endpoint); None when the request failed every
        retry (recorded in ``failures``; the run stops once the other requests are done). ``probe``: a question
        asked to learn about the endpoint, counted apart unless a later question is the same (see Usage)."""
        if self.extra_body:  # the client merges it into the body; as a parameter it is part of the answer's key
            parameters = {**parameters, "extra_body": self.extra_body}
        key = ResponseCache.key(self.model, messages, parameters, api.endpoint_host(self.sending.base_url))
        if key in self._pending:  # the same question is in flight: its answer, not a second request
            answer = await self._pending[key]
        elif key in self._answered:
            answer = self._answered[key]
        else:
            future = asyncio.get_running_loop().create_future()
            self._pending[key] = future
            answer = None
            try:
                answer = await self._fetch(key, messages, parameters)
            finally:
                del self._pending[key]
                future.set_result(answer)
        if answer is not None:
            self._count(key, probe)
        return answer

    def _count(self, key: str, probe: bool) -> None:
        if probe:
            self._probes.add(key)
        elif key in self._claimed:
            self.usage.repeated += 1
        else:
            self._claimed.add(key)
            if self._origin[key] == "sent":
                self.usage.requests += 1
            else:
                self.usage.cached += 1

    def _count_probes(self) -> None:
        """Probes whose answer no later question reused: counted apart (once per run)."""
        for key in self._probes - self._claimed:
            if self._origin.get(key) == "sent":
                self.usage.probe_requests += 1
            else:
                self.usage.probe_cached += 1
        self._probes = set()

    async def _fetch(self, key: str, messages: list[dict[str, str]], parameters: dict[str, Any]) -> api.Answer | None:
        cached = self.cache.get(key)
        if cached is not None:
            self._origin[key] = "cached"
            self._answered[key] = cached
            return cached
        if self._semaphore is None or self._client is None:
            raise RuntimeError("Requester.ask runs inside Requester.run")
        async with self._semaphore:
            try:
                answer = await api.answer(self._client, self.model, messages, parameters, self.rules)
            except Exception as error:  # noqa: BLE001 - classified: fatal errors stop the run, others are counted
                served = await api.unserved_model(self._client, self.model, error)
                if served is not None:  # a server pinned to another model refuses every request: stop at once
                    raise api.EndpointError(api.unserved_message(error, served, model=self.model, secrets=self._secrets,
                                                                 model_option=self.model_option)) from None
                self.failures[key] = self._failed(error)
                if api.refused(error):
                    self.refused.add(key)
                return None
        self.failures.pop(key, None)
        self.refused.discard(key)
        self._origin[key] = "sent"
        self.usage.prompt_tokens += answer.prompt_tokens
        self.usage.completion_tokens += answer.completion_tokens
        await asyncio.to_thread(self.cache.put, key, answer)  # its fsync off the event loop: other answers keep coming
        self._answered[key] = answer
        return answer

    def _failed(self, error: BaseException) -> str:
        message = api.describe(error, model=self.model, key_env=self._key_env, base_url=self.sending.base_url,
                               secrets=self._secrets, model_option=self.model_option)
        if api.classify(error) == "fatal":
            raise api.EndpointError(message) from None
        return message

    def run(self, main: Callable[[], Awaitable[T]]) -> T:
        """Run ``main()`` (which calls ``ask``) with a fresh client; raise if any request failed every retry."""
        started = time.perf_counter()
        try:
            return run_coroutine(self._run(main))
        finally:
            self.usage.wall_seconds += time.perf_counter() - started

    async def _run(self, main: Callable[[], Awaitable[T]]) -> T:
        key = api.api_key(self.endpoint.api_key_env)
        self._secrets = [key]
        self._client = api.make_client(self.sending.base_url, key, timeout=self.sending.timeout,
                                       max_retries=self.sending.max_retries)
        self._semaphore = asyncio.Semaphore(self.sending.concurrency)
        self.failures = {}
        self.refused = set()
        try:
            result = await main()
        finally:
            self._count_probes()
            await self._client.close()
            self._client = None
            self.cache.put_rules(api.endpoint_host(self.sending.base_url), self.model, self.rules)
        if self.failures:
            host, first = api.endpoint_host(self.sending.base_url), next(iter(self.failures.values()))
            if set(self.failures) <= self.refused:  # a rerun sends the same requests and gets the same answers
                raise api.EndpointError(
                    f"{len(self.failures)} request(s) to {host} were refused (not retried; first: {first}); running the same "
                    "command again sends the same requests: change what the server refused first (its text is above)")
            raise api.EndpointError(
                f"{len(self.failures)} request(s) to {host} failed on every retry (first: {first}); "
                + ("the answers received are cached: run the same command again to continue" if self.cache.enabled
                   else "the cache is off (R2MED_NO_CACHE): a rerun asks every request again"))
        return result


def run_coroutine(coroutine: Coroutine[Any, Any, T]) -> T:
    """asyncio.run, also from code that already runs an event loop (Jupyter): then in a worker thread."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coroutine)
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, coroutine).result()
