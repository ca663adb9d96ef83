"""Encoding with the tokenizer off the critical path: a sentence-transformers model fed by a DataLoader.

sentence-transformers tokenizes each batch in the calling thread, between the device's forward passes, so a GPU waits
for the tokenizer a third of the time in float32 and most of it in bfloat16. Here the model's own preprocessing
(``SentenceTransformer.preprocess``: the prompt, truncation, the tokenizer) runs as the ``collate_fn`` of a
``torch.utils.data.DataLoader`` with worker processes and pinned memory, a few batches ahead of the forward pass.

Everything else is what ``encode_query`` / ``encode_document`` do: the prompt (the one given, else the model's
``query`` / ``document`` prompt, else its default prompt name), the router task (``task="query"`` / ``"document"``),
truncation (``max_seq_length``, ``truncate_dim``), the modules' own normalisation, the texts sorted by length as
sentence-transformers sorts them (longest first; interleaved where the model packs inputs without padding), so the
batches are the same ones and the embeddings equal its own, returned in the original order as float32.

Used only on CUDA devices (on a CPU the worker processes compete with torch for the same cores) and only where it can
reproduce the model's encode: sentence-transformers 6 or later, a plain ``SentenceTransformer`` (no subclass with an
``encode`` of its own), one device, no device map, the ``fork`` start method (the workers share the model's tokenizer
without pickling the model) and a process allowed to start others (not a daemonic pool worker). Anything else keeps
the model's own ``encode``. One ``FastEncoder`` run starts one worker pool, however many checkpointed chunks it feeds
(``r2med_plugin.retrieval.dense``).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Generator, Sequence
from contextlib import closing
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from r2med_plugin.quiet import bar_disabled

FastKind = Literal["query", "document"]

# Tests set this to a number of worker processes to run the fast path on a CPU device too (it is off on CPUs).
_FORCE_WORKERS: int | None = None
_MAX_WORKERS = 10  # tokenizing ~0.5 ms per text in each worker keeps a GPU busy at several thousand texts/s
_PREFETCH_BATCHES = 4  # batches each worker prepares ahead
_MIN_SENTENCE_TRANSFORMERS = (6, 0)  # preprocess(texts, prompt=...) and the prompt resolution used here


def _version(text: str) -> tuple[int, ...]:
    numbers: list[int] = []
    for part in text.split(".")[:2]:
        digits = "".join(ch for ch in part if ch.isdigit())
        if not digits:
            break
        numbers.append(int(digits))
    return tuple(numbers)


def default_workers() -> int:
    """Worker processes for one encode on a GPU: the cores this process may use, less two (torch's thread and the
    pin-memory thread), between 1 and 10."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cores = os.cpu_count() or 2
    return max(1, min(_MAX_WORKERS, cores - 2))


def supported_model(model: object) -> bool:
    """Whether ``model`` is a sentence-transformers model whose encode this module reproduces."""
    import multiprocessing

    import sentence_transformers
    from sentence_transformers import SentenceTransformer

    if _version(sentence_transformers.__version__) < _MIN_SENTENCE_TRANSFORMERS:
        return False
    if not isinstance(model, SentenceTransformer) or "fork" not in multiprocessing.get_all_start_methods():
        return False
    cls = type(model)
    own = ("encode", "encode_query", "encode_document", "preprocess", "forward")
    if any(getattr(cls, name, None) is not getattr(SentenceTransformer, name, None) for name in own):
        return False  # a subclass encodes its own way
    needed = ("_resolve_prompt", "_input_length", "_can_flatten_inputs", "_interleave_sorted_indices", "prompts")
    if not all(hasattr(model, name) for name in needed):
        return False
    # sentence-transformers places or spreads a model with a device map or distributed inference itself
    return getattr(model, "_distributed_inference", None) is None and not getattr(model, "_placement_is_delegated", False)


def workers_for(model: Any) -> int:
    """Worker processes the fast path would use for ``model`` now: 0 where it keeps the model's own encode."""
    import multiprocessing

    if multiprocessing.current_process().daemon:
        return 0  # a daemonic process (a pool's worker) cannot start worker processes
    if _FORCE_WORKERS is not None:
        return _FORCE_WORKERS
    return default_workers() if model.device.type == "cuda" else 0


@dataclass(frozen=True)
class FastEncoder:
    """How one kind of text (queries or documents) is encoded on the fast path: the model, the prompt as
    ``encode_query`` / ``encode_document`` resolve it, and the batches.

    ``prepare`` turns the caller's texts into what the model reads (mteb's wrapper: the texts its DataLoader gives,
    stripped); None: the texts themselves.
    """

    model: Any
    kind: FastKind
    prompt: str | None
    batch_size: int
    workers: int
    show_progress: bool = False
    prepare: Callable[[list[str]], list[str]] | None = None

    def inputs(self, texts: Sequence[str]) -> list[str]:
        """What the model reads for ``texts``."""
        return self.prepare(list(texts)) if self.prepare is not None else list(texts)

    def order(self, inputs: Sequence[str]) -> np.ndarray:
        """The order sentence-transformers encodes ``inputs`` in (longest first; interleaved where the model packs
        inputs without padding): encoded in this order in batches of ``batch_size``, the batches are its own."""
        order = np.argsort([-self.model._input_length(text) for text in inputs])
        if self.model._can_flatten_inputs():
            order = self.model._interleave_sorted_indices(order)
        return np.asarray(order, dtype=np.int64)

    def stream(self, ordered: Sequence[str]) -> Generator[np.ndarray, None, None]:
        """The embeddings of ``ordered`` (already in ``order``), a batch at a time (float32), from one DataLoader:
        one pool of worker processes tokenizing ahead of the forward pass."""
        import torch
        from torch.utils.data import DataLoader
        from tqdm.auto import tqdm

        texts = list(ordered)
        if not texts:
            return
        device = self.model.device
        task = {"task": self.kind}
        collate = _Preprocess(self.model, self.prompt, self.kind)
        dataset: Any = texts  # a list is a map-style dataset to torch
        batches = [list(range(start, min(start + self.batch_size, len(texts)))) for start in range(0, len(texts), self.batch_size)]
        multiprocess: dict[str, Any] = {}
        if self.workers > 0:
            import multiprocessing

            multiprocess = {"multiprocessing_context": multiprocessing.get_context("fork"), "prefetch_factor": _PREFETCH_BATCHES,
                            "worker_init_fn": _one_tokenizer_thread}
        loader: DataLoader[Any] = DataLoader(dataset, batch_sampler=batches, collate_fn=collate, num_workers=self.workers,
                            pin_memory=device.type == "cuda", **multiprocess)
        truncate_dim = getattr(self.model, "truncate_dim", None)
        self.model.eval()
        with torch.inference_mode(), tqdm(total=len(texts), desc="Batches", unit="text", disable=bar_disabled(self.show_progress),
                                          leave=False) as bar:
            for features in loader:
                features = {key: value.to(device, non_blocking=True) if isinstance(value, torch.Tensor) else value
                            for key, value in features.items()}
                embeddings = self.model(features, **task)["sentence_embedding"]
                if truncate_dim is not None:
                    embeddings = embeddings[..., :truncate_dim]
                bar.update(embeddings.shape[0])
                yield embeddings.detach().float().cpu().numpy()

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """The embeddings of ``texts`` in their order, float32: what the model's ``encode_query`` /
        ``encode_document`` return for them (with this prompt and batch size)."""
        inputs = self.inputs(texts)
        if not inputs:
            return np.asarray(self.model.encode(inputs), dtype=np.float32)
        order = self.order(inputs)
        with closing(self.stream([inputs[index] for index in order])) as batches:
            ordered = np.concatenate(list(batches), axis=0)
        embeddings = np.empty_like(ordered)
        embeddings[order] = ordered
        return embeddings


def _one_tokenizer_thread(worker: int) -> None:
    """In each worker process: the tokenizer on one thread (the workers are the parallelism), unless the user chose."""
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


class _Preprocess:
    """The DataLoader's collate_fn: the model's own preprocessing of a batch (prompt, truncation, tokenizer), run in a
    worker process (forked: the model is not pickled; the worker never touches its weights)."""

    def __init__(self, model: Any, prompt: str | None, kind: FastKind) -> None:
        self.model, self.prompt, self.kind = model, prompt, kind

    def __call__(self, batch: list[str]) -> dict[str, Any]:
        return self.model.preprocess(batch, prompt=self.prompt, task=self.kind)


def resolved_prompt(model: Any, kind: FastKind, prompt: str | None = None, prompt_name: str | None = None) -> str | None:
    """The prompt ``encode_query`` / ``encode_document`` apply: ``prompt``, else ``prompt_name``'s, else the model's
    prompt named like ``kind``, else its default prompt name's (sentence-transformers' own resolution)."""
    if prompt_name is None and prompt is None and kind in model.prompts:
        prompt_name = kind
    return model._resolve_prompt(prompt, prompt_name)


def fast_encoder(model: Any, kind: FastKind, *, prompt: str | None = None, batch_size: int = 32,
                 show_progress: bool = False, prepare: Callable[[list[str]], list[str]] | None = None) -> FastEncoder | None:
    """The fast path for ``model`` encoding ``kind`` texts with ``prompt`` (None: the model's own, as
    ``encode_query`` / ``encode_document`` choose), or None where the model's own encode is used: not a CUDA
    device, or a model this module does not reproduce (see the module docstring)."""
    if batch_size < 1 or not supported_model(model):
        return None
    workers = workers_for(model)
    if workers < 1:
        return None
    return FastEncoder(model, kind, resolved_prompt(model, kind, prompt), batch_size, workers, show_progress, prepare)
