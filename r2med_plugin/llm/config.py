"""Where LLM requests go (``Endpoint``) and how an LLM reranker is set up (``LLMRerankerConfig``)."""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, ClassVar

from r2med_plugin.endpoints.extra_body import extra_body_of, refuse_reserved
from r2med_plugin.llm_settings import KIND_SETTINGS, S, declaration, declared_settings
from r2med_plugin.request_options import API_KEY_ENV, BASE_URL, CONCURRENCY, DIMENSIONS, EXTRA_BODY, MAX_RETRIES, TIMEOUT, option_field
from r2med_plugin.rules import RequestError, SettingError, seconds_problem, whole_number

# what an LLM reranker's requests carry themselves: an extra body may not replace them
RERANKER_REQUEST_FIELDS = {
    "model": "{rerank} llm-<kind>:<model> names it", "messages": "the reranker's prompt",
    "max_tokens": "set it with {max_tokens} (llm-listwise, llm-reasoning, llm-setwise, llm-groupwise)",
    "max_completion_tokens": "set it with {max_tokens} (llm-listwise, llm-reasoning, llm-setwise, llm-groupwise)",
    "reasoning_effort": "set it with {reasoning_effort} (llm-listwise, llm-reasoning, llm-setwise, llm-groupwise)",
    "temperature": "0: the rerankers ask greedily", "logprobs": "the pointwise and reasoning rerankers ask for them",
    "top_logprobs": "20, what vLLM serves by default", "n": "one answer per request", "stream": "answers are read whole",
}


DEFAULT_CONCURRENCY, DEFAULT_MAX_RETRIES, DEFAULT_TIMEOUT = 8, 6, 600.0  # an LLM endpoint's, where none is given


@dataclass(frozen=True)
class Endpoint:
    """An OpenAI-compatible endpoint (the one type: an LLM reranker's, ``r2med generate``'s, an embedding endpoint's):
    where requests go and what they carry (``base_url``, ``extra_body``, ``dimensions`` of an embedding endpoint: part
    of a result's identity), and how they are sent (the key's variable, default OPENAI_API_KEY, never the key; concurrency,
    retries, timeout: neutral). Unset sending settings take their defaults where requests are sent (``with_defaults``)."""

    KIND: ClassVar[str] = "endpoint"
    base_url: str | None = option_field(BASE_URL)
    extra_body: Mapping[str, Any] | None = option_field(EXTRA_BODY, hash=False)
    dimensions: int | None = option_field(DIMENSIONS)
    api_key_env: str | None = option_field(API_KEY_ENV, neutral=True)
    concurrency: int | None = option_field(CONCURRENCY, neutral=True)
    max_retries: int | None = option_field(MAX_RETRIES, neutral=True)
    timeout: float | None = option_field(TIMEOUT, neutral=True)

    def __post_init__(self) -> None:
        object.__setattr__(self, "extra_body", extra_body_of(self.extra_body))
        whole_number("concurrency", self.concurrency, 1)
        whole_number("max_retries", self.max_retries, 0)
        if self.timeout is not None and seconds_problem(self.timeout):
            raise SettingError(f"{{timeout}} {seconds_problem(self.timeout)}", field="timeout")

    def given(self, names: tuple[str, ...]) -> dict[str, Any]:
        """The settings that were set, among ``names``."""
        return {name: getattr(self, name) for name in names if getattr(self, name) is not None}

    def sending(self) -> Sending:
        """What requests are sent with: ``base_url`` (required) and the sending settings, unset ones at their defaults
        (8 concurrent requests, 6 retries, 600 s)."""
        if not self.base_url:
            raise RequestError("base_url", "is not set, and requests need it", "give the endpoint's URL, e.g. "
                               "http://127.0.0.1:8000/v1")
        done = self.with_defaults()
        return Sending(self.base_url, done.concurrency or DEFAULT_CONCURRENCY, DEFAULT_MAX_RETRIES
                       if done.max_retries is None else done.max_retries, done.timeout or DEFAULT_TIMEOUT, self.api_key_env)

    def with_defaults(self) -> Endpoint:
        """This endpoint with the sending settings left unset at their defaults (8 concurrent requests, 6 retries,
        600 s)."""
        return replace(self, concurrency=DEFAULT_CONCURRENCY if self.concurrency is None else self.concurrency,
                       max_retries=DEFAULT_MAX_RETRIES if self.max_retries is None else self.max_retries,
                       timeout=DEFAULT_TIMEOUT if self.timeout is None else self.timeout)


@dataclass(frozen=True)
class Sending:
    """An endpoint as requests are sent to it: every setting has its value (``Endpoint.sending``)."""

    base_url: str
    concurrency: int
    max_retries: int
    timeout: float
    api_key_env: str | None = None


@dataclass(frozen=True, init=False)
class LLMRerankerConfig:
    """How an LLM reranker asks: the endpoint, extra fields merged into every request body (``extra_body``: server
    options such as ``{"chat_template_kwargs": {"enable_thinking": false}}``; part of the reranker's name and of every
    answer's cache key), where answers are cached (default: ``$R2MED_CACHE_DIR/llm-responses``) and the kinds' settings
    given as keywords (``settings``: ``window=10``, ``set_size=5``, ...). Each kind reads its own through its settings
    class (r2med_plugin.llm_settings: ``ListwiseSettings``, ``SetwiseSettings``, ...), where each setting is declared,
    with its default and its check; every given value is checked here. ``config.window`` reads a setting (its default
    where it was not given)."""

    endpoint: Endpoint
    cache_dir: str | os.PathLike | None = None
    extra_body: Mapping[str, Any] | None = field(default=None, hash=False)
    settings: Mapping[str, Any] = field(default_factory=dict, hash=False)

    def __init__(self, endpoint: Endpoint, *, cache_dir: str | os.PathLike | None = None,
                 extra_body: Mapping[str, Any] | None = None, settings: Mapping[str, Any] | None = None, **given: Any) -> None:
        object.__setattr__(self, "extra_body", extra_body_of(extra_body))
        refuse_reserved(self.extra_body, RERANKER_REQUEST_FIELDS)
        if not isinstance(endpoint, Endpoint) or not endpoint.base_url:
            raise TypeError("LLMRerankerConfig(endpoint=...) takes an Endpoint with its URL, e.g. "
                            "Endpoint('http://localhost:8000/v1')")
        object.__setattr__(self, "endpoint", endpoint.with_defaults())
        object.__setattr__(self, "cache_dir", cache_dir)
        object.__setattr__(self, "settings", checked_settings({**(settings or {}), **given}, "LLMRerankerConfig()"))

    def __getattr__(self, name: str) -> Any:
        """A setting's value (``config.window``): the one given, else its declared default."""
        fields = declared_settings() if not name.startswith("_") and name != "settings" else {}
        if name not in fields:
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
        return self.settings.get(name, fields[name].default)

    def for_kind(self, settings_class: type[S]) -> S:
        """The settings a kind reads (``settings_class``), from the ones given."""
        return settings_class.of(self.settings)

    @property
    def cache_path(self) -> Path | None:
        return Path(self.cache_dir) if self.cache_dir is not None else None


class _SettingUsers(Mapping[str, tuple[str, ...]]):
    """Setting -> the kinds that read it, derived from each kind's settings class (``KIND_SETTINGS``) whenever it is
    read, so a kind registered later is in it."""

    def _table(self) -> dict[str, tuple[str, ...]]:
        users: dict[str, list[str]] = {}
        for kind, settings_class in KIND_SETTINGS.items():
            for name in settings_class.declared():
                users.setdefault(name, []).append(kind)
        return {name: tuple(kinds) for name, kinds in users.items()}

    def __getitem__(self, name: str) -> tuple[str, ...]:
        return self._table()[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._table())

    def __len__(self) -> int:
        return len(self._table())

    def __repr__(self) -> str:
        return repr(self._table())


# The LLM reranker kinds and the settings each one reads, derived from their settings classes: the CLI, sweep specs and
# LlmRerankerSpec all refuse, from it, a setting the kind never reads.
LLM_SETTING_USERS: Mapping[str, tuple[str, ...]] = _SettingUsers()


def checked_settings(given: Mapping[str, Any], what: str) -> dict[str, Any]:
    """The settings ``given`` (None: unset, left out), each known and checked by every kind's settings class that
    reads it (its field's check, then the class's rules between fields); ``what`` names the callee of an unknown
    keyword's TypeError."""
    chosen = {name: value for name, value in given.items() if value is not None}
    unknown = sorted(set(chosen) - set(LLM_SETTING_USERS))
    if unknown:
        raise TypeError(f"{what} got an unexpected keyword argument {unknown[0]!r}: the LLM reranker settings are "
                        f"{', '.join(LLM_SETTING_USERS)}")
    for settings_class in KIND_SETTINGS.values():
        settings_class.of(chosen)
    return chosen


def llm_reranker_kind(name: str) -> str:
    """"listwise", "pointwise" or "reasoning" of ``llm-<kind>:<model>`` (the kind as written, lowered)."""
    return name.split(":", 1)[0].lower().removeprefix("llm-")


def settings_unused_by(kind: str) -> dict[str, str]:
    """Setting -> why an llm-``kind`` reranker never reads it, for each setting its settings class does not declare (the
    declaring field's ``unused`` words: window, step and shown scores outside listwise; max_tokens and
    reasoning_effort in pointwise; set size, method and k outside setwise; group settings outside groupwise)."""
    fields = declared_settings()
    return {name: declaration(fields[name]).unused_reason(kind, users)
            for name, users in LLM_SETTING_USERS.items() if kind not in users}


def build_reranker_config(base_url: str | None, *, what: str, api_key_env: str | None = None,
                          concurrency: int | None = None, max_retries: int | None = None, timeout: float | None = None,
                          extra_body: Mapping[str, Any] | None = None, check_key: bool = True, sends: bool | None = None,
                          **settings: Any) -> LLMRerankerConfig:
    """The one way an LLM reranker's endpoint and settings are built (``r2med evaluate --rerank llm-...`` and a sweep
    spec's rerankers entry): the URL is checked, then every setting (``settings``: the keywords the kinds' settings
    classes declare, ``window=``, ``set_size=``, ...; None: unset), then the key variable (``check_key``); unset
    settings take their defaults. ``what`` names the source in the missing-endpoint message ("--rerank
    llm-listwise:m", "rerankers[0]"). ``sends`` (default: ``check_key``): requests will be sent, so the openai client
    must be installed (refused now, before a first stage runs, rather than with a traceback after it)."""
    from r2med_plugin.endpoints.client import api_key, endpoint_host, require_openai

    if not base_url:
        raise SettingError(f"{what} needs an endpoint: add {{base_url}} URL (e.g. http://localhost:8000/v1 for vLLM)",
                           field="base_url")
    endpoint_host(str(base_url))  # a malformed URL is refused before any data loads
    whole_number("concurrency", concurrency, 1)
    whole_number("max_retries", max_retries, 0)
    if timeout is not None and seconds_problem(timeout):
        raise SettingError(f"{{timeout}} {seconds_problem(timeout)}", field="timeout")
    asks = checked_settings(settings, "build_reranker_config()")
    if check_key:
        api_key(api_key_env)  # an unset variable is refused now (the key itself is not kept)
    if check_key if sends is None else sends:
        require_openai(what)
    endpoint = Endpoint(str(base_url), api_key_env=api_key_env, concurrency=concurrency, max_retries=max_retries,
                        timeout=timeout)
    return LLMRerankerConfig(endpoint, extra_body=extra_body, settings=asks)
