"""Calls to an OpenAI-compatible chat-completions endpoint, through the ``openai`` client library: the one
client of the package (``r2med generate`` and the LLM rerankers both call through it).

Retries (429, 5xx, 408/409, timeouts, dropped connections) are the client's own: exponential
backoff from 0.5 s up to 8 s with jitter, honouring ``Retry-After``. A bad key (401/403) or an
unknown model (404) stops the run with a message that names the fix. The API key is read from an
environment variable (never from the command line) and is removed from every message we raise.

A model that refuses a request parameter (HTTP 400 "Unsupported parameter: 'max_tokens' is not supported with this
model. Use 'max_completion_tokens' instead.", as OpenAI's reasoning models answer ``max_tokens``, ``temperature``
and ``logprobs``) is asked again at once without it (``RequestRules``): ``max_tokens`` goes as
``max_completion_tokens``, and without ``temperature``; ``temperature``, ``top_p``, ``seed``, ``logprobs``,
``top_logprobs`` and ``reasoning_effort`` (a model that does not reason) are left out. The rule is kept for the rest
of the run, so each refusal costs one request.
"""

from __future__ import annotations

import os
import re
import time
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from r2med_plugin.errors import UserError
from r2med_plugin.rules import SettingError

DEFAULT_KEY_ENV = "OPENAI_API_KEY"
NO_KEY = "EMPTY"  # what local servers (vLLM, llama.cpp, Ollama) accept when they check no key


class GenerationError(RuntimeError):
    """A run that cannot go on (bad key, unknown model, endpoint failing); the message says what to do."""


EndpointError = GenerationError  # the name the LLM rerankers use


@dataclass(frozen=True)
class Completion:
    hy_doc: str
    prompt_tokens: int | None
    completion_tokens: int | None
    finish_reason: str | None
    served_model: str | None
    seconds: float
    reasoning: bool  # the server returned a separate reasoning part (kept as <think>...</think>)


def endpoint_host(base_url: str) -> str:
    """scheme://host[:port] of the endpoint: no user info, path, query or fragment (they may hold credentials)."""
    parts = urllib.parse.urlsplit(base_url)
    if parts.username or parts.password or parts.query or parts.fragment:
        # httpx would send user:password as Basic auth in place of the key, and a query string breaks the
        # request paths; neither part is repeated here, as either may be a credential.
        raise SettingError("{base_url} must be a plain http(s) URL without user:password@, ?query or #fragment "
                           "(put the key in the environment variable named by {api_key_env})", field="base_url")
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise SettingError(f"{{base_url}} must be an http(s) URL such as http://localhost:8000/v1, got {base_url!r}",
                           field="base_url")
    host = parts.hostname if ":" not in parts.hostname else f"[{parts.hostname}]"
    return f"{parts.scheme}://{host}" + (f":{parts.port}" if parts.port else "")


def host_label(base_url: str) -> str:
    """An endpoint's host as a part of a result name: host-port (no scheme, no path: those never name another model
    here). One model id on two servers is two systems (LLM rerankers, embedding endpoints), so the host names them."""
    return endpoint_host(base_url).split("://", 1)[1].replace(":", "-")


def redact(text: str, secrets: list[str]) -> str:
    for secret in secrets:
        if secret and len(secret) >= 4:
            text = text.replace(secret, "***")
    return text


def api_key(env_var: str | None) -> str:
    """The key from ``env_var`` (default OPENAI_API_KEY); "EMPTY" when the default variable is unset."""
    if env_var is not None and not env_var.strip():
        raise SettingError("{api_key_env} is empty: name the environment variable that holds the key (e.g. "
                           "OPENAI_API_KEY)", field="api_key_env")
    name = env_var or DEFAULT_KEY_ENV
    value = os.environ.get(name, "").strip()
    if value:
        return value
    if env_var and env_var != DEFAULT_KEY_ENV:
        raise SettingError(f"{{api_key_env}} {env_var}: the environment variable {env_var} is not set; export it first",
                           field="api_key_env")
    return NO_KEY


def require_openai(what: str) -> None:
    """Refuse, before any work, what will send requests through the openai client when it is not installed (the
    [generate] extra): a ValueError naming ``what`` (e.g. "--rerank llm-listwise:m") and the install command."""
    try:
        import openai  # noqa: F401
    except ImportError:
        raise UserError(f"{what} sends its requests through the openai client, which is not installed here: "
                        "pip install 'r2med-plugin[generate]', then run it again") from None


def make_client(base_url: str, key: str, *, timeout: float, max_retries: int,
                feature: str = "r2med generate and the LLM rerankers") -> Any:
    try:
        from openai import AsyncOpenAI
    except ImportError as error:  # the [generate] extra
        raise ImportError(f"{feature} needs the openai client: pip install 'r2med-plugin[generate]'") from error
    return AsyncOpenAI(base_url=base_url, api_key=key, timeout=timeout, max_retries=max_retries)


def _text_of(message: Any) -> tuple[str, bool]:
    """The output text; a separate reasoning part (vLLM/DeepSeek ``reasoning_content``, ``reasoning``) is
    prepended as ``<think>...</think>``, the form the released reasoning-LLM files have."""
    content = message.content or ""
    extra = getattr(message, "model_extra", None) or {}
    reasoning = extra.get("reasoning_content") or extra.get("reasoning")
    if isinstance(reasoning, str) and reasoning.strip():
        return f"<think>\n{reasoning.strip()}\n</think>\n\n{content.strip()}", True
    return content, False


# parameters a model may refuse (HTTP 400 "Unsupported parameter"/"Unsupported value") that a request can do without
DROPPABLE = ("temperature", "top_p", "seed", "logprobs", "top_logprobs", "reasoning_effort")
_UNSUPPORTED = re.compile(r"Unsupported (?:parameter|value): '(\w+)'")


def unsupported_parameter(error: BaseException) -> str | None:
    """The request parameter an HTTP 400 refuses as unsupported by the model (OpenAI's "Unsupported parameter:
    'max_tokens' is not supported with this model..." / "Unsupported value: 'temperature' does not support 0..."),
    else None."""
    if getattr(error, "status_code", None) != 400:
        return None
    match = _UNSUPPORTED.search(_server_message(error))
    return match.group(1) if match else None


@dataclass
class RequestRules:
    """What one endpoint's model refused (HTTP 400, unsupported parameters), learned during a run and applied to every
    later request: ``max_tokens`` sent as ``max_completion_tokens`` (and no ``temperature``), parameters left out."""

    completion_tokens: bool = False  # max_tokens is sent as max_completion_tokens
    dropped: set[str] = field(default_factory=set)
    refused: dict[str, str] = field(default_factory=dict)  # parameter -> what the server said, first time

    def apply(self, arguments: dict[str, Any]) -> dict[str, Any]:
        """``arguments`` as this endpoint takes them."""
        sent = {key: value for key, value in arguments.items() if key not in self.dropped}
        if self.completion_tokens and "max_tokens" in sent:
            sent["max_completion_tokens"] = sent.pop("max_tokens")
        return sent

    def learn(self, error: BaseException) -> bool:
        """Whether ``error`` refuses a parameter a request can do without (the rule is then kept)."""
        name = unsupported_parameter(error)
        if name == "max_tokens":
            self.completion_tokens = True
            self.dropped.add("temperature")  # the models that want max_completion_tokens take no temperature but 1
        elif name in ("logprobs", "top_logprobs"):
            self.dropped |= {"logprobs", "top_logprobs"}
        elif name in DROPPABLE:
            self.dropped.add(name)
        else:
            return False
        self.refused.setdefault(name, _server_message(error))
        return True

    @property
    def logprobs(self) -> bool:
        """Whether the endpoint still gets asked for log-probabilities."""
        return "logprobs" not in self.dropped

    def summary(self) -> str:
        """What was refused and what is sent instead, in one sentence ("" when nothing was refused)."""
        if not self.refused:
            return ""
        changes = (["max_completion_tokens in place of max_tokens"] if self.completion_tokens else []) + (
            [f"no {', '.join(sorted(self.dropped))}"] if self.dropped else [])
        first = next(iter(self.refused.values()))
        return (f"the model refused {', '.join(repr(name) for name in sorted(self.refused))} (HTTP 400: {first}); "
                f"every request was sent with {' and '.join(changes)}")


async def create_completion(client: Any, rules: RequestRules | None, **arguments: Any) -> Any:
    """``client.chat.completions.create(**arguments)`` as the endpoint takes it: a 400 refusing a parameter the
    request can do without (``RequestRules.learn``) is asked again at once without it, and the rule is kept."""
    if rules is None:
        return await client.chat.completions.create(**arguments)
    while True:
        sent = rules.apply(arguments)
        try:
            return await client.chat.completions.create(**sent)
        except Exception as error:  # noqa: BLE001 - only a refused parameter is retried; the rest is the caller's
            learned = rules.learn(error)
            if not learned or rules.apply(arguments) == sent:  # nothing left to change: the 400 stands
                raise


async def complete(client: Any, model: str, messages: list[dict[str, str]], sampling: dict[str, Any], extra_body: Mapping[str, Any] | None,
                   rules: RequestRules | None = None) -> Completion:
    """One chat completion (the client retries transient faults itself; ``rules``: what the endpoint refused)."""
    started = time.perf_counter()
    arguments = {key: value for key, value in sampling.items() if value is not None}
    response = await create_completion(client, rules, model=model, messages=messages, extra_body=extra_body or None, **arguments)
    if not response.choices:
        raise ValueError("the endpoint answered with no choices")
    choice = response.choices[0]
    text, reasoning = _text_of(choice.message)
    if not text.strip():
        raise SettingError(f"empty completion (finish_reason={choice.finish_reason}); raise {{max_tokens}} or check the "
                           "model", field="max_tokens")
    usage = response.usage
    return Completion(
        hy_doc=text,
        prompt_tokens=getattr(usage, "prompt_tokens", None),
        completion_tokens=getattr(usage, "completion_tokens", None),
        finish_reason=choice.finish_reason,
        served_model=response.model,
        seconds=time.perf_counter() - started,
        reasoning=reasoning,
    )


@dataclass(frozen=True)
class Answer:
    """One chat completion as the rerankers keep it (and cache it): the answer apart from any reasoning part, and
    the log-probabilities of the generated tokens when the endpoint returned them (as it returned them: behind vLLM's
    reasoning parser they cover the reasoning's tokens first; ``prompting.answer_tokens`` finds the answer's)."""

    content: str
    reasoning: str | None
    logprobs: list[dict[str, Any]] | None  # per generated token: {"token", "logprob", "top": {token: logprob}}
    prompt_tokens: int
    completion_tokens: int
    finish_reason: str | None

    def to_json(self) -> dict[str, Any]:
        return {"content": self.content, "reasoning": self.reasoning, "logprobs": self.logprobs, "prompt_tokens": self.prompt_tokens,
                "completion_tokens": self.completion_tokens, "finish_reason": self.finish_reason}

    @classmethod
    def from_json(cls, payload: dict[str, Any]) -> "Answer":
        fields: dict[str, Any] = {key: payload.get(key) for key in ("content", "reasoning", "logprobs", "finish_reason")}
        return cls(**fields, prompt_tokens=int(payload.get("prompt_tokens") or 0), completion_tokens=int(payload.get("completion_tokens") or 0))


async def answer(client: Any, model: str, messages: list[dict[str, str]], parameters: dict[str, Any],
                 rules: RequestRules | None = None) -> Answer:
    """One chat completion, empty answers included (the rerankers decide what an empty answer means); the client
    retries transient faults itself (``rules``: what the endpoint refused)."""
    response = await create_completion(client, rules, model=model, messages=messages, **parameters)
    if not response.choices:
        return Answer("", None, None, 0, 0, None)
    choice = response.choices[0]
    extra = getattr(choice.message, "model_extra", None) or {}
    reasoning = extra.get("reasoning_content") or extra.get("reasoning")
    tokens = None
    content_logprobs = getattr(getattr(choice, "logprobs", None), "content", None)
    if content_logprobs:
        tokens = [{"token": item.token, "logprob": float(item.logprob),
                   "top": {top.token: float(top.logprob) for top in (item.top_logprobs or [])}} for item in content_logprobs]
    usage = response.usage
    return Answer(
        content=choice.message.content or "", reasoning=reasoning if isinstance(reasoning, str) and reasoning.strip() else None,
        logprobs=tokens, prompt_tokens=int(getattr(usage, "prompt_tokens", 0) or 0),
        completion_tokens=int(getattr(usage, "completion_tokens", 0) or 0), finish_reason=choice.finish_reason,
    )


def classify(error: BaseException) -> str:
    """"fatal" (stop the run), "query" (this query failed after the client's retries), or "other"."""
    import openai

    if isinstance(error, (openai.AuthenticationError, openai.PermissionDeniedError, openai.NotFoundError)):
        return "fatal"
    if isinstance(error, (openai.APIError, ValueError)):
        return "query"
    return "other"


RETRIED_STATUSES = (408, 409, 429)  # and every 5xx: what the openai client retries; any other 4xx is answered once


def refused(error: BaseException) -> bool:
    """Whether ``error`` is an HTTP answer the client does not retry (400, 413, 422, ...: the request itself is refused,
    and sending it again gets the same answer)."""
    status = getattr(error, "status_code", None)
    return isinstance(status, int) and 400 <= status < 500 and status not in RETRIED_STATUSES


def base_url_forms(base_url: str) -> tuple[str, str]:
    """The two places servers put their OpenAI-compatible routes: (``<root>/v1``, ``<root>``)."""
    root = base_url.rstrip("/")
    root = root[: -len("/v1")] if root.endswith("/v1") else root
    return f"{root}/v1", root


def describe(error: BaseException, *, model: str, key_env: str, base_url: str, secrets: list[str], model_option: str = "--llm",
             timeout_fix: str = "raise --timeout or lower --concurrency", route: str = "/chat/completions") -> str:
    """A message for ``error`` with the fix, never holding the key (``model_option``: the option that names the model;
    ``route``: the path the request went to, after ``base_url``)."""
    import openai

    status = getattr(error, "status_code", None)
    detail = _server_message(error)
    if isinstance(error, openai.AuthenticationError):
        text = f"the endpoint rejected the API key (HTTP 401): check the key in ${key_env}, or pass --api-key-env VAR"
    elif isinstance(error, openai.PermissionDeniedError):
        text = f"the API key may not use this endpoint or model (HTTP 403): check the key in ${key_env}"
    elif isinstance(error, openai.NotFoundError):
        url = base_url.rstrip("/") + route
        if "model" in detail.lower() or model in detail:  # the route exists; the model does not
            text = f"unknown model {model!r}: the endpoint does not serve it (HTTP 404 from POST {url}); check {model_option}"
        else:
            with_v1, root = base_url_forms(base_url)
            text = (f"POST {url} was not found (HTTP 404): --base-url is the address before {route}, and servers put their "
                    f"routes in one of two places: under /v1 (vLLM, TEI, Ollama, llama.cpp's server, LiteLLM, OpenAI: "
                    f"--base-url {with_v1}) or at the root (infinity: --base-url {root}); also check {model_option}")
    elif isinstance(error, openai.APITimeoutError):
        text = f"the request timed out on every retry; {timeout_fix}"
    elif isinstance(error, openai.APIConnectionError):
        text = f"cannot reach the endpoint {endpoint_host(base_url)} (connection failed on every retry)"
    elif refused(error):  # not retried: the same request gets the same answer
        text = f"the endpoint refused the request (HTTP {status}; a refused request is not retried)"
        if "no connected db" in detail.lower():  # LiteLLM's proxy, asked with a key it cannot look up
            detail += (f"; a LiteLLM proxy answers so for a key it does not know: it may need its master key "
                       f"(LITELLM_MASTER_KEY, or a virtual key it issued) in ${key_env}")
    elif status is not None:
        text = f"the endpoint answered HTTP {status} on every retry"
    else:
        text = str(error)
    if detail:
        text += f" (server said: {detail})"
    return redact(text, secrets)


def _server_message(error: BaseException) -> str:
    """The server's reason: OpenAI's and vLLM's ``{"error": {"message"}}`` or ``{"message"}``, FastAPI's
    ``{"detail": "..."}`` (``transformers serve``) or ``{"detail": [{"msg"}, ...]}`` (a 422), a bare ``{"error": "..."}``."""
    body = getattr(error, "body", None)
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict) and inner.get("message"):
            return str(inner["message"])[:300]
        if isinstance(inner, str) and inner.strip():
            return inner.strip()[:300]
        detail = body.get("detail")
        if isinstance(detail, str) and detail.strip():
            return detail.strip()[:300]
        if isinstance(detail, list):
            messages = [str(item.get("msg")) for item in detail if isinstance(item, dict) and item.get("msg")]
            if messages:
                return "; ".join(messages)[:300]
    return ""


async def context_lengths(client: Any) -> dict[str, int]:
    """Each served model's context length in tokens, where the endpoint reports it (vLLM: ``max_model_len`` per model
    in GET /models), else {}."""
    try:
        page = await client.models.list()
    except Exception:  # noqa: BLE001 - a check only; a server without /models is asked as before
        return {}
    lengths = {}
    for model in page.data:
        value = (getattr(model, "model_extra", None) or {}).get("max_model_len")
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            lengths[model.id] = value
    return lengths
async def unserved_model(client: Any, model: str, error: BaseException) -> list[str] | None:
    """The models the endpoint lists, when ``error`` is a refusal (HTTP 400 or 422; vLLM and OpenAI answer 404, which
    is fatal already) and ``model`` is not among them: a server pinned to one model (``transformers serve <path>``
    answers 400 "Server is pinned to '<path>'") refuses every request alike, so the run stops at once. None otherwise
    (another refusal, such as a prompt over the context length, belongs to its own request)."""
    if getattr(error, "status_code", None) not in (400, 422):
        return None
    models = await available_models(client)
    return models if models and model not in models else None


def unserved_message(error: BaseException, served: list[str], *, model: str, secrets: list[str], model_option: str = "--llm") -> str:
    """What to say when the endpoint refused ``model`` and serves ``served`` (``unserved_model``)."""
    detail = _server_message(error)
    said = f"; the server said: {detail}" if detail else ""
    return redact(f"the endpoint refused the model {model!r} (HTTP {getattr(error, 'status_code', '?')}{said}); it serves "
                  f"{', '.join(served[:20])}: name one of them in {model_option}, exactly as GET /v1/models lists it", secrets)


async def available_models(client: Any) -> list[str]:
    """The endpoint's model ids (GET /models), or [] when it does not list them."""
    try:
        page = await client.models.list()
        return sorted(model.id for model in page.data)
    except Exception:  # noqa: BLE001 - a hint only; the 404 message stands without it
        return []
