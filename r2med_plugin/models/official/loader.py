"""The ``official`` model loader: every model of the official R2MED code by its short name.

- ``--retriever official:<name>``: the dense retrievers of src/eval_retrieval.py (contriever, medcpt, inst-l, inst-xl,
  bmr-410m, bmr-2b, bmr-7b, bge, e5, grit, sfr, nv, openai, voyage), r2med_plugin.models.official.loading;
- ``--rerank official:<name>``: the rerankers of src/eval_reranker.py (rankllama, bge-reranker, monobert),
  r2med_plugin.models.official.reranker_model; also any ``castorini/rankllama-*`` LoRA.

``official:<name>@<weights>`` runs the same recipe on other weights (a folder or a hub id; MedCPT takes
``<query tower>+<article tower>``, RankLLaMA ``<adapter>[+<base>]``). The two API retrievers take
``--base-url`` (default: OpenAI's and Voyage's public endpoints), ``--api-key-env`` (default OPENAI_API_KEY and
VOYAGE_API_KEY) and ``--concurrency``. Registered through the ``r2med_plugin.model_loaders`` entry point.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

from r2med_plugin.errors import UserError
from r2med_plugin.models.official import reranker_model
from r2med_plugin.models.official.loading import OfficialEncoder, load_official_encoder
from r2med_plugin.models.official.profiles import ENDPOINTS, default_weights, parse_weights, retriever_profiles, towers
from r2med_plugin.models.placement import merged_setting
from r2med_plugin.models.registry import ModelLoaderBase, RetrieverRef
from r2med_plugin.rules import SettingError

NAME = SCHEME = "official"
ENDPOINT_SETTINGS = ("base_url", "api_key_env", "concurrency")  # what the two API retrievers take


def _usage() -> str:
    return (f"official retrievers: {', '.join('official:' + name for name in retriever_profiles())}; official rerankers: "
            f"{', '.join('official:' + name for name in reranker_model.PROFILES)}; the same recipe on other weights: "
            "official:<name>@<folder or hub id>")


def _suggestion(name: str) -> str:
    """How to name ``name`` as an official model: its profile where it is a published checkpoint, the recipe on a folder."""
    from pathlib import Path

    for short, profile in retriever_profiles().items():
        towers = profile.checkpoint if isinstance(profile.checkpoint, tuple) else (profile.checkpoint,)
        if name in towers:
            return f"write official:{short} (--retriever official:{short}), which needs no --loader"
    for short, reranker_profile in reranker_model.PROFILES.items():
        if name == reranker_profile.checkpoint:
            return f"write official:{short} (--rerank official:{short}), which needs no --loader"
    if Path(name).expanduser().exists():
        return f"to run an official recipe on this folder, write official:<name>@{name} (e.g. official:bge@{name})"
    return f"official models are named official:<name> and need no --loader ({_usage()})"


def endpoint_options(name: str) -> tuple[str, ...]:
    """The endpoint settings ``name`` takes (the API retrievers'), else ()."""
    short = name.split(":", 1)[1].partition("@")[0] if name.startswith(f"{SCHEME}:") else ""
    profile = retriever_profiles().get(short)
    return ENDPOINT_SETTINGS if profile is not None and profile.remote else ()


class OfficialLoader(ModelLoaderBase):
    """See r2med_plugin.models.registry.ModelLoader. It also claims ``castorini/rankllama-*`` ids when
    ``loader="auto"`` (mteb has no RankLLaMA)."""

    name = NAME
    scheme = SCHEME
    auto = True

    def endpoint_options(self, name: str) -> tuple[str, ...]:
        return endpoint_options(name)

    def unclaimed_hint(self, name: str) -> str:
        return f"{name!r} is not named as an official R2MED model: {_suggestion(name)}; drop --loader official"

    def claim(self, name: str, revision: str | None, settings: Mapping[str, Any]) -> RetrieverRef | None:
        if not name.startswith(f"{SCHEME}:") and not name.startswith(reranker_model.RANKLLAMA_PREFIX):
            return None  # a plain name (or one mteb knows) is not an official model
        short, at, weights = name.split(":", 1)[1].partition("@") if name.startswith(f"{SCHEME}:") else ("", "", "")
        profile = retriever_profiles().get(short)
        if profile is None:
            if short and short not in reranker_model.PROFILES:
                raise UserError(f"{name!r} is not a model of the official R2MED code: {_usage()}")
            _no_settings(name, settings, "an official reranker that loads locally")
            reranker, reranker_checkpoint, base = reranker_model.parse(name)
            return RetrieverRef(name, "plugin", reranker_checkpoint, revision, loader=NAME,
                                settings=(("base", base), ("mode", reranker.mode), ("profile", reranker.name), ("role", "reranker")))
        checkpoint = parse_weights(profile, weights) if at else default_weights(profile)
        if profile.remote:
            if revision is not None:
                raise SettingError(f"{name} is served by its API: {{revision}} reaches no code there; drop it", field="revision")
            unknown = sorted(set(settings) - set(ENDPOINT_SETTINGS))
            if unknown:
                flags = ", ".join("{" + key + "}" for key in unknown)
                raise SettingError(f"{flags}: {name} sends the official code's requests, at the official size of "
                                   f"{profile.checkpoint}; drop {flags}", field=unknown[0])
            return RetrieverRef(name, "plugin", str(checkpoint), None, loader=NAME,
                                settings=(("profile", profile.name), ("role", "retriever"), *sorted(settings.items())))
        _no_settings(name, settings, "an official retriever that loads locally")
        if revision is not None and isinstance(checkpoint, tuple) and checkpoint[0] != checkpoint[1]:
            raise SettingError(f"{name}: one {{revision}} cannot pin two repositories (the query and the article tower); "
                               "download each at its revision (huggingface-cli download REPO --revision SHA --local-dir DIR) "
                               "and name the two folders after '@'", field="revision")
        source = "+".join(checkpoint) if isinstance(checkpoint, tuple) else checkpoint
        return RetrieverRef(name, "plugin", source, revision, loader=NAME,
                            settings=(("profile", profile.name), ("role", "retriever")))

    def stamp(self, ref: RetrieverRef) -> str:
        settings = dict(ref.settings)
        if settings["role"] == "reranker":
            parts = [f"{settings['mode']}:{reranker_model.weights_stamp(ref.source, ref.revision)}"]
            if settings.get("base"):
                parts.append(f"base:{reranker_model.weights_stamp(settings['base'], None)}")
            return "+".join(parts)
        profile = retriever_profiles()[settings["profile"]]
        if profile.remote:
            from r2med_plugin.models.embedding_endpoint import endpoint_host

            url = settings.get("base_url") or ENDPOINTS[ref.source][0]
            return f"retriever:{profile.name}:{endpoint_host(url)}:{ref.source}"
        loaded = towers(_checkpoint(ref, profile))
        return f"retriever:{profile.name}:" + "+".join(reranker_model.weights_stamp(tower, ref.revision) for tower in dict.fromkeys(loaded))

    def load_encoder(self, ref: RetrieverRef, *, device: str | None = "auto", devices: Sequence[str] | None = None,
                     batch_size: int | None = None, show_progress: bool = True, name: str | None = None,
                     dtype: str | None = None, **requests: Any) -> OfficialEncoder:
        """``requests``: ``timeout`` and ``max_retries`` of the API profiles' requests."""
        settings = dict(ref.settings)
        if settings["role"] == "reranker":
            raise SettingError(f"{ref.name} is a reranker (it scores query-document pairs): use it with {{rerank}}, "
                               "after a first stage ({first_stage})", field="retriever")
        profile = retriever_profiles()[settings["profile"]]
        setting = merged_setting(device, devices)  # a list is checked by the profile's recipe (load_official_encoder)
        endpoint = None
        unknown = sorted(set(requests) - {"timeout", "max_retries"})
        if unknown or (requests and not profile.remote):
            raise TypeError(f"unexpected options for {ref.name}: {', '.join(sorted(requests))}")
        if profile.remote:
            if setting not in (None, "cpu", "auto"):
                raise SettingError(f"{ref.name} runs on its API's servers: a {{device}} reaches no code there; drop it",
                                   field="device")
            endpoint = _endpoint(profile.checkpoint, settings, batch_size or int(profile.arguments["batch_size"]), show_progress,
                                 requests)
        return load_official_encoder(profile, _checkpoint(ref, profile), revision=ref.revision, device=setting,
                                     batch_size=batch_size, dtype=dtype, show_progress=show_progress, name=name,
                                     endpoint=endpoint)

    def load_cross_encoder(self, ref: RetrieverRef, *, device: str | None = "auto", batch_size: int = 32,
                           dtype: str | None = None, max_length: int = reranker_model.MAX_LENGTH,
                           **options: Any) -> reranker_model.OfficialReranker:
        settings = dict(ref.settings)
        if settings["role"] == "retriever":
            raise SettingError(f"{ref.name} is a dense retriever of the official code: use it as the first stage "
                               f"({{retriever}} {ref.name} or {{first_stage}} {ref.name}) and rerank with a reranker",
                               field="rerank")
        if options:
            raise TypeError(f"unexpected options for an official reranker: {', '.join(sorted(options))}")
        return reranker_model.OfficialReranker(settings["mode"], ref.source, profile=settings["profile"], base=settings.get("base"),
                                               revision=ref.revision,
                                               device=device, batch_size=batch_size,
                                               dtype=dtype or reranker_model.PROFILES[settings["profile"]].dtype, max_length=max_length)


LOADER = OfficialLoader()


def _checkpoint(ref: RetrieverRef, profile: Any) -> str | tuple[str, str]:
    if isinstance(profile.checkpoint, tuple):
        query, _, article = ref.source.partition("+")
        return (query, article)
    return ref.source


def _no_settings(name: str, settings: Mapping[str, Any], what: str) -> None:
    if settings:
        flags = ", ".join("--" + key.replace("_", "-") for key in sorted(settings))
        raise UserError(f"{flags} configure an endpoint; {name!r} is {what}: drop {flags}")


def _endpoint(model: Any, settings: Mapping[str, Any], batch_size: int, show_progress: bool,
              requests: Mapping[str, Any]) -> Any:
    from r2med_plugin.models.embedding_endpoint import EndpointEncoder, endpoint_host

    url, default_env = ENDPOINTS[str(model)]
    key_env = settings.get("api_key_env") or default_env
    own_server = bool(settings.get("base_url")) and endpoint_host(settings["base_url"]) != endpoint_host(url)
    if not os.environ.get(key_env) and not own_server:  # the public API needs a key; a server of your own may not
        raise SettingError(f"{model} at {url} needs an API key: set ${key_env} (or name another variable with {{api_key_env}}), "
                           "or give {base_url} for a server of your own", field="api_key_env")
    return EndpointEncoder(str(model), settings.get("base_url") or url, api_key_env=key_env if os.environ.get(key_env) or settings.get("api_key_env") else None,
                           concurrency=settings.get("concurrency") or 8, batch_size=batch_size, show_progress=show_progress,
                           encoding_format="base64" if str(model).startswith("voyage") else "float", **requests)
