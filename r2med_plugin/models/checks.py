"""Checks every model family makes on what it is asked to load: the device, and a user's name for its results."""

from __future__ import annotations

from r2med_plugin.identifiers import BM25_NAMES
from r2med_plugin.rules import SettingError


def check_device(device: str | None) -> None:
    """Refuse a device this torch cannot use, before a model is loaded onto it (torch would assert)."""
    if not device or device == "cpu":
        return
    import torch

    try:
        parsed = torch.device(device)
    except (RuntimeError, ValueError, TypeError):
        raise SettingError(f"{{device}} {device!r} is not a device torch knows: use cpu, cuda, cuda:1 or mps",
                           field="device") from None
    kind = parsed.type
    if kind == "cuda" and not torch.cuda.is_available():
        raise SettingError(f"{{device}} {device}: this torch has no usable CUDA (torch {torch.__version__}); use {{device}} "
                           "cpu", field="device")
    if kind == "cuda" and parsed.index is not None and parsed.index >= torch.cuda.device_count():
        raise SettingError(f"{{device}} {device}: this machine has {torch.cuda.device_count()} CUDA device(s), cuda:0 to "
                           f"cuda:{torch.cuda.device_count() - 1}", field="device")
    if kind == "mps" and not torch.backends.mps.is_available():
        raise SettingError(f"{{device}} {device}: MPS is not available here; use {{device}} cpu", field="device")



def check_model_name(name: str) -> None:
    """A user's name for a model's results (``--model-name``): not empty, no folder climbing, no BM25 name."""
    if not isinstance(name, str) or not name.strip() or name.strip(" ./") == "" or ".." in name.split("/"):
        raise SettingError(f"{{model_name}} {name!r} cannot name a result folder: give a name such as my-org/my-model",
                           field="model_name")
    if name in BM25_NAMES:
        raise SettingError(f"{{model_name}} {name!r} is a BM25 retriever's name: its results would mix with BM25's; choose "
                           "another", field="model_name")
