"""The official expansion prompts (data in official_prompts.json) and how they are filled in.

The official code keys its templates by internal task names (``Stack-Biology``, ``PMC-Treat``...);
``TaskSpec.official_internal_name`` maps a task to its key. A request is two chat messages: the
system prompt and the filled-in template. LaMer's ``{PASSAGE}`` is the first stage's top 10
documents, newlines replaced by spaces, each cut to its first 512 whitespace-separated words, each
as ``"\\n[rank]. text"``.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from functools import lru_cache
from importlib import resources
from typing import Any

from r2med_plugin import identifiers
from r2med_plugin.errors import UserError
from r2med_plugin.types import TaskSpec

GENERATION_METHODS = identifiers.GENERATION_METHODS
PRESETS = ("api", "vllm")


@lru_cache(maxsize=1)
def official_prompts() -> dict[str, Any]:
    """The extracted official prompt data (see scripts/extract_official_prompts.py)."""
    text = (resources.files("r2med_plugin") / "generation" / "official_prompts.json").read_text(encoding="utf-8")
    return json.loads(text)


def check_method(method: str) -> str:
    if method not in GENERATION_METHODS:
        raise UserError(f"unknown generation method {method!r}; the official code generates {', '.join(GENERATION_METHODS)}")
    return method


def template(spec: TaskSpec, method: str) -> str:
    """The official user-prompt template of ``method`` for ``spec`` (placeholders {TEXT}, {PASSAGE})."""
    templates = official_prompts()["templates"][check_method(method)]
    if spec.official_internal_name not in templates:
        raise UserError(f"{spec.name} has no official {method} prompt; prompts exist for the 8 R2MED tasks")
    return templates[spec.official_internal_name]


def system_prompt() -> str:
    return official_prompts()["system_prompt"]


def cut_words(text: str, max_words: int) -> str:
    """The first ``max_words`` whitespace-separated words, re-joined by single spaces (as the official cut_text)."""
    return " ".join(text.split()[:max_words])


def lamer_passages(doc_ids: Sequence[str], doc_text: Mapping[str, str]) -> str:
    """The ``{PASSAGE}`` value: the first ``top_k`` of ``doc_ids`` (ranked), in the official format."""
    rules = official_prompts()["lamer_passages"]
    items = []
    for rank, doc_id in enumerate(doc_ids[: rules["top_k"]], start=1):
        text = cut_words(doc_text[doc_id].replace("\n", " "), rules["max_words"])
        items.append(rules["item"].format(rank=rank, text=text))
    return "".join(items)


def user_prompt(spec: TaskSpec, method: str, text: str, passages: str | None = None) -> str:
    """The filled-in template, exactly as the official code fills it (str.format)."""
    if method == "lamer":
        if passages is None:
            raise UserError("lamer needs the first stage's passages")
        return template(spec, method).format(TEXT=text, PASSAGE=passages)
    return template(spec, method).format(TEXT=text)


def messages(spec: TaskSpec, method: str, text: str, passages: str | None = None) -> list[dict[str, str]]:
    """The chat messages of one request: the official system prompt and the filled-in template."""
    return [
        {"role": "system", "content": system_prompt()},
        {"role": "user", "content": user_prompt(spec, method, text, passages)},
    ]


def prompts_hash(spec: TaskSpec, method: str) -> str:
    """sha256 of what shapes every request of (task, method): system prompt, template, LaMer rules."""
    data = official_prompts()
    payload = {"system": data["system_prompt"], "template": template(spec, method)}
    if method == "lamer":
        payload["lamer_passages"] = data["lamer_passages"]
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode("utf-8")).hexdigest()


def sampling_preset(name: str) -> dict[str, float | int | None]:
    """The official sampling defaults: "api" (the OpenAI path: temperature 0.8, top_p 0.8) or
    "vllm" (the local path: temperature 0.7, seed 42, max_tokens 10240)."""
    if name not in PRESETS:
        raise UserError(f"unknown sampling preset {name!r}; choose from {', '.join(PRESETS)}")
    return dict(official_prompts()["sampling_presets"][name])
