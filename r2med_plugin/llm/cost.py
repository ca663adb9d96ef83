"""What LLM requests will cost, before any is sent: requests, prompt tokens, the completion budget and US dollars.

The estimate never asks the endpoint. An LLM reranker builds the exact requests it would send by running its own
request code against a stand-in (``DryRequester``) that records each question and answers it blankly: a listwise
window keeps its order, a setwise question picks its first passage, a pointwise question says "yes" with its
log-probability. Where the questions do not depend on the answers (pointwise, reasoning, ``r2med generate``; the
listwise and setwise bubble-sort request counts) the estimate is exact; where they do (setwise heapsort's count;
which passages a listwise window or a setwise set holds), the reranker also gives a worst case (``RequestPlan.bound``)
and the estimate says which figure is which.

Tokens are counted (``token_counter``), in this order, by:

1. the model's own tokenizer, when it is local (a folder holding a tokenizer, or the model's name in the local
   Hugging Face cache; the network is never asked): with its chat template where it has one (as vLLM counts a chat
   request), else the tokens of each message's text (special tokens left out);
2. tiktoken, when it is installed and its encoding file is already cached (OpenAI's count for chat messages: each
   message's text, plus 3 tokens per message and 3 for the reply);
3. one token per 4 characters of each message's text, rounded up (``CHARS_PER_TOKEN``).

Dollars are tokens x price per million tokens (``--price-in`` for prompt tokens, ``--price-out`` for completion
tokens); answers already in the response cache cost nothing and are left out of the tokens and dollars.
"""

from __future__ import annotations

import hashlib
import math
import os
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from tqdm.auto import tqdm

from r2med_plugin.errors import UserError
from r2med_plugin.quiet import bar_disabled
from r2med_plugin.rules import SettingError

CHARS_PER_TOKEN = 4
OPENAI_TOKENS_PER_MESSAGE = 3  # OpenAI's chat format: each message's own tokens, and 3 that start the reply
OPENAI_REPLY_TOKENS = 3
TIKTOKEN_FILES = {  # where tiktoken reads each encoding from (and caches it under the sha1 of this address)
    "o200k_base": "https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken",
    "cl100k_base": "https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken",
}

Messages = list[dict[str, str]]


# --- counting tokens ---------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class TokenCounter:
    """Counts tokens by one rule (``rule`` says which): of texts (``count_texts``, a batch at a time), and of chat
    conversations, either whole (``templated``: a chat template) or as the sum of their messages' texts, plus
    ``per_message`` tokens per message and ``reply`` tokens per conversation (OpenAI's chat format)."""

    rule: str
    count_texts: Callable[[Sequence[str]], list[int]] = field(repr=False)
    templated: Callable[[Sequence[Messages]], list[int]] | None = field(default=None, repr=False)
    per_message: int = 0
    reply: int = 0

    def count_text(self, text: str) -> int:
        return self.count_texts([text])[0]

    def count_messages(self, messages: Messages) -> int:
        return self.count_conversations([messages])[0]

    def count_conversations(self, conversations: Sequence[Messages], *, show_progress: bool = False) -> list[int]:
        """The prompt tokens of each conversation (each distinct message text counted once), a batch at a time."""
        def chunks(items: list, count: Callable[[list], list[int]]) -> list[int]:
            starts = range(0, len(items), COUNT_BATCH)
            bar = tqdm(starts, desc=f"Counting prompt tokens ({self.rule.split(' (')[0]})", unit="batch",
                       disable=bar_disabled(show_progress and len(starts) >= 2))
            return [number for start in bar for number in count(items[start:start + COUNT_BATCH])]

        if self.templated is not None:  # each distinct conversation rendered and counted once
            keys = [tuple((message["role"], message["content"]) for message in messages) for messages in conversations]
            distinct = list(dict.fromkeys(keys))
            counted = dict(zip(distinct, chunks([[{"role": role, "content": content} for role, content in key]
                                                 for key in distinct], self.templated), strict=True))
            return [counted[key] for key in keys]
        texts = list(dict.fromkeys(message["content"] for messages in conversations for message in messages))
        counts = dict(zip(texts, chunks(texts, self.count_texts), strict=True))
        return [sum(counts[message["content"]] + self.per_message for message in messages) + self.reply
                for messages in conversations]


COUNT_BATCH = 1024  # texts (or conversations) counted per call of a tokenizer


def _batched(count: Callable[[list[str]], list[int]]) -> Callable[[Sequence[str]], list[int]]:
    def each(texts: Sequence[str]) -> list[int]:
        texts = list(texts)
        return [number for start in range(0, len(texts), COUNT_BATCH) for number in count(texts[start:start + COUNT_BATCH])]
    return each


def chars_counter() -> TokenCounter:
    """One token per ``CHARS_PER_TOKEN`` characters of each message's text, rounded up per message."""
    return TokenCounter(f"{CHARS_PER_TOKEN} characters per token (each message's text, rounded up; no local tokenizer "
                        "for the model, no cached tiktoken encoding)",
                        lambda texts: [math.ceil(len(text) / CHARS_PER_TOKEN) for text in texts])


def token_counter(model: str, tokenizer: str | os.PathLike | None = None) -> TokenCounter:
    """How tokens of requests to ``model`` are counted: its local tokenizer (``tokenizer``, a folder or hub name, else
    ``model`` itself), else tiktoken with a cached encoding, else ``CHARS_PER_TOKEN`` characters per token. A
    ``tokenizer`` given but not found locally is refused (it is never downloaded)."""
    name = str(tokenizer) if tokenizer is not None else model
    local = _local_tokenizer(name)
    if local is not None:
        return local
    if tokenizer is not None:
        raise UserError(f"tokenizer {name!r} is neither a folder holding a tokenizer nor a model name in the local Hugging "
                        "Face cache (it is never downloaded): give a folder, or download it first (huggingface-cli download "
                        f"{name} tokenizer.json tokenizer_config.json)")
    return _tiktoken_counter(model) or chars_counter()


def _tokenizer_location(name: str) -> str | None:
    """``name`` when it is a folder holding a tokenizer or a hub name whose tokenizer files are in the local cache."""
    if Path(name).is_dir():
        return name if any((Path(name) / file).is_file() for file in ("tokenizer.json", "tokenizer_config.json", "vocab.txt")) else None
    try:
        from huggingface_hub import try_to_load_from_cache
    except ImportError:  # pragma: no cover - a dependency of sentence-transformers
        return None
    for file in ("tokenizer.json", "tokenizer_config.json"):
        try:
            found = try_to_load_from_cache(name, file)
        except Exception:  # noqa: BLE001 - not a valid hub name (an API model's id): no local tokenizer
            return None
        if isinstance(found, str):
            return name
    return None


def _local_tokenizer(name: str) -> TokenCounter | None:
    location = _tokenizer_location(name)
    if location is None:
        return None
    try:
        from transformers import AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(location, local_files_only=True)
    except Exception:  # noqa: BLE001 - files that do not load as a tokenizer: counted another way
        return None

    tokenizer.model_max_length = 10**12  # counting only: no warning for prompts longer than the model's own limit

    def encode(texts: list[str]) -> list[int]:
        return [len(ids) for ids in tokenizer(texts, add_special_tokens=False)["input_ids"]] if texts else []

    if getattr(tokenizer, "chat_template", None):
        def templated(conversations: Sequence[Messages]) -> list[int]:
            # the conversation as the server renders it (its template holds the special tokens), then encoded as is
            try:
                # tokenize=False: the rendered text
                rendered = [cast(str, tokenizer.apply_chat_template(list(messages), add_generation_prompt=True, tokenize=False))
                            for messages in conversations]
            except Exception as error:  # noqa: BLE001 - jinja's TemplateError and what a template raises itself
                raise UserError(f"the chat template of {name} refuses these messages ({type(error).__name__}: {error}); "
                                "a server applying it refuses the requests too") from None
            return encode(rendered)

        return TokenCounter(f"the model's tokenizer ({name}) with its chat template", _batched(encode), templated)
    return TokenCounter(f"the model's tokenizer ({name}), each message's text (it has no chat template)", _batched(encode))


def _tiktoken_counter(model: str) -> TokenCounter | None:
    """tiktoken's encoding for ``model`` (o200k_base for a model it does not know), only when its file is cached."""
    try:
        import tiktoken
    except ImportError:
        return None
    try:
        encoding_name = tiktoken.encoding_name_for_model(model)
    except KeyError:
        encoding_name = "o200k_base"
    if not _tiktoken_file_cached(encoding_name):
        return None
    encoding = tiktoken.get_encoding(encoding_name)

    def encode(texts: list[str]) -> list[int]:
        return [len(ids) for ids in encoding.encode_batch(texts, disallowed_special=())]

    return TokenCounter(f"tiktoken {encoding_name} (OpenAI's chat count: {OPENAI_TOKENS_PER_MESSAGE} tokens per message and "
                        f"{OPENAI_REPLY_TOKENS} for the reply)", _batched(encode), per_message=OPENAI_TOKENS_PER_MESSAGE,
                        reply=OPENAI_REPLY_TOKENS)


def _tiktoken_file_cached(encoding_name: str) -> bool:
    address = TIKTOKEN_FILES.get(encoding_name)
    if address is None:
        return False
    folder = os.environ.get("TIKTOKEN_CACHE_DIR") or os.environ.get("DATA_GYM_CACHE_DIR") or os.path.join(
        tempfile.gettempdir(), "data-gym-cache")
    return (Path(folder) / hashlib.sha1(address.encode()).hexdigest()).is_file()


# --- what a run would ask ----------------------------------------------------------------------------------------

@dataclass(frozen=True)
class PlannedRequest:
    """One question as it would be sent: the messages and the request parameters (``extra_body`` included)."""

    messages: Messages
    parameters: dict[str, Any]
    probe: bool = False


@dataclass(frozen=True)
class RequestPlan:
    """What a run would ask. ``asked``: the questions of a dry run (answered as ``assumption`` says); ``count_exact``:
    the number of questions is the same for any answers; ``messages_exact``: so are their texts. Where either is not,
    ``bound`` holds a worst case: at least as many questions, each at least as long (``bound_rule`` says how)."""

    asked: list[PlannedRequest]
    count_exact: bool = True
    messages_exact: bool = True
    assumption: str = ""
    bound: list[PlannedRequest] | None = None
    bound_rule: str = ""
    count_rule: str = ""
    answer_sketch: Callable[[PlannedRequest], str] | None = field(default=None, repr=False)


def request_key(model: str, request: PlannedRequest, host: str) -> str:
    """The response cache's key of ``request`` (r2med_plugin.llm.requests.ResponseCache.key): identical questions
    are asked once, and an answer already cached costs nothing."""
    from r2med_plugin.llm.requests import ResponseCache

    return ResponseCache.key(model, request.messages, request.parameters, host)


@dataclass(frozen=True)
class CostEstimate:
    """What a run will cost, before it runs. ``requests``: the questions it asks (identical ones once); ``cached``: of
    those, already answered in the response cache (free); ``prompt_tokens`` and ``completion_tokens``: of the others,
    the completion being the requests' budget (``--max-tokens``) where they set one, else a bare answer's length
    (``completion_rule``). ``*_max``: the worst case where the figure depends on the answers (else equal)."""

    what: str
    requests: int
    cached: int
    prompt_tokens: int
    completion_tokens: int
    requests_max: int
    prompt_tokens_max: int
    completion_tokens_max: int
    count_exact: bool
    tokens_exact: bool
    token_rule: str
    completion_rule: str
    count_rule: str = ""
    assumption: str = ""
    bound_rule: str = ""

    @property
    def to_send(self) -> int:
        return self.requests - self.cached

    def dollars(self, price_in: float | None, price_out: float | None, *, worst: bool = False) -> float | None:
        """US dollars at ``price_in`` / ``price_out`` per million prompt / completion tokens (None without prices)."""
        prompt, completion = ((self.prompt_tokens_max, self.completion_tokens_max) if worst else
                              (self.prompt_tokens, self.completion_tokens))
        return dollars(prompt, completion, price_in, price_out)

    def as_dict(self) -> dict[str, Any]:
        return {"requests": self.requests, "cached_answers": self.cached, "prompt_tokens": self.prompt_tokens,
                "completion_tokens": self.completion_tokens, "requests_max": self.requests_max,
                "prompt_tokens_max": self.prompt_tokens_max, "completion_tokens_max": self.completion_tokens_max,
                "count_exact": self.count_exact, "tokens_exact": self.tokens_exact, "token_rule": self.token_rule,
                "completion_rule": self.completion_rule}

    def __add__(self, other: "CostEstimate") -> "CostEstimate":
        """Two estimates together (tasks of one command): exact only where both are."""
        def joined(mine: str, theirs: str) -> str:
            return mine if mine == theirs or not theirs else theirs if not mine else f"{mine}; {theirs}"

        return CostEstimate(
            what="total", requests=self.requests + other.requests, cached=self.cached + other.cached,
            prompt_tokens=self.prompt_tokens + other.prompt_tokens, completion_tokens=self.completion_tokens + other.completion_tokens,
            requests_max=self.requests_max + other.requests_max, prompt_tokens_max=self.prompt_tokens_max + other.prompt_tokens_max,
            completion_tokens_max=self.completion_tokens_max + other.completion_tokens_max,
            count_exact=self.count_exact and other.count_exact, tokens_exact=self.tokens_exact and other.tokens_exact,
            token_rule=joined(self.token_rule, other.token_rule), completion_rule=joined(self.completion_rule, other.completion_rule),
            count_rule=joined(self.count_rule, other.count_rule), assumption=joined(self.assumption, other.assumption),
            bound_rule=joined(self.bound_rule, other.bound_rule))


def dollars(prompt_tokens: int, completion_tokens: int, price_in: float | None, price_out: float | None) -> float | None:
    """prompt_tokens x price_in + completion_tokens x price_out, prices in US dollars per million tokens."""
    if price_in is None or price_out is None:
        return None
    return (prompt_tokens * price_in + completion_tokens * price_out) / 1_000_000


def check_prices(price_in: float | None, price_out: float | None, *, option: str = "{price_in}/{price_out}") -> None:
    """Both prices or neither, each a finite number of at least 0 (US dollars per million tokens); a refusal names the
    setting (``price_in``, ``price_out``) as each front end spells it (``option``: the two, as ``{setting}`` text)."""
    for name, value in (("price_in", price_in), ("price_out", price_out)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value)
                                  or value < 0):
            raise SettingError(f"{{{name}}} must be a price of at least 0 (US dollars per million tokens), got {value!r}",
                               field=name)
    if (price_in is None) != (price_out is None):
        given, missing = ("price_in", "price_out") if price_out is None else ("price_out", "price_in")
        raise SettingError(f"{{{given}}} needs {{{missing}}} too ({option}: US dollars per million prompt / completion tokens; "
                           f"give {{{missing}}} 0 where those tokens are free)", field=missing)


def estimate(what: str, plan: RequestPlan, *, model: str, host: str, counter: TokenCounter,
             cached: Callable[[str], bool] = lambda key: False, distinct: bool = True, answered: int = 0,
             show_progress: bool = False) -> CostEstimate:
    """The cost of ``plan``'s questions to ``model`` at ``host``: identical questions once (``distinct``: as the
    rerankers' requester asks them; else each is sent), cached answers free; ``answered``: questions answered before,
    outside the plan (a resumed ``r2med generate``'s finished queries), counted as cached."""
    questions: dict[str, PlannedRequest] = {}
    for index, request in enumerate(plan.asked):
        questions.setdefault(request_key(model, request, host) if distinct else str(index), request)
    to_send = [request for key, request in questions.items() if not cached(key)]
    sketch = plan.answer_sketch
    bound = plan.bound or []
    counts = counter.count_conversations([request.messages for request in [*to_send, *bound]], show_progress=show_progress)
    prompt = sum(counts[:len(to_send)])
    completion, unbudgeted = _completion(to_send, counter, sketch)
    requests_max, prompt_max, completion_max = len(questions), prompt, completion
    if plan.bound is not None:
        requests_max = max(len(plan.bound), requests_max)
        prompt_max = max(sum(counts[len(to_send):]), prompt)
        completion_max = max(_completion(plan.bound, counter, sketch)[0], completion)
    rule = ("the requests' --max-tokens budget" if not unbudgeted else
            "no --max-tokens budget, and an answer's length is not known before: counted 0 (give --max-tokens for a bound)"
            if sketch is None else
            "a bare answer's length (no --max-tokens budget: the server's own limit bounds each answer)" if unbudgeted == len(to_send)
            else "the requests' budget, and a bare answer's length for those without one")
    return CostEstimate(what, len(questions) + answered, len(questions) + answered - len(to_send), prompt, completion,
                        requests_max + answered, prompt_max,
                        completion_max, plan.count_exact, plan.count_exact and plan.messages_exact, counter.rule, rule,
                        plan.count_rule, plan.assumption, plan.bound_rule)


def _completion(requests: Sequence[PlannedRequest], counter: TokenCounter,
                sketch: Callable[[PlannedRequest], str] | None) -> tuple[int, int]:
    """(completion tokens, how many requests had no budget and were counted by a bare answer's length)."""
    budgets = [request.parameters.get("max_tokens") or request.parameters.get("max_completion_tokens") for request in requests]
    unbudgeted = [request for request, budget in zip(requests, budgets, strict=True) if not budget]
    total = sum(int(budget) for budget in budgets if budget)
    if unbudgeted and sketch is not None:
        answers = [sketch(request) for request in unbudgeted]
        distinct = list(dict.fromkeys(answers))
        counts = dict(zip(distinct, counter.count_texts(distinct), strict=True))
        total += sum(counts[answer] for answer in answers)
    return total, len(unbudgeted)


# --- a dry run: the reranker's own request code, nothing sent -----------------------------------------------------

class DryRequester:
    """Stands in for r2med_plugin.llm.requests.Requester in a dry run: each question is recorded as it would be sent
    (``extra_body`` merged into its parameters, as the Requester keys it) and answered blankly, with no request."""

    def __init__(self, extra_body: Mapping[str, Any] | None, rules: Any) -> None:
        self.extra_body = dict(extra_body) if extra_body else None
        self.rules = rules  # what the model refused in an earlier run (pointwise reads it for its label question)
        self.asked: list[PlannedRequest] = []

    async def ask(self, messages: Messages, parameters: dict[str, Any], *, probe: bool = False):
        from r2med_plugin.endpoints.client import Answer

        if self.extra_body:
            parameters = {**parameters, "extra_body": self.extra_body}
        self.asked.append(PlannedRequest(messages, dict(parameters), probe))
        # blank: no ranking (a window keeps its order, a set picks its first), "yes" at certainty for a yes/no question
        # (no log-probabilities where the model refused them in an earlier run: the run will not get any either)
        logprobs = None if "logprobs" in getattr(self.rules, "dropped", ()) else [{"token": "yes", "logprob": 0.0, "top": {}}]
        return Answer(content="", reasoning=None, logprobs=logprobs, prompt_tokens=0, completion_tokens=0, finish_reason="stop")


def longest_first(passages: Sequence[str], counter: TokenCounter) -> list[int]:
    """The positions of the passages, those with the most tokens (then characters) first: the first n make a question
    of n passages longest (each passage counted once, however many questions take a prefix)."""
    counts = counter.count_texts(passages)
    return sorted(range(len(passages)), key=lambda index: (counts[index], len(passages[index])), reverse=True)


# --- printing ----------------------------------------------------------------------------------------------------

def _money(value: float) -> str:
    return f"${value:,.4f}" if value < 100 else f"${value:,.2f}"


def estimate_figures(estimate_: CostEstimate, price_in: float | None = None, price_out: float | None = None) -> list[str]:
    """Requests, prompt tokens, completion tokens (each with its worst case where it depends on the answers) and,
    with prices, dollars."""
    e = estimate_
    count = f"{e.requests} requests" + (f" (at most {e.requests_max})" if e.requests_max > e.requests else
                                         " (exact)" if e.count_exact else "")
    if e.cached:
        count += f", {e.cached} already answered (cached or generated before): {e.to_send} to send"
    tokens = f"{e.prompt_tokens:,} prompt tokens" + ("" if e.prompt_tokens_max == e.prompt_tokens
                                                      else f" (at most {e.prompt_tokens_max:,})")
    completion = f"{e.completion_tokens:,} completion tokens" + (
        "" if e.completion_tokens_max == e.completion_tokens else f" (at most {e.completion_tokens_max:,})")
    lines = [f"  {count}; {tokens}; {completion}"]
    cost = e.dollars(price_in, price_out)
    if cost is not None:
        worst = e.dollars(price_in, price_out, worst=True)
        lines.append(f"  cost: {_money(cost)} ({e.prompt_tokens:,} x ${price_in:g} + {e.completion_tokens:,} x ${price_out:g} "
                     "per million tokens)" + (f", at most {_money(worst)}" if worst is not None and worst > cost else ""))
    return lines


def estimate_rules(estimate_: CostEstimate) -> list[str]:
    """How the figures were found: the token rule, the completion rule, the request count's rule and the worst case."""
    e = estimate_
    lines = [f"  tokens counted by {e.token_rule}", f"  completion tokens: {e.completion_rule}"]
    if e.count_rule:
        lines.append(f"  requests: {e.count_rule}")
    if e.assumption:
        lines.append(f"  the first figures assume {e.assumption}; the 'at most' figures: {e.bound_rule}")
    elif e.bound_rule:
        lines.append(f"  the 'at most' figures: {e.bound_rule}")
    return lines


def render_estimates(estimates: Sequence[CostEstimate], price_in: float | None = None, price_out: float | None = None) -> str:
    """Each estimate (a task) under its name, their total when there are several, then how the figures were found
    (each rule once); nothing was sent."""
    lines, rules = [], []
    for each in estimates:
        lines += [f"{each.what}: estimated cost, no request sent", *estimate_figures(each, price_in, price_out)]
        rules += [rule for rule in estimate_rules(each) if rule not in rules]
    if len(estimates) > 1:
        total = estimates[0]
        for each in estimates[1:]:
            total = total + each
        lines += [f"total of {len(estimates)} tasks:", *estimate_figures(total, price_in, price_out)]
    return "\n".join(lines + rules) + "\n"


def render_side_by_side(estimated: Mapping[str, Any], usage: Mapping[str, Any], price_in: float | None = None,
                        price_out: float | None = None) -> str:
    """The estimate made before a run beside what the run used: requests, prompt and completion tokens, dollars."""
    asked = usage.get("requests", 0) + usage.get("probe_requests", 0)
    cached = usage.get("cached_answers", 0) + usage.get("probe_cached_answers", 0)
    bound = "" if estimated.get("count_exact", True) else f" (at most {estimated['requests_max']})"
    line = (f"  cost, estimated vs used: requests {estimated['requests'] - estimated['cached_answers']}{bound} vs "
            f"{asked} sent (+ {cached} from the cache); prompt tokens {estimated['prompt_tokens']:,} vs "
            f"{usage.get('prompt_tokens', 0):,}; completion tokens {estimated['completion_tokens']:,} vs "
            f"{usage.get('completion_tokens', 0):,}")
    before = dollars(estimated["prompt_tokens"], estimated["completion_tokens"], price_in, price_out)
    after = dollars(usage.get("prompt_tokens", 0), usage.get("completion_tokens", 0), price_in, price_out)
    if before is not None and after is not None:
        line += f"; {_money(before)} vs {_money(after)}"
    rule = str(estimated.get("token_rule", ""))
    return line + (f" (tokens estimated by {rule.split(' (')[0]})" if rule else "")
