"""The host libraries' internals this package relies on, in one place, behind version checks.

mteb has no public way to add tasks and benchmarks to its registries, and ir_datasets none to replace a
registered id; both are done through their private attributes, named only here. An unsupported host
version fails loudly at registration, naming the versions this release supports. Nor does mteb tell a task
where its result will be saved: that is read from the frame of its private ``_evaluate_task``, here too,
and only on a supported mteb.
"""

from __future__ import annotations

import importlib
import inspect
import sys
from collections.abc import Callable
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
    """The version of ``package``: its own ``__version__`` once it is imported (mteb and ir_datasets set it; reading
    the install metadata instead costs ~7 ms a call, inside every ``import mteb``), else the install metadata's."""
    found = getattr(sys.modules.get(package), "__version__", None)
    if isinstance(found, str):
        return found
    try:
        return version(package)
    except PackageNotFoundError:
        return None


def is_supported(package: str, found: str | None = None) -> bool:
    """Whether ``found`` (default: the installed version of ``package``) is one this release supports."""
    found = found if found is not None else installed_version(package)
    low, high = SUPPORTED[package]
    return found is not None and low <= _parts(found) < high


def check_host_version(package: str, found: str | None = None) -> str:
    """The installed version of ``package`` (mteb, ir_datasets), refused when this release does not support it."""
    found = found if found is not None else installed_version(package)
    low, high = SUPPORTED[package]
    if found is None or not is_supported(package, found):
        bounds = f">={'.'.join(map(str, low))},<{'.'.join(map(str, high))}"
        raise RuntimeError(f"r2med-plugin supports {package}{bounds}, found {found or 'none'}; install a supported "
                           f"{package} (pip install '{package}{bounds}') or an r2med-plugin release for {package} {found}")
    return found


# --- mteb ------------------------------------------------------------------------------------------------------

MTEB_BENCHMARK_MODULE = "mteb.benchmarks.get_benchmark"  # holds _build_registry, mteb's cached benchmark registry


def mteb_registries() -> tuple[Any, dict, Any]:
    """(mteb.get_tasks module, its task registry dict, the benchmark registry builder), shape-checked."""
    check_host_version("mteb")
    # mteb re-exports functions under its modules' names (mteb.get_tasks is a function): go by module path.
    tasks_module = importlib.import_module("mteb.get_tasks")
    benchmark_module = importlib.import_module(MTEB_BENCHMARK_MODULE)
    registry = getattr(tasks_module, "_TASKS_REGISTRY", None)
    task_list = getattr(tasks_module, "TASK_LIST", None)
    build_benchmarks = getattr(benchmark_module, "_build_registry", None)
    cached = callable(build_benchmarks) and callable(getattr(build_benchmarks, "cache_info", None))
    if not isinstance(registry, dict) or not isinstance(task_list, tuple) or not cached:
        raise RuntimeError(
            f"mteb {installed_version('mteb')} changed the shape of its task or benchmark registry "
            "(mteb.get_tasks._TASKS_REGISTRY dict, TASK_LIST tuple, "
            "mteb.benchmarks.get_benchmark._build_registry cached function); "
            "r2med-plugin needs an update for this mteb release"
        )
    return tasks_module, registry, build_benchmarks


class _ExtendedBenchmarkRegistry:
    """Stands in for mteb's cached ``_build_registry``: builds mteb's registry (once, mteb's cache), then lets each
    plugin's extender add its benchmarks to it (each extender is idempotent)."""

    def __init__(self, build: Any) -> None:
        self.build = build
        self.extenders: dict[str, Callable[[dict], None]] = {}

    def __call__(self) -> dict:
        registry = self.build()
        for extend in self.extenders.values():
            extend(registry)
        return registry

    def __getattr__(self, name: str) -> Any:  # cache_clear, cache_info of mteb's lru_cache
        return getattr(self.build, name)


def wrap_benchmark_registry(owner: str, extend: Callable[[dict], None]) -> None:
    """Have ``extend(registry)`` add ``owner``'s benchmarks to mteb's benchmark registry whenever mteb builds or reads
    it (mteb.get_benchmark(s), ``mteb run -b``, ResultCache), not before: building it imports every mteb benchmark.
    Idempotent; when mteb has built the registry already, ``extend`` runs now."""
    _, _, build = mteb_registries()
    module = importlib.import_module(MTEB_BENCHMARK_MODULE)
    wrapper = build if isinstance(build, _ExtendedBenchmarkRegistry) else _ExtendedBenchmarkRegistry(build)
    wrapper.extenders[owner] = extend
    vars(module)["_build_registry"] = wrapper  # mteb's private builder, replaced by one that extends its registry
    if wrapper.build.cache_info().currsize:  # mteb's registry exists already: extend it now
        wrapper()


# The mteb function that runs one task and holds, as its locals, the ResultCache and ModelMeta the result is saved with.
MTEB_EVALUATE_MODULE, MTEB_EVALUATE_FUNCTION = "mteb.evaluate", "_evaluate_task"


def mteb_running_evaluation() -> tuple[Any, Any] | None:
    """(ResultCache, ModelMeta) of the ``mteb.evaluate`` call that runs the current task; None when there is no such
    call (``task.evaluate(...)`` called directly), it saves nothing (``cache=None``), or the installed mteb is not a
    supported one (its private function may differ: then nothing is guessed)."""
    if not is_supported("mteb"):
        return None
    frame = inspect.currentframe()
    try:
        while frame is not None:
            if frame.f_code.co_name == MTEB_EVALUATE_FUNCTION and frame.f_globals.get("__name__") == MTEB_EVALUATE_MODULE:
                cache, meta = frame.f_locals.get("cache"), frame.f_locals.get("model_meta")
                if cache is None or meta is None or not hasattr(cache, "get_task_result_path"):
                    return None
                return cache, meta
            frame = frame.f_back
        return None
    finally:
        del frame  # a frame held in a local keeps every caller's locals alive


def mteb_dataloader(rows: Any, **options: Any) -> Any:
    """mteb's own DataLoader for texts (what its models' encode/predict take)."""
    from mteb._create_dataloaders import create_dataloader

    return create_dataloader(rows, **options)


# mteb's wrapper of a sentence-transformers model and its prompt resolution (private: shape-checked before use)
MTEB_SENTENCE_TRANSFORMER_MODULE = "mteb.models.sentence_transformer_wrapper"


def mteb_sentence_transformer(model: Any, task_metadata: Any, kind: str) -> tuple[Any, str | None] | None:
    """(the SentenceTransformer inside, the prompt mteb resolves for the task and ``kind``) when ``model`` is mteb's
    ``SentenceTransformerEncoderWrapper`` with that class's own ``encode`` (which hands its texts and that prompt to
    ``encode_query`` / ``encode_document``), on a supported mteb whose wrapper module has the expected shape; None
    otherwise (the model keeps its own encode)."""
    if not is_supported("mteb"):
        return None
    module = importlib.import_module(MTEB_SENTENCE_TRANSFORMER_MODULE)
    wrapper = getattr(module, "SentenceTransformerEncoderWrapper", None)
    resolve = getattr(module, "_resolve_prompt", None)
    if wrapper is None or not callable(resolve) or not isinstance(model, wrapper) or type(model).encode is not wrapper.encode:
        return None
    if not hasattr(model, "model_prompts"):
        return None
    from mteb.types import PromptType

    prompt_type = PromptType.query if kind == "query" else PromptType.document
    try:
        prompt = resolve(model.model_prompts, task_metadata, prompt_type)
    except TypeError:  # another signature than (model_prompts, task_metadata, prompt_type): keep mteb's encode
        return None
    return model.model, prompt


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
