"""The host libraries' internals this package relies on, in one place, behind version checks.

mteb has no public way to add tasks and benchmarks to its registries, and ir_datasets none to replace a
registered id; both are done through their private attributes, named only here. An unsupported host
version fails loudly at registration, naming the versions this release supports.
"""

from __future__ import annotations

import importlib
from importlib.metadata import PackageNotFoundError, version
from typing import Any

SUPPORTED = {"mteb": ((2, 16), (3, 0)), "ir_datasets": ((0, 5, 11), (0, 7))}  # [lowest, first unsupported)


def _parts(text: str) -> tuple[int, ...]:
    numbers = []
    for part in text.split("."):
        digits = "".join(ch for ch in part if ch.isdigit())
        if not digits:
            break
        numbers.append(int(digits))
    return tuple(numbers)


def installed_version(package: str) -> str | None:
    try:
        return version(package)
    except PackageNotFoundError:
        return None


def check_host_version(package: str, found: str | None = None) -> str:
    """The installed version of ``package`` (mteb, ir_datasets), refused when this release does not support it."""
    found = found if found is not None else installed_version(package)
    low, high = SUPPORTED[package]
    if found is None or not (low <= _parts(found) < high):
        bounds = f">={'.'.join(map(str, low))},<{'.'.join(map(str, high))}"
        raise RuntimeError(f"r2med-plugin supports {package}{bounds}, found {found or 'none'}; install a supported "
                           f"{package} (pip install '{package}{bounds}') or an r2med-plugin release for {package} {found}")
    return found


# --- mteb ------------------------------------------------------------------------------------------------------


def mteb_registries() -> tuple[Any, dict, Any]:
    """(mteb.get_tasks module, its task registry dict, the benchmark registry builder), shape-checked."""
    check_host_version("mteb")
    # mteb re-exports functions under its modules' names (mteb.get_tasks is a function): go by module path.
    tasks_module = importlib.import_module("mteb.get_tasks")
    benchmark_module = importlib.import_module("mteb.benchmarks.get_benchmark")
    registry = getattr(tasks_module, "_TASKS_REGISTRY", None)
    task_list = getattr(tasks_module, "TASK_LIST", None)
    build_benchmarks = getattr(benchmark_module, "_build_registry", None)
    if not isinstance(registry, dict) or not isinstance(task_list, tuple) or not callable(build_benchmarks):
        raise RuntimeError(
            f"mteb {installed_version('mteb')} changed the shape of its task or benchmark registry "
            "(mteb.get_tasks._TASKS_REGISTRY dict, TASK_LIST tuple, mteb.benchmarks.get_benchmark._build_registry); "
            "r2med-plugin needs an update for this mteb release"
        )
    return tasks_module, registry, build_benchmarks


def mteb_dataloader(rows: Any, **options: Any) -> Any:
    """mteb's own DataLoader for texts (what its models' encode/predict take)."""
    from mteb._create_dataloaders import create_dataloader

    return create_dataloader(rows, **options)


# --- ir_datasets ------------------------------------------------------------------------------------------------


def irds_registered() -> dict:
    """ir_datasets' id -> dataset registry, shape-checked (ids are replaced there: it has no API for that)."""
    import ir_datasets

    check_host_version("ir_datasets")
    registry = ir_datasets.registry
    registered = getattr(registry, "_registered", None)
    if not isinstance(registered, dict) or not hasattr(registry, "register_pattern"):
        raise RuntimeError("ir_datasets changed the shape of its registry; r2med-plugin needs an update for this release")
    return registered
