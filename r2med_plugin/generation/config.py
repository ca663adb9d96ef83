"""What a generation run is: the LLM configuration (what the expansions depend on) and the endpoint (where
requests go, which never changes the expansions). ``GenerationConfig.identity`` is what a folder's manifest
records and what resuming compares: a folder holds the expansions of one configuration."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from r2med_plugin.generation.prompts import check_method, prompts_hash, sampling_preset
from r2med_plugin.generation.store import check_name, slug_name
from r2med_plugin.llm.config import Endpoint
from r2med_plugin.rules import SettingError, SettingFileError
from r2med_plugin.types import TaskSpec

BM25_FIRST_STAGE = "bm25-lucene"
IDENTITY_KEYS = ("task", "method", "model", "llm", "prompts_sha256", "sampling", "first_stage", "extra_body", "dataset_revision")


@dataclass(frozen=True)
class GenerationConfig:
    method: str
    llm: str  # the model id the endpoint serves
    name: str | None = None  # the LLM's folder name (default: llm made folder-safe)
    preset: str = "api"
    temperature: float | None = None
    top_p: float | None = None
    max_tokens: int | None = None
    seed: int | None = None
    first_stage: str = BM25_FIRST_STAGE  # lamer: bm25-lucene or a run file
    extra_body: Mapping[str, Any] | None = field(default=None, hash=False)

    def __post_init__(self) -> None:
        check_method(self.method)
        if self.method != "lamer" and self.first_stage != BM25_FIRST_STAGE:
            raise SettingError(f"{{first_stage}} is used by lamer only; {self.method} prompts hold the query alone",
                               field="first_stage")
        self.sampling()  # refuse bad values before any data loads

    @property
    def folder_name(self) -> str:
        return check_name(self.name or slug_name(self.llm))

    def sampling(self) -> dict[str, Any]:
        """The preset's official defaults with the given (non-None) overrides, validated."""
        sampling: dict[str, Any] = sampling_preset(self.preset)
        overrides = {"temperature": self.temperature, "top_p": self.top_p, "max_tokens": self.max_tokens, "seed": self.seed}
        sampling.update({key: value for key, value in overrides.items() if value is not None})
        if sampling.get("temperature") is not None and not 0 <= sampling["temperature"] <= 2:
            raise SettingError(f"{{temperature}} must be within [0, 2], got {sampling['temperature']}", field="temperature")
        if sampling.get("top_p") is not None and not 0 < sampling["top_p"] <= 1:
            raise SettingError(f"{{top_p}} must be within (0, 1], got {sampling['top_p']}", field="top_p")
        if sampling.get("max_tokens") is not None and sampling["max_tokens"] < 1:
            raise SettingError(f"{{max_tokens}} must be a positive integer, got {sampling['max_tokens']}",
                               field="max_tokens")
        return sampling

    def first_stage_identity(self) -> dict[str, str] | None:
        if self.method != "lamer":
            return None
        if self.first_stage == BM25_FIRST_STAGE:
            return {"name": BM25_FIRST_STAGE}
        path = Path(self.first_stage)
        if not path.is_file():
            raise SettingFileError(f"{{first_stage}} {self.first_stage}: no such run file; pass bm25-lucene or a TREC / topk_docs "
                                   "JSONL run", field="first_stage")
        return {"name": "run file", "path": str(path.resolve()), "sha256": hashlib.sha256(path.read_bytes()).hexdigest()}

    def identity(self, spec: TaskSpec, dataset_revision: str) -> dict[str, Any]:
        """What the expansions depend on (IDENTITY_KEYS): a folder made with another identity is not resumed."""
        extra_body = dict(self.extra_body) if self.extra_body is not None else None
        return {
            "task": spec.name, "method": self.method, "model": self.llm, "llm": self.folder_name,
            "prompts_sha256": prompts_hash(spec, self.method), "sampling": self.sampling(),
            "first_stage": self.first_stage_identity(), "extra_body": extra_body, "dataset_revision": dataset_revision,
        }


# the endpoint settings a generation run reads (an embedding endpoint's ``dimensions`` is not one; ``extra_body`` is
# GenerationConfig's, as it changes the expansions)
GENERATION_ENDPOINT_KEYS = ("base_url", "api_key_env", "concurrency", "max_retries", "timeout")


@dataclass(frozen=True)
class GenerationRequest:
    """One task's generation run, the one argument of ``generate_expansions`` and ``estimate_generation_cost``: what
    the expansions depend on (``config``), where the requests go (``endpoint``; an estimate sends none, so needs none)
    and how this run goes (the folder ``out``, failures tolerated, starting the folder again, the data, progress)."""

    task: str
    config: GenerationConfig
    endpoint: Endpoint | None = None
    out: str | os.PathLike = "r2med-expansions"
    max_failures: int = 10
    overwrite: bool = False
    data_dir: str | os.PathLike | None = None
    accept_drift: bool | None = None
    show_progress: bool = True

    @classmethod
    def of(cls, task: str, method: str, llm: str, base_url: str | None = None, /, *, what: str = "generate_expansions",
           **settings: Any) -> GenerationRequest:
        """The keyword form (``generate_expansions(task, method, llm, base_url, out=..., concurrency=...)``): each
        setting goes to the part that owns it; an unknown one is refused with the known ones."""
        owners = {"config": [item.name for item in fields(GenerationConfig)][2:], "endpoint": GENERATION_ENDPOINT_KEYS,
                  "request": [item.name for item in fields(cls)][3:]}
        known = [name for names in owners.values() for name in names if name != "base_url"]
        unknown = sorted(set(settings) - set(known))
        if unknown:
            raise TypeError(f"{what}() got an unexpected keyword argument {unknown[0]!r}; it takes task, method, llm, "
                            f"base_url and {', '.join(known)}")
        part = {owner: {name: settings[name] for name in names if name in settings} for owner, names in owners.items()}
        endpoint = Endpoint(base_url, **part["endpoint"]) if base_url is not None or part["endpoint"] else None
        return cls(task, GenerationConfig(method, llm, **part["config"]), endpoint, **part["request"])
