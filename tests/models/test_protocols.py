"""The encoder and reranker protocols of r2med_plugin.models.protocols.

Every model family satisfies its protocol (each declared member is there, with its default or its own), and a
user's plain object with only ``name``, ``revision`` and ``encode`` (a reranker: ``rerank``) works everywhere an
encoder (a reranker) is accepted, through the one adapter, with each protocol default in force."""

from __future__ import annotations

import re
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from r2med_plugin.cache import key_of, read_cached_array
from r2med_plugin.data.loader import load_task
from r2med_plugin.evaluation.first_stages import Dense, Named, as_first_stage
from r2med_plugin.evaluation.reranker_stage import CrossEncoderReranker, as_reranker
from r2med_plugin.evaluation.runner import evaluate_task, score_candidate_lists
from r2med_plugin.models.hashing import HashingEncoder
from r2med_plugin.models.protocols import (
    AdaptedEncoder,
    AdaptedReranker,
    Encoder,
    EncoderBase,
    PairScorerBase,
    Reranker,
    RerankerBase,
    as_encoder,
    as_reranker_model,
)
from r2med_plugin.retrieval.dense import dense_search, encode_cached, normalise, score_candidates

NANO, R2MED = "NanoR2MEDBiology", "R2MEDBiology"
ENCODER_MEMBERS = ("name", "revision", "query_prompt", "cache_identity", "expansion_mean_dtype", "encode",
                   "encode_expansions", "for_task", "instructions", "close")
RERANKER_MEMBERS = ("name", "revision", "last_report", "rerank", "for_task", "close")


class PlainEncoder:
    """A user's encoder: name, revision and encode(texts, *, kind), nothing else. Records what it was given."""

    def __init__(self, name: str = "plain-encoder", dim: int = 32) -> None:
        self.name, self.revision = name, f"plain-dim{dim}"
        self._inner = HashingEncoder(dim=dim, name=name)
        self.calls: list[tuple[str, list[str]]] = []

    def encode(self, texts, *, kind):
        self.calls.append((kind, list(texts)))
        return self._inner.encode(texts, kind=kind)


class PlainReranker:
    """A user's reranker: name, revision and rerank, nothing else (scores: word overlap)."""

    name, revision = "plain-reranker", "v1"

    def rerank(self, first_stage, queries, documents, *, depth, show_progress=True):
        out = {}
        for query_id, ranked in first_stage.items():
            words = set(queries[query_id].lower().split())
            scored = {doc_id: float(len(words & set(documents[doc_id].lower().split()))) for doc_id in list(ranked)[:depth]}
            out[query_id] = dict(sorted(scored.items(), key=lambda item: item[1], reverse=True))
        return out


def _members(value: object, members: tuple[str, ...]) -> list[str]:
    return [member for member in members if not hasattr(value, member)]


# --- every family satisfies its protocol -----------------------------------------------------------------------


def test_every_encoder_family_subclasses_the_defaults_and_declares_every_member():
    from r2med_plugin.integrations.mteb_models import MtebEncoder
    from r2med_plugin.models.embedding_endpoint import EndpointEncoder
    from r2med_plugin.models.official.loading import OfficialEncoder
    from r2med_plugin.models.sentence_transformer import SentenceTransformerEncoder

    families = [SentenceTransformerEncoder, HashingEncoder, EndpointEncoder, OfficialEncoder, MtebEncoder, AdaptedEncoder]
    assert [cls.__name__ for cls in families if not issubclass(cls, EncoderBase)] == []
    assert {cls.__name__: _members(cls, ENCODER_MEMBERS[2:]) for cls in families} == {cls.__name__: [] for cls in families}


def test_built_encoders_of_each_family_are_encoders():
    from r2med_plugin.catalog import get_task_spec
    from r2med_plugin.integrations.mteb_models import MtebEncoder
    from r2med_plugin.models.embedding_endpoint import EndpointEncoder
    from r2med_plugin.models.official.loading import OfficialEncoder
    from r2med_plugin.models.official.profiles import retriever_profiles
    from r2med_plugin.models.official.recipes import Recipe

    class StubRecipe(Recipe):
        def settings(self):
            return ["stub"]

        def encode(self, texts, kind, instruction, expansion=False):
            return np.ones((len(texts), 4), dtype=np.float32)

    endpoint = EndpointEncoder("m", "http://127.0.0.1:9/v1")
    official = OfficialEncoder(retriever_profiles()["bmr-410m"], StubRecipe(), name="o", revision="r", identity="i")
    mteb_encoder = MtebEncoder(None, SimpleNamespace(name="org/m", revision="c" * 40, loader=None, loader_kwargs=None))
    bound = [HashingEncoder(), endpoint, official.for_task(R2MED), mteb_encoder.for_task(NANO), as_encoder(PlainEncoder())]
    assert [type(encoder).__name__ for encoder in bound if not isinstance(encoder, Encoder)] == []
    # what each declares of its own, beside the defaults
    assert official.for_task(R2MED).expansion_mean_dtype == "float32" and official.query_prompt is None
    assert official.for_task(R2MED).instructions()["query"] == retriever_profiles()["bmr-410m"].instruction(
        "query", get_task_spec(R2MED).hub_name)
    assert endpoint.expansion_mean_dtype is None and endpoint.instructions() is None and endpoint.for_task(NANO) is endpoint
    assert mteb_encoder.for_task(NANO).cache_identity.endswith(f"task:{NANO}")


def test_the_sentence_transformers_family_is_an_encoder():
    from r2med_plugin.models.sentence_transformer import SentenceTransformerEncoder

    encoder = SentenceTransformerEncoder("minilm-packaged", show_progress=False)
    assert isinstance(encoder, Encoder) and encoder.for_task(NANO) is encoder and encoder.instructions() is None
    assert encoder.cache_identity and encoder.expansion_mean_dtype is None
    encoder.close()  # no pool was started: nothing to stop


def test_every_reranker_family_subclasses_the_defaults_and_declares_every_member():
    from r2med_plugin.integrations.mteb import MtebPairScorer
    from r2med_plugin.llm.reranker_kinds import (
        ListwiseLLMReranker,
        PointwiseLLMReranker,
        ReasoningLLMReranker,
        SetwiseLLMReranker,
    )
    from r2med_plugin.models.cross_encoder import SentenceTransformerCrossEncoder
    from r2med_plugin.models.official.reranker_model import OfficialReranker

    rerankers = [CrossEncoderReranker, ListwiseLLMReranker, PointwiseLLMReranker, ReasoningLLMReranker,
                 SetwiseLLMReranker, AdaptedReranker]
    assert [cls.__name__ for cls in rerankers if not issubclass(cls, RerankerBase)] == []
    assert {cls.__name__: _members(cls, RERANKER_MEMBERS[2:]) for cls in rerankers} == {cls.__name__: [] for cls in rerankers}
    scorers = [SentenceTransformerCrossEncoder, OfficialReranker, MtebPairScorer]
    assert [cls.__name__ for cls in scorers if not issubclass(cls, PairScorerBase)] == []


def test_every_model_loader_has_the_loader_defaults():
    from r2med_plugin.models.registry import ModelLoader, ModelLoaderBase, loaders

    found = {name: loader for name, loader in loaders().items() if name in ("mteb", "official", "openai")}
    assert len(found) == 3
    assert all(isinstance(loader, ModelLoaderBase) and isinstance(loader, ModelLoader) for loader in found.values())
    assert found["official"].endpoint_options("official:bge") == () and found["mteb"].unclaimed_hint("x") is None


# --- a plain object works everywhere an encoder is accepted ---------------------------------------------------


def test_as_encoder_adapts_a_plain_object_once_and_keeps_ours():
    plain, ours = PlainEncoder(), HashingEncoder()
    adapted = as_encoder(plain)
    assert isinstance(adapted, AdaptedEncoder) and adapted.model is plain and as_encoder(adapted) is adapted
    assert as_encoder(ours) is ours
    assert (adapted.name, adapted.revision) == (plain.name, plain.revision)
    assert Dense(plain) == Dense(plain)  # one object adapted twice is one encoder
    with pytest.raises(TypeError, match="an encoder needs name, revision and encode"):
        as_encoder(SimpleNamespace(name="x", revision="y"))


def test_a_plain_encoder_gives_the_same_results_as_its_encodings_everywhere(mirror_env: Path):
    """evaluate_task (full corpus, hybrid, candidates), score_candidate_lists, a rerank first stage: the plain object
    gives what a HashingEncoder of the same name, revision and dimension gives, and its own encode was called."""
    plain = PlainEncoder(name="plain-vs-hashing", dim=32)
    twin = HashingEncoder(dim=32, name="plain-vs-hashing")
    twin.revision = plain.revision
    for model in (twin, plain):  # the twin first: the plain object's calls below are its own, not cache hits
        model.result = evaluate_task(NANO, model, hybrid=True, candidates=["bm25"], show_progress=False)
    assert plain.result.scores == twin.result.scores and plain.result.run == twin.result.run
    assert plain.result.retriever == "plain-vs-hashing" and plain.result.model_revision == "plain-dim32"

    fresh = PlainEncoder(name="plain-lists", dim=24)
    lists = score_candidate_lists(fresh, NANO, "bm25")
    assert lists and {kind for kind, _ in fresh.calls} == {"query", "document"}
    reranked = evaluate_task(NANO, rerank=PlainReranker(), first_stage=PlainEncoder(name="plain-first", dim=24),
                             rerank_depth=10, show_progress=False)
    assert reranked.rerank.first_stage == "plain-first" and reranked.rerank.reranker == "plain-reranker"


def test_plain_encoders_in_the_dense_functions(mirror_env: Path):
    data = load_task(NANO)
    plain = PlainEncoder(name="plain-dense", dim=16)
    run = dense_search(plain, data.corpus, data.queries, dataset_revision=data.revision, top_k=5)
    query_id = data.queries["id"][0]
    candidates = {query_id: list(run[query_id])}
    scored = score_candidates(plain, data.corpus, data.queries, candidates, dataset_revision=data.revision)
    assert scored[query_id] == pytest.approx(run[query_id])
    assert isinstance(as_first_stage(plain), Dense)
    assert isinstance(as_first_stage(plain, name="mine"), Named)


# --- one test per protocol default, through the adapter -------------------------------------------------------


def test_default_prompt_is_prepended_for_an_encode_without_prompt(tmp_path: Path):
    plain = PlainEncoder(name="prompt-probe")
    adapted = as_encoder(plain)
    assert adapted.query_prompt is None  # default: no prompt of its own
    encode_cached(plain, ["a text"], kind="query", dataset_revision="rev", prompt="Find: ")
    encode_cached(plain, ["a text"], kind="document", dataset_revision="rev")
    assert plain.calls == [("query", ["Find: a text"]), ("document", ["a text"])]


def test_an_encode_that_takes_prompt_gets_it_passed():
    class Prompted(PlainEncoder):
        def encode(self, texts, *, kind, prompt=None):
            self.calls.append((kind, [f"<{prompt}>"] + list(texts)))
            return self._inner.encode(texts, kind=kind)

    plain = Prompted(name="prompt-passed")
    as_encoder(plain).encode(["t"], kind="query", prompt="P")
    assert plain.calls == [("query", ["<P>", "t"])]


def test_default_cache_identity_keeps_the_embedding_cache_key():
    """The default identity is "": the key is the one earlier releases used for an encoder without cache_identity."""
    plain = PlainEncoder(name="identity-probe", dim=8)
    assert as_encoder(plain).cache_identity == ""
    texts = ["one text", "another text"]
    encode_cached(plain, texts, kind="document", dataset_revision="rev-1")
    import hashlib

    digest = hashlib.sha256("\0".join(texts).encode("utf-8", "surrogatepass")).hexdigest()
    key = key_of(plain.name, plain.revision, "", "rev-1", "document", None, len(texts), digest)
    assert read_cached_array("embeddings", key) is not None


def test_default_for_task_is_the_encoder_itself_and_instructions_none(mirror_env: Path):
    adapted = as_encoder(PlainEncoder())
    assert adapted.for_task(NANO) is adapted and adapted.instructions() is None
    result = evaluate_task(NANO, PlainEncoder(name="instructions-probe"), show_progress=False)
    assert result.instructions is None  # an encoder applying no instructions of its own records none


def test_default_expansion_mixing_averages_unit_vectors_of_the_expansion_as_a_document(mirror_env: Path):
    data = load_task(R2MED)
    plain = PlainEncoder(name="expansion-probe", dim=16)
    adapted = as_encoder(plain)
    assert adapted.expansion_mean_dtype is None
    expansions = [f"expansion of {text}" for text in data.queries["text"].to_list()]
    np.testing.assert_array_equal(adapted.encode_expansions(expansions[:2]), plain.encode(expansions[:2], kind="document"))
    run = dense_search(plain, data.corpus, data.queries, dataset_revision=data.revision, top_k=3, mix_with=expansions)
    queries = normalise(plain.encode(data.queries["text"].to_list(), kind="query"))
    mixed = normalise((queries + normalise(plain.encode(expansions, kind="document"))) / 2.0)
    documents = normalise(plain.encode(data.corpus["text"].to_list(), kind="document"))
    first = data.queries["id"][0]
    expected = dict(zip(data.corpus["id"].to_list(), (documents @ mixed[0]).tolist(), strict=True))
    assert {doc_id: pytest.approx(expected[doc_id], abs=1e-6) for doc_id in run[first]} == run[first]


def test_default_close_does_nothing_and_a_users_own_close_is_called():
    assert as_encoder(PlainEncoder()).close() is None

    class Pooled(PlainEncoder):
        closed = 0

        def close(self):
            self.closed += 1

    pooled = Pooled()
    as_encoder(pooled).close()
    assert pooled.closed == 1


def test_members_a_users_object_declares_itself_are_kept(tmp_path: Path):
    """An earlier release documented query_prompt, cache_identity and for_task as optional: they still count."""

    class Rich(PlainEncoder):
        query_prompt = "Q: "
        cache_identity = "weights-v2"

        def for_task(self, task):
            bound = Rich(name=f"rich-{task}")
            return bound

    adapted = as_encoder(Rich(name="rich"))
    assert adapted.query_prompt == "Q: " and adapted.cache_identity == "weights-v2"
    bound = adapted.for_task(NANO)
    assert isinstance(bound, AdaptedEncoder) and bound.name == f"rich-{NANO}"


def test_reranker_defaults_through_the_adapter(mirror_env: Path):
    plain = PlainReranker()
    adapted = as_reranker_model(plain)
    assert isinstance(adapted, Reranker) and adapted.last_report is None and adapted.for_task(NANO) is adapted
    assert adapted.close() is None and as_reranker(plain) == adapted and as_reranker_model(adapted) is adapted
    result = evaluate_task(NANO, rerank=plain, first_stage="bm25-robertson", rerank_depth=10, show_progress=False)
    assert result.rerank.reranker == "plain-reranker" and result.rerank.usage is None and result.rerank.traces is None
    with pytest.raises(TypeError, match="a reranker needs name, revision and rerank"):
        as_reranker_model(SimpleNamespace(name="x", revision="y"))


@pytest.fixture()
def own_loaders(monkeypatch: pytest.MonkeyPatch) -> None:
    """Loaders registered by a test are gone after it."""
    from r2med_plugin.models import registry

    monkeypatch.setattr(registry, "_LOADERS", dict(registry.loaders()))


class _PlainLoader:
    """A third-party loader with the five members every loader needs and neither default."""

    name, scheme, auto = "plain-loader", "plainloader", False

    def claim(self, name, revision, settings):
        return None

    def stamp(self, ref):
        return "plain"

    def load_encoder(self, ref, **options):
        return PlainEncoder()

    def load_cross_encoder(self, ref, **options):
        raise ValueError("no")


def test_a_loader_without_the_loader_defaults_is_refused_with_the_fix(own_loaders):
    from r2med_plugin.models.registry import loaders, register_loader

    with pytest.raises(TypeError, match=re.escape("_PlainLoader is not a ModelLoader: it lacks endpoint_options, unclaimed_hint; "
                                                  "subclass r2med_plugin.models.registry.ModelLoaderBase")):
        register_loader(_PlainLoader())
    assert "plain-loader" not in loaders()


def test_a_loader_on_the_base_class_gets_the_loader_defaults(own_loaders):
    from r2med_plugin.models.registry import ENDPOINT_SETTINGS, ModelLoaderBase, endpoint_options_of, loaders, register_loader, resolve

    class BasedLoader(_PlainLoader, ModelLoaderBase):
        pass

    register_loader(BasedLoader())
    assert isinstance(loaders()["plain-loader"], BasedLoader)
    assert endpoint_options_of("plainloader:model") == ENDPOINT_SETTINGS
    with pytest.raises(ValueError, match=re.escape("the plain-loader loader does not know the model 'm'")):
        resolve("m", loader="plain-loader")


def test_the_docs_example_of_a_model_family_runs(mirror_env: Path, own_loaders, capsys):
    page = (Path(__file__).resolve().parents[2] / "docs" / "explanation" / "models.md").read_text(encoding="utf-8")
    (code,) = re.findall(r"```python\n(.*?)```", page, flags=re.S)
    exec(compile(code, "docs/explanation/models.md", "exec"), {})  # noqa: S102
    name, score = capsys.readouterr().out.split()
    assert name == "length-0.5" and 0.0 <= float(score) <= 1.0
    from r2med_plugin.models.registry import resolve

    assert resolve("length:0.5").stamp().endswith(":length:length:0.5")
