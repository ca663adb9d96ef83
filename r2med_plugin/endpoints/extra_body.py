"""Extra request-body fields for OpenAI-compatible endpoints (``--extra-body``): parsing, a canonical key and label for
identities, and the refusal of fields a request already carries. Shared by the LLM rerankers, the generator and the
embedding endpoint."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

from r2med_plugin.rules import SettingError


def extra_body_of(value: Any, *, option: str = "{extra_body}", example: str = '{"truncate_prompt_tokens": 256}') -> dict[str, Any] | None:
    """Extra fields for each request body (``--extra-body JSON``, a sweep spec's ``extra_body:`` mapping, or a dict):
    a JSON object, as a dict; None when nothing (or ``{}``) is given. Refused: text that is not JSON, JSON that is not
    an object, values that do not serialise as JSON. ``option`` names the setting (``{extra_body}``: each front end
    spells it its own way)."""
    if value is None:
        return None
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError as error:
            raise SettingError(f"{option} is not valid JSON ({error}); give an object, e.g. '{example}'",
                               field="extra_body") from None
    if not isinstance(value, Mapping):
        raise SettingError(f"{option} must be a JSON object of extra request fields, e.g. '{example}'; got {value!r}",
                           field="extra_body")
    try:
        json.dumps(dict(value), sort_keys=True, allow_nan=False)
    except (TypeError, ValueError) as error:
        raise SettingError(f"{option} must hold JSON values only (strings, numbers, true/false, null, lists, objects): "
                           f"{error}", field="extra_body") from None
    return dict(value) or None


def extra_body_key(body: Mapping[str, Any] | None) -> str | None:
    """The canonical JSON of an extra body (sorted keys), for cache keys and identities; None for none."""
    return json.dumps(dict(body), sort_keys=True, ensure_ascii=False, separators=(",", ":")) if body else None


def extra_body_label(body: Mapping[str, Any] | None) -> str:
    """A short name part for an extra body (``body-<8 hex of its canonical JSON>``), "" for none."""
    key = extra_body_key(body)
    return f"body-{hashlib.sha256(key.encode('utf-8')).hexdigest()[:8]}" if key else ""


def refuse_reserved(body: Mapping[str, Any] | None, reserved: Mapping[str, str], option: str = "{extra_body}") -> None:
    """Refuse extra fields that would replace what the command itself sends (``reserved``: field -> how to set it)."""
    for name in body or {}:
        if name in reserved:
            raise SettingError(f"{option} sets {name!r}, which the request already carries ({reserved[name]}): "
                               f"drop {name!r} from {option}", field="extra_body")
