"""Where and in what precision a model the package loads runs: the one device setting and the one dtype setting.

Device (``--device``, ``ModelSpec.device``, a sweep's ``devices``): ``auto`` (the default) gives the libraries no
device, so sentence-transformers, its CrossEncoder and mteb's loaders choose as they do on their own (CUDA when torch
sees one, else MPS, else the CPU); ``cpu``, ``cuda``, ``cuda:1``, ``mps`` name one device; a comma-separated list
(``cuda:0,cuda:1``, ``cpu,cpu``) encodes with sentence-transformers' multi-process pool, one process per entry;
``all`` is every CUDA device torch sees (refused where there is none). ``auto`` is always one device.

Dtype (``--dtype``, ``ModelSpec.dtype``, a sweep's ``dtype``): ``auto`` (the default) loads a checkpoint in its own
dtype, as the libraries do; ``float32``, ``bfloat16`` and ``float16`` are the compute dtype the weights are loaded in
(``model_kwargs={"dtype": ...}``), not a quantization of the output embeddings.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from r2med_plugin.rules import SettingError

AUTO = "auto"
ALL = "all"
DTYPES = (AUTO, "float32", "bfloat16", "float16")
DEVICE_EXAMPLES = "auto, cpu, cuda, cuda:1, mps, a list such as cuda:0,cuda:1 or cpu,cpu, or all (every CUDA device)"


@dataclass(frozen=True)
class Placement:
    """What a device setting asks for: one device (``device``; None = the library's choice) or a pool (``devices``)."""

    device: str | None = None
    devices: tuple[str, ...] = ()

    @property
    def pooled(self) -> bool:
        """Two or more processes (sentence-transformers' multi-process pool)."""
        return len(self.devices) > 1


def placement(setting: str | Sequence[str] | None) -> Placement:
    """The placement ``setting`` asks for, each device checked against this torch."""
    if setting is None:
        return Placement()
    if isinstance(setting, str):
        text = setting.strip()
        if text.lower() == AUTO:
            return Placement()
        entries = cuda_devices() if text.lower() == ALL else [part.strip() for part in text.split(",")]
    elif len(setting) == 1:  # a list of one ([all], [auto], [cuda:1]) is that one setting
        return placement(str(setting[0]))
    else:
        entries = [str(part).strip() for part in setting]
    if not entries or any(not entry for entry in entries):
        raise SettingError(f"{{device}} {setting!r} has an empty entry: give {DEVICE_EXAMPLES}", field="device")
    for word in (AUTO, ALL):
        if len(entries) > 1 and word in (entry.lower() for entry in entries):
            raise SettingError(f"{{device}} {setting!r}: {word} stands alone, it is not a device of a list; give {word} alone, "
                               "or name the devices (cuda:0,cuda:1)", field="device")
    if len(entries) == 1 and entries[0].lower() == AUTO:
        return Placement()
    for entry in entries:
        check_one_device(entry)
    if len(entries) == 1:
        return Placement(entries[0])
    return Placement(None, tuple(entries))


def cuda_devices() -> list[str]:
    """Every CUDA device torch sees (``--device all``); refused where there is none."""
    import torch

    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if count == 0:
        raise SettingError(f"{{device}} all: torch {torch.__version__} sees no CUDA device here; use {{device}} cpu (or cpu,cpu for "
                        f"two CPU processes), or {{device}} auto", field="device")
    return [f"cuda:{index}" for index in range(count)]


def check_one_device(device: str) -> None:
    """Refuse a device this torch cannot use, before a model is loaded onto it (torch would assert)."""
    if device in ("cpu", AUTO):
        return
    import torch

    try:
        parsed = torch.device(device)
    except (RuntimeError, ValueError, TypeError):
        raise SettingError(f"{{device}} {device!r} is not a device torch knows: give {DEVICE_EXAMPLES}", field="device") from None
    kind = parsed.type
    if kind == "cuda" and not torch.cuda.is_available():
        raise SettingError(f"{{device}} {device}: this torch has no usable CUDA (torch {torch.__version__}); use {{device}} cpu or auto", field="device")
    if kind == "cuda" and parsed.index is not None and parsed.index >= torch.cuda.device_count():
        raise SettingError(f"{{device}} {device}: this machine has {torch.cuda.device_count()} CUDA device(s), cuda:0 to "
                        f"cuda:{torch.cuda.device_count() - 1}", field="device")
    if kind == "mps" and not torch.backends.mps.is_available():
        raise SettingError(f"{{device}} {device}: MPS is not available here; use {{device}} cpu or auto", field="device")


def one_device(setting: str | Sequence[str] | None, why: str) -> str | None:
    """The one device of ``setting`` (None: the library's choice); a list is refused with ``why``."""
    chosen = placement(setting)
    if chosen.pooled:
        raise SettingError(f"{{device}} {','.join(chosen.devices)}: {why}; give one device (or auto)", field="device")
    return chosen.device


def official_device(setting: str | Sequence[str] | None, why: str) -> str:
    """The one device of the official code's torch loops: ``auto`` is what the official code takes, CUDA when torch
    sees one, else the CPU; a list is refused with ``why``."""
    chosen = one_device(setting, why)
    if chosen is not None:
        return chosen
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def merged_setting(device: str | Sequence[str] | None, devices: Sequence[str] | None) -> str | Sequence[str] | None:
    """One device setting from a loader's two options: ``devices`` (a sweep's list) wins over ``device``."""
    return list(devices) if devices else device


class DevicePool:
    """sentence-transformers' multi-process pool over ``devices`` for a class holding a SentenceTransformer as
    ``model``: started on first use, stopped by ``close`` (and at exit)."""

    model: Any
    devices: Sequence[str] | None
    _pool: dict | None = None

    def _pool_option(self) -> dict:
        """{"pool": the started pool} when encoding on several devices, else {}."""
        if not self.devices:
            return {}
        if self._pool is None:
            import atexit

            self._pool = self.model.start_multi_process_pool(target_devices=list(self.devices))
            atexit.register(self.close)
        return {"pool": self._pool}

    def close(self) -> None:
        """Stop the multi-process pool, if one was started."""
        if self._pool is not None:
            pool, self._pool = self._pool, None
            self.model.stop_multi_process_pool(pool)


# --- dtype ----------------------------------------------------------------------------------------------------------------


def check_dtype(dtype: str | None) -> str:
    """``dtype`` when it is one of DTYPES (None: auto); else refused naming the choices."""
    if dtype is None:
        return AUTO
    if not isinstance(dtype, str) or dtype not in DTYPES:
        raise SettingError(f"{{dtype}} {dtype!r} is not a compute dtype: use one of {', '.join(DTYPES)}", field="dtype")
    return dtype


def dtype_option(value: Any) -> dict[str, Any]:
    """from_pretrained's dtype keyword and ``value``: ``dtype`` since transformers 4.56, ``torch_dtype`` before (an
    older transformers ignores the newer name and would load float32)."""
    import transformers
    from packaging.version import Version

    return {"dtype" if Version(transformers.__version__) >= Version("4.56") else "torch_dtype": value}


def dtype_kwargs(dtype: str) -> dict[str, Any]:
    """What sentence-transformers' constructors take to load the weights in ``dtype`` ({} for auto)."""
    return {} if check_dtype(dtype) == AUTO else {"model_kwargs": dtype_option(dtype)}


def auto_dtype(source: str, revision: str | None = None) -> str:
    """The dtype a model loads in when none is asked for: the checkpoint's own from transformers 5 (its default
    ``dtype="auto"``), float32 before; a result is labelled with a chosen dtype only when it differs from this."""
    import transformers
    from packaging.version import Version

    if Version(transformers.__version__) < Version("5"):
        return "float32"
    return checkpoint_dtype(source, revision)


def checkpoint_dtype(source: str, revision: str | None = None) -> str:
    """The dtype a checkpoint records in its config (``dtype``, or the older ``torch_dtype``); float32, what transformers
    builds a model in, when it records none or none can be read."""
    try:
        from transformers import AutoConfig

        config = AutoConfig.from_pretrained(source, revision=revision)
    except (OSError, ValueError):
        return "float32"
    recorded = getattr(config, "dtype", None) or vars(config).get("torch_dtype")  # the older name, unwarned
    return str(recorded).removeprefix("torch.") if recorded not in (None, AUTO) else "float32"


def dtype_label(dtype: str, own: str) -> str:
    """The result-name label of a dtype chosen over a checkpoint's own (``+bfloat16``); "" for auto or the same one."""
    return "" if dtype in (AUTO, own) else f"+{dtype}"


# --- reporting --------------------------------------------------------------------------------------------------------------


def device_of(model: object) -> str | None:
    """Where a loaded model runs, as torch names it ("cpu", "cuda:0"; a pool: its devices joined by commas), read from
    the object or what it wraps (``model``, an official profile's ``recipe``); None when none says (an endpoint, a
    user's own object)."""
    level, found = [model], []
    for _ in range(3):
        found += level
        level = [inner for node in level for inner in (getattr(node, "recipe", None), getattr(node, "model", None))
                 if inner is not None]
    for node in found:
        pooled = getattr(node, "devices", None)
        if isinstance(pooled, (list, tuple)) and len(pooled) > 1:
            return ",".join(str(device) for device in pooled)
    for node in found:
        device = getattr(node, "device", None)
        if device is not None and not callable(device) and type(device).__name__ in ("device", "str"):
            return str(device)
    return None


def report_device(what: str, model: object, *, quiet: bool = False) -> str | None:
    """One line on stderr saying where ``what`` (a model's name) runs, unless ``quiet``; returns the device."""
    device = device_of(model)
    if device is not None and not quiet:
        print(f"r2med: {what} runs on {device}", file=sys.stderr, flush=True)
    return device
