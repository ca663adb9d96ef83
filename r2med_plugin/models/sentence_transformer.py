"""The sentence-transformers family: a model loaded by sentence-transformers, encoded the way MTEB runs one
(``encode_query`` / ``encode_document``; a prompt only when asked for), identified by its weights and settings."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from r2med_plugin.errors import UserError
from r2med_plugin.models.checks import check_model_name
from r2med_plugin.models.fast_encode import FastEncoder, fast_encoder
from r2med_plugin.models.identity import PACKAGED_MODELS, encoder_settings, model_revision, packaged_model_folder
from r2med_plugin.models.placement import DevicePool, auto_dtype, check_dtype, dtype_kwargs, dtype_label, merged_setting, placement
from r2med_plugin.models.protocols import EncodeKind, EncoderBase
from r2med_plugin.quiet import bar_shown
from r2med_plugin.rules import SettingError


class SentenceTransformerEncoder(DevicePool, EncoderBase):
    """A sentence-transformers model; ``query_prompt`` is prepended to queries when given.

    ``device`` is the one device setting (r2med_plugin.models.placement): ``auto`` (default: sentence-transformers
    chooses, CUDA when there is one), one device, or a list (``"cuda:0,cuda:1"``, ``"cpu,cpu"``, ``"all"``);
    ``devices`` (a sweep's list) wins over it. Two or more devices encode with sentence-transformers' multi-process
    pool, one process per device, started on first use and stopped by ``close()`` (or at exit). The embeddings equal
    a single-process run's (to float noise). ``dtype`` (auto, float32, bfloat16, float16) is the compute dtype the
    weights load in; one other than the checkpoint's own is added to the name (``+bfloat16``).
    """

    devices: list[str] | None = None

    def __init__(
        self,
        model_name_or_path: str,
        *,
        revision: str | None = None,
        device: str | Sequence[str] | None = "auto",
        batch_size: int = 32,
        query_prompt: str | None = None,
        show_progress: bool = True,
        devices: Sequence[str] | None = None,
        name: str | None = None,
        dtype: str = "auto",
    ) -> None:
        from sentence_transformers import SentenceTransformer

        from r2med_plugin.quiet import no_loading_bar

        if name is not None:
            check_model_name(name)

        placed = placement(merged_setting(device, devices))
        dtype = check_dtype(dtype)
        self.devices = list(placed.devices) if placed.pooled else None
        self._pool = None
        source = model_name_or_path
        if model_name_or_path in PACKAGED_MODELS:
            if revision is not None:
                raise SettingError(f"{model_name_or_path} is one set of packaged weights: drop {{revision}}", field="revision")
            source = str(packaged_model_folder(model_name_or_path))
        try:
            with no_loading_bar():
                # a pool copies the model onto each of its devices itself; auto: sentence-transformers chooses
                self.model = SentenceTransformer(source, revision=revision, device="cpu" if placed.pooled else placed.device,
                                                 **dtype_kwargs(dtype))
        except OSError as error:
            raise UserError(
                f"could not load the model {model_name_or_path!r} ({error}); give a local folder or a hub name "
                "that is in the Hugging Face cache (HF_HUB_OFFLINE=1 needs it cached)"
            ) from error
        # Hub: the commit loaded (as mteb records it); local folder: a fingerprint of its files.
        self.name, self.revision, self._identity = model_revision(model_name_or_path, revision)
        self.name = name or self.name  # the revision still comes from the weights: a name never hides other weights
        self.dtype = dtype
        self.name += dtype_label(dtype, auto_dtype(source, revision) if dtype != "auto" else dtype)
        self.batch_size = batch_size
        self.query_prompt = query_prompt
        self.show_progress = show_progress

    @property
    def cache_identity(self) -> str:
        """Weights and files (commit or fingerprint) plus the in-memory settings: part of the embedding cache key."""
        return f"{self._identity}/{encoder_settings(self.model)}"

    def fast_encoder(self, kind: EncodeKind, prompt: str | None = None) -> FastEncoder | None:
        """On a GPU (one device): ``encode`` through r2med_plugin.models.fast_encode, the tokenizer in worker processes."""
        if self.devices:
            return None
        if prompt is None and kind == "query":
            prompt = self.query_prompt
        return fast_encoder(self.model, kind, prompt=prompt, batch_size=self.batch_size, show_progress=self.show_progress)

    def encode(self, texts: Sequence[str], *, kind: EncodeKind, prompt: str | None = None) -> np.ndarray:
        """Embeddings of ``texts``; ``prompt`` (queries: default ``query_prompt``) is prepended by sentence-transformers."""
        fast = self.fast_encoder(kind, prompt)
        if fast is not None:
            return fast.encode(texts)
        encode = self.model.encode_query if kind == "query" else self.model.encode_document
        if prompt is None and kind == "query":
            prompt = self.query_prompt
        return np.asarray(
            encode(list(texts), prompt=prompt, batch_size=self.batch_size, convert_to_numpy=True, show_progress_bar=bar_shown(self.show_progress), **self._pool_option())
        )
