"""A lazy import hook, installed by r2med_plugin_autoload.pth at interpreter start-up.

Neither mteb nor ir_datasets discovers plugins. When one of them is first imported in a process,
this hook runs every entry point of its group (``mteb.tasks`` / ``ir_datasets.datasets``) right
after the host module has finished importing. Nothing else is imported at start-up: the hook
itself is a few lines of standard library, and it answers every other import with None at once.
"""

from __future__ import annotations

import sys

# Kept free of typing/importlib.abc imports: this module is imported at every interpreter start-up (the
# block below is read by type checkers only).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence
    from importlib.abc import Loader
    from importlib.abc import Loader as _LoaderBase
    from importlib.machinery import ModuleSpec
    from importlib.metadata import EntryPoint
    from types import ModuleType
else:
    _LoaderBase = object  # a Loader to type checkers, with no import at start-up

ENTRY_POINT_GROUPS = {"mteb": "mteb.tasks", "ir_datasets": "ir_datasets.datasets"}
DISABLE_ENV = "R2MED_PLUGIN_NO_AUTOLOAD"


# module name -> entry points whose module was still importing when its host finished (see run_entry_points)
_DEFERRED: dict[str, list[tuple[EntryPoint, str]]] = {}


def _initializing(module_name: str) -> bool:
    """Whether ``module_name`` is being imported right now (in sys.modules, its body not yet run to the end)."""
    module = sys.modules.get(module_name)
    return module is not None and bool(getattr(getattr(module, "__spec__", None), "_initializing", False))


def run_entry_points(group: str) -> None:
    """Call every entry point of ``group``; a failing plugin is reported, never breaks the host import.

    An entry point whose module is itself importing the host (``from r2med_plugin.integrations.ir_datasets import
    ...`` before ``import ir_datasets``) cannot run yet: its module is half-imported. It is kept, and runs when that
    module calls ``run_deferred(__name__)`` as its last line, so any import order registers."""
    for entry_point in group_entry_points(group):
        if _initializing(entry_point.module):
            _DEFERRED.setdefault(entry_point.module, []).append((entry_point, group))
            continue
        _call(entry_point, group)


def group_entry_points(group: str) -> list[EntryPoint]:
    """``importlib.metadata.entry_points(group=group)``, found faster: the same distributions, de-duplicated the same
    way (the first on sys.path wins), but only the entry_points.txt files that mention ``group`` are parsed. Parsing
    all ~160 files of a typical environment took ~15 ms of CPU inside every ``import mteb``; reading them, ~6 ms."""
    from importlib.metadata import distributions

    found: list[EntryPoint] = []
    seen: set[str] = set()
    for distribution in distributions():
        key = getattr(distribution, "_normalized_name", None) or distribution.name  # importlib.metadata's own key
        if key in seen:
            continue
        seen.add(key)
        text = distribution.read_text("entry_points.txt")
        if text and group in text:
            found.extend(distribution.entry_points.select(group=group))
    return found


def run_deferred(module_name: str) -> None:
    """Run the entry points kept for ``module_name`` while it was importing its host (none: nothing happens)."""
    for entry_point, group in _DEFERRED.pop(module_name, []):
        _call(entry_point, group)


def _call(entry_point: EntryPoint, group: str) -> None:
    import logging

    try:
        target = entry_point.load()
        if callable(target):
            target()
    except Exception as error:  # noqa: BLE001 - a plugin must not break `import mteb`
        logging.getLogger(__name__).warning(
            "entry point %s of group %s failed to register (%s: %s); call it by hand to see the traceback",
            entry_point.value, group, type(error).__name__, error,
        )


class _RegisterAfterExec(_LoaderBase):
    def __init__(self, loader: Loader, group: str) -> None:
        self._loader = loader
        self._group = group

    def __getattr__(self, name: str) -> object:  # get_data, get_resource_reader, ... of the real loader
        return getattr(self._loader, name)

    def create_module(self, spec: ModuleSpec) -> ModuleType | None:
        return self._loader.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        # The host reads its own package data while importing (pkgutil.get_data): give it its real loader.
        if module.__spec__ is not None:
            module.__spec__.loader = self._loader
        module.__loader__ = self._loader
        self._loader.exec_module(module)
        run_entry_points(self._group)


class HostImportHook:
    """Wraps the loader of ``mteb`` / ``ir_datasets`` so their entry points run once they are imported."""

    def find_spec(self, fullname: str, path: Sequence[str] | None = None,
                  target: ModuleType | None = None) -> ModuleSpec | None:
        group = ENTRY_POINT_GROUPS.get(fullname)
        if group is None:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None and spec.loader is not None:
                spec.loader = _RegisterAfterExec(spec.loader, group)
                return spec
        return None


def install() -> None:
    """Put the hook in front of sys.meta_path (idempotent); run the groups of hosts already imported."""
    import os

    if os.environ.get(DISABLE_ENV):
        return
    if not any(isinstance(finder, HostImportHook) for finder in sys.meta_path):
        sys.meta_path.insert(0, HostImportHook())
    for module_name, group in ENTRY_POINT_GROUPS.items():
        if module_name in sys.modules:
            run_entry_points(group)
