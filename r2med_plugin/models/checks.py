"""Checks every model family makes on what it is asked to load: the device, and a user's name for its results."""

from __future__ import annotations

from collections.abc import Sequence

from r2med_plugin.identifiers import BM25_NAMES
from r2med_plugin.rules import SettingError


def check_device(device: str | Sequence[str] | None) -> None:
    """Refuse a device setting this torch cannot use (r2med_plugin.models.placement), before a model is loaded onto it
    (torch would assert): ``auto``, one device, a list, or ``all``."""
    from r2med_plugin.models.placement import placement

    placement(device)


def check_model_name(name: str) -> None:
    """A user's name for a model's results (``--model-name``): not empty, no folder climbing, no BM25 name."""
    if not isinstance(name, str) or not name.strip() or name.strip(" ./") == "" or ".." in name.split("/"):
        raise SettingError(f"{{model_name}} {name!r} cannot name a result folder: give a name such as my-org/my-model",
                           field="model_name")
    if name in BM25_NAMES:
        raise SettingError(f"{{model_name}} {name!r} is a BM25 retriever's name: its results would mix with BM25's; choose "
                           "another", field="model_name")
