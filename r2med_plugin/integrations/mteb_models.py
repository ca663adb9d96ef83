"""mteb's model registry as a model loader: ``--retriever NAME`` / ``--rerank NAME`` load NAME the way
``mteb run -m NAME`` does whenever mteb has a ModelMeta for it (its loader, prompts, instructions,
pooling, revision), and the result is filed under mteb's model name and revision.

``MtebEncoder`` implements the plugin's Encoder protocol (``encode(texts, *, kind, prompt=None)``,
``cache_identity``) over mteb's ``encode(DataLoader, task_metadata=..., prompt_type=...)``, fed exactly as
mteb's retrieval evaluator feeds it (``create_dataloader`` over id/text rows, split "test", subset
"default"). Prompts depend on the task, so the Dense stage binds the encoder to its task first
(``for_task``): the task metadata is our registered mteb task's (its ``prompt`` is the official
instruction). Cross-encoders load as mteb's wrapper (a sentence-transformers CrossEncoder inside is
scored on raw logits, as the official reranker does) or, for mteb's own implementations, through
``MtebPairScorer``.

Registered as the ``mteb`` loader through the ``r2med_plugin.model_loaders`` entry point; mteb is
imported only when a name is resolved, never at import.
"""

from __future__ import annotations

import copy
import functools
import hashlib
import json
from collections.abc import Mapping, Sequence
from importlib.metadata import version
from typing import Any

import numpy as np

from r2med_plugin.errors import UserError
from r2med_plugin.models.checks import check_model_name
from r2med_plugin.models.fast_encode import FastEncoder, fast_encoder
from r2med_plugin.models.placement import (
    Placement,
    auto_dtype,
    check_dtype,
    dtype_label,
    dtype_option,
    merged_setting,
    one_device,
    placement,
)
from r2med_plugin.models.protocols import EncodeKind, EncoderBase
from r2med_plugin.models.registry import ModelLoaderBase, RetrieverRef, cached_hub_commit
from r2med_plugin.quiet import bar_shown

NAME = "mteb"
SPLIT, SUBSET = "test", "default"


def model_meta(name: str) -> Any | None:
    """mteb's ModelMeta for ``name`` (or for sentence-transformers/<name>, the completion sentence-transformers
    makes), None when mteb's registry has none. Never reaches the hub."""
    import warnings

    import mteb

    for candidate in (name, f"sentence-transformers/{name}") if "/" not in name else (name,):
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", DeprecationWarning)  # renamed models resolve to their new name
                return mteb.get_model_meta(candidate)
        except KeyError:
            continue
    return None


class MtebLoader(ModelLoaderBase):
    """The ``mteb`` model loader (see r2med_plugin.models.registry.ModelLoader)."""

    name = NAME
    scheme = None
    auto = True  # loader="auto": a name mteb knows is loaded through mteb

    def claim(self, name: str, revision: str | None, settings: Mapping[str, Any]) -> RetrieverRef | None:
        meta = model_meta(name)
        if meta is None:
            return None
        if settings:
            flags = ", ".join("--" + key.replace("_", "-") for key in sorted(settings))
            raise UserError(f"{flags} configure an embedding endpoint (openai:<model>); {name!r} is a model of mteb's registry: drop {flags}")
        if revision is not None and meta.revision is not None and revision != meta.revision:
            raise UserError(
                f"mteb's ModelMeta for {meta.name} pins revision {meta.revision}, not {revision}: drop --model-revision "
                f"(mteb's loader, prompts and revision), or add --loader sentence-transformers to load revision {revision} "
                "as a plain sentence-transformers model"
            )
        return RetrieverRef(name, "plugin", meta.name, meta.revision, loader=NAME)

    def stamp(self, ref: RetrieverRef) -> str:
        commit = ref.revision or cached_hub_commit(ref.source, "model", "main") or "unresolved"
        return f"mteb-{version('mteb')}:{ref.source}@{commit}"

    def load_encoder(self, ref: RetrieverRef, **options: Any) -> MtebEncoder:
        meta = _loadable(ref)
        if meta.is_cross_encoder:
            raise UserError(f"{meta.name} is a cross-encoder in mteb's registry: rerank with it (--rerank {ref.name}), "
                             "it does not embed texts for a first stage")
        placed = placement(merged_setting(options.pop("device", "auto"), options.pop("devices", None)))
        dtype = check_dtype(options.pop("dtype", "auto"))
        if placed.pooled or dtype != "auto":
            _check_sentence_transformers_wrapper(meta, placed, dtype)
        # a pool copies the model onto each of its devices itself; auto (None): mteb's loader chooses
        model = _load(meta, ref, "cpu" if placed.pooled else placed.device, dtype)
        label = dtype_label(dtype, _own_dtype(meta)) if dtype != "auto" else ""
        return MtebEncoder(model, meta, devices=list(placed.devices) if placed.pooled else None, dtype_label=label, **options)

    def load_cross_encoder(self, ref: RetrieverRef, *, device: str | None = "auto", batch_size: int = 32,
                           max_length: int | None = None) -> Any:
        meta = _loadable(ref)
        if not meta.is_cross_encoder:
            raise UserError(f"{meta.name} is an embedding model in mteb's registry, not a cross-encoder: use it as the "
                            f"first stage (--first-stage {ref.name}) and rerank with a cross-encoder")
        if max_length is not None:
            raise UserError("max_length is set by mteb's loader for models of its registry; leave it out")
        model = _load(meta, ref, one_device(device, "a cross-encoder scores its pairs in one process"))
        from r2med_plugin.integrations.mteb_pair_scorer import MtebPairScorer
        from r2med_plugin.models.cross_encoder import as_pair_scorer

        try:
            as_pair_scorer(model)  # mteb's CrossEncoderWrapper: its sentence-transformers model, raw logits
            return model
        except TypeError:
            return MtebPairScorer(model, batch_size=batch_size)  # mteb's own implementation, fed DataLoaders


LOADER = MtebLoader()


def _loadable(ref: RetrieverRef) -> Any:
    meta = model_meta(ref.source)
    if meta is None or meta.loader is None:
        raise UserError(
            f"mteb knows {ref.name!r} but has no implementation to load it (its ModelMeta has no loader); add "
            "--loader sentence-transformers to load it as a plain sentence-transformers model, if it is one"
        )
    return meta


def _st_wrappers() -> tuple[type, ...]:
    """mteb's wrappers that hold a SentenceTransformer (``.model``), build it with the loader's keyword arguments and pass
    ``encode``'s keyword arguments on to it: a multi-process pool and a dtype reach it."""
    from mteb.models.instruct_wrapper import InstructSentenceTransformerModel
    from mteb.models.sentence_transformer_wrapper import (
        SentenceTransformerEncoderWrapper,
    )

    return SentenceTransformerEncoderWrapper, InstructSentenceTransformerModel


def _check_sentence_transformers_wrapper(meta: Any, placed: Placement, dtype: str) -> None:
    """A device list or a dtype reaches an mteb model only through a wrapper that holds a SentenceTransformer."""
    loader = meta.loader
    if isinstance(loader, type) and issubclass(loader, _st_wrappers()):
        return
    what = f"--device {','.join(placed.devices)}" if placed.pooled else f"--dtype {dtype}"
    why = ("sentence-transformers' multi-process pool encodes only a SentenceTransformer" if placed.pooled
           else "only a SentenceTransformer's loader takes the compute dtype here")
    raise UserError(f"{what}: mteb loads {meta.name} with {getattr(loader, '__name__', loader)}, which wraps no "
                    f"SentenceTransformer ({why}); " + ("give one device (or auto)" if placed.pooled else "drop --dtype (auto)"))


def _own_dtype(meta: Any) -> str:
    """The dtype mteb loads a model in: its ModelMeta's ``model_kwargs`` dtype, else the checkpoint's own."""
    model_kwargs = dict((meta.loader_kwargs or {}).get("model_kwargs") or {})
    recorded = model_kwargs.get("dtype") or model_kwargs.get("torch_dtype")
    if recorded is not None and recorded != "auto":
        return str(getattr(recorded, "value", recorded)).removeprefix("torch.")
    return auto_dtype(meta.name, meta.revision)


def _load(meta: Any, ref: RetrieverRef, device: str | None, dtype: str = "auto") -> Any:
    options: dict[str, Any] = {}
    if dtype != "auto":  # merged into the ModelMeta's own model_kwargs (mteb's update would replace them)
        model_kwargs = {key: value for key, value in dict((meta.loader_kwargs or {}).get("model_kwargs") or {}).items()
                        if key not in ("dtype", "torch_dtype")}
        options["model_kwargs"] = model_kwargs | dtype_option(dtype)
    try:
        return meta.load_model(device=device, **options)
    except OSError as error:
        raise UserError(
            f"mteb could not load {meta.name} at revision {meta.revision} ({error}); it must be in the Hugging Face "
            "cache at that revision (HF_HUB_OFFLINE=1 needs it cached), or add --loader sentence-transformers"
        ) from error


class MtebEncoder(EncoderBase):
    """A model of mteb's registry as an Encoder; ``for_task(name)`` binds the task whose prompts it uses."""

    query_prompt = None  # mteb chooses the prompts (model prompts, the task's instruction)

    def __init__(self, model: Any, meta: Any, *, batch_size: int = 32, show_progress: bool = True,
                 name: str | None = None, task: str | None = None, devices: list[str] | None = None,
                 dtype_label: str = "") -> None:
        if batch_size < 1:
            raise UserError(f"batch_size must be positive, got {batch_size}")
        if name is not None:
            check_model_name(name)
        self.model = model
        self.meta = meta
        self.name = (name or meta.name) + dtype_label  # "+bfloat16": another dtype than the model's own, filed apart
        self.dtype_label = dtype_label
        self.devices = devices  # two or more: sentence-transformers' multi-process pool over the wrapped model
        self._pool: dict[str, Any] = {}  # {"pool": the started pool}: one dict, shared by the copies for_task binds
        self.revision = meta.revision or cached_hub_commit(meta.name, "model", "main") or "unknown-revision"
        self.batch_size = batch_size
        self.show_progress = show_progress
        self.task = task

    def _pool_option(self) -> dict:
        """{"pool": the started pool} when encoding on several devices (mteb passes it on to the SentenceTransformer)."""
        if not self.devices:
            return {}
        if "pool" not in self._pool:
            import atexit

            self._pool["pool"] = self.model.model.start_multi_process_pool(target_devices=self.devices)
            atexit.register(self.close)
        return {"pool": self._pool["pool"]}

    def close(self) -> None:
        """Stop the multi-process pool, if one was started (for this encoder and every copy bound to a task)."""
        if "pool" in self._pool:
            self.model.model.stop_multi_process_pool(self._pool.pop("pool"))

    def for_task(self, task: str) -> MtebEncoder:
        bound = copy.copy(self)
        bound.task = task
        return bound

    @property
    def cache_identity(self) -> str:
        """mteb's version, the ModelMeta (name, revision, loader and its settings, prompts) and the task."""
        settings = json.dumps([self.meta.name, self.meta.revision, str(getattr(self.meta, "loader", "")),
                               getattr(self.meta, "loader_kwargs", None)], sort_keys=True, default=repr)
        digest = hashlib.sha256(settings.encode("utf-8")).hexdigest()[:16]
        dtype = f"/dtype:{self.dtype_label.removeprefix('+')}" if self.dtype_label else ""  # auto: the key stays
        return f"mteb-{version('mteb')}/{digest}{dtype}/task:{self.task}"

    def task_metadata(self) -> Any:
        if self.task is None:
            raise UserError("an mteb encoder uses its task's prompts: bind one first, encoder.for_task('NanoR2MEDBiology') "
                            "(the Dense first stage does this itself)")
        import mteb

        return mteb.get_task(self.task).metadata

    def encode(self, texts: Sequence[str], *, kind: EncodeKind, prompt: str | None = None) -> np.ndarray:
        if prompt is not None:
            raise UserError(
                f"{self.name} is loaded through mteb, which applies the model's own prompts and the task's instruction; "
                "a prompt of ours would be ignored: drop --instruction (or query_prompt=), or add --loader "
                "sentence-transformers to prepend the official prompt"
            )
        fast = self.fast_encoder(kind)
        if fast is not None:
            return fast.encode(texts)
        from mteb.types import PromptType

        metadata = self.task_metadata()
        prompt_type = PromptType.query if kind == "query" else PromptType.document
        loader = self._loader(texts, kind)
        embeddings = self.model.encode(loader, task_metadata=metadata, hf_split=SPLIT, hf_subset=SUBSET, prompt_type=prompt_type,
                                       batch_size=self.batch_size, show_progress_bar=bar_shown(self.show_progress), **self._pool_option())
        if hasattr(embeddings, "detach"):
            embeddings = embeddings.detach().float().cpu().numpy()
        return np.asarray(embeddings, dtype=np.float32)

    def _loader(self, texts: Sequence[str], kind: EncodeKind) -> Any:
        """mteb's DataLoader over ``texts``, as its retrieval evaluator builds it."""
        import datasets
        from mteb._create_dataloaders import create_dataloader
        from mteb.types import PromptType

        prompt_type = PromptType.query if kind == "query" else PromptType.document
        rows = datasets.Dataset.from_dict({"id": [str(index) for index in range(len(texts))], "text": list(texts)})
        return create_dataloader(rows, task_metadata=self.task_metadata(), prompt_type=prompt_type, batch_size=self.batch_size)

    def _texts(self, texts: list[str], kind: EncodeKind) -> list[str]:
        """The texts mteb's DataLoader gives the model for ``texts`` (documents stripped, as mteb reads a corpus)."""
        return [text for batch in self._loader(texts, kind) for text in batch["text"]]

    def fast_encoder(self, kind: EncodeKind, prompt: str | None = None) -> FastEncoder | None:
        """mteb's SentenceTransformerEncoderWrapper on a GPU: its model and the prompt mteb resolves for the task, encoded
        through r2med_plugin.models.fast_encode (the tokenizer in worker processes); other models: None (mteb's encode)."""
        if prompt is not None:
            return None
        from r2med_plugin.integrations.compat import mteb_sentence_transformer

        found = mteb_sentence_transformer(self.model, self.task_metadata(), kind)
        if found is None:
            return None
        model, resolved = found
        return fast_encoder(model, kind, prompt=resolved, batch_size=self.batch_size, show_progress=self.show_progress,
                            prepare=functools.partial(self._texts, kind=kind))
