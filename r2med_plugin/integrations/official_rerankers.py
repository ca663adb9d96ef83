"""Moved to r2med_plugin.models.official.rerankers; the old names import from here, with a DeprecationWarning."""

from r2med_plugin._moved import Moved, same_names

__getattr__ = Moved(__name__, {
    **same_names("r2med_plugin.models.official.rerankers", ["NAME", "SCHEME", "MAX_LENGTH", "RANKLLAMA_PREFIX", "RerankerProfile", "PROFILES", "MODES", "MODE_PROFILES",
        "parse", "weights_stamp", "adapter_base", "OfficialReranker"]),
})
