"""Moved to r2med_plugin.models.identity; the old names import from here, with a DeprecationWarning."""

from r2med_plugin._moved import Moved, same_names

__getattr__ = Moved(__name__, {
    **same_names("r2med_plugin.models.identity", ["PackagedModel", "PACKAGED_MODELS", "packaged_model_folder", "default_hf_home", "cache_packaged_model",
        "model_files", "folder_revision", "hub_commit", "model_revision", "encoder_settings"]),
})
