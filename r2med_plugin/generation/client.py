"""The OpenAI-compatible client helpers moved to r2med_plugin.llm.client (shared with the LLM rerankers, which
sit below this package); re-exported here for earlier callers."""

from r2med_plugin.llm.client import (  # noqa: F401
    DEFAULT_KEY_ENV,
    NO_KEY,
    Completion,
    RequestRules,
    GenerationError,
    api_key,
    available_models,
    classify,
    complete,
    context_lengths,
    describe,
    endpoint_host,
    make_client,
    redact,
    refused,
    unserved_message,
    unserved_model,
)
