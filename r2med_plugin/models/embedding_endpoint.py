"""Embeddings from any OpenAI-compatible ``/v1/embeddings`` server (OpenAI, vLLM, TEI, Ollama, LiteLLM), as
an Encoder: ``--retriever openai:<model> --base-url URL [--api-key-env VAR] [--dimensions N] [--concurrency N]
[--extra-body JSON]``.

- Texts go in batches (``batch_size`` per request), ``concurrency`` requests in flight, through the
  ``openai`` client, which retries 429, 5xx, timeouts and dropped connections (r2med_plugin.endpoints.client).
- Every batch's embeddings are cached as soon as they arrive (key: endpoint host, model id, dimensions,
  prompt, extra body and the batch's texts), so a killed run resumes where it stopped; the whole encode is then
  cached like a local model's (``encode_cached``, key from ``cache_identity``), so a rerun sends nothing.
- ``--extra-body JSON`` is merged into every request (vLLM: ``{"truncate_prompt_tokens": 256}``, which cuts longer
  texts instead of refusing them with HTTP 400); it may change the embeddings, so it is part of the cache keys, the
  stamp and the revision results are filed under.
- The key is read from the environment (``--api-key-env``, default OPENAI_API_KEY; "EMPTY" when unset) and
  never written to a file, a log, a cache key, a stamp or an error (messages are redacted).
- An answer with the wrong number of rows, other dimensions than ``--dimensions``, ragged or non-finite
  vectors, or a body that is not JSON stops the run with an error that says so.

Registered as the ``openai`` loader (scheme ``openai:``) through the ``r2med_plugin.model_loaders`` entry point.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import threading
from collections.abc import Mapping, Sequence
from typing import Any, cast

import numpy as np

from r2med_plugin.cache import key_of, read_cached_array, store_array
from r2med_plugin.endpoints.client import api_key, describe, endpoint_host, host_label, make_client, redact
from r2med_plugin.endpoints.client import refused as api_refused
from r2med_plugin.endpoints.extra_body import extra_body_key, extra_body_label, extra_body_of, refuse_reserved
from r2med_plugin.errors import UserError
from r2med_plugin.models.checks import check_model_name
from r2med_plugin.models.protocols import EncodeKind, EncoderBase
from r2med_plugin.models.registry import ModelLoaderBase, RetrieverRef
from r2med_plugin.quiet import bar_disabled
from r2med_plugin.request_options import EMBEDDING_ENDPOINT_OPTIONS
from r2med_plugin.rules import SettingError

NAME = SCHEME = "openai"
SETTINGS = EMBEDDING_ENDPOINT_OPTIONS
# what every embeddings request carries itself: an extra body may not replace it
REQUEST_FIELDS = {"model": "{retriever} openai:<model> names it", "input": "the texts", "encoding_format": "float",
                  "dimensions": "set it with {dimensions}"}
BATCH_CACHE = "embeddings-endpoint"


class EndpointError(UserError):
    """The endpoint failed on every retry, or answered something that is not one embedding per text."""


class EndpointSettingError(SettingError, EndpointError):
    """An endpoint's answer that a setting can fix (``--dimensions``, ``--batch-size``, ``--base-url``): an
    ``EndpointError`` worded per front end as a ``SettingError``."""


def _positive(name: str, value: Any) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise SettingError(f"{{{name}}} must be a positive integer, got {value!r}", field=name)
    return value


class EndpointLoader(ModelLoaderBase):
    """The ``openai`` model loader: ``openai:<model id>`` (see r2med_plugin.models.registry.ModelLoader)."""

    name = NAME
    scheme = SCHEME
    auto = False

    def claim(self, name: str, revision: str | None, settings: Mapping[str, Any]) -> RetrieverRef:
        model = name.split(":", 1)[1] if name.startswith(f"{SCHEME}:") else name
        if not model.strip():
            raise UserError(f"{name!r} names no model: write openai:<model id the endpoint serves>, e.g. openai:text-embedding-3-small")
        if revision is not None:
            raise SettingError("an embedding endpoint serves the model it serves: {revision} reaches no code there; drop it",
                               field="revision")
        unknown = sorted(set(settings) - set(SETTINGS))
        if unknown:
            raise UserError(f"{unknown[0]!r} is not an endpoint setting; use {', '.join(SETTINGS)}")
        if not settings.get("base_url"):
            raise SettingError(f"{name} needs {{base_url}} URL: the OpenAI-compatible server, e.g. "
                               "http://localhost:8000/v1 (OpenAI: https://api.openai.com/v1)", field="base_url")
        endpoint_host(settings["base_url"])  # a URL holding credentials or no host is refused here
        _positive("dimensions", settings.get("dimensions"))
        _positive("concurrency", settings.get("concurrency"))
        settings = dict(settings)
        if "extra_body" in settings:  # kept as its canonical JSON: a settings tuple holds hashable values
            body = extra_body_of(settings["extra_body"])
            refuse_reserved(body, REQUEST_FIELDS)
            settings.pop("extra_body")
            if body:
                settings["extra_body"] = extra_body_key(body)
        return RetrieverRef(name, "plugin", model, None, loader=NAME, settings=tuple(sorted(settings.items())))

    def stamp(self, ref: RetrieverRef) -> str:
        settings = dict(ref.settings)
        body = f":extra_body={settings['extra_body']}" if settings.get("extra_body") else ""
        return f"{endpoint_host(settings['base_url'])}:{ref.source}:dimensions={settings.get('dimensions')}{body}"

    def load_encoder(self, ref: RetrieverRef, *, device: str | None = None, devices: Sequence[str] | None = None,
                     batch_size: int = 32, show_progress: bool = True, name: str | None = None,
                     timeout: float = 120.0, max_retries: int = 6) -> EndpointEncoder:
        if device not in (None, "cpu", "auto") or any(chosen not in ("cpu", "auto") for chosen in devices or ()):
            raise SettingError(f"{ref.name} runs on its server: a {{device}} (or devices) reaches no code there; drop it",
                               field="device")
        settings = dict(ref.settings)
        return EndpointEncoder(ref.source, settings["base_url"], api_key_env=settings.get("api_key_env"),
                               dimensions=settings.get("dimensions"), concurrency=settings.get("concurrency") or 8,
                               batch_size=batch_size, show_progress=show_progress, name=name, timeout=timeout,
                               max_retries=max_retries, extra_body=extra_body_of(settings.get("extra_body")))

    def load_cross_encoder(self, ref: RetrieverRef, **options: Any) -> Any:
        raise UserError(f"{ref.name} is an embedding endpoint; it embeds texts and cannot rerank pairs: use it as the first stage")


LOADER = EndpointLoader()


class EndpointEncoder(EncoderBase):
    """An OpenAI-compatible embeddings endpoint as an Encoder (see the module docstring)."""

    def __init__(self, model: str, base_url: str, *, api_key_env: str | None = None, dimensions: int | None = None,
                 concurrency: int = 8, batch_size: int = 32, timeout: float = 120.0, max_retries: int = 6,
                 show_progress: bool = True, name: str | None = None, encoding_format: str = "float",
                 extra_body: Mapping[str, Any] | str | None = None) -> None:
        if encoding_format not in ("float", "base64"):
            raise UserError(f"encoding_format must be float or base64, got {encoding_format!r}")
        self.host = endpoint_host(base_url)
        self.encoding_format = encoding_format  # base64: float32 little-endian, for servers without "float" (Voyage)
        self.base_url = base_url
        self.model = model
        self.dimensions = _positive("dimensions", dimensions)
        self.extra_body = extra_body_of(extra_body)  # merged into every request (vLLM's truncate_prompt_tokens)
        refuse_reserved(self.extra_body, REQUEST_FIELDS)
        self.concurrency = _positive("concurrency", concurrency) or 8
        self.batch_size = _positive("batch_size", batch_size) or 32
        self.timeout, self.max_retries = timeout, max_retries
        self.show_progress = show_progress
        self.key_env = api_key_env or "OPENAI_API_KEY"
        api_key(api_key_env)  # an unset --api-key-env variable is refused before any request
        self._api_key_env = api_key_env
        if name is not None:
            check_model_name(name)
        # what it is names it: the model id, the server (host-port) and the dimensions asked for; one model id on two
        # servers, or at two --dimensions, is two systems (two leaderboard rows), never two revisions of one
        body = f"\0{extra_body_key(self.extra_body)}" if self.extra_body else ""  # none: the revisions of earlier versions
        self.name = name or endpoint_model_name(model, base_url, self.dimensions, self.extra_body)
        self.revision = "endpoint-" + hashlib.sha256(f"{self.host}\0{model}\0{self.dimensions}{body}".encode()).hexdigest()[:12]
        self.requests_sent = 0

    @property
    def cache_identity(self) -> str:
        """Endpoint host, model id, dimensions and the extra body (never the key)."""
        fmt = "" if self.encoding_format == "float" else f":format={self.encoding_format}"
        body = f":extra_body={extra_body_key(self.extra_body)}" if self.extra_body else ""
        return f"endpoint:{self.host}:{self.model}:dimensions={self.dimensions}{fmt}{body}"

    def encode(self, texts: Sequence[str], *, kind: EncodeKind, prompt: str | None = None,
               extra_body: Mapping[str, Any] | None = None) -> np.ndarray:
        """One embedding per text (``prompt`` prepended); ``extra_body`` adds fields to each request (Voyage's input_type),
        over the encoder's own extra body (already in ``cache_identity``)."""
        inputs = [(prompt or "") + text for text in texts]
        extra = dict(extra_body or {})
        batches = [inputs[start:start + self.batch_size] for start in range(0, len(inputs), self.batch_size)]
        extra_key = json.dumps(extra, sort_keys=True) if extra else None  # no extra fields: the keys of earlier versions
        keys = [key_of(self.cache_identity, prompt, len(batch), _digest(batch), *([extra_key] if extra_key else []))
                for batch in batches]
        results: list[np.ndarray | None] = [read_cached_array(BATCH_CACHE, key) for key in keys]
        missing = [index for index, found in enumerate(results) if found is None or found.shape[0] != len(batches[index])]
        if missing:
            fetched = _run(self._fetch_all([(index, batches[index], keys[index]) for index in missing], extra))
            for index, array in fetched.items():
                results[index] = array
        if not results:
            return np.zeros((0, self.dimensions or 1), dtype=np.float32)
        widths = {array.shape[1] for array in results if array is not None}
        if len(widths) > 1:
            raise EndpointSettingError(f"{self.host} returned embeddings of {sorted(widths)} dimensions for {self.model!r}; "
                                       "one model gives one dimension: check that one model serves {retriever} openai:"
                                       + self.model, field="retriever")
        return np.concatenate(cast(list[np.ndarray], results), axis=0)  # every batch is filled above

    async def _fetch_all(self, work: list[tuple[int, list[str], str]], extra: Mapping[str, Any]) -> dict[int, np.ndarray]:
        from tqdm.auto import tqdm

        key = api_key(self._api_key_env)
        client = make_client(self.base_url, key, timeout=self.timeout, max_retries=self.max_retries,
                             feature="an openai: embedding retriever")
        gate = asyncio.Semaphore(self.concurrency)
        done: dict[int, np.ndarray] = {}
        with tqdm(total=sum(len(batch) for _, batch, _ in work), desc=f"Embedding ({self.model})", unit="text",
                  disable=bar_disabled(self.show_progress)) as bar:
            async def one(index: int, batch: list[str], cache_key: str) -> None:
                async with gate:
                    array = await self._request(client, batch, key, extra)
                store_array(BATCH_CACHE, cache_key, array)  # kept at once: a killed run resumes from here
                done[index] = array
                bar.update(len(batch))

            tasks = [asyncio.ensure_future(one(*item)) for item in work]
            try:
                await asyncio.gather(*tasks)
            except BaseException:
                for task in tasks:
                    task.cancel()
                await asyncio.gather(*tasks, return_exceptions=True)
                raise
            finally:
                await client.close()
        return done

    async def _request(self, client: Any, batch: list[str], key: str, extra: Mapping[str, Any]) -> np.ndarray:
        arguments: dict[str, Any] = {"model": self.model, "input": batch, "encoding_format": self.encoding_format}
        if self.dimensions is not None:
            arguments["dimensions"] = self.dimensions
        if extra or self.extra_body:
            arguments["extra_body"] = {**(self.extra_body or {}), **extra}
        self.requests_sent += 1
        try:
            # the raw body, parsed as JSON here: the client's typed parse builds one object per number (20x slower)
            raw = await client.embeddings.with_raw_response.create(**arguments)
            response = json.loads(raw.content)
        except Exception as error:  # noqa: BLE001 - every failure becomes one message with the fix, without the key
            raise EndpointError(self._describe(error, key)) from None
        return self._checked(response, len(batch), key)

    def _describe(self, error: BaseException, key: str) -> str:
        import openai

        if isinstance(error, (openai.APIResponseValidationError, json.JSONDecodeError)):
            text = f"{self.host} answered with a body that is not an embeddings response (not JSON, or not its shape); check --base-url"
        else:
            text = describe(error, model=self.model, key_env=self.key_env, base_url=self.base_url, secrets=[key],
                            model_option="--retriever openai:<model>", timeout_fix="raise --timeout, or lower --concurrency or --batch-size",
                            route="/embeddings")
            if self.dimensions is not None and api_refused(error) and any(word in text.lower() for word in ("dimension", "matryoshka")):
                text += (f"; the server refused --dimensions {self.dimensions} (vLLM serves other sizes only for models "
                         "trained for them, Matryoshka): drop --dimensions")
            if "maximum context length" in text or "context length" in text.lower():
                text += ("; the server refuses texts longer than the model's context: have it cut them (vLLM: --extra-body "
                         "'{\"truncate_prompt_tokens\": N}' with N at most the context, e.g. 256 for all-MiniLM-L6-v2; "
                         "TEI: serve with --auto-truncate)")
        return redact(f"embedding endpoint {self.host}, model {self.model!r}: {text}", [key])

    def _checked(self, response: Any, count: int, key: str) -> np.ndarray:
        data = response.get("data") if isinstance(response, dict) else None
        if not isinstance(data, list) or not all(isinstance(item, dict) for item in data):
            raise EndpointSettingError(redact(f"{self.host} answered with a body that is not an embeddings response "
                                              f"(not JSON, or no `data` list); check {{base_url}} ({self.base_url})", [key]),
                                       field="base_url")
        if len(data) != count:
            raise EndpointSettingError(f"{self.host} returned {len(data)} embeddings for {count} texts of one request "
                                       f"(model {self.model!r}); the server must answer one per input: lower {{batch_size}}",
                                       field="batch_size")
        rows = sorted(data, key=lambda item: item.get("index", 0) if isinstance(item.get("index"), int) else 0)
        vectors = [_decoded(item.get("embedding")) for item in rows]
        if any(not isinstance(vector, list) or not vector for vector in vectors):
            raise EndpointError(f"{self.host} returned an embedding that is not a list of numbers (model {self.model!r})")
        widths = {len(vector) for vector in vectors}
        if len(widths) > 1:
            raise EndpointError(f"{self.host} returned embeddings of different lengths {sorted(widths)} in one answer (model {self.model!r})")
        (width,) = widths
        if self.dimensions is not None and width != self.dimensions:
            did = ("ignored --dimensions and answered longer ones" if width > self.dimensions
                   else "answered shorter ones than asked")
            raise EndpointSettingError(f"{self.host} returned {width}-dimensional embeddings, but {{dimensions}} "
                                       f"{self.dimensions} asked for {self.dimensions} (the server {did}): drop {{dimensions}} "
                                       f"(or give {width}), or use a model that can shorten its embeddings", field="dimensions")
        array = np.asarray(vectors, dtype=np.float32)
        if not np.isfinite(array).all():
            raise EndpointError(f"{self.host} returned NaN or infinite embeddings (model {self.model!r})")
        return array


def endpoint_model_name(model: str, base_url: str, dimensions: int | None = None,
                        extra_body: Mapping[str, Any] | None = None) -> str:
    """The name an endpoint's results are filed under: ``<model>@<host-port>``, plus ``+dim<N>`` for --dimensions N
    (``text-embedding-3-large@api.openai.com+dim256``) and ``+body-<hash>`` for an --extra-body (vLLM's
    truncate_prompt_tokens cuts texts: another system, not another revision of the same one)."""
    body = f"+{extra_body_label(extra_body)}" if extra_body else ""
    return f"{model}@{host_label(base_url)}" + (f"+dim{dimensions}" if dimensions is not None else "") + body


def _decoded(embedding: Any) -> Any:
    """An embedding as a list of numbers: base64 answers are float32, little-endian (OpenAI's and Voyage's format)."""
    if not isinstance(embedding, str):
        return embedding
    import base64
    import binascii

    try:
        return np.frombuffer(base64.b64decode(embedding, validate=True), dtype="<f4").tolist()
    except (binascii.Error, ValueError):
        return None  # reported as not a list of numbers


def _digest(texts: Sequence[str]) -> str:
    return hashlib.sha256("\0".join(texts).encode("utf-8", "surrogatepass")).hexdigest()


def _run(coroutine: Any) -> Any:
    """Run ``coroutine`` to the end, also from code that already runs an event loop (a notebook)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coroutine)
    outcome: dict[str, Any] = {}

    def target() -> None:
        try:
            outcome["value"] = asyncio.run(coroutine)
        except BaseException as error:  # noqa: BLE001 - re-raised in the caller's thread
            outcome["error"] = error

    thread = threading.Thread(target=target)
    thread.start()
    thread.join()
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]
