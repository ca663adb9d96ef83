"""Moved to r2med_plugin.models.embedding_endpoint; the old names import from here, with a DeprecationWarning."""

from r2med_plugin._moved import Moved, same_names

__getattr__ = Moved(__name__, {
    **same_names("r2med_plugin.models.embedding_endpoint", ["NAME", "SCHEME", "SETTINGS", "REQUEST_FIELDS", "BATCH_CACHE", "EndpointError", "EndpointLoader", "LOADER",
        "EndpointEncoder", "endpoint_model_name"]),
})
