"""Moved to r2med_plugin.models.official.loader; the old names import from here, with a DeprecationWarning."""

from r2med_plugin._moved import Moved, same_names

__getattr__ = Moved(__name__, {
    **same_names("r2med_plugin.models.official.loader", ["NAME", "SCHEME", "ENDPOINT_SETTINGS", "endpoint_options", "OfficialLoader", "LOADER"]),
})
