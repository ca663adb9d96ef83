"""Host-library integrations (mteb, ir_datasets): the only code that imports a host library."""

from __future__ import annotations


def register() -> list[str]:
    """Register every integration whose host library is installed; returns the new MTEB task names.

    The documented fallback where the autoload ``.pth`` file does not run (e.g. embedded interpreters).
    """
    from r2med_plugin.integrations.mteb import register as register_mteb

    return register_mteb()
