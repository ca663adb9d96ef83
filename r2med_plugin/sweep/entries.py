"""A sweep spec's retriever and reranker entries, read into the types every front end builds: a retrievers entry
into a ``ModelSpec`` (or a BM25 name), a rerankers entry into a ``CrossEncoderSpec`` or an ``LlmRerankerSpec``.

The entries stay plain dicts in a job (its id hashes them); the types check them once, here, with their refusals
keyed under the entry (```retrievers[0].revision```).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from r2med_plugin.errors import UserError
from r2med_plugin.evaluation.request import RequestError
from r2med_plugin.evaluation.specs import CrossEncoderSpec, EndpointSpec, LlmRerankerSpec, ModelSpec, check_retriever_name
from r2med_plugin.identifiers import BM25_NAMES
from r2med_plugin.llm.config import LLM_SETTING_USERS
from r2med_plugin.llm.reranker_kinds import is_llm_reranker_name
from r2med_plugin.models.placement import DTYPES
from r2med_plugin.request_options import BASE_URL, EMBEDDING_ENDPOINT_OPTIONS, EXTRA_BODY, LOADER, option_fields
from r2med_plugin.rules import neutral_fields
from r2med_plugin.sweep.shorthand import SpecError, as_bool, as_int, as_list, read_device_setting, spec_error

# How a model loads: --loader, and an openai:<model> endpoint's settings; kept in a job only when given
LOADING_KEYS = (LOADER.name, *EMBEDDING_ENDPOINT_OPTIONS)
# a retrievers entry's keys: the model, the ModelSpec fields that hold an option, by their field names (revision, not
# model_revision; not display_name: a sweep names its results itself), the device under its earlier spelling (devices)
MODEL_KEYS = {"model", "devices", *(name for name in option_fields(ModelSpec) if name != "display_name"), *LOADING_KEYS}


LLM_REQUEST_KEYS = neutral_fields(EndpointSpec)  # how its requests go


def llm_reranker_keys() -> tuple[str, ...]:
    """What an LLM reranker (llm-listwise:<model>, ...) asks, in a job's identity: its endpoint, extra body and the
    settings the kinds' settings classes declare (llm.config.LLM_SETTING_USERS: a registered kind's too)."""
    return (BASE_URL.name, *LLM_SETTING_USERS, EXTRA_BODY.name)


def reranker_keys() -> set[str]:
    """Every key a rerankers entry may hold (a cross-encoder's or an LLM reranker's)."""
    return {"model", "first_stage", "depth", "batch_size", *llm_reranker_keys(), *LLM_REQUEST_KEYS}


def _looks_like_path(name: str) -> bool:
    """Whether a model name is meant as a local path: absolute, ./ ../ ~, or a relative path whose first folder
    exists here ("models/m" with a models/ folder). Hub names ("org/name") contain "/" too, so they pass."""
    if name in (".", "..") or name.startswith(("./", "../", "~", ".\\", "..\\")) or Path(name).is_absolute():
        return True
    parts = Path(name).parts
    return len(parts) > 1 and Path(parts[0]).is_dir()


def check_model_path(path: Path, key: str, name: str) -> None:
    """Refuse a model (or first stage) that names a local path that does not exist, before any job runs.

    Jobs read relative paths from the folder ``r2med sweep`` runs in (not the spec's folder)."""
    if not _looks_like_path(name) or Path(name).expanduser().exists():
        return
    beside_spec = path.parent / name
    hint = (f" ({beside_spec} exists: model paths are relative to the folder you run r2med from, not to the spec; "
            "write the absolute path)") if not Path(name).is_absolute() and path.name != "<spec>" and beside_spec.exists() else ""
    raise spec_error(
        path, key, f"is {name!r}, a local path that does not exist (looked for {Path(name).expanduser().absolute()}){hint}",
        "give an existing model folder (or run file), or a hub name such as org/name",
    )


def read_retriever(path: Path, index: int, entry: Any, raw: Mapping[str, Any]) -> dict[str, Any]:
    key = f"retrievers[{index}]"
    if isinstance(entry, str):
        if entry in BM25_NAMES:
            return {"bm25": entry}
        entry = {"model": entry}
    if not isinstance(entry, dict) or not isinstance(entry.get("model"), str) or not entry["model"]:
        raise spec_error(path, key, f"is {entry!r}", "write bm25-lucene, bm25-hakari, bm25-robertson, a model name, or {model: NAME_OR_FOLDER, revision: ...}")
    unknown = sorted(set(entry) - MODEL_KEYS)
    if unknown:
        raise spec_error(path, f"{key}.{unknown[0]}", "is not a model setting", f"use only {sorted(MODEL_KEYS)}")
    if entry["model"] in BM25_NAMES:
        raise spec_error(path, key, f"uses {entry['model']!r} as a model", f"write it as a plain string: - {entry['model']}")
    try:
        check_retriever_name(entry["model"])  # "bm25-lucen" is a typo, not a hub model to download
    except ValueError as error:
        raise spec_error(path, key, f"is {entry['model']!r}", str(error)) from None
    check_model_path(path, key if set(entry) == {"model"} else f"{key}.model", entry["model"])
    revision = entry.get("revision")
    if revision is not None and not isinstance(revision, str):
        raise spec_error(path, f"{key}.revision", f"is {revision!r}", "quote it as a string (a commit sha or a tag)")
    loading = {name: entry[name] for name in LOADING_KEYS if entry.get(name) is not None}
    instruction = bool(as_bool(path, f"{key}.instruction", entry.get("instruction")))
    dtype = read_dtype(path, f"{key}.dtype", entry.get("dtype")) or read_dtype(path, "dtype", raw.get("dtype"))
    model_spec(entry["model"], revision, loading, instruction, path=path, key=key, dtype=dtype or "auto")  # checked once, here
    return {
        "model": entry["model"],
        "revision": revision,
        "batch_size": as_int(path, f"{key}.batch_size", entry.get("batch_size"), as_int(path, "batch_size", raw.get("batch_size"), 32, 1), 1),
        "devices": read_device_setting(path, key, entry) or read_device_setting(path, "", raw),
        "instruction": instruction,
        **loading,
        **({"dtype": dtype} if dtype else {}),  # auto is left out: a job's id stays what it was
    }


def key_wording(error: Exception) -> str:
    """A refusal as a sweep spec words it: a user error names its settings by their keys (``window``, not
    ``--window``); any other error's text without the CLI's dashes."""
    return error.render("key") if isinstance(error, UserError) else str(error).replace("--", "")


def read_dtype(path: Path, key: str, value: Any) -> str | None:
    """A model's compute dtype (``dtype: bfloat16``); None for auto or none given."""
    if value is None:
        return None
    if value not in DTYPES:
        raise spec_error(path, key, f"is {value!r}", f"use one of {', '.join(DTYPES)}")
    return None if value == "auto" else value


def model_spec(name: str, revision: str | None, loading: Mapping[str, Any], instruction: bool, *,
               path: Path = Path("<spec>"), key: str = "retrievers[0]", dtype: str = "auto") -> Any:
    """The ModelSpec of a retrievers entry (what the name is and how it loads: mteb's registry, an endpoint's
    settings, the instruction rule), its refusal keyed under the entry."""
    settings = {option: value for option, value in loading.items() if option != "loader"}
    try:
        return ModelSpec(name, revision, loader=loading.get("loader"), endpoint=EndpointSpec(**settings) if settings else None,
                         instruction=instruction, dtype=dtype)
    except RequestError as error:
        raise SpecError(f"{path}: {error.keyed(f'`{key}.{error.key}`')}") from None
    except ValueError as error:
        field_key = f"{key}.revision" if revision is not None and "revision" in str(error) else key
        raise spec_error(path, field_key, f"is {name!r}" if field_key == key else f"is {revision!r}",
                         key_wording(error)) from None


def read_rerankers(path: Path, raw: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Each rerankers entry as ``evaluate_task``'s reranker keywords, its type built (and so checked) once."""
    return [_read_reranker(path, f"rerankers[{index}]", entry)
            for index, entry in enumerate(as_list(path, "rerankers", raw.get("rerankers")))]


def _read_reranker(path: Path, key: str, entry: Any) -> dict[str, Any]:
    plain = isinstance(entry, str)
    entry = {"model": entry} if plain else entry
    if not isinstance(entry, dict) or not isinstance(entry.get("model"), str):
        raise spec_error(path, key, f"is {entry!r}", "write {model: CROSS_ENCODER, first_stage: bm25-lucene, depth: 10}")
    known = reranker_keys()
    unknown = sorted(set(entry) - known)
    if unknown:
        raise spec_error(path, f"{key}.{unknown[0]}", "is not a reranker setting", f"use only {sorted(known)}")
    check_model_path(path, key if plain else f"{key}.model", entry["model"])
    kwargs: dict[str, Any] = {"rerank": entry["model"], "rerank_depth": as_int(path, f"{key}.depth", entry.get("depth"), 10, 1)}
    if entry.get("first_stage") is not None:
        kwargs["first_stage"] = str(entry["first_stage"])
        check_model_path(path, f"{key}.first_stage", kwargs["first_stage"])
    if entry.get("batch_size") is not None:
        kwargs["rerank_batch_size"] = as_int(path, f"{key}.batch_size", entry["batch_size"], 32, 1)
    kwargs |= _llm_reranker_settings(path, key, entry)
    if "llm_reranker" in kwargs:  # the kind's settings, each value, the endpoint and the depth: checked by the type
        _built(path, key, entry["model"], lambda: llm_reranker_spec(
            entry["model"], kwargs["llm_reranker"], kwargs["llm_requests"], depth=kwargs["rerank_depth"]))
    else:  # the depth (at least 10: the main score is nDCG@10), the batch size and the name, as `r2med evaluate` checks them
        _built(path, key, entry["model"], lambda: CrossEncoderSpec(
            entry["model"], depth=kwargs["rerank_depth"], batch_size=kwargs.get("rerank_batch_size")))
    return kwargs


def _built(path: Path, key: str, model: str, build: Callable[[], Any]) -> Any:
    """``build()``, its refusal keyed under the entry ``key``: a RequestError under its own key (```rerankers[0].depth```),
    any other under the entry."""
    try:
        return build()
    except RequestError as error:
        raise SpecError(f"{path}: {error.keyed(f'`{key}.{error.key}`')}") from None
    except (TypeError, ValueError) as error:
        raise spec_error(path, key, f"is {model!r}", key_wording(error)) from None


def _llm_reranker_settings(path: Path, key: str, entry: Mapping[str, Any]) -> dict[str, Any]:
    """{"llm_reranker": what it asks, "llm_requests": how} for an LLM reranker entry; {} for a cross-encoder, which
    refuses LLM settings (the shorthand's flat entry mixes both kinds' keys, so this is where a key meets its kind)."""
    given = [name for name in (*llm_reranker_keys(), *LLM_REQUEST_KEYS) if entry.get(name) is not None]
    if not is_llm_reranker_name(entry["model"]):
        if given:
            raise spec_error(path, f"{key}.{given[0]}", f"is set, but {entry['model']} is a cross-encoder",
                             "LLM settings apply to llm-listwise:<model>, llm-pointwise:<model>, llm-reasoning:<model>, "
                             "llm-setwise:<model> or llm-groupwise:<model>: drop it")
        return {}
    if entry.get("batch_size") is not None:
        raise spec_error(path, f"{key}.batch_size", "is set, but an LLM reranker batches nothing",
                         "its requests go `concurrency` at a time: drop batch_size")
    if not entry.get("base_url"):
        raise spec_error(path, f"{key}.base_url", "is missing", "an LLM reranker needs its endpoint: base_url: http://localhost:8000/v1")
    return {"llm_reranker": {name: entry[name] for name in llm_reranker_keys() if entry.get(name) is not None},
            "llm_requests": {name: entry[name] for name in LLM_REQUEST_KEYS if entry.get(name) is not None}}


def llm_reranker_spec(model: str, asks: Mapping[str, Any], requests: Mapping[str, Any], *, depth: int = 10) -> Any:
    """The LlmRerankerSpec of a rerankers entry: what it asks (``asks``: base_url, extra_body and the kind's settings)
    and how its requests go (``requests``)."""
    endpoint = EndpointSpec(base_url=asks.get("base_url"), extra_body=asks.get("extra_body"), **requests)
    settings = {name: value for name, value in asks.items() if name not in ("base_url", "extra_body")}
    return LlmRerankerSpec(model, endpoint, depth=depth, settings=settings)
