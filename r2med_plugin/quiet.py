"""`--quiet`: no progress bar and no library message that is not an error.

The libraries under a run (transformers, huggingface_hub, sentence-transformers, datasets, mteb)
each print through their own logger and their own tqdm bars ("Loading weights", "Batches",
"Could not reach the Hub"). Their switches are environment variables read at import time and
loggers that can be raised to ERROR at any time: set both, before anything heavy is imported.
"""

from __future__ import annotations

import logging
import os
import warnings

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


_saved: list[tuple[dict[str, str | None], dict[str, int], list]] = []


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
        ))
    os.environ.update(_ENVIRONMENT)
    for name in LIBRARY_LOGGERS:
        logging.getLogger(name).setLevel(logging.ERROR)
    warnings.filterwarnings("ignore", category=UserWarning)
    warnings.filterwarnings("ignore", category=FutureWarning)
    warnings.filterwarnings("ignore", category=DeprecationWarning)


def restore_libraries() -> None:
    """Undo ``silence_libraries`` (no-op when it was not called)."""
    if not _saved:
        return
    environment, levels, filters = _saved.pop()
    for name, value in environment.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value
    for name, level in levels.items():
        logging.getLogger(name).setLevel(level)
    warnings.filters[:] = filters
