"""Moved to r2med_plugin.models.registry; the old names import from here, with a DeprecationWarning."""

from r2med_plugin._moved import Moved, same_names

__getattr__ = Moved(__name__, {
    **same_names("r2med_plugin.models.registry", ["RetrieverKind", "SENTENCE_TRANSFORMERS", "AUTO", "ENTRY_POINT_GROUP", "RetrieverRef", "ModelLoader",
        "register_loader", "loaders", "loader_named", "loader_choices", "scheme_loader", "endpoint_options_of",
        "resolve", "load_encoder", "load_reranker", "files_stamp", "hub_cache_dir", "cached_hub_commit"]),
})
