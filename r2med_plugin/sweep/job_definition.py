"""One sweep job: a plain, serialisable (task, retriever, options) triple, its stable id, and the
``EvaluationRequest`` it runs (``job_request``), built by the same types as ``r2med evaluate``'s.

A job's options are ``evaluate_task``'s keyword arguments (``TaskArguments``), kept as a plain dict so that its id
(``job_identity``) stays the JSON the first sweeps hashed.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from r2med_plugin.evaluation.plan import request_of
from r2med_plugin.evaluation.request import TaskArguments
from r2med_plugin.evaluation.specs import Bm25Spec, CrossEncoderSpec, EndpointSpec, ModelSpec
from r2med_plugin.rules import neutral_fields
from r2med_plugin.sweep.entries import LOADING_KEYS, llm_reranker_spec, model_spec

# What a job's id leaves out, as the types mark it neutral: a retrievers entry's devices (ModelSpec.device, one per
# worker), batch size and endpoint sending settings; evaluate_task's neutral arguments (where the data lives, progress
# bars) and an LLM reranker's ``llm_requests`` (EndpointSpec's neutral fields: the key's variable, concurrency, ...).
NEUTRAL_MODEL_KEYS = frozenset({"devices", *neutral_fields(ModelSpec), *neutral_fields(EndpointSpec)})


NEUTRAL_OPTIONS = frozenset({*neutral_fields(TaskArguments), "llm_requests"})


@dataclass(frozen=True)
class Job:
    """One evaluation: ``evaluate_task(task, <retriever>, **options)`` then ``write_outputs``. JSON-able."""

    task: str
    retriever: dict[str, Any] | None  # {"bm25": name} or {"model": ..., "revision": ..., ...}; None: reranker's first stage
    options: dict[str, Any]
    output: str
    trec: bool = False
    instruction: bool = False
    env: dict[str, str | None] = field(default_factory=dict)  # None: unset the variable in the job

    @property
    def job_id(self) -> str:
        return job_identity(self)

    @property
    def is_model_job(self) -> bool:
        return bool(self.retriever and "model" in self.retriever) or "rerank" in self.options

    @property
    def label(self) -> str:
        name = (self.retriever or {}).get("model") or (self.retriever or {}).get("bm25") or "-"
        path = Path(str(name))
        shown = "/".join(path.parts[-2:]) if path.is_absolute() or str(name).startswith(".") else str(name)  # folder: its tail
        parts = [self.task, shown]
        if self.options.get("expansion"):
            parts.append(f"+{self.options['expansion']}")
        if self.options.get("rerank"):
            parts.append(f"rerank={Path(str(self.options['rerank'])).name}")
        return " ".join(parts)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, payload: Mapping[str, Any]) -> Job:
        return cls(**dict(payload))


JOB_SCHEMA_VERSION = 1  # a new version is a new identity formula; existing sweep folders keep resuming under version 1


def job_identity(job: Job) -> str:
    """A stable id for what a job computes (job schema version 1): the JSON of [task, retriever, instruction,
    options] with sorted keys, where retriever is {"bm25": name} or {"model", "revision", ...} (never devices, batch
    size, API key variable or concurrency, which change no score) and options are what the job computes with (never
    where the data lives: data_dir, accept_drift, show_progress). Pinned by tests/test_sweep_trust.py: ids of fixed
    specs never change."""
    retriever = {key: value for key, value in (job.retriever or {}).items() if key not in NEUTRAL_MODEL_KEYS}
    options = {key: value for key, value in job.options.items() if key not in NEUTRAL_OPTIONS}
    payload = json.dumps([job.task, retriever, job.instruction, options], sort_keys=True, default=str)
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()[:16]


def job_request(job: Job, models: dict[str, Any] | None = None) -> Any:
    """The EvaluationRequest a job runs, built from its plain form (models named, not loaded; ``models`` keeps the
    ModelSpecs built so far, so a model of many jobs is resolved once)."""
    options = {key: value for key, value in job.options.items() if key not in ("llm_reranker", "llm_requests")}
    retriever = job.retriever or {}
    first = Bm25Spec(retriever["bm25"]) if "bm25" in retriever else None
    if "model" in retriever:
        loading = {name: retriever[name] for name in LOADING_KEYS if retriever.get(name) is not None}
        dtype = retriever.get("dtype") or "auto"
        key = json.dumps([retriever["model"], retriever.get("revision"), loading, job.instruction, dtype], sort_keys=True, default=str)
        models = {} if models is None else models
        if key not in models:
            models[key] = model_spec(retriever["model"], retriever.get("revision"), loading, job.instruction, dtype=dtype)
        first = models[key]
    if "rerank" in options:
        depth, batch_size = options.pop("rerank_depth", None) or 10, options.pop("rerank_batch_size", None)
        asks = job.options.get("llm_reranker")
        options["rerank"] = (llm_reranker_spec(options["rerank"], asks, job.options.get("llm_requests") or {}, depth=depth)
                             if asks is not None else CrossEncoderSpec(options["rerank"], depth=depth, batch_size=batch_size))
    return request_of(job.task, first, TaskArguments.of({**options, "show_progress": False}, "a sweep job's evaluate_task"))
