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


def silence_libraries() -> None:
    """Silence progress bars and non-error messages of the libraries a run goes through (errors still print)."""
    os.environ.update(_ENVIRONMENT)
    for name in LIBRARY_LOGGERS:
        logging.getLogger(name).setLevel(logging.ERROR)
    warnings.filterwarnings("ignore", category=UserWarning)
    warnings.filterwarnings("ignore", category=FutureWarning)
    warnings.filterwarnings("ignore", category=DeprecationWarning)
