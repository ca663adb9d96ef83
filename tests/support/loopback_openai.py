"""A small OpenAI-compatible chat-completions and embeddings server on 127.0.0.1 for tests.

It answers ``POST /v1/chat/completions``, ``POST /v1/embeddings`` and ``GET /v1/models`` the way vLLM and the OpenAI
API do (log-probabilities included, when a reply gives them: ``logprobs_of``; a reply may also give the generated
``tokens``, which the server cuts at ``max_tokens`` and, with ``reasoning_parser="deepseek_r1"``, splits into
``reasoning_content`` and ``content`` as vLLM's ``--reasoning-parser deepseek_r1`` does, its log-probabilities still
covering every generated token, the reasoning's first),
records every request (path, JSON body, whether the key matched), and can misbehave on purpose:
queued faults for the next completions ("400", "429", "500", "drop" a connection, "slow:<seconds>"), a
delay on every answer; for embeddings also "nonjson" (a 200 whose body is not JSON), "baddim" (vectors
one dimension short) and "fewer" (one row missing); with ``context_tokens``, HTTP 400 with vLLM's text for an
input longer than the context (a token is a word here) unless the request carries ``truncate_prompt_tokens``, which
cuts each input to its first N tokens as vLLM does (-1: the context); with ``unsupported`` (OpenAI's reasoning models:
"max_tokens", "temperature", "logprobs", ...), HTTP 400 with OpenAI's text for a chat request that carries one of those
parameters, and ``hidden_reasoning`` tokens of reasoning counted in ``max_completion_tokens`` before the answer (a
smaller budget: empty content, finish_reason "length"); with ``count_prompt``, a chat prompt's tokens as that function
counts its messages (a real tokenizer) instead of its words; with ``max_model_len``, vLLM's per-model context in GET
/models (unless ``report_max_model_len`` is false, as servers that do not report it) and its HTTP 400 for a chat
request whose prompt (in words) and ``max_tokens`` exceed it; with ``route_prefix=""`` its routes at the root, as
infinity serves them (any other path: FastAPI's 404 ``{"detail": "Not Found"}``); ``dimensions_mode`` for a request
with ``dimensions``: "native" (that many buckets), "cut" (the full vector's first N values, not renormalised, as
infinity answers), "refuse" (vLLM's 400 for a model without Matryoshka support), "ignore" (the full width);
``wrong_key="litellm"``: a wrong key answered as LiteLLM's proxy without a database does (400 "No connected db.");
401 for a wrong key (echoing the key it was given, so tests can prove the
client never shows it) and 404 for an unknown model (with ``pinned=True``: 400 and FastAPI's ``{"detail": ...}``, as
``transformers serve <model>`` answers; the fault "400" is such a refusal too). Bounded: it serves only while the test
holds it and answers 503 after ``max_seconds``.
"""

from __future__ import annotations

import base64
import json
import struct
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


def echo_query_reply(body: dict[str, Any]) -> str:
    """Default answer: a passage made of the last 40 words of the user prompt (deterministic)."""
    user = next(m["content"] for m in body["messages"] if m["role"] == "user")
    return "Passage: " + " ".join(user.split()[-40:])


def logprobs_of(tokens: list[tuple[str, float, dict[str, float]]]) -> dict[str, Any]:
    """A choice's ``logprobs`` as the OpenAI API and vLLM send them: per answer token, its log-probability and
    the top alternatives (``[(token, logprob, {alternative: logprob})]``)."""
    return {"content": [
        {"token": token, "logprob": logprob, "bytes": list(token.encode("utf-8")),
         "top_logprobs": [{"token": other, "logprob": value, "bytes": list(other.encode("utf-8"))} for other, value in top.items()]}
        for token, logprob, top in tokens
    ]}


def deepseek_r1_split(text: str) -> tuple[str, str | None]:
    """(reasoning_content, content) as vLLM's DeepSeekR1ReasoningParser splits a whole output: a leading ``<think>``
    dropped, everything before the first ``</think>`` is reasoning; no ``</think>`` (the budget spent thinking): all
    of it is reasoning and the content is null; an empty content is null too."""
    before, marker, after = text.partition("<think>")
    text = after if marker else before
    if "</think>" not in text:
        return text, None
    reasoning, _, content = text.partition("</think>")
    return reasoning, content or None


def listwise_passages(body: dict[str, Any]) -> list[str]:
    """The passages of a RankGPT conversation, in their [1], [2], ... order."""
    return [m["content"].split("] ", 1)[1] for m in body["messages"] if m["role"] == "user" and m["content"].startswith("[")]


@dataclass
class LoopbackOpenAI:
    api_key: str = "sk-loopback-test"
    models: tuple[str, ...] = ("test-llm",)
    reply: Callable[[dict[str, Any]], str | dict[str, str]] = echo_query_reply
    delay: float = 0.0
    max_seconds: float = 300.0
    requests: list[dict[str, Any]] = field(default_factory=list)
    faults: list[str] = field(default_factory=list)
    embedding_dim: int = 16  # the width of an embedding when the request names no `dimensions`
    reasoning_parser: str | None = None  # "deepseek_r1": generated tokens are split as vLLM's reasoning parser splits them
    context_tokens: int | None = None  # embeddings: vLLM's max_model_len (longer inputs: 400 unless truncate_prompt_tokens)
    unsupported: tuple[str, ...] = ()  # chat parameters refused with OpenAI's 400 (o3-mini: max_tokens, temperature, logprobs)
    hidden_reasoning: int = 0  # tokens an OpenAI reasoning model thinks, unseen, within max_completion_tokens
    max_model_len: int | None = None  # chat: vLLM's context (prompt + max_tokens beyond it: 400), reported in /models
    report_max_model_len: bool = True
    route_prefix: str = "/v1"  # "": infinity's routes (/embeddings, /models) at the root
    dimensions_mode: str = "native"  # "cut" (infinity), "refuse" (vLLM without Matryoshka), "ignore"
    wrong_key: str = "401"  # "litellm": 400 "No connected db." as LiteLLM's proxy answers a key it cannot look up
    pinned: bool = False  # an unknown model is refused as `transformers serve <model>` refuses it: 400 {"detail": ...}
    count_prompt: Callable[[list[dict[str, Any]]], int] | None = None  # chat prompt tokens (default: words of the messages)

    def __post_init__(self) -> None:
        server = self
        self._lock = threading.Lock()

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True  # headers and body are two writes: without TCP_NODELAY each answer waits ~40 ms

            def log_message(self, *args: object) -> None:  # quiet
                pass

            def do_GET(self) -> None:  # noqa: N802
                server._get(self)

            def do_POST(self) -> None:  # noqa: N802
                server._post(self)

        class Server(ThreadingHTTPServer):
            request_queue_size = 128  # the default listen backlog (5) drops connections beyond 5 in flight: 1 s SYN retries

        self._server = Server(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self._deadline = 0.0

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}{self.route_prefix}"

    def __enter__(self) -> "LoopbackOpenAI":
        self._deadline = time.monotonic() + self.max_seconds
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def add_faults(self, *faults: str) -> None:
        """Queue faults for the next completions, one each: "400", "429", "500", "drop", "slow:<seconds>"."""
        with self._lock:
            self.faults.extend(faults)

    def completions(self) -> list[dict[str, Any]]:
        """The JSON bodies of every chat-completion request received, in arrival order."""
        return [r["body"] for r in self.requests if r["path"].endswith("/chat/completions")]

    def embedding_requests(self) -> list[dict[str, Any]]:
        """The JSON bodies of every embeddings request received, in arrival order."""
        return [r["body"] for r in self.requests if r["path"].endswith("/embeddings")]

    @staticmethod
    def embedding(text: str, dim: int) -> list[float]:
        """The server's embedding of ``text``: hashed words into ``dim`` buckets (deterministic; similar texts are close)."""
        import hashlib

        vector = [0.0] * dim
        for word in text.lower().split():
            vector[int(hashlib.md5(word.encode()).hexdigest(), 16) % dim] += 1.0
        vector[0] += 0.5  # no text embeds to zeros
        return vector

    # --- request handling ---------------------------------------------------------------------------

    def _authorized(self, handler: BaseHTTPRequestHandler) -> tuple[bool, str]:
        presented = handler.headers.get("Authorization", "").removeprefix("Bearer ").strip()
        return presented == self.api_key, presented

    def _get(self, handler: BaseHTTPRequestHandler) -> None:
        authorized, _ = self._authorized(handler)
        self.requests.append({"method": "GET", "path": handler.path, "body": None, "authorized": authorized})
        if handler.path.rstrip("/") == f"{self.route_prefix}/models":
            data = [{"id": m, "object": "model", "created": 0, "owned_by": "loopback"} for m in self.models]
            if self.max_model_len is not None and self.report_max_model_len:  # as vLLM lists its models
                data = [entry | {"max_model_len": self.max_model_len} for entry in data]
            return self._send(handler, 200, {"object": "list", "data": data})
        return self._send(handler, 404, {"detail": "Not Found"})

    def _post(self, handler: BaseHTTPRequestHandler) -> None:
        length = int(handler.headers.get("Content-Length") or 0)
        raw = handler.rfile.read(length)
        try:
            body = json.loads(raw)
        except ValueError:
            body = {"unparsable": raw.decode("utf-8", "replace")}
        authorized, presented = self._authorized(handler)
        with self._lock:
            fault = self.faults.pop(0) if self.faults and authorized else None
        self.requests.append({"method": "POST", "path": handler.path, "body": body, "authorized": authorized, "fault": fault})
        if time.monotonic() > self._deadline:
            return self._send(handler, 503, {"error": {"message": "loopback server expired"}})
        embeddings = handler.path.rstrip("/") == f"{self.route_prefix}/embeddings"
        if not embeddings and handler.path.rstrip("/") != f"{self.route_prefix}/chat/completions":
            return self._send(handler, 404, {"detail": "Not Found"})  # FastAPI's answer for a route it does not have
        if not authorized and self.wrong_key == "litellm":
            return self._send(handler, 400, {"error": {"message": "No connected db.", "type": "no_db_connection", "param": None,
                                                       "code": "400"}})
        if not authorized:  # like the real API, say which key was refused (the client must never repeat it)
            message = f"Incorrect API key provided: {presented}. You can find your API key at your provider."
            return self._send(handler, 401, {"error": {"message": message, "type": "invalid_request_error", "code": "invalid_api_key"}})
        if body.get("model") not in self.models and self.pinned:
            detail = f"Server is pinned to '{self.models[0]}'; requested '{body.get('model')}'."
            return self._send(handler, 400, {"detail": detail})
        if body.get("model") not in self.models:
            message = f"The model `{body.get('model')}` does not exist or you do not have access to it."
            return self._send(handler, 404, {"error": {"message": message, "type": "invalid_request_error", "code": "model_not_found"}})
        refused = None if embeddings else self._unsupported(body) or self._too_long(body)
        if refused:
            return self._send(handler, 400, {"error": refused})
        if fault in ("429", "500"):
            extra = {"retry-after-ms": "20"} if fault == "429" else {}
            return self._send(handler, int(fault), {"error": {"message": f"injected {fault}", "type": "server_error"}}, extra=extra)
        if fault == "400":  # a request the server refuses (FastAPI's body, as transformers serve sends it)
            return self._send(handler, 400, {"detail": "injected 400: this request is refused"})
        if fault == "drop":
            handler.close_connection = True
            handler.connection.shutdown(2)
            return None
        if fault and fault.startswith("slow:"):
            time.sleep(float(fault.split(":", 1)[1]))
        if self.delay:
            time.sleep(self.delay)
        if embeddings:
            return self._embeddings(handler, body, fault)
        answer = self.reply(body)
        budget = body.get("max_completion_tokens")
        if self.hidden_reasoning and isinstance(answer, str) and budget is not None and budget < self.hidden_reasoning + len(answer.split()):
            answer = {"content": "", "finish_reason": "length"}  # the budget was spent on the hidden reasoning
        generated = answer.get("tokens") if isinstance(answer, dict) else None
        if generated is not None:
            answer = self._generated(body, generated)
        choice_fields: dict[str, Any] = {"finish_reason": "stop"}
        if isinstance(answer, str):
            message = {"role": "assistant", "content": answer}
        else:  # "logprobs" (see logprobs_of) and "finish_reason" belong to the choice, the rest to the message
            answer = dict(answer)
            choice_fields |= {key: answer.pop(key) for key in ("logprobs", "finish_reason") if key in answer}
            message = {"role": "assistant", **answer}
        prompt_tokens = (self.count_prompt(body["messages"]) if self.count_prompt is not None
                         else sum(len(m["content"].split()) for m in body["messages"]))
        completion_tokens = len(" ".join(str(v) for v in message.values() if v != "assistant").split())
        if generated is not None:
            completion_tokens = min(len(generated), body.get("max_tokens") or len(generated))
        payload = {
            "id": f"chatcmpl-{len(self.requests)}", "object": "chat.completion", "created": int(time.time()), "model": body["model"],
            "choices": [{"index": 0, "message": message, **choice_fields}],
            "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens, "total_tokens": prompt_tokens + completion_tokens},
        }
        self._send(handler, 200, payload)

    def _generated(self, body: dict[str, Any], tokens: list[tuple[str, float, dict[str, float]]]) -> dict[str, Any]:
        """The message and choice fields for generated ``tokens`` ([(token, logprob, {alternative: logprob})]): cut at
        the request's ``max_tokens`` (finish_reason "length"), split by the reasoning parser when the server has one,
        and log-probabilities for every generated token when the request asks for them (vLLM does not leave out the
        reasoning's tokens)."""
        limit = body.get("max_tokens")
        cut = limit is not None and len(tokens) > limit
        tokens = tokens[:limit] if cut else tokens
        text = "".join(token for token, _, _ in tokens)
        if self.reasoning_parser == "deepseek_r1":
            reasoning, content = deepseek_r1_split(text)
            message: dict[str, Any] = {"content": content, "reasoning_content": reasoning}
        else:
            message = {"content": text}
        message["finish_reason"] = "length" if cut else "stop"
        if body.get("logprobs"):
            message["logprobs"] = logprobs_of(tokens)
        return message

    def _embeddings(self, handler: BaseHTTPRequestHandler, body: dict, fault: str | None) -> None:
        if fault == "nonjson":
            raw = b"<html>502 Bad Gateway (from a proxy)</html>"
            handler.send_response(200)
            handler.send_header("Content-Type", "application/json")
            handler.send_header("Content-Length", str(len(raw)))
            handler.end_headers()
            handler.wfile.write(raw)
            return None
        texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
        if self.context_tokens is not None:
            refused, texts = self._truncated(body, texts)
            if refused:
                return self._send(handler, 400, {"error": {"message": refused, "type": "BadRequestError", "param": None, "code": 400}})
        asked = body.get("dimensions")
        if asked is not None and self.dimensions_mode == "refuse":
            message = (f'Model "{body["model"]}" does not support matryoshka representation, changing output dimensions '
                       "will lead to poor results.")
            return self._send(handler, 400, {"error": {"message": message, "type": "BadRequestError", "param": None, "code": 400}})
        native = asked is not None and self.dimensions_mode == "native"
        dim = int(asked if native else self.embedding_dim) - (1 if fault == "baddim" else 0)
        rows = [{"object": "embedding", "index": i, "embedding": self.embedding(t, dim)} for i, t in enumerate(texts)]
        if asked is not None and self.dimensions_mode == "cut":  # the full vector's first values, not renormalised
            rows = [row | {"embedding": row["embedding"][:asked]} for row in rows]
        if body.get("encoding_format") == "base64":  # float32 little-endian, as OpenAI's and Voyage's APIs answer
            for row in rows:
                row["embedding"] = base64.b64encode(struct.pack(f"<{len(row['embedding'])}f", *row["embedding"])).decode()
        if fault == "fewer":
            rows = rows[:-1]
        rows.reverse()  # servers may answer out of order: the index says which input a row is
        tokens = sum(len(t.split()) for t in texts)
        payload = {"object": "list", "data": rows, "model": body["model"], "usage": {"prompt_tokens": tokens, "total_tokens": tokens}}
        self._send(handler, 200, payload)

    def _unsupported(self, body: dict) -> dict[str, Any] | None:
        """OpenAI's 400 error for the first parameter of ``unsupported`` the request carries (None: none)."""
        for name in self.unsupported:
            if name not in body or (name == "temperature" and body[name] == 1):  # the default is accepted
                continue
            if name == "max_tokens":
                message = "Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens' instead."
            elif name == "temperature":
                message = (f"Unsupported value: 'temperature' does not support {body[name]} with this model. Only the default "
                           "(1) value is supported.")
            else:
                message = f"Unsupported parameter: '{name}' is not supported with this model."
            code = "unsupported_value" if name == "temperature" else "unsupported_parameter"
            return {"message": message, "type": "invalid_request_error", "param": name, "code": code}
        return None

    def _too_long(self, body: dict) -> dict[str, Any] | None:
        """vLLM's 400 for a chat request whose prompt and completion budget exceed max_model_len (None: it fits)."""
        budget = body.get("max_tokens") or body.get("max_completion_tokens")
        if self.max_model_len is None or budget is None:
            return None
        prompt = sum(len(m["content"].split()) for m in body["messages"])
        if prompt + budget <= self.max_model_len:
            return None
        message = (f"'max_tokens' or 'max_completion_tokens' is too large: {budget}. This model's maximum context length is "
                   f"{self.max_model_len} tokens and your request has {prompt} input tokens ({budget} > {self.max_model_len} "
                   f"- {prompt}).")
        return {"message": message, "type": "BadRequestError", "param": None, "code": 400}

    def _truncated(self, body: dict, texts: list[str]) -> tuple[str | None, list[str]]:
        """vLLM's checks of an embeddings request against the context (max_model_len): (its error text, or None; the
        texts as embedded). ``truncate_prompt_tokens`` N keeps each input's first N tokens (-1: the context's); without
        it an input longer than the context is refused."""
        limit = self.context_tokens
        truncate = body.get("truncate_prompt_tokens")
        if truncate is not None:
            if truncate == -1:
                truncate = limit
            if truncate > limit:
                return (f"truncate_prompt_tokens value ({truncate}) is greater than max_model_len ({limit}). Please, select "
                        "a smaller truncation size."), texts
            return None, [" ".join(text.split()[:truncate]) for text in texts]
        for text in texts:
            count = len(text.split())
            if count > limit:
                return (f"This model's maximum context length is {limit} tokens. However, you requested {count} tokens in "
                        "the input for embedding generation. Please reduce the length of the input."), texts
        return None, texts

    @staticmethod
    def _send(handler: BaseHTTPRequestHandler, status: int, payload: dict, *, extra: dict | None = None) -> None:
        body = json.dumps(payload).encode("utf-8")
        try:
            handler.send_response(status)
            handler.send_header("Content-Type", "application/json")
            for key, value in (extra or {}).items():
                handler.send_header(key, value)
            handler.send_header("Content-Length", str(len(body)))
            handler.end_headers()
            handler.wfile.write(body)
        except (BrokenPipeError, ConnectionResetError):  # the client gave up (timeout) first
            pass


def reranker_config(server: LoopbackOpenAI, cache=None, **settings):
    """An LLMRerankerConfig for ``server``: 4 requests in flight (or ``concurrency=``), 4 retries, ``cache`` as the
    answers' cache folder, the kind's ``settings``."""
    from r2med_plugin.llm import Endpoint, LLMRerankerConfig

    concurrency = settings.pop("concurrency", 4)
    return LLMRerankerConfig(Endpoint(server.base_url, concurrency=concurrency, max_retries=4), cache_dir=cache, **settings)


def trec_rankings(path) -> dict[str, list[str]]:
    """A TREC run file as query -> documents in rank order."""
    from pathlib import Path

    rows: dict[str, list[tuple[int, str]]] = {}
    for line in Path(path).read_text().splitlines():
        query_id, _, doc_id, rank, *_ = line.split()
        rows.setdefault(query_id, []).append((int(rank), doc_id))
    return {query_id: [doc_id for _, doc_id in sorted(pairs)] for query_id, pairs in rows.items()}
