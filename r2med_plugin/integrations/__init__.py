"""Host-library integrations (mteb, ir_datasets): the only code that imports a host library."""

from __future__ import annotations


def register() -> list[str]:
    """Register with mteb and ir_datasets (each when installed); returns the names newly added.

    The documented fallback where the autoload ``.pth`` file does not run (e.g. embedded interpreters).
    """
    from importlib.util import find_spec

    added: list[str] = []
    if find_spec("mteb") is not None:
        from r2med_plugin.integrations.mteb import register as register_mteb

        added += register_mteb()
    if find_spec("ir_datasets") is not None:
        from r2med_plugin.integrations.ir_datasets import register as register_ir_datasets

        added += register_ir_datasets()
    return added
