"""Where LLM requests go (``Endpoint``) and how an LLM reranker is set up (``LLMRerankerConfig``)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, ClassVar

from r2med_plugin.endpoints.extra_body import extra_body_of, refuse_reserved
from r2med_plugin.rules import RequestError, SettingError, neutral, seconds_problem, whole_number

DEFAULT_WINDOW = 20  # RankGPT's sliding window (Sun et al., 2023) and rank-llm's defaults
DEFAULT_STEP = 10
DEFAULT_REASONING_TOKENS = 8192  # Rank1's reasoning budget
# Setwise (Zhuang et al., 2024): passages per question (the paper's c = 3; llm-rankers' num_child = c - 1 = 2), how the
# picks sort the list, and how many documents they sort to the top (llm-rankers' k)
DEFAULT_SET_SIZE = 3
SETWISE_METHODS = ("heapsort", "bubblesort")
DEFAULT_SETWISE_K = 10
MAX_SET_SIZE = 23  # the labels A to W (llm-rankers' CHARACTERS)
# Groupwise (GroupRank, arXiv 2511.11653): documents per group (the paper's 20), how groups are drawn (random: the
# paper's best; first-stage: consecutive slices of the first stage's order) and how many random groupings are averaged
DEFAULT_GROUP_SIZE = 20
GROUPINGS = ("random", "first-stage")
# what --reasoning-effort may say (OpenAI's values; vLLM takes low, medium and high for the models that read it)
REASONING_EFFORTS = ("none", "minimal", "low", "medium", "high", "xhigh")


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
    base_url: str | None = None
    extra_body: Mapping[str, Any] | None = field(default=None, hash=False)
    dimensions: int | None = None
    api_key_env: str | None = neutral()
    concurrency: int | None = neutral()
    max_retries: int | None = neutral()
    timeout: float | None = neutral()

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


@dataclass(frozen=True)
class LLMRerankerConfig:
    """How an LLM reranker asks: the endpoint, RankGPT's window and step (listwise), the set size, sort method and
    number of documents sorted to the top (setwise: ``set_size`` passages per question, ``setwise_method`` heapsort or
    bubblesort, ``setwise_k``), the group size, grouping, its seed and the number of groupings averaged (groupwise:
    ``group_size``, ``grouping`` random or first-stage, ``group_seed``, ``regroup``), the first stage's scores in the
    listwise prompt (``show_scores``: InsertRank, 4 decimals), the completion budget (``max_tokens``: listwise, setwise
    and groupwise answer, reasoning budget; pointwise asks for one token), ``reasoning_effort`` sent with every request
    (listwise, setwise, groupwise, reasoning), extra fields merged into every
    request body (``extra_body``: server options such as ``{"chat_template_kwargs": {"enable_thinking": false}}``; part
    of the reranker's name and of every answer's cache key) and where answers are cached
    (default: ``$R2MED_CACHE_DIR/llm-responses``)."""

    endpoint: Endpoint
    window: int = DEFAULT_WINDOW
    step: int = DEFAULT_STEP
    max_tokens: int | None = None
    cache_dir: str | os.PathLike | None = None
    set_size: int = DEFAULT_SET_SIZE
    setwise_method: str = "heapsort"
    setwise_k: int = DEFAULT_SETWISE_K
    group_size: int = DEFAULT_GROUP_SIZE
    grouping: str = "random"
    group_seed: int | None = None  # None: seed 0 (random grouping); refused with first-stage grouping, which draws nothing
    regroup: int = 1
    show_scores: bool = False
    reasoning_effort: str | None = None
    extra_body: Mapping[str, Any] | None = field(default=None, hash=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "extra_body", extra_body_of(self.extra_body))
        refuse_reserved(self.extra_body, RERANKER_REQUEST_FIELDS)
        if not isinstance(self.endpoint, Endpoint) or not self.endpoint.base_url:
            raise TypeError("LLMRerankerConfig(endpoint=...) takes an Endpoint with its URL, e.g. "
                            "Endpoint('http://localhost:8000/v1')")
        object.__setattr__(self, "endpoint", self.endpoint.with_defaults())
        for name in ("window", "step"):
            whole_number(name, getattr(self, name), 1)
        if self.window < 2:
            raise SettingError(f"{{window}} must be at least 2 (a window ranks passages against each other), got {self.window}",
                               field="window")
        if self.step >= self.window:
            raise SettingError(f"{{step}} must be smaller than {{window}} (got {self.step} and {self.window}): windows must "
                               "overlap for a passage to move up past a window's edge (RankGPT: window 20, step 10)",
                               field="step")
        whole_number("set_size", self.set_size, 2, MAX_SET_SIZE, why="passages per setwise question, labelled A to W")
        whole_number("setwise_k", self.setwise_k, 1)
        if self.setwise_method not in SETWISE_METHODS:
            raise SettingError(f"{{setwise_method}} must be one of {', '.join(SETWISE_METHODS)}, got {self.setwise_method!r}",
                               field="setwise_method")
        self._check_groupwise()
        if not isinstance(self.show_scores, bool):
            raise SettingError(f"{{show_scores}} is a switch (true or false), got {self.show_scores!r}", field="show_scores")
        if self.reasoning_effort is not None and self.reasoning_effort not in REASONING_EFFORTS:
            raise SettingError(f"{{reasoning_effort}} must be one of {', '.join(REASONING_EFFORTS)}, got "
                               f"{self.reasoning_effort!r}", field="reasoning_effort")
        whole_number("max_tokens", self.max_tokens, 1)

    def _check_groupwise(self) -> None:
        whole_number("group_size", self.group_size, 1)
        whole_number("regroup", self.regroup, 1)
        if self.grouping not in GROUPINGS:
            raise SettingError(f"{{grouping}} must be one of {', '.join(GROUPINGS)}, got {self.grouping!r}", field="grouping")
        whole_number("group_seed", self.group_seed, 0)
        if self.grouping == "first-stage":
            why = "{grouping} first-stage cuts the first stage's order into consecutive groups, the same every time"
            if self.group_seed is not None:
                raise SettingError(f"{{group_seed}} reaches no code with {{grouping}} first-stage: {why}; drop {{group_seed}} "
                                   "(or use {grouping} random)", field="group_seed")
            if self.regroup > 1:
                raise SettingError(f"{{regroup}} reaches no code with {{grouping}} first-stage: {why}, so {self.regroup} "
                                   "groupings would ask the same questions; drop {regroup} (or use {grouping} random)",
                                   field="regroup")

    @property
    def seed(self) -> int:
        """The random grouping's seed (0 unless ``group_seed`` is given)."""
        return self.group_seed if self.group_seed is not None else 0

    @property
    def cache_path(self) -> Path | None:
        return Path(self.cache_dir) if self.cache_dir is not None else None


# The LLM reranker kinds and the settings each one uses: the one place this rule is written (the CLI and sweep specs
# both refuse, from this table, a setting the kind never reads).
LLM_SETTING_USERS = {
    "window": ("listwise",), "step": ("listwise",), "max_tokens": ("listwise", "reasoning", "setwise", "groupwise"),
    "set_size": ("setwise",), "setwise_method": ("setwise",), "setwise_k": ("setwise",),
    "group_size": ("groupwise",), "grouping": ("groupwise",), "group_seed": ("groupwise",), "regroup": ("groupwise",),
    "show_scores": ("listwise",), "reasoning_effort": ("listwise", "reasoning", "setwise", "groupwise"),
}
_GROUPWISE_ONLY = "the group size, grouping, its seed and the regroupings are llm-groupwise's; llm-{kind} scores no groups"
_SETWISE_ONLY = "the set size, sort method and k are llm-setwise's; llm-{kind} does not sort by picks from sets"
UNUSED_SETTING_REASONS = {
    "window": "RankGPT's sliding window is listwise; llm-{kind} asks about one passage at a time",
    "step": "RankGPT's sliding window is listwise; llm-{kind} asks about one passage at a time",
    "max_tokens": "llm-pointwise asks for a one-token answer (its log-probabilities) or a short label",
    "set_size": _SETWISE_ONLY, "setwise_method": _SETWISE_ONLY, "setwise_k": _SETWISE_ONLY,
    "group_size": _GROUPWISE_ONLY, "grouping": _GROUPWISE_ONLY, "group_seed": _GROUPWISE_ONLY, "regroup": _GROUPWISE_ONLY,
    "show_scores": "InsertRank's first-stage scores go into RankGPT's listwise prompt; llm-{kind} shows none",
    "reasoning_effort": "llm-pointwise reads the first answer token's log-probabilities, which a model reasoning first "
                        "never reaches (for a reasoning model use llm-reasoning, or llm-listwise/llm-groupwise)",
}
# a kind's own words where the general reason does not fit it
UNUSED_SETTING_REASONS_BY_KIND = {
    ("setwise", "window"): "RankGPT's sliding window is listwise; llm-setwise asks about sets of --set-size passages",
    ("setwise", "step"): "RankGPT's sliding window is listwise; llm-setwise asks about sets of --set-size passages",
    ("groupwise", "window"): "RankGPT's sliding window is listwise; llm-groupwise scores groups of --group-size documents",
    ("groupwise", "step"): "RankGPT's sliding window is listwise; llm-groupwise scores groups of --group-size documents",
}


def llm_reranker_kind(name: str) -> str:
    """"listwise", "pointwise" or "reasoning" of ``llm-<kind>:<model>`` (the kind as written, lowered)."""
    return name.split(":", 1)[0].lower().removeprefix("llm-")


def settings_unused_by(kind: str) -> dict[str, str]:
    """Setting -> why an llm-``kind`` reranker never reads it (window, step and shown scores outside listwise;
    max_tokens and reasoning_effort in pointwise; set size, method and k outside setwise; group settings outside
    groupwise)."""
    return {name: UNUSED_SETTING_REASONS_BY_KIND.get((kind, name), UNUSED_SETTING_REASONS[name]).format(kind=kind)
            for name, users in LLM_SETTING_USERS.items() if kind not in users}


def build_reranker_config(base_url: str | None, *, what: str, api_key_env: str | None = None,
                          concurrency: int | None = None, max_retries: int | None = None, timeout: float | None = None,
                          window: int | None = None, step: int | None = None, max_tokens: int | None = None,
                          extra_body: Mapping[str, Any] | None = None, set_size: int | None = None,
                          setwise_method: str | None = None, setwise_k: int | None = None,
                          group_size: int | None = None, grouping: str | None = None, group_seed: int | None = None,
                          regroup: int | None = None, show_scores: bool | None = None, reasoning_effort: str | None = None,
                          check_key: bool = True, sends: bool | None = None) -> LLMRerankerConfig:
    """The one way an LLM reranker's endpoint and settings are built (``r2med evaluate --rerank llm-...`` and a sweep
    spec's rerankers entry): the URL is checked, the key variable too (``check_key``), unset settings take the
    defaults. ``what`` names the source in the missing-endpoint message ("--rerank llm-listwise:m", "rerankers[0]").
    ``sends`` (default: ``check_key``): requests will be sent, so the openai client must be installed (refused now,
    before a first stage runs, rather than with a traceback after it)."""
    from r2med_plugin.endpoints.client import api_key, endpoint_host, require_openai

    if not base_url:
        raise SettingError(f"{what} needs an endpoint: add {{base_url}} URL (e.g. http://localhost:8000/v1 for vLLM)",
                           field="base_url")
    endpoint_host(str(base_url))  # a malformed URL is refused before any data loads
    for name, value, minimum in (("window", window, 1), ("step", step, 1), ("max_tokens", max_tokens, 1),
                                 ("concurrency", concurrency, 1), ("max_retries", max_retries, 0),
                                 ("set_size", set_size, 2), ("setwise_k", setwise_k, 1), ("group_size", group_size, 1),
                                 ("regroup", regroup, 1), ("group_seed", group_seed, 0)):
        whole_number(name, value, minimum)
    if timeout is not None and seconds_problem(timeout):
        raise SettingError(f"{{timeout}} {seconds_problem(timeout)}", field="timeout")
    if check_key:
        api_key(api_key_env)  # an unset variable is refused now (the key itself is not kept)
    if check_key if sends is None else sends:
        require_openai(what)
    endpoint = Endpoint(str(base_url), api_key_env=api_key_env, concurrency=concurrency, max_retries=max_retries,
                        timeout=timeout)
    asks: dict[str, Any] = {name: value for name, value in (("window", window), ("step", step), ("max_tokens", max_tokens),
                                            ("extra_body", extra_body), ("set_size", set_size),
                                            ("setwise_method", setwise_method), ("setwise_k", setwise_k),
                                            ("group_size", group_size), ("grouping", grouping), ("group_seed", group_seed),
                                            ("regroup", regroup), ("show_scores", show_scores),
                                            ("reasoning_effort", reasoning_effort)) if value is not None}
    return LLMRerankerConfig(endpoint, **asks)
