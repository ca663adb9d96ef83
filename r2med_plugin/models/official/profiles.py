"""The official R2MED dense retrievers' profiles, as data: ``official:<name>`` (``--retriever official:<name>``).

Each profile is what src/eval_retrieval.py of R2MED/R2MED@62b7074 configures for one of its retriever names
(contriever, medcpt, inst-l, inst-xl, bmr-410m, bmr-2b, bmr-7b, bge, e5, grit, sfr, nv, openai, voyage): the
checkpoint, the src/utils.py model class with its arguments, and the query and document instructions per task.
They are data (profiles.json beside this module), extracted from the official code by
scripts/extract_official_retrievers.py, never retyped. How each class encodes: r2med_plugin.models.official.recipes;
how a profile loads: r2med_plugin.models.official.loading.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import Any

from r2med_plugin.errors import UserError
from r2med_plugin.models.protocols import EncodeKind
from r2med_plugin.rules import SettingError

PROFILE_FILE = "profiles.json"
ENDPOINTS = {  # the public endpoints of the two API profiles, and where their key is read from by default
    "text-embedding-3-large": ("https://api.openai.com/v1", "OPENAI_API_KEY"),
    "voyage-3": ("https://api.voyageai.com/v1", "VOYAGE_API_KEY"),
}
EXPANSION_KEEPS_INSTRUCTION = ("InstructorModel", "GritModel", "NVEmbedModel")


@dataclass(frozen=True)
class RetrieverProfile:
    name: str  # the official short name (src/run.py --retriever_name)
    model_class: str  # the src/utils.py class
    checkpoint: str | tuple[str, str]  # hub id; MedCPT: (query tower, article tower) as model_path_dict lists them
    arguments: Mapping[str, Any]  # what init_model passes, over the class defaults
    query_instruction: str | Mapping[str, str] | None  # one for every task, or per task (hub name)
    document_instruction: str | Mapping[str, str] | None
    published_row: str  # the retriever's row in the published leaderboard

    @property
    def remote(self) -> bool:
        return self.model_class == "RetrievalOPENAI"

    def instruction(self, kind: EncodeKind, hub_name: str | None) -> str | None:
        """The instruction the official code sets for ``kind`` on the task ``hub_name`` (None: none)."""
        value = self.query_instruction if kind == "query" else self.document_instruction
        if not isinstance(value, Mapping):
            return value
        if hub_name is None:
            raise UserError(f"official:{self.name} has one instruction per task: bind the encoder to a task first "
                            "(encoder.for_task('R2MEDBiology'); the Dense first stage does this itself)")
        if hub_name not in value:
            raise UserError(f"official:{self.name} has no instruction for the task {hub_name!r}; it knows {', '.join(value)}")
        return value[hub_name]


@lru_cache(maxsize=1)
def _profile_data() -> dict[str, Any]:
    text = (resources.files(__package__) / PROFILE_FILE).read_text(encoding="utf-8")
    return json.loads(text)


def profile_source() -> Mapping[str, str]:
    """Where the profiles were extracted from (repository, commit, what each part comes from)."""
    return dict(_profile_data()["source"])


def retriever_profiles() -> dict[str, RetrieverProfile]:
    profiles = {}
    for name, entry in _profile_data()["profiles"].items():
        checkpoint = entry["checkpoint"]
        profiles[name] = RetrieverProfile(
            name, entry["class"], tuple(checkpoint) if isinstance(checkpoint, list) else checkpoint,
            dict(entry["arguments"]), entry["query_instruction"], entry["document_instruction"], entry["published_row"])
    return profiles


def parse_weights(profile: RetrieverProfile, weights: str) -> str | tuple[str, str]:
    """The checkpoint of ``official:<name>@<weights>``: a folder or hub id (MedCPT: ``<query tower>+<article tower>``)."""
    if profile.remote:
        raise SettingError(f"official:{profile.name} is an API model ({profile.checkpoint}); it has no weights to replace "
                           "after '@': use openai:<model> {base_url} URL for another endpoint model", field="retriever")
    if isinstance(profile.checkpoint, tuple):
        query, plus, article = weights.partition("+")
        if not plus or not query.strip() or not article.strip():
            raise UserError(f"official:medcpt@ takes two towers: official:medcpt@<query encoder>+<article encoder>, got {weights!r}")
        return query, article
    if not weights.strip():
        raise UserError(f"official:{profile.name}@ names no weights: give a folder or a hub id after '@'")
    return weights


def default_weights(profile: RetrieverProfile) -> str | tuple[str, str]:
    """The weights the official class loads: the checkpoint; for MedCPT the two towers init_model passes, which are
    the article tower twice (``retrieral_model_path[1]`` for both)."""
    if isinstance(profile.checkpoint, tuple):
        return profile.arguments["query_encoder_name_or_path"], profile.arguments["doc_encoder_name_or_path"]
    return profile.checkpoint


def towers(checkpoint: str | tuple[str, str]) -> tuple[str, str]:
    """(query tower, document tower) of a checkpoint (one model: the same twice)."""
    return checkpoint if isinstance(checkpoint, tuple) else (checkpoint, checkpoint)



def official_dtype(profile: RetrieverProfile) -> str:
    """The precision the official code loads the profile's weights in (float16: NV-Embed; float32 the others)."""
    return "float16" if profile.model_class == "NVEmbedModel" else "float32"
