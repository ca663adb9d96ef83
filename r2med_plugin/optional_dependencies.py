"""Optional dependencies: the extra that installs each one, and one clear error when it is missing.

The base install leaves out what only one command needs: matplotlib (charts: ``--plot`` and ``r2med demo``) and
datasketch (``r2med audit``). ``require_extra`` checks for one before any work starts (without importing it);
``import_extra`` imports it where it is used. Both raise ``MissingExtraError`` (an ImportError) naming the extra.
"""

from __future__ import annotations

import importlib
import importlib.util
from types import ModuleType

from r2med_plugin.errors import UserError

EXTRAS = {"matplotlib": "plots", "datasketch": "audit"}  # top-level module -> the extra that installs it


class MissingExtraError(UserError, ImportError):
    """An optional dependency is not installed; the message names the extra that installs it."""

    def __init__(self, message: str, *, name: str | None = None) -> None:
        super().__init__(message)  # ValueError, first in the order, takes no keywords: ImportError's name is set here
        self.name = name


def missing_extra_message(module: str, needed_for: str, extra: str | None = None) -> str:
    top = module.partition(".")[0]
    extra = extra or EXTRAS[top]
    return (f"{needed_for} needs {top}, which the base install leaves out; install the {extra!r} extra: "
            f"pip install 'r2med-plugin[{extra}]'")


def require_extra(module: str, needed_for: str, extra: str | None = None) -> None:
    """Raise MissingExtraError unless ``module`` is installed (found, not imported: the check costs nothing); the
    message names ``extra`` (default: the one EXTRAS lists for the module)."""
    try:
        found = importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # blocked by an import hook, or a module set to None in sys.modules
        found = False
    if not found:
        raise MissingExtraError(missing_extra_message(module, needed_for, extra), name=module)


def import_extra(module: str, needed_for: str) -> ModuleType:
    """``module`` imported, or MissingExtraError naming the extra that installs it."""
    try:
        return importlib.import_module(module)
    except ImportError as error:
        raise MissingExtraError(missing_extra_message(module, needed_for), name=module) from error
