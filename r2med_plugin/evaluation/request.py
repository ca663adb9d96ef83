"""The parts of an evaluation request that own their rules: each checks itself once, when it is built.

``Scoring`` is what a retriever's result is scored on (its depth, hybrid fusion, the stored candidate lists, an LLM
expansion). ``evaluate_task``/``build_plan``, the CLI and sweep specs all state these settings through it, so that each
rule below is written once:

- hybrid scores fuse full-corpus runs, which ``candidates_only`` skips: not both;
- candidate subsets are bm25, dense and hybrid, and ``candidates_only`` needs one;
- the run is at least 10 deep (the main score is nDCG@10);
- candidate subsets exist for tasks with stored lists (NanoR2MED), released expansions for R2MED tasks, and the two
  never go together.

A refusal is a ``RequestError``: its message reads as the Python API's (``top_k (--top-k) ...``), its
``flag_message`` as the CLI's (``--top-k ...``), and ``keyed(label)`` under a sweep spec's key (`` `top_k` ...``).
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from r2med_plugin.data.expansions import llm_name
from r2med_plugin.metrics import MIN_TOP_K
from r2med_plugin.identifiers import BM25_NAMES, CANDIDATE_SUBSETS
from r2med_plugin.rules import RequestError, neutral, neutral_fields, whole_number_problem
from r2med_plugin.types import TaskSpec


@dataclass(frozen=True)
class Scoring:
    """What a retriever's result is scored on; refused at construction when no task could run it."""

    top_k: int = 1000
    hybrid: bool = False
    candidates: tuple[str, ...] = ()
    candidates_only: bool = False
    expansion: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "candidates", tuple(dict.fromkeys(self.candidates)))
        if self.hybrid and self.candidates_only:
            raise RequestError("hybrid", "fuses full-corpus runs, which {candidates_only} skips", "drop one of the two")
        unknown = [name for name in self.candidates if name not in CANDIDATE_SUBSETS]
        if unknown:
            raise RequestError("candidates", f"holds {unknown[0]!r}, an unknown candidate subset",
                               f"choose from {list(CANDIDATE_SUBSETS)}")
        if self.candidates_only and not self.candidates:
            raise RequestError("candidates_only", "needs at least one candidate subset (the lists to rank)",
                               "add {candidates} bm25, dense or hybrid, or drop {candidates_only}")
        if whole_number_problem(self.top_k, MIN_TOP_K):
            raise RequestError("top_k", f"must be at least {MIN_TOP_K}: the main score is nDCG@10; got {self.top_k!r}",
                               "raise it (default 1000)")

    def check_task(self, spec: TaskSpec) -> None:
        """The rules that depend on the task: stored candidate lists (NanoR2MED), released expansions (R2MED)."""
        if self.candidates and not spec.candidate_profiles:
            raise ValueError(f"{spec.name} has no stored candidate lists; candidate subsets (--candidates) exist for the "
                             f"NanoR2MED tasks only: run {spec.name} in a command without --candidates")
        if self.expansion is None:
            return
        if self.candidates:
            raise ValueError("expansions apply to the R2MED tasks, candidate subsets to NanoR2MED: use one or the other")
        if ":" in self.expansion:  # a locally generated expansion ("local:..."): checked where it is read
            return
        known = [f"{method}/{llm_name(split)}" for method, splits in spec.gar_configs.items() for split in splits]
        if not known:
            raise ValueError(f"{spec.name} has no released expansions; they exist for the R2MED tasks")
        if self.expansion != "all" and self.expansion not in known:
            from r2med_plugin.catalog import unknown_name_message

            raise KeyError(unknown_name_message("expansion", self.expansion, [*known, "all"]))


@dataclass(frozen=True)
class TaskArguments:
    """``evaluate_task``'s and ``build_plan``'s keyword arguments: the Python API's way to state a request (see
    ``evaluate_task`` for each). ``r2med_plugin.evaluation.plan.request_of`` turns them into an EvaluationRequest;
    the fields marked neutral change no score (a sweep job's id leaves them out)."""

    hybrid: bool = False
    candidates: Sequence[str] = ()
    candidates_only: bool = False
    data_dir: str | os.PathLike | None = neutral()
    accept_drift: bool | None = neutral()
    top_k: int = 1000
    query_prompt: str | None = None
    expansion: str | None = None
    show_progress: bool = neutral(True)
    rerank: object | None = None
    first_stage: object | None = None
    rerank_depth: int | None = None
    first_stage_name: str | None = None
    rerank_batch_size: int | None = None
    bm25_workers: int | None = None

    @classmethod
    def of(cls, arguments: Mapping[str, Any], what: str = "evaluate_task") -> TaskArguments:
        """The arguments given by keyword to ``what``; an unknown one is refused with the known ones."""
        known = [item.name for item in fields(cls)]
        unknown = sorted(set(arguments) - set(known))
        if unknown:
            raise TypeError(f"{what}() got an unexpected keyword argument {unknown[0]!r}; it takes task, retriever and "
                            f"{', '.join(known)}")
        return cls(**arguments)

    @property
    def scoring(self) -> Scoring:
        return Scoring(top_k=self.top_k, hybrid=self.hybrid, candidates=tuple(self.candidates),
                       candidates_only=self.candidates_only, expansion=self.expansion)


# --- outputs ------------------------------------------------------------------------------------------------------------

TREC_DEFAULT_DEPTH = 1000


@dataclass(frozen=True)
class Outputs:
    """Where a result is written: the MTEB result, official JSON and per-query sidecar into ``folder``, and with
    ``trec`` a TREC run of each query's top ``trec_depth``."""

    folder: str | None = None
    trec: bool = False
    trec_depth: int = TREC_DEFAULT_DEPTH

    def __post_init__(self) -> None:
        if self.trec and not self.folder:
            raise RequestError("trec", "writes run files into the {output} folder", "add {output} DIR")
        if whole_number_problem(self.trec_depth, 1):
            raise RequestError("trec_depth", f"must be a positive number of documents per query, got {self.trec_depth!r}",
                               "give one, e.g. 100")
        if self.trec_depth != TREC_DEFAULT_DEPTH and not self.trec:
            raise RequestError("trec_depth", "is the depth of TREC run files", "add {trec} (and {output} DIR), or drop it")

    def uses(self, option: str) -> bool:
        return option in ("output", "trec") or (option == "depth" and self.trec)


# --- the request ----------------------------------------------------------------------------------------------------------

REQUEST_SCHEMA_VERSION = 1


@dataclass(frozen=True)
class EvaluationRequest:
    """One evaluation of one task, checked once when it is built: what retrieves (``first_stage``), what reranks it
    (``reranker``, or None), what the result is scored on (``scoring``) and where it is written (``outputs``).

    Serialisable (``to_dict``/``from_dict``, except what the Python API gave as objects), and identified by what it
    computes (``identity``: neutral fields such as devices, batch sizes, concurrency and where the data lives are left
    out). ``r2med_plugin.evaluation.plan.plan_request`` turns it into the stages that run."""

    task: str
    first_stage: Any  # a FirstStageSpec (r2med_plugin.evaluation.specs)
    reranker: Any = None  # a RerankerSpec, or None
    scoring: Scoring = field(default_factory=Scoring)
    outputs: Outputs = field(default_factory=Outputs)
    first_stage_name: str | None = None  # the reranked first stage's name in result names
    bm25_workers: int | None = neutral()
    data_dir: str | None = neutral()
    accept_drift: bool | None = neutral()
    show_progress: bool = neutral(True)

    def __post_init__(self) -> None:
        from r2med_plugin.catalog import get_task_spec
        from r2med_plugin.evaluation.specs import RunFileSpec

        spec = get_task_spec(self.task)  # an unknown task gets a did-you-mean
        if self.reranker is None:
            if isinstance(self.first_stage, RunFileSpec):
                raise ValueError("a run file is a first stage to rerank: add a reranker (--rerank), or search with a "
                                 "retriever")
            if self.first_stage_name is not None:
                raise ValueError("first_stage_name (--first-stage-name) names what a reranker reranks: add a reranker "
                                 "(--rerank), or drop it")
            self.scoring.check_task(spec)
        else:
            if self.scoring.hybrid or self.scoring.candidates or self.scoring.expansion is not None:
                raise ValueError("reranking takes one first stage: drop hybrid, candidates and expansion (rerank their "
                                 "run file instead)")
            if self.outputs.trec_depth != TREC_DEFAULT_DEPTH:
                raise ValueError("trec_depth (--depth) reaches no code here: a reranked run (and its TREC file) holds each "
                                 "query's reranked top depth only; drop it")
        if self.outputs.trec_depth != TREC_DEFAULT_DEPTH and self.outputs.trec_depth > self.scoring.top_k:
            raise ValueError(f"--depth {self.outputs.trec_depth} is deeper than the run (--top-k {self.scoring.top_k} "
                             f"documents per query): raise --top-k to {self.outputs.trec_depth}, or lower --depth")
        if self.bm25_workers is not None:
            from r2med_plugin.retrieval.analyzed import resolve_workers

            resolve_workers(self.bm25_workers)  # a bad value is refused before any work
            if not self.computes_bm25_lucene:
                raise ValueError("bm25_workers (--workers) sets the processes of bm25-lucene's corpus analysis, and this "
                                 "plan runs no bm25-lucene: drop it")

    # --- what the request computes ---

    @property
    def hybrid_partner(self) -> str | None:
        """The BM25 the hybrid scores fuse with (r2med_plugin.evaluation.plan.hybrid_partner), or None."""
        if not self.scoring.hybrid or self.scoring.candidates_only or self.reranker is not None:
            return None
        from r2med_plugin.catalog import get_task_spec

        return hybrid_partner(get_task_spec(self.task), self._bm25_variant or "", self.scoring.expansion)

    @property
    def _bm25_variant(self) -> str | None:
        from r2med_plugin.evaluation.specs import Bm25Spec

        return self.first_stage.variant if isinstance(self.first_stage, Bm25Spec) else None

    @property
    def computes_bm25_lucene(self) -> bool:
        """Whether the request analyses a corpus with the Lucene analyzer (what ``bm25_workers`` parallelises)."""
        if self._bm25_variant == "bm25-lucene":
            return True
        return self.hybrid_partner == "bm25-lucene"

    def uses(self, option: str) -> bool:
        """Whether a part of this request has a field for ``option`` (a CLI option name) and uses it."""
        if option == "workers":
            return self.computes_bm25_lucene
        if option == "first_stage_name":
            return self.reranker is not None
        if option == "top_k":
            return not self.scoring.candidates_only and self.reranker is None
        if option == "depth":
            return self.outputs.trec and self.reranker is None
        parts = [self.first_stage, self.reranker]
        return any(part is not None and part.uses(option) for part in parts) or self.outputs.uses(option)

    def why_not(self, option: str) -> str:
        """Why ``option`` reaches no code in this request: the words of the part that owns it, else the generic ones."""
        for part in (self.first_stage, self.reranker):
            reason = part.why_not(option) if part is not None else None
            if reason:
                return reason
        specific = {
            "workers": "it sets the processes of bm25-lucene's corpus analysis, and this command runs no bm25-lucene",
            "top_k": ("--candidates-only ranks the stored candidate lists, not the corpus" if self.scoring.candidates_only
                      else "the reranked run is the first stage's top --rerank-depth, and first_stage_* scores a first stage "
                           "computed here at its own result's depth (1000), a run file at the file's depth"),
            "depth": ("a reranked run (and its TREC file) holds each query's reranked top --rerank-depth only"
                      if self.reranker is not None else "it is the depth of TREC run files, and no --trec is asked for"),
        }
        if option in specific:
            return specific[option]
        return f"{option_owner(option)}, and {self.summary()}"

    def summary(self) -> str:
        first = self.first_stage.label
        if self.reranker is None:
            return f"this command searches with {first}"
        return f"this command reranks {first} with {self.reranker.label}"

    # --- serialising ---

    def to_dict(self, *, results_only: bool = False) -> dict[str, Any]:
        """Plain data (``from_dict`` reads it back): the schema version, the task, each part with its ``kind``;
        ``results_only`` leaves out the neutral fields (what ``identity`` hashes)."""
        from r2med_plugin.evaluation.specs import PREBUILT, spec_dict

        for part in (self.first_stage, self.reranker):
            if isinstance(part, PREBUILT):
                raise TypeError(f"{part.label} was given as a Python object, which does not serialise: name it by a spec "
                                "(ModelSpec, Bm25Spec, RunFileSpec, CrossEncoderSpec, LlmRerankerSpec)")
        payload: dict[str, Any] = {"schema": REQUEST_SCHEMA_VERSION, "task": self.task,
                                   "first_stage": spec_dict(self.first_stage, results_only=results_only),
                                   "reranker": None if self.reranker is None else spec_dict(self.reranker, results_only=results_only),
                                   "scoring": asdict(self.scoring) | {"candidates": list(self.scoring.candidates)},
                                   "outputs": asdict(self.outputs),
                                   "first_stage_name": self.first_stage_name}
        if not results_only:
            payload |= {name: getattr(self, name) for name in neutral_fields(type(self))}
        return payload

    @classmethod
    def from_dict(cls, payload: Mapping[str, Any], where: str = "request") -> EvaluationRequest:
        """The request ``to_dict`` wrote; an error names ``where`` and the key at fault."""
        from r2med_plugin.evaluation.specs import spec_from_dict

        if not isinstance(payload, Mapping) or payload.get("schema") != REQUEST_SCHEMA_VERSION:
            raise ValueError(f"{where}: not an evaluation request of schema {REQUEST_SCHEMA_VERSION} "
                             f"(got schema {payload.get('schema') if isinstance(payload, Mapping) else payload!r})")
        known = {item.name for item in fields(cls)} | {"schema"}
        unknown = sorted(set(payload) - known)
        if unknown:
            raise ValueError(f"{where}.{unknown[0]}: not a field of an evaluation request; use only {sorted(known)}")
        values = dict(payload)
        values.pop("schema")
        values["first_stage"] = spec_from_dict(values["first_stage"], f"{where}.first_stage")
        if values.get("reranker") is not None:
            values["reranker"] = spec_from_dict(values["reranker"], f"{where}.reranker")
        scoring = dict(values.get("scoring") or {})
        scoring["candidates"] = tuple(scoring.get("candidates") or ())
        values["scoring"] = Scoring(**scoring)
        values["outputs"] = Outputs(**dict(values.get("outputs") or {}))
        return cls(**values)

    def identity(self) -> str:
        """A stable id of what this request computes (schema 1): sha256 of the canonical JSON of ``to_dict`` without
        the neutral fields (devices, batch sizes, concurrency, the key's variable, retries, timeouts, where the data
        lives, progress bars)."""
        text = json.dumps(self.to_dict(results_only=True), sort_keys=True, default=str, separators=(",", ":"))
        return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


# Each request option (a CLI option name, a sweep spec's key) and what it configures: the generic half of the reason an
# option reaches no code, when no part of the request has words of its own for it.
OPTION_OWNERS = {
    "model_revision": "it names an encoder's weights (a model first stage)",
    "model_name": "it names a model first stage's results",
    "loader": "it chooses how a model loads (a model first stage or a cross-encoder)",
    "instruction": "it is the official prompt of an encoder first stage",
    "device": "it places a local model (an encoder first stage or a cross-encoder)",
    "batch_size": "it batches a local model's inputs (an encoder first stage or a cross-encoder)",
    "rerank_depth": "it configures --rerank, which is not given",
    "rerank_revision": "it configures --rerank, which is not given",
    "first_stage_name": "it names what --rerank reranks, and no --rerank is given",
    "base_url": "it configures an endpoint: an embedding endpoint (--retriever openai:<model>) or an LLM reranker "
                "(--rerank llm-listwise:<model>, ...)",
    "dimensions": "it configures an embedding endpoint (--retriever openai:<model>)",
    "workers": "it sets the processes of bm25-lucene's corpus analysis",
}
for _name in ("api_key_env", "concurrency", "extra_body", "max_retries", "timeout"):
    OPTION_OWNERS[_name] = OPTION_OWNERS["base_url"]


def option_owner(option: str) -> str:
    """What ``option`` configures, in the words of a refusal."""
    if option in OPTION_OWNERS:
        return OPTION_OWNERS[option]
    from r2med_plugin.llm.config import LLM_SETTING_USERS

    if option in LLM_SETTING_USERS:
        readers = " or ".join(f"llm-{kind}" for kind in LLM_SETTING_USERS[option])
        return f"it is a setting of {readers} (--rerank llm-<kind>:<model>)"
    return "it configures another kind of run"


def hybrid_partner(spec: TaskSpec, retriever: object, expansion: str | None = None) -> str:
    """The BM25 that ``hybrid_*`` fuses with: the task's BM25, or the other variant for that same BM25.

    Fusing a BM25 run with itself would reproduce the plain run (hybrid == plain); an expanded BM25
    run differs from the plain-query BM25, so it keeps the task's variant.
    """
    own = spec.own_bm25
    if retriever == own and expansion is None:
        return next(name for name in BM25_NAMES if name != own)
    return own
