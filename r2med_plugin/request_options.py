"""The options of a request's parts, each declared once and attached to the field that holds it.

An option is what a front end lets a user set on a part of a request: ``--model-revision`` on a model first stage,
``--rerank-depth`` on a reranker, ``--base-url`` on an endpoint. Its ``Option`` says its name (the CLI's dest, and the
flag with dashes), its help, how the command line reads it, its CLI group and what it configures (the generic half of
the "reaches no code" refusal, used when no part of the request has words of its own). A spec's field carries its
option in its metadata (``option_field``), as ``rules.neutral`` marks a field; from those fields come each part's
option names (``options_of``), the request's list of options a front end checks (evaluation.request.request_options),
the words of a refusal (``configures``) and the CLI's flags (cli/evaluate.py reads ``DECLARED``). The LLM rerankers'
own settings are declared the same way, per kind, in r2med_plugin.llm_settings.

This module imports nothing heavy: the CLI's parser reads it for ``r2med --help``.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Literal

OPTION = "option"  # the field metadata key of an option's declaration

Group = Literal["first", "scoring", "outputs", "rerank", "endpoint"]
# how the command line reads a value: text as it is, an on-switch, an integer (of at least 1 or 0), seconds, a choice
Parse = Literal["text", "switch", "int", "positive", "count", "seconds", "choice", "loader"]


@dataclass(frozen=True, eq=False)
class Option:
    """An option of a request's part: ``name`` (the CLI dest; its flag is ``--name`` with dashes, rules.flag_of), the
    flag's ``help``, what it ``configures`` (a refusal's words: "it names an encoder's weights ..."), its CLI ``group``,
    how the command line reads it (``parse``, ``choices``, ``metavar``) and the flag's default where the part's own
    default is not the command line's text (``flag_default``: ``--device auto``, ``--batch-size 32``)."""

    name: str
    help: str
    configures: str
    group: Group
    parse: Parse = "text"
    choices: tuple[str, ...] = ()
    metavar: str | None = None
    flag_default: Any = None


DECLARED: dict[str, Option] = {}  # name -> declaration, in the order of the CLI's help


def declare(name: str, help: str, configures: str, group: Group, **how: Any) -> Option:
    """An option, entered in ``DECLARED`` (its name taken once)."""
    if name in DECLARED:
        raise TypeError(f"the option {name!r} is declared twice: declare it once and attach it to each field that holds it")
    declared = DECLARED[name] = Option(name, help, configures, group, **how)
    return declared


def option_field(declared: Option, default: Any = None, *, neutral: bool = False, **field_options: Any) -> Any:
    """A spec's field that holds ``declared`` (its metadata names it; ``neutral``: it changes no result, as
    ``rules.neutral``)."""
    metadata: dict[str, Any] = {OPTION: declared}
    if neutral:
        metadata["neutral"] = True
    if "omit_default" in field_options:
        metadata["omit_default"] = field_options.pop("omit_default")
    return dataclasses.field(default=default, metadata=metadata, **field_options)


def options_of(*classes: type) -> tuple[str, ...]:
    """The option names the fields of ``classes`` (dataclasses) hold, in field order."""
    names = [item.metadata[OPTION].name for cls in classes for item in dataclasses.fields(cls) if OPTION in item.metadata]
    return tuple(dict.fromkeys(names))


def option_fields(cls: type) -> tuple[str, ...]:
    """The names of the fields of ``cls`` that hold an option (a sweep entry's keys: ``revision``, not
    ``model_revision``)."""
    return tuple(item.name for item in dataclasses.fields(cls) if OPTION in item.metadata)


def configures(name: str) -> str | None:
    """What the option ``name`` configures, in a refusal's words; None for a name that is not a declared option."""
    declared = DECLARED.get(name)
    return declared.configures if declared else None


# --- a model first stage ------------------------------------------------------------------------------------------------

_LOCAL_MODEL = "an encoder first stage or a cross-encoder"

INSTRUCTION = declare("instruction", "prepend the official 'Instruct: ...\\nQuery: ' prompt to queries",
                      "it is the official prompt of an encoder first stage", "first", parse="switch", flag_default=False)
MODEL_REVISION = declare(
    "model_revision", "hub revision of the model (default: what the cache holds); for a folder, a label filed with its "
    "fingerprint", "it names an encoder's weights (a model first stage)", "first")
MODEL_NAME = declare(
    "model_name", "the name results are filed under (default: the hub name, or the folder's path), e.g. my-org/minilm-ft",
    "it names a model first stage's results", "first")
DEVICE = declare(
    "device", "where the model runs: auto (default: as sentence-transformers and mteb choose, CUDA when there is one), "
    "cpu, cuda, cuda:1, mps; a list encodes in one process per device (cuda:0,cuda:1; cpu,cpu), all = every CUDA device",
    f"it places a local model ({_LOCAL_MODEL})", "first", flag_default="auto")
DTYPE = declare(
    "dtype", "compute dtype the model's weights load in (default auto: the checkpoint's own); another than the model's "
    "own is filed apart (+bfloat16)", "it sets the compute dtype of a model first stage's weights", "first",
    parse="choice", choices=("auto", "float32", "bfloat16", "float16"), flag_default="auto")
BATCH_SIZE = declare("batch_size", "encoder (and cross-encoder) batch size (default 32)",
                     f"it batches a local model's inputs ({_LOCAL_MODEL})", "first", parse="positive", flag_default=32)
WORKERS = declare("workers", "processes for bm25-lucene corpus analysis (default: all cores)",
                  "it sets the processes of bm25-lucene's corpus analysis", "first", parse="positive")
LOADER = declare(
    "loader", "how --retriever / --rerank models load (default auto: through mteb when mteb's registry has the name, "
    "with its prompts and revision; else sentence-transformers)",
    "it chooses how a model loads (a model first stage or a cross-encoder)", "first", parse="loader")

# --- scoring and outputs ------------------------------------------------------------------------------------------------

TOP_K = declare("top_k", "documents retrieved per query (default 1000, at least 10); deeper metrics are left out below 1000",
                "it is the depth of the searched run", "scoring", parse="int", flag_default=1000)
DEPTH = declare("depth", "documents per query in TREC run files (default 1000)", "it is the depth of TREC run files",
                "outputs", parse="int", flag_default=1000)

# --- a reranker ---------------------------------------------------------------------------------------------------------

RERANK_DEPTH = declare("rerank_depth", "documents reranked per query, at least 10 (official: 10 or 100; default 10)",
                       "it configures --rerank, which is not given", "rerank", parse="positive", flag_default=10)
RERANK_REVISION = declare("rerank_revision", "the cross-encoder's hub revision (default: what the cache holds)",
                          "it configures --rerank, which is not given", "rerank")
FIRST_STAGE_NAME = declare("first_stage_name", "the first stage's name in result names (default: the retriever, or the "
                           "run folder)", "it names what --rerank reranks, and no --rerank is given", "rerank")

# --- an endpoint (an embedding endpoint's, an LLM reranker's) ----------------------------------------------------------

_ENDPOINT = ("it configures an endpoint: an embedding endpoint (--retriever openai:<model>) or an LLM reranker "
             "(--rerank llm-listwise:<model>, ...)")

BASE_URL = declare("base_url", "the OpenAI-compatible endpoint of --retriever openai:<model> (embeddings) or of an LLM "
                   "reranker (--rerank llm-...), e.g. http://localhost:8000/v1", _ENDPOINT, "endpoint")
API_KEY_ENV = declare("api_key_env", "openai:<model> / LLM rerankers: environment variable holding the API key (default "
                      "OPENAI_API_KEY)", _ENDPOINT, "endpoint")
DIMENSIONS = declare("dimensions", "openai:<model>: ask the endpoint for embeddings of this many dimensions (checked in "
                     "every answer)", "it configures an embedding endpoint (--retriever openai:<model>)", "endpoint",
                     parse="int")
CONCURRENCY = declare("concurrency", "openai:<model> / LLM rerankers: requests in flight at once (default 8); --batch-size "
                      "texts per embeddings request", _ENDPOINT, "endpoint", parse="positive")
MAX_RETRIES = declare("max_retries", "openai:<model>, official:openai/voyage and LLM rerankers: retries per request on 429, "
                      "5xx, timeouts and dropped connections (default 6)", _ENDPOINT, "endpoint", parse="count")
TIMEOUT = declare("timeout", "openai:<model>, official:openai/voyage and LLM rerankers: seconds per request before it is "
                  "retried (default: 120 for embeddings, 600 for LLM rerankers)", _ENDPOINT, "endpoint", parse="seconds")
EXTRA_BODY = declare(
    "extra_body", "openai:<model> / LLM rerankers: a JSON object merged into every request body (server options; part of "
    "the results' identity), e.g. vLLM embeddings: '{\"truncate_prompt_tokens\": 256}', Qwen3: '{\"chat_template_kwargs\": "
    "{\"enable_thinking\": false}}'", _ENDPOINT, "endpoint", metavar="JSON")

# what an embedding endpoint's loader takes (models.registry, models.embedding_endpoint; a sweep's retrievers entry)
EMBEDDING_ENDPOINT_OPTIONS = tuple(item.name for item in (BASE_URL, API_KEY_ENV, DIMENSIONS, CONCURRENCY, EXTRA_BODY))
