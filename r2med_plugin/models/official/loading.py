"""An official profile loaded: ``OfficialEncoder`` (the Encoder a profile is, bound to a task by ``for_task``) and
``load_official_encoder`` (the profile's recipe on its weights, or on weights given after '@', named as
r2med_plugin.models.official.naming says)."""

from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from r2med_plugin.errors import UserError
from r2med_plugin.models.checks import check_model_name
from r2med_plugin.models.embedding_endpoint import endpoint_host
from r2med_plugin.models.identity import model_revision
from r2med_plugin.models.official.naming import folder_label, result_name
from r2med_plugin.models.official.profiles import (
    ENDPOINTS,
    EXPANSION_KEEPS_INSTRUCTION,
    RetrieverProfile,
    official_dtype,
    towers,
)
from r2med_plugin.models.official.recipes import (
    BiEncoderRecipe,
    EndpointRecipe,
    GritRecipe,
    InstructorRecipe,
    NVEmbedRecipe,
    TransformerRecipe,
)
from r2med_plugin.models.placement import official_device, placement
from r2med_plugin.models.protocols import EncodeKind, EncoderBase
from r2med_plugin.rules import SettingError

# --- the encoders ---------------------------------------------------------------------------------------------


class OfficialEncoder(EncoderBase):
    """An official profile as an Encoder (``encode(texts, kind=...)``), bound to a task by ``for_task``."""

    query_prompt = None  # the profile sets the instructions

    def __init__(self, profile: RetrieverProfile, recipe: Any, *, name: str, revision: str, identity: str,
                 task: str | None = None) -> None:
        self.profile, self.recipe = profile, recipe
        self.name, self.revision, self._identity = name, revision, identity
        self.task = task

    def for_task(self, task: str) -> OfficialEncoder:
        bound = copy.copy(self)
        bound.task = task
        return bound

    @property
    def hub_name(self) -> str | None:
        if self.task is None:
            return None
        from r2med_plugin.catalog import get_task_spec

        return get_task_spec(self.task).hub_name

    @property
    def cache_identity(self) -> str:
        """Weights, the recipe's settings and the instructions it uses for the bound task."""
        settings = json.dumps([self.profile.model_class, self.recipe.settings(),
                               self.instruction("query"), self.instruction("document")], sort_keys=True, default=repr)
        return f"{self._identity}/official:{self.profile.name}/{hashlib.sha256(settings.encode()).hexdigest()[:16]}"

    def instruction(self, kind: EncodeKind) -> str | None:
        return self.profile.instruction(kind, self.hub_name)

    def instructions(self) -> dict[str, str | None]:
        """What this profile prepends (or passes) on the bound task: query, document and expansion instructions."""
        query = self.instruction("query")
        return {"query": query, "document": self.instruction("document"),
                "expansion": query if self.profile.model_class in EXPANSION_KEEPS_INSTRUCTION else None}

    @property
    def expansion_mean_dtype(self) -> str:
        """The dtype the official class's embeddings have, in which it averages a query's and its expansion's:
        float16 for NV-Embed at its official float16, else float32."""
        return self.recipe.output_dtype

    def encode(self, texts: Sequence[str], *, kind: EncodeKind, prompt: str | None = None) -> np.ndarray:
        if prompt is not None:
            raise UserError(f"official:{self.profile.name} applies the official instructions of each task itself; a prompt "
                            "of ours would be a second one: drop --instruction (or query_prompt=)")
        return self.recipe.encode(list(texts), kind, self.instruction(kind))

    def encode_expansions(self, texts: Sequence[str]) -> np.ndarray:
        """The official encoding of an expansion text (mixed with the query's embedding before the search)."""
        instruction = self.instruction("query") if self.profile.model_class in EXPANSION_KEEPS_INSTRUCTION else None
        return self.recipe.encode(list(texts), "query", instruction, expansion=True)


# --- loading -----------------------------------------------------------------------------------------------------


def load_official_encoder(profile: RetrieverProfile, checkpoint: str | tuple[str, str], *, revision: str | None = None,
                          device: str | Sequence[str] | None = "auto", batch_size: int | None = None, dtype: str | None = None,
                          show_progress: bool = True, name: str | None = None, endpoint: Any = None) -> OfficialEncoder:
    """The encoder of ``profile`` on ``checkpoint`` (the profile's own, or weights given after '@'); an API profile
    sends its texts to ``endpoint`` (an encoder with ``encode(texts, kind=..., extra_body=...)``, ``cache_identity``
    and ``revision``: the official loader builds an EndpointEncoder)."""
    arguments = dict(profile.arguments)
    batch = batch_size or int(arguments["batch_size"])
    if batch < 1:
        raise UserError(f"batch_size must be positive, got {batch}")
    if name is not None:
        check_model_name(name)
    if profile.remote:
        if dtype is not None:
            raise UserError(f"official:{profile.name} embeds on its API's servers: dtype reaches no code there; drop it")
        if endpoint is None:
            raise UserError(f"official:{profile.name} embeds through an endpoint: load it by name (load_encoder('official:{profile.name}'))")
        model = str(profile.checkpoint)
        recipe = EndpointRecipe(model, endpoint, voyage=model.startswith("voyage"))
        # another server than the API's: filed as <model>@<host> (its model is not known to be the published one)
        served = (model if endpoint.host == endpoint_host(ENDPOINTS[model][0])
                  else f"{model}@{endpoint.host.split('://', 1)[1].replace(':', '-')}")
        return OfficialEncoder(profile, recipe, name=name or result_name(served, profile), revision=endpoint.revision,
                               identity=endpoint.cache_identity)
    placed = placement(device)
    if placed.pooled and profile.model_class != "InstructorModel":  # the one recipe that encodes with sentence-transformers
        raise SettingError(f"{{device}} {','.join(placed.devices)}: official:{profile.name} encodes with the official code's "
                           f"own loop ({profile.model_class}) in one process, which sentence-transformers' multi-process pool "
                           "cannot run; give one device (or auto)", field="device")
    query_tower, document_tower = towers(checkpoint)
    local = Path(document_tower).expanduser().is_dir()
    hub_revision = None if local else revision
    common = {"batch_size": batch, "device": official_device(placed.device, ""), "show_progress": show_progress,
              "revision": hub_revision, **({"devices": list(placed.devices)} if placed.pooled else {})}
    try:
        recipe = _recipe(profile, arguments, query_tower, document_tower, common, dtype)
    except OSError as error:
        raise UserError(f"could not load official:{profile.name} from {document_tower!r} ({error}); give a local folder "
                        "or a hub name in the Hugging Face cache (HF_HUB_OFFLINE=1 needs it cached)") from error
    weights, reported, identity = model_revision(document_tower, revision)
    weights = folder_label(weights, local)
    if query_tower != document_tower:  # two towers: both name the results (never filed as the official one-tower run)
        query_weights, query_reported, query_identity = model_revision(query_tower, revision)
        query_weights = folder_label(query_weights, Path(query_tower).expanduser().is_dir())
        weights = f"{query_weights}+{weights}"
        reported, identity = f"{query_reported}+{reported}", f"{query_identity}+{identity}"
    if dtype is not None and dtype != official_dtype(profile):  # other precision, other numbers: filed apart
        weights = f"{weights}+{dtype}"
    return OfficialEncoder(profile, recipe, name=name or result_name(weights, profile), revision=reported, identity=identity)


def _recipe(profile: RetrieverProfile, arguments: dict[str, Any], query_tower: str, document_tower: str,
            common: dict[str, Any], dtype: str | None) -> Any:
    kind = profile.model_class
    if kind in ("FlagDRESModel", "HighScaleModel"):
        if arguments.get("load_mode", "Automodel") != "Automodel":
            raise UserError(f"official:{profile.name}: load_mode {arguments['load_mode']!r} is not supported")
        return TransformerRecipe(document_tower, pooling_method=arguments["pooling_method"],
                                 normalize_embeddings=arguments["normalize_embeddings"], max_length=arguments["max_length"],
                                 encode_mode=arguments["encode_mode"], dtype=dtype, **common)
    if kind == "BiEncoderModel":
        return BiEncoderRecipe(query_tower, document_tower, max_length=arguments["max_length"], dtype=dtype, **common)
    if dtype is not None and kind in ("InstructorModel", "GritModel"):
        raise UserError(f"official:{profile.name} loads its weights as the official code does (dtype reaches no code): drop dtype")
    if kind == "InstructorModel":
        return InstructorRecipe(document_tower, **common)
    if kind == "GritModel":
        return GritRecipe(document_tower, query_max_length=arguments["query_max_length"],
                          doc_max_length=arguments["doc_max_length"], **common)
    if kind == "NVEmbedModel":
        return NVEmbedRecipe(document_tower, max_length=arguments["max_length"],
                             normalize_embeddings=arguments["normalize_embeddings"], dtype=dtype, **common)
    raise UserError(f"official:{profile.name}: the class {kind} has no encoder here")
