"""What a request runs: its first stage and its reranker, each a small frozen type that checks itself when it is built.

First stages: ``Bm25Spec`` (bm25-lucene, bm25-hakari[:<tokenizer>], bm25-robertson), ``ModelSpec`` (a model by name: sentence-transformers,
mteb's registry, an embedding endpoint, an official profile), ``RunFileSpec`` (a TREC or topk_docs run, file or folder)
and ``PrebuiltFirstStage`` (an object the Python API was given: an encoder, a run dict, a stage). Rerankers:
``CrossEncoderSpec``, ``LlmRerankerSpec`` (llm-<kind>:<model> behind an ``EndpointSpec``) and ``PrebuiltReranker``.

Every type names the options it has a field for (``OPTIONS``, the CLI's option names, which are also a sweep spec's keys)
and says which of them it uses in its configuration (``uses``) and, where it knows better than the generic words, why
not (``why_not``): an option that no part of a request uses reaches no code, and the front ends refuse it from that.
Fields that change no result (devices, batch sizes, concurrency, the API key's variable, timeouts, retries) are marked
``neutral`` (r2med_plugin.rules): a request's identity, and a sweep job's id, leave them out. The endpoint type is
``r2med_plugin.llm.config.Endpoint`` (``EndpointSpec`` here).
"""

from __future__ import annotations

import copy
import dataclasses
import difflib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from r2med_plugin.catalog import get_task_spec
from r2med_plugin.data.runs import read_run_file
from r2med_plugin.errors import UserError
from r2med_plugin.evaluation.first_stages import task_run_file
from r2med_plugin.evaluation.reranker_stage import as_reranker
from r2med_plugin.identifiers import BM25_NAMES
from r2med_plugin.llm.config import LLM_SETTING_USERS, Endpoint, build_reranker_config, llm_reranker_kind, settings_unused_by
from r2med_plugin.llm.reranker_kinds import is_llm_reranker_name
from r2med_plugin.metrics import rerank_depth_problem
from r2med_plugin.models.checks import check_model_name
from r2med_plugin.models.placement import DTYPES
from r2med_plugin.models.protocols import PlainEncoder  # what a user's encoder needs
from r2med_plugin.models.registry import endpoint_options_of, resolve, scheme_loader
from r2med_plugin.request_options import (
    BASE_URL,
    BATCH_SIZE,
    DEVICE,
    DIMENSIONS,
    DTYPE,
    EMBEDDING_ENDPOINT_OPTIONS,
    EXTRA_BODY,
    INSTRUCTION,
    LOADER,
    MAX_RETRIES,
    MODEL_NAME,
    MODEL_REVISION,
    RERANK_DEPTH,
    RERANK_REVISION,
    TIMEOUT,
    option_field,
    options_of,
)
from r2med_plugin.retrieval.rerank import check_depth
from r2med_plugin.rules import RequestError, SettingError, neutral, whole_number


def spec_dict(spec: Any, *, results_only: bool = False) -> dict[str, Any]:
    """A spec's fields as plain JSON-able data, with its ``kind``; ``results_only`` leaves the neutral fields out."""
    payload: dict[str, Any] = {"kind": spec.KIND}
    for item in dataclasses.fields(spec):
        if not item.init or (results_only and item.metadata.get("neutral")):
            continue
        value = getattr(spec, item.name)
        if item.metadata.get("omit_default") and value == item.default:
            continue  # a setting added later: at its default, identities stay what they were
        payload[item.name] = spec_dict(value, results_only=results_only) if dataclasses.is_dataclass(value) else value
    return payload


LOADED = {"loaded": True}  # field metadata: what a front end loaded once for several requests (not part of any identity)


def loaded_field() -> Any:
    """A spec's field for the model (or BM25 index) a front end loaded once and hands to every request that runs it:
    not a constructor argument, not compared, not serialised (``spec_dict`` skips it), so identities stay."""
    return field(default=None, init=False, repr=False, compare=False, metadata=LOADED)


def with_loaded(spec: Any, value: Any) -> Any:
    """A copy of ``spec`` that runs with ``value`` (a loaded encoder, cross-encoder or LLM reranker, a built BM25 index)
    instead of loading its own: ``r2med evaluate``, a sweep's jobs and the matrix load once and run many requests."""
    if value is None:
        return spec
    if not any(item.metadata.get("loaded") for item in dataclasses.fields(spec)):
        raise TypeError(f"{type(spec).__name__} loads nothing: it takes no loaded value")
    if isinstance(spec, Bm25Spec) and spec.variant != "bm25-lucene":
        raise TypeError(f"{spec.variant} takes no loaded value: a shared index is bm25-lucene's")
    copied = copy.copy(spec)
    object.__setattr__(copied, "loaded", value)
    return copied


def unreached(name: str, why: str) -> RequestError:
    """The refusal of a field set where it reaches no code (``why``)."""
    return RequestError(name, f"reaches no code here: {why}", "drop {%s}" % name)


def check_retriever_name(name: str) -> None:
    """Refuse a near-miss BM25 name ("bm25", "BM25-lucene") before anything tries to load it as a model.

    A model folder or a hub name ("org/name") passes; loading it is the encoder's job.
    """
    if name in BM25_NAMES or "/" in name or Path(name).exists():
        return
    lowered = name.lower()
    if lowered.startswith("bm25-hakari:"):
        tokenizer = lowered.partition(":")[2]
        fix = ("write 'bm25-hakari': it is the english_porter_stop tokenizer" if tokenizer == "english_porter_stop" else
               "the tokenizers are " + ", ".join(name.partition(":")[2] for name in BM25_NAMES if name.startswith("bm25-hakari:")))
        raise UserError(f"unknown retriever {name!r}: {fix}")
    close = difflib.get_close_matches(lowered, list(BM25_NAMES), n=2, cutoff=0.6)
    if "bm25" in lowered or close:
        guess = close or ["bm25-lucene", "bm25-hakari", "bm25-robertson"]
        raise UserError(
            f"unknown retriever {name!r}. Did you mean {' or '.join(repr(g) for g in guess)}? The BM25 retrievers are "
            "'bm25-lucene' (the official R2MED BM25: Lucene analyzer, k1=0.9, b=0.4), 'bm25-hakari' (HAKARI-Bench's "
            "BM25, NanoR2MED's own: bm25s k1=1.5, b=0.75 over its english_porter_stop tokenizer; 'bm25-hakari:<tokenizer>' "
            "for regex, english_regex, english_porter, stemmer, whitespace) and 'bm25-robertson' (bm25s over bm25s's own "
            "tokenizer); anything else is loaded as a model"
        )


# --- endpoints --------------------------------------------------------------------------------------------------------

EndpointSpec = Endpoint  # the one endpoint type (r2med_plugin.llm.config), by the name the other specs go by

# what an embedding loader takes (models.registry: an endpoint's settings), and how every endpoint's requests go
ENDPOINT_OPTIONS = EMBEDDING_ENDPOINT_OPTIONS
REQUEST_OPTIONS = (MAX_RETRIES.name, TIMEOUT.name)
# an LLM reranker's endpoint: every endpoint option but the size of embedding vectors (an LLM answers in text)
LLM_ENDPOINT_OPTIONS = tuple(name for name in options_of(EndpointSpec) if name != DIMENSIONS.name)


# --- first stages -----------------------------------------------------------------------------------------------------



@dataclass(frozen=True)
class Bm25Spec:
    """bm25-lucene (the official R2MED BM25), bm25-hakari[:<tokenizer>] (HAKARI-Bench's BM25, NanoR2MED's own) or
    bm25-robertson (bm25s over bm25s's own tokenizer)."""

    KIND: ClassVar[str] = "bm25"
    OPTIONS: ClassVar[tuple[str, ...]] = ()
    variant: str
    loaded: Any = loaded_field()  # a bm25-lucene index built once for the task (the reproduction matrix)

    def __post_init__(self) -> None:
        if self.variant not in BM25_NAMES:
            check_retriever_name(self.variant)  # "bm25" gets a did-you-mean
            raise UserError(f"unknown BM25 variant {self.variant!r}: use one of {sorted(BM25_NAMES)}")

    @property
    def label(self) -> str:
        return self.variant

    def uses(self, option: str) -> bool:
        return False

    def why_not(self, option: str) -> str | None:
        return {"instruction": "it is a prompt for dense models; BM25 would ignore it",
                "model_name": "BM25 results are named by the retriever",
                "device": "BM25 loads no model", "dtype": "BM25 loads no model", "batch_size": "BM25 encodes nothing"}.get(option)


@dataclass(frozen=True)
class ModelSpec:
    """A model by name, resolved once when the spec is built (r2med_plugin.models.registry: mteb's registry, an
    endpoint ``openai:<model>``, an official profile ``official:<name>``, sentence-transformers); nothing loads yet."""

    KIND: ClassVar[str] = "model"
    OPTIONS: ClassVar[tuple[str, ...]]  # its fields' options and its endpoint's (set below the class)
    name: str
    revision: str | None = option_field(MODEL_REVISION)
    loader: str | None = option_field(LOADER)
    endpoint: EndpointSpec | None = None
    instruction: bool = option_field(INSTRUCTION, False)  # the task's official instruction as the query prompt
    display_name: str | None = option_field(MODEL_NAME)  # the results' model name
    # the compute dtype the weights load in (auto: the checkpoint's own); another than the model's own is "+<dtype>".
    # Left out of a spec's dict at its default (spec_dict): identities stay what they were before the setting existed
    dtype: str = option_field(DTYPE, "auto", omit_default=True)
    device: str | None = option_field(DEVICE, neutral=True)  # auto (None), one device, a list ("cuda:0,cuda:1") or "all"
    batch_size: int | None = option_field(BATCH_SIZE, neutral=True)
    ref: Any = field(default=None, init=False, repr=False, compare=False)
    loaded: Any = loaded_field()

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise UserError(f"a model is named by a non-empty string, got {self.name!r}")
        check_retriever_name(self.name)  # "bm25-lucen" is a typo, not a hub model to download
        if self.revision is not None and not isinstance(self.revision, str):
            raise UserError(f"revision {self.revision!r}: quote it as a string (a commit sha or a tag)")
        whole_number("batch_size", self.batch_size, 1)
        if self.display_name is not None:
            check_model_name(self.display_name)
        endpoint = self.endpoint.given(ENDPOINT_OPTIONS) if self.endpoint is not None else {}
        object.__setattr__(self, "ref", resolve(self.name, self.revision, loader=self.loader, settings=endpoint))
        refusal = self.ref.instruction_refusal
        if self.instruction and refusal is not None:
            raise unreached("instruction", f"{refusal[0]} ({refusal[1]})")
        if self.dtype not in DTYPES:
            raise RequestError("dtype", f"{self.dtype!r} is not a compute dtype", f"use one of {', '.join(DTYPES)}")
        if self.dtype != "auto" and not self.uses("dtype"):
            raise unreached("dtype", self.why_not("dtype") or "")

    @property
    def label(self) -> str:
        return self.name

    @property
    def is_endpoint(self) -> bool:
        return bool(endpoint_options_of(self.name))

    def uses(self, option: str) -> bool:
        takes = endpoint_options_of(self.name)
        if option in ENDPOINT_OPTIONS:
            return option in takes
        if option in REQUEST_OPTIONS:
            return bool(takes)
        if option == "device":
            return not takes
        if option == "dtype":
            return not takes and getattr(self.ref, "loader", None) != "official"
        if option == "loader":
            return scheme_loader(self.name) is None
        if option == "instruction":
            return self.ref is None or self.ref.instruction_refusal is None
        return option in self.OPTIONS

    def why_not(self, option: str) -> str | None:
        if option in ENDPOINT_OPTIONS:
            return self._endpoint_reason(option)
        if option in ("device", "dtype") and self.is_endpoint:
            return f"{self.name} runs on the endpoint's server"
        if option == "dtype" and getattr(self.ref, "loader", None) == "official":
            return f"{self.name} is an official profile: it loads its weights in its recipe's dtype, as the official code does"
        if option == "loader":
            return f"{self.name} names its loader itself ({self.name.split(':', 1)[0]}:)"
        if option == "instruction" and self.ref is not None and self.ref.instruction_refusal is not None:
            why, fix = self.ref.instruction_refusal
            return f"{why} ({fix})"
        return None

    def _endpoint_reason(self, option: str) -> str:
        if not self.is_endpoint:
            return "it configures an embedding endpoint (--retriever openai:<model>), and an encoder first stage is not one"
        return (f"{self.name} sends the official code's requests as they are" if option == EXTRA_BODY.name
                else f"{self.name} embeds at its model's official size")

    def load(self, *, show_progress: bool = True) -> Any:
        """The encoder this spec names (a local model on ``device``, an endpoint with its request settings); the one a
        front end loaded already (``with_loaded``) if there is one."""
        if self.loaded is not None:
            return self.loaded
        requests = self.endpoint.given(REQUEST_OPTIONS) if self.endpoint is not None and self.is_endpoint else {}
        options: dict[str, Any] = {"batch_size": 32 if self.batch_size is None else self.batch_size,
                                   "show_progress": show_progress, "name": self.display_name, **requests,
                                   **({"dtype": self.dtype} if self.dtype != "auto" else {})}
        return self.ref.load_encoder(device=None if self.is_endpoint else self.device, **options)


ModelSpec.OPTIONS = options_of(ModelSpec, EndpointSpec)


@dataclass(frozen=True)
class RunFileSpec:
    """A first stage read from a run file (TREC or topk_docs JSONL) or a folder of them, one per task."""

    KIND: ClassVar[str] = "run_file"
    OPTIONS: ClassVar[tuple[str, ...]] = ()
    path: str

    @property
    def label(self) -> str:
        return f"the run file {self.path}"

    def uses(self, option: str) -> bool:
        return False

    def why_not(self, option: str) -> str | None:
        return {"instruction": "a run-file first stage is read, not searched with the queries"}.get(option)

    def check_task(self, task: str) -> None:
        """A folder of run files must hold this task's, readable (checked for every task before the first runs)."""
        if not Path(self.path).is_dir():
            return

        spec = get_task_spec(task)
        read_run_file(task_run_file(Path(self.path), spec.name, spec.hub_name))


@dataclass(frozen=True)
class PrebuiltFirstStage:
    """A first stage the Python API was given as an object (an encoder, a run dict, a FirstStage), with its query prompt
    (``query_prompt``, encoders only). It runs as given and does not serialise: name it by a spec for a sweep."""

    KIND: ClassVar[str] = "prebuilt"
    OPTIONS: ClassVar[tuple[str, ...]] = ()
    value: Any = field(compare=False)
    query_prompt: str | None = None

    def __post_init__(self) -> None:
        if self.query_prompt and not isinstance(self.value, PlainEncoder):
            raise SettingError(f"a query prompt ({{query_prompt}}) is for encoders; {self.label} would ignore it: leave it "
                               "out", field="query_prompt")

    @property
    def label(self) -> str:
        return str(getattr(self.value, "name", type(self.value).__name__))

    def uses(self, option: str) -> bool:
        return False

    def why_not(self, option: str) -> str | None:
        return None


FirstStageSpec = Bm25Spec | ModelSpec | RunFileSpec | PrebuiltFirstStage


# --- rerankers --------------------------------------------------------------------------------------------------------


def _check_depth(depth: Any) -> None:
    check_depth(depth)
    problem = rerank_depth_problem(depth)
    if problem:
        raise RequestError("rerank_depth", problem, "raise it (10 or 100, as the official code)", key="depth")


@dataclass(frozen=True)
class CrossEncoderSpec:
    """A cross-encoder (or an official reranker profile) by name, reranking the first stage's top ``depth``."""

    KIND: ClassVar[str] = "cross_encoder"
    OPTIONS: ClassVar[tuple[str, ...]]  # its fields' options (set below the class)
    name: str
    revision: str | None = option_field(RERANK_REVISION)
    loader: str | None = option_field(LOADER)
    depth: int = option_field(RERANK_DEPTH, 10)
    device: str | None = option_field(DEVICE, neutral=True)
    batch_size: int | None = option_field(BATCH_SIZE, neutral=True)
    ref: Any = field(default=None, init=False, repr=False, compare=False)
    loaded: Any = loaded_field()

    def __post_init__(self) -> None:
        if is_llm_reranker_name(self.name):
            raise UserError(f"{self.name} is an LLM reranker: build it as LlmRerankerSpec (with its endpoint)")
        _check_depth(self.depth)
        whole_number("batch_size", self.batch_size, 1)
        object.__setattr__(self, "ref", resolve(self.name, self.revision, loader=self.loader, settings={}))

    @property
    def label(self) -> str:
        return f"the cross-encoder {self.name}"

    def uses(self, option: str) -> bool:
        return option in self.OPTIONS

    def why_not(self, option: str) -> str | None:
        if option in ENDPOINT_OPTIONS or option in REQUEST_OPTIONS:
            return f"--rerank {self.name} is a cross-encoder, which sends no request"
        return None

    def load(self) -> Any:
        if self.loaded is not None:
            return self.loaded
        return self.ref.load_cross_encoder(device=self.device, batch_size=32 if self.batch_size is None else self.batch_size)


CrossEncoderSpec.OPTIONS = options_of(CrossEncoderSpec)


@dataclass(frozen=True)
class LlmRerankerSpec:
    """``llm-<kind>:<model>`` behind an OpenAI-compatible endpoint; ``settings`` are the kind's (window, step,
    max_tokens, set_size, ...: llm.config.LLM_SETTING_USERS says which kind reads which)."""

    KIND: ClassVar[str] = "llm"
    name: str
    endpoint: EndpointSpec
    depth: int = option_field(RERANK_DEPTH, 10)
    settings: Mapping[str, Any] = field(default_factory=dict, hash=False)
    loaded: Any = loaded_field()

    def __post_init__(self) -> None:
        object.__setattr__(self, "settings", {key: value for key, value in dict(self.settings).items() if value is not None})
        _check_depth(self.depth)
        unknown = sorted(set(self.settings) - set(LLM_SETTING_USERS))
        if unknown:
            raise UserError(f"{unknown[0]} is not an LLM reranker setting; use only {sorted(LLM_SETTING_USERS)}")
        for name, why in settings_unused_by(self.kind).items():
            if name in self.settings:
                raise unreached(name, f"{self.name} is llm-{self.kind}: {why}")
        if self.endpoint.dimensions is not None:
            raise unreached("dimensions", "it sizes an embedding endpoint's vectors, and an LLM reranker asks for text")
        as_reranker(self.name, llm=self.config(check_key=False))  # the kind's name and every value, before any data loads

    @property
    def kind(self) -> str:
        return llm_reranker_kind(self.name)

    @property
    def label(self) -> str:
        return f"the LLM reranker {self.name}"

    @classmethod
    def options(cls) -> tuple[str, ...]:
        return (*options_of(cls), *LLM_ENDPOINT_OPTIONS, *LLM_SETTING_USERS)

    def uses(self, option: str) -> bool:
        return option in self.options() and option not in settings_unused_by(self.kind)

    def why_not(self, option: str) -> str | None:
        reasons = {"rerank_revision": "an LLM endpoint serves one revision of its model; it is recorded by the prompt and settings",
                   "batch_size": "LLM requests go --concurrency at a time",
                   "device": "the LLM runs behind --base-url", "dtype": "the LLM runs behind --base-url"}
        return settings_unused_by(self.kind).get(option) or reasons.get(option)

    def config(self, *, check_key: bool = True, sends: bool | None = None) -> Any:
        """The LLMRerankerConfig (llm.config.build_reranker_config: the one way it is built)."""
        endpoint = self.endpoint.given(tuple(name for name in LLM_ENDPOINT_OPTIONS if name != BASE_URL.name))
        return build_reranker_config(self.endpoint.base_url, what=f"--rerank {self.name}", check_key=check_key,
                                     sends=sends, **endpoint, **self.settings)

    def load(self, *, sends: bool = True) -> Any:
        """The reranker; ``sends=False`` for one that only estimates its requests (no openai client needed)."""
        if self.loaded is not None:
            return self.loaded
        return as_reranker(self.name, llm=self.config(sends=sends))


@dataclass(frozen=True)
class PrebuiltReranker:
    """A reranker the Python API was given as it is: a Reranker, a pair scorer, or a cross-encoder's name (loaded when
    the plan runs, ``batch_size`` pairs at a time). It does not serialise."""

    KIND: ClassVar[str] = "prebuilt"
    value: Any = field(compare=False)
    depth: int = 10
    batch_size: int | None = neutral()

    def __post_init__(self) -> None:
        _check_depth(self.depth)
        whole_number("batch_size", self.batch_size, 1)

    @property
    def label(self) -> str:
        return str(getattr(self.value, "name", self.value))

    def uses(self, option: str) -> bool:
        return False

    def why_not(self, option: str) -> str | None:
        return None

    def load(self) -> Any:
        return self.value


RerankerSpec = CrossEncoderSpec | LlmRerankerSpec | PrebuiltReranker
PREBUILT = (PrebuiltFirstStage, PrebuiltReranker)

SPEC_TYPES: dict[str, type] = {cls.KIND: cls for cls in (Bm25Spec, ModelSpec, RunFileSpec, CrossEncoderSpec, LlmRerankerSpec,
                                                          EndpointSpec)}


def spec_from_dict(payload: Mapping[str, Any], where: str = "spec") -> Any:
    """A spec from ``spec_dict``'s output (``kind`` names the type); errors name ``where`` and the key."""
    if not isinstance(payload, Mapping) or payload.get("kind") not in SPEC_TYPES:
        raise UserError(f"{where}: expected a mapping with kind one of {sorted(SPEC_TYPES)}, got {payload!r}")
    cls = SPEC_TYPES[payload["kind"]]
    names = {item.name for item in dataclasses.fields(cls) if item.init}
    unknown = sorted(set(payload) - names - {"kind"})
    if unknown:
        raise UserError(f"{where}.{unknown[0]}: not a field of {cls.__name__}; use only {sorted(names)}")
    values = {key: spec_from_dict(value, f"{where}.{key}") if isinstance(value, Mapping) and "kind" in value else value
              for key, value in payload.items() if key != "kind"}
    return cls(**values)
