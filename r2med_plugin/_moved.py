"""Names that moved or were renamed stay importable from their old path for a while, with a warning.

A module keeps its old names with one line, ``__getattr__ = Moved(__name__, {"old_name": "new.module.new_name"})``:
Python calls a module's ``__getattr__`` only for names the module does not define (PEP 562), so each old
name warns (DeprecationWarning, naming the old and the new import path) and returns the object from its
new home. Nothing is copied, so ``isinstance`` and identity checks see the one object.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from importlib import import_module

DEPRECATED = "is deprecated; import"  # in every warning, so that a test can tell ours apart


def same_names(module: str, names: Iterable[str]) -> dict[str, str]:
    """``{name: "<module>.<name>"}`` for names that moved to ``module`` under their own name."""
    return {name: f"{module}.{name}" for name in names}


@dataclass(frozen=True)
class Moved:
    """A module-level ``__getattr__`` for ``module``: each old name -> its new dotted path ("pkg.module.name")."""

    module: str
    targets: Mapping[str, str]

    def __call__(self, name: str) -> object:
        target = self.targets.get(name)
        if target is None:
            raise AttributeError(f"module {self.module!r} has no attribute {name!r}")
        new_module, _, new_name = target.rpartition(".")
        # stacklevel 2: the frame that imported or looked up the old name
        warnings.warn(f"{self.module}.{name} {DEPRECATED} {target} instead", DeprecationWarning, stacklevel=2)
        return getattr(import_module(new_module), new_name)
