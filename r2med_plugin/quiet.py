"""`--quiet`: no progress bar and no library message that is not an error.

The libraries under a run (transformers, huggingface_hub, sentence-transformers, datasets, mteb)
each print through their own logger and their own tqdm bars ("Loading weights", "Batches",
"Could not reach the Hub"). Their switches are environment variables read at import time and
loggers that can be raised to ERROR at any time: set both, before anything heavy is imported.
"""

from __future__ import annotations

import logging
import os
import sys
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager

LIBRARY_LOGGERS = ("transformers", "huggingface_hub", "sentence_transformers", "datasets", "mteb", "torch", "faiss", "bm25s")
_ENVIRONMENT = {
    "TQDM_DISABLE": "1",  # every tqdm bar, whoever creates it (tqdm >= 4.66 reads TQDM_* defaults)
    "HF_HUB_DISABLE_PROGRESS_BARS": "1",
    "HF_DATASETS_DISABLE_PROGRESS_BARS": "1",
    "TRANSFORMERS_VERBOSITY": "error",
    "TRANSFORMERS_NO_ADVISORY_WARNINGS": "1",
    "HF_HUB_VERBOSITY": "error",
    "DATASETS_VERBOSITY": "error",
}


def bar_disabled(show_progress: bool) -> bool | None:
    """tqdm's ``disable`` for a bar a step shows unless told not to: None (tqdm's own rule: shown on a terminal only, as
    a piped or logged run would hold its escape codes and carriage returns; ``tqdm.auto`` shows it in a notebook) or
    True (not asked for, or ``--quiet``: silence_libraries' TQDM_DISABLE, which an explicit ``disable`` would override)."""
    return None if show_progress and not os.environ.get("TQDM_DISABLE") else True


def bar_shown(show_progress: bool) -> bool:
    """A library's ``show_progress_bar`` under the same rule as ``bar_disabled``: on a terminal or in a notebook only."""
    if bar_disabled(show_progress):
        return False
    isatty = getattr(sys.stderr, "isatty", None)
    return bool(isatty and isatty()) or type(sys.stderr).__module__.startswith("ipykernel")


_saved: list[tuple[dict[str, str | None], dict[str, int], list, dict[str, bool]]] = []


def _progress_switches() -> dict[str, tuple[Callable[[], bool], Callable[[bool], object]]]:
    """(is enabled, enable/disable) of the progress bars of transformers, huggingface_hub and datasets when already
    imported: they read their environment switches at import only (transformers' "Loading weights" bar, hub
    downloads, a dataset's map)."""
    switches: dict[str, tuple[Callable[[], bool], Callable[[bool], object]]] = {}
    if "huggingface_hub" in sys.modules:
        from huggingface_hub.utils import are_progress_bars_disabled, disable_progress_bars, enable_progress_bars

        switches["huggingface_hub"] = (lambda: not are_progress_bars_disabled(), lambda on: enable_progress_bars() if on else disable_progress_bars())
    if "datasets" in sys.modules:  # its bars (a dataset's map: mteb's "Standardizing text corpus format")
        from datasets.utils import are_progress_bars_disabled as datasets_bars_disabled
        from datasets.utils import disable_progress_bars as disable_datasets_bars
        from datasets.utils import enable_progress_bars as enable_datasets_bars

        switches["datasets"] = (lambda: not datasets_bars_disabled(),
                                lambda on: enable_datasets_bars() if on else disable_datasets_bars())
    if "transformers" in sys.modules:
        from transformers.utils import logging as transformers_logging

        switches["transformers"] = (
            transformers_logging.is_progress_bar_enabled,
            lambda on: transformers_logging.enable_progress_bar() if on else transformers_logging.disable_progress_bar(),
        )
    return switches


def silence_libraries() -> None:
    """Silence progress bars and non-error messages of the libraries a run goes through (errors still print).

    ``restore_libraries`` undoes it (the CLI calls it when a command returns, so that in-process callers
    such as tests get their environment back).
    """
    if not _saved:
        _saved.append((
            {name: os.environ.get(name) for name in _ENVIRONMENT},
            {name: logging.getLogger(name).level for name in LIBRARY_LOGGERS},
            list(warnings.filters),
            {name: is_enabled() for name, (is_enabled, _) in _progress_switches().items()},
        ))
    os.environ.update(_ENVIRONMENT)
    for _, switch in _progress_switches().values():
        switch(False)
    for name in LIBRARY_LOGGERS:
        logging.getLogger(name).setLevel(logging.ERROR)
    warnings.filterwarnings("ignore", category=UserWarning)
    warnings.filterwarnings("ignore", category=FutureWarning)
    warnings.filterwarnings("ignore", category=DeprecationWarning)


def restore_libraries() -> None:
    """Undo ``silence_libraries`` (no-op when it was not called)."""
    if not _saved:
        return
    environment, levels, filters, bars = _saved.pop()
    for name, value in environment.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value
    for name, level in levels.items():
        logging.getLogger(name).setLevel(level)
    # typeshed declares warnings.filters a Sequence; it is the list the warnings module reads, restored in place
    warnings.filters[:] = filters  # type: ignore[index]
    switches = _progress_switches()
    for name, enabled in bars.items():  # a library imported while silenced keeps what its import read
        if enabled and name in switches:
            switches[name][1](True)


@contextmanager
def silenced(quiet: bool = True) -> Iterator[None]:
    """``silence_libraries`` for the duration of a block (a sweep job), then back as before; nothing when not quiet.
    Inside an already silenced command it leaves the silence to the command."""
    if not quiet or _saved:
        if quiet:
            silence_libraries()
        yield
        return
    silence_libraries()
    try:
        yield
    finally:
        restore_libraries()


@contextmanager
def no_loading_bar() -> Iterator[None]:
    """transformers' "Loading weights" bar off while a model loads (a bar for a step of a second that the user did not
    ask about, printed between our own lines), then as it was."""
    import transformers  # noqa: F401  (so that its switch is known)

    is_enabled, switch = _progress_switches()["transformers"]
    was = is_enabled()
    switch(False)
    try:
        yield
    finally:
        switch(was)


@contextmanager
def no_library_bars() -> Iterator[None]:
    """The progress bars of the libraries already imported (``_progress_switches``) off for the duration of a block,
    then as they were: for output that is not a terminal, where a bar is only escape codes in a file."""
    switches = _progress_switches()
    was = {name: is_enabled() for name, (is_enabled, _) in switches.items()}
    for _, switch in switches.values():
        switch(False)
    try:
        yield
    finally:
        for name, (_, switch) in switches.items():
            switch(was[name])
