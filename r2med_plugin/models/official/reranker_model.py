"""The three rerankers of the official code, with its input format and scoring: ``--rerank official:<name>``.

The official ``RerankerModel`` (src/utils.py of R2MED/R2MED@62b7074), loaded by src/eval_reranker.py, has three
modes; each is a profile here, and the published checkpoints are those of eval_reranker.py's ``model_path_dict``:

============  =====  ===========================================================  ==========================
name          mode   checkpoint                                                   scoring
============  =====  ===========================================================  ==========================
rankllama     llama  LoRA castorini/rankllama-v1-7b-lora-passage on                one pair at a time:
                     meta-llama/Llama-2-7b-hf (sequence classification, 1 label)  ("query: q", "document: d")
bge-reranker  bge    BAAI/bge-reranker-v2-m3                                      pairs, padded, logits.view(-1)
monobert      mono   castorini/monobert-large-msmarco                             (queries, passages), logit 1
============  =====  ===========================================================  ==========================

Every mode tokenizes with ``max_length=512`` (eval_reranker.py passes 1024 only when the name is "llama", which
none of its names is) and truncates "longest_first": bge and mono ask for it; llama mode gives ``max_length``
without ``truncation``, which transformers treats as "longest_first" (with a warning), so it is asked for here.
RankLLaMA is loaded as the official code loads it: the base's tokenizer, ``AutoModelForSequenceClassification``
of the base with ``num_labels=1``, the adapter through ``peft.PeftModel.from_pretrained(...).merge_and_unload()``;
its score is ``logits[0][0]``. The official code loads RankLLaMA in float16 (on its GPUs) and the others in
float32: those are the defaults here, and ``dtype=`` (Python API) changes them (float32 for a CPU, or for a
comparison to 1e-5).

Names:

- ``official:rankllama``, ``official:bge-reranker``, ``official:monobert``: the published checkpoints. Results are
  filed as ``<checkpoint>+official-<name>`` (never over the same weights loaded through mteb or
  sentence-transformers), and the official JSON carries the short name as ``model_name``; other weights keep their
  own name there (a local folder is named ``<folder>+local`` where it would read as a hub id).
- ``official:<name>@<checkpoint>``: the same recipe on other weights, a folder or a hub id; for rankllama the
  checkpoint is a LoRA adapter, and its base is the adapter's ``base_model_name_or_path`` (adapter_config.json),
  or ``official:rankllama@<adapter>+<base>`` names it.
- ``castorini/rankllama-*`` (any RankLLaMA LoRA on the hub): as ``official:rankllama@<that id>``.

``--rerank-revision`` (``revision``) is the checkpoint's hub revision (the adapter's for rankllama).
RankLLaMA needs peft: ``pip install 'r2med-plugin[rankllama]'``. The names are resolved by the ``official`` loader
(r2med_plugin.models.official.loader), which also serves the official dense retrievers.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from r2med_plugin.errors import UserError
from r2med_plugin.models.placement import dtype_option
from r2med_plugin.models.protocols import PairScorerBase
from r2med_plugin.models.registry import cached_hub_commit, files_stamp

NAME = SCHEME = "official"
MAX_LENGTH = 512  # what src/eval_reranker.py passes for each of its three names
RANKLLAMA_PREFIX = "castorini/rankllama-"


@dataclass(frozen=True)
class RerankerProfile:
    name: str  # the official short name (eval_reranker.py's reranker_name)
    mode: str  # RerankerModel's mode: llama, bge or mono
    checkpoint: str  # the published weights (the LoRA adapter for llama)
    base: str | None  # the base model the adapter goes on (llama only)
    dtype: str  # what the official code loads the weights in


PROFILES = {
    "rankllama": RerankerProfile("rankllama", "llama", "castorini/rankllama-v1-7b-lora-passage", "meta-llama/Llama-2-7b-hf", "float16"),
    "bge-reranker": RerankerProfile("bge-reranker", "bge", "BAAI/bge-reranker-v2-m3", None, "float32"),
    "monobert": RerankerProfile("monobert", "mono", "castorini/monobert-large-msmarco", None, "float32"),
}
MODES = ("llama", "bge", "mono")
MODE_PROFILES = {profile.mode: name for name, profile in PROFILES.items()}


def _usage() -> str:
    return ("use official:rankllama, official:bge-reranker or official:monobert, or the same recipe on other weights: "
            "official:<name>@<checkpoint folder or hub id> (official:rankllama@<adapter>[+<base>])")


def parse(name: str) -> tuple[RerankerProfile, str, str | None]:
    """(profile, checkpoint, base) of an ``official:`` name or a ``castorini/rankllama-*`` id; ValueError otherwise."""
    if name.startswith(RANKLLAMA_PREFIX):
        return PROFILES["rankllama"], name, None
    rest = name.split(":", 1)[1] if name.startswith(f"{SCHEME}:") else name
    short, at, weights = rest.partition("@")
    profile = PROFILES.get(short)
    if profile is None:
        raise UserError(f"{name!r} is not an official reranker: {_usage()}")
    if not at:
        return profile, profile.checkpoint, profile.base
    checkpoint, plus, base = weights.partition("+") if profile.mode == "llama" else (weights, "", "")
    if not checkpoint.strip() or (plus and not base.strip()):
        raise UserError(f"{name!r} names no weights after '@' (or no base after '+'): {_usage()}")
    return profile, checkpoint, base or None




def weights_stamp(name_or_path: str, revision: str | None) -> str:
    folder = Path(name_or_path).expanduser()
    if folder.is_dir():
        return f"path:{files_stamp(folder)}"
    return f"hub:{revision or cached_hub_commit(name_or_path, 'model', 'main') or 'unresolved'}"


def adapter_base(adapter: str, revision: str | None = None) -> str:
    """The base model a LoRA adapter names (``base_model_name_or_path`` of its adapter_config.json)."""
    folder = Path(adapter).expanduser()
    if folder.is_dir():
        config_path = folder / "adapter_config.json"
        if not config_path.is_file():
            raise UserError(f"{adapter} has no adapter_config.json: it is not a LoRA adapter (rankllama@ takes one)")
        config = json.loads(config_path.read_text(encoding="utf-8"))
    else:
        peft = _peft()
        config = peft.PeftConfig.from_pretrained(adapter, revision=revision).to_dict()
    base = config.get("base_model_name_or_path")
    if not base:
        raise UserError(f"the adapter {adapter} names no base model: write official:rankllama@{adapter}+<base>")
    return str(base)



def _peft():
    try:
        import peft
    except ImportError as error:
        raise ImportError("RankLLaMA (official:rankllama, castorini/rankllama-*) is a LoRA adapter and loads through peft: "
                          "pip install 'r2med-plugin[rankllama]' (or pip install 'peft>=0.10')") from error
    return peft


def _check_head(mode: str, checkpoint: str, model: Any, loading: dict[str, Any]) -> None:
    """A bge/mono checkpoint must bring its classification head (else it scores with random weights), with one
    logit (bge: ``logits.view(-1)``) or at least two (mono: logit 1)."""
    missing = [key for key in loading.get("missing_keys", []) if key]
    if missing:
        raise UserError(f"the reranker {checkpoint!r} has no trained classification head (missing {', '.join(sorted(missing)[:3])}): "
                        "it would score with random weights; give a sequence-classification checkpoint")
    labels = int(model.config.num_labels)
    if mode == "bge" and labels != 1:
        raise UserError(f"official:bge-reranker scores one logit per pair (logits.view(-1)), and {checkpoint!r} has {labels} "
                        "labels: use official:monobert for a two-label head (it scores logit 1)")
    if mode == "mono" and labels < 2:
        raise UserError(f"official:monobert scores logit 1 of a two-label head, and {checkpoint!r} has {labels} label: use "
                        "official:bge-reranker for a one-logit head")


class OfficialReranker(PairScorerBase):
    """A pair scorer (``predict(pairs) -> scores``) with the official RerankerModel's input format and scoring."""

    def __init__(self, mode: str, checkpoint: str, *, profile: str | None = None, base: str | None = None, revision: str | None = None,
                 device: str | None = "auto", batch_size: int = 32, dtype: str = "float32", max_length: int = MAX_LENGTH) -> None:
        import torch
        from transformers import AutoModelForSequenceClassification, AutoTokenizer

        from r2med_plugin.models.identity import model_revision
        from r2med_plugin.models.placement import official_device

        if mode not in MODES:
            raise UserError(f"mode must be one of {', '.join(MODES)}, got {mode!r}")
        if batch_size < 1 or max_length < 1:
            raise UserError(f"batch_size and max_length must be positive, got {batch_size} and {max_length}")
        torch_dtype = getattr(torch, dtype, None)
        if not isinstance(torch_dtype, torch.dtype):
            raise UserError(f"dtype must name a torch dtype (float16, bfloat16, float32), got {dtype!r}")
        self.mode, self.batch_size, self.max_length, self.dtype = mode, batch_size, max_length, dtype
        self.device = torch.device(official_device(device, "an official reranker scores its pairs in one process"))
        local = Path(checkpoint).expanduser().is_dir()
        hub_revision = None if local else revision
        try:
            if mode == "llama":
                peft = _peft()
                base = base or adapter_base(checkpoint, hub_revision)
                self.tokenizer = AutoTokenizer.from_pretrained(base)
                model = AutoModelForSequenceClassification.from_pretrained(base, num_labels=1, **dtype_option(torch_dtype))
                model = peft.PeftModel.from_pretrained(model, checkpoint, revision=hub_revision).merge_and_unload()
            else:
                self.tokenizer = AutoTokenizer.from_pretrained(checkpoint, revision=hub_revision)
                model, loading = AutoModelForSequenceClassification.from_pretrained(
                    checkpoint, revision=hub_revision, output_loading_info=True, **dtype_option(torch_dtype))
                _check_head(mode, checkpoint, model, loading)
        except OSError as error:
            raise UserError(f"could not load the reranker {checkpoint!r}{f' on {base!r}' if base else ''} ({error}); give local "
                            "folders or hub names in the Hugging Face cache (HF_HUB_OFFLINE=1 needs them cached)") from error
        self.model = model.to(self.device).eval()
        self.base = base
        name, reported, _ = model_revision(checkpoint, revision)
        if local and "/" in name and not name.startswith(("/", ".")):
            name = f"{name}+local"  # a folder never reads as the hub id it may be named after
        # filed as <weights>+official-<name>: never over the same weights loaded another way (mteb, sentence-transformers)
        self.name = f"{name}+official-{profile or MODE_PROFILES[mode]}"
        if base is not None:
            _, base_reported, _ = model_revision(base, None)
            reported = f"{reported}+{base_reported}"
        self.revision = reported

    def predict(self, pairs: Sequence[tuple[str, str]]) -> np.ndarray:
        import torch

        pairs = [(str(query), str(document)) for query, document in pairs]
        scores: list[float] = []
        with torch.no_grad():
            if self.mode == "llama":  # one pair at a time, unpadded, as the official loop
                for query, document in pairs:
                    inputs = self.tokenizer(f"query: {query}", f"document: {document}", return_tensors="pt",
                                            truncation="longest_first", max_length=self.max_length).to(self.device)
                    scores.append(self.model(**inputs).logits[0][0].float().item())
            else:
                for start in range(0, len(pairs), self.batch_size):
                    chunk = pairs[start : start + self.batch_size]
                    queries, documents = [query for query, _ in chunk], [document for _, document in chunk]
                    inputs = self.tokenizer(queries, documents, return_tensors="pt", padding=True, truncation=True,
                                            max_length=self.max_length).to(self.device)
                    logits = self.model(**inputs).logits.float()
                    scores += (logits.view(-1) if self.mode == "bge" else logits[:, 1]).cpu().tolist()
        return np.asarray(scores, dtype=np.float64)

