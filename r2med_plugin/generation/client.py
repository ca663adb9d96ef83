"""The OpenAI-compatible client helpers moved to r2med_plugin.llm.client (shared with the LLM rerankers, which
sit below this package); the old path still works, with a warning."""

from r2med_plugin._moved import Moved, same_names

__all__ = [
    "DEFAULT_KEY_ENV", "NO_KEY", "Completion", "GenerationError", "RequestRules", "api_key", "available_models", "classify",
    "complete", "context_lengths", "describe", "endpoint_host", "make_client", "redact", "refused", "unserved_message",
    "unserved_model",
]
__getattr__ = Moved(__name__, same_names("r2med_plugin.llm.client", __all__))
