"""The rules a setting's value follows, each written once, and a refusal worded once for every front end.

A ``RequestError`` names the setting at fault (``field``) and says the problem and the fix once. ``{name}`` in them
stands for another setting. It renders per front end from those words: the Python API's parameter
(``top_k (--top-k) must be ...``), the CLI's flag (``--top-k must be ...``) and a sweep spec's key
(```top_k` must be ...``). ``whole_number`` is the one "an integer, not a bool, of at least n" check; ``integer_option``
is the same rule as an argparse type.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import re
from collections.abc import Callable, Mapping
from typing import Any

from r2med_plugin.errors import FrontEnd, InputFileError, MissingFileError, UnknownNameError, UserError

_SETTING = re.compile(r"\{([a-z][a-z0-9_]*)\}")


# settings whose flag is not their name with dashes
FLAGS = {"trec_depth": "--depth", "bm25_workers": "--workers", "folder": "--output",
         "query_prompt": "--instruction", "revision": "--model-revision", "out_dir": "--out"}


def flag_of(name: str, flags: Mapping[str, str] | None = None) -> str:
    """The CLI flag of a setting: ``top_k`` -> ``--top-k``, ``trec_depth`` -> ``--depth``; ``flags`` (setting -> flag)
    first, for a parameter whose flag is its command's own (``count`` is ``r2med inspect``'s ``--worst``)."""
    if flags and name in flags:
        return flags[name]
    return FLAGS.get(name, "--" + name.replace("_", "-"))


def label_of(name: str, front_end: FrontEnd, flags: Mapping[str, str] | None = None) -> str:
    """A setting as a front end names it in prose (a sweep spec's key is quoted by the caller, who knows its path)."""
    if front_end == "api":
        return f"{name} ({flag_of(name, flags)})"
    return flag_of(name, flags) if front_end == "flag" else name


def render(text: str, front_end: FrontEnd, flags: Mapping[str, str] | None = None) -> str:
    """``text`` with each ``{setting}`` written as ``front_end`` names it (``flags``: see ``flag_of``)."""
    return _SETTING.sub(lambda match: label_of(match.group(1), front_end, flags), text)


class SettingError(UserError):
    """A refusal whose text names settings as ``{setting}`` (``"{step} must be smaller than {window}"``): ``str(error)``
    is the Python API's wording (``step (--step) ...``), ``flag_message`` the CLI's (``--step ...``), ``render("key")``
    a sweep spec's (``step ...``). ``field`` is the setting at fault, where there is one; ``flags`` (setting -> flag)
    names the flag of a parameter whose flag is its command's own (``{"count": "--worst"}``), where ``FLAGS`` does not."""

    def __init__(self, text: str, *, field: str | None = None, flags: Mapping[str, str] | None = None) -> None:
        self.text, self.field, self.flags = text, field, dict(flags or {})
        super().__init__(render(text, "api", self.flags))

    def render(self, front_end: FrontEnd = "api", label: str | None = None) -> str:
        return render(self.text, front_end, self.flags)


class SettingFileError(SettingError, MissingFileError):
    """A file or folder a setting names that is not there: a ``MissingFileError`` (so a ``FileNotFoundError``) worded
    per front end as a ``SettingError``."""


class SettingNameError(SettingError, UnknownNameError):
    """A name a setting gives that the package does not know: an ``UnknownNameError`` (so a ``KeyError``) worded per
    front end as a ``SettingError``."""


class SettingInputError(SettingError, InputFileError):
    """An input file that cannot be used as it is, whose fix names a setting: an ``InputFileError`` worded per front end
    as a ``SettingError``."""


class RequestError(UserError):
    """A request that cannot run, found without any data: the setting at fault, the problem and the fix, worded once.
    ``str(error)`` is the Python API's wording, ``flag_message`` the CLI's, ``keyed(label)`` a sweep spec's;
    ``key`` is the setting's sweep-spec key where it differs from ``field`` (a reranker entry's ``depth``)."""

    def __init__(self, field: str, problem: str, fix: str, *, key: str | None = None) -> None:
        self.field, self.problem, self.fix, self.key = field, problem, fix, key or field
        super().__init__(self.render("api"))

    def render(self, front_end: FrontEnd = "api", label: str | None = None) -> str:
        head = label if label is not None else label_of(self.field, front_end)
        return f"{head} {render(self.problem, front_end)}; {render(self.fix, front_end)}"

    def keyed(self, label: str) -> str:
        """The refusal under a sweep spec's key (``label``, e.g. ```rerankers[0].depth```)."""
        return self.render("key", label)


def whole_number_problem(value: Any, minimum: int, maximum: int | None = None) -> str | None:
    """What is wrong with ``value`` as an integer (a bool is not one) from ``minimum`` (to ``maximum``); None if nothing."""
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum or (maximum is not None and value > maximum):
        bounds = f"from {minimum} to {maximum}" if maximum is not None else f"of at least {minimum}"
        return f"must be an integer {bounds}, got {value!r}"
    return None


def whole_number(name: str, value: Any, minimum: int, maximum: int | None = None, *, why: str = "") -> Any:
    """``value`` if it is an integer from ``minimum`` (to ``maximum``), else a SettingError naming the setting ``name``
    (each front end in its spelling); None passes (an unset setting). ``why`` is added to the refusal ("passages per
    setwise question")."""
    problem = None if value is None else whole_number_problem(value, minimum, maximum)
    if problem:
        label = f"{{{name}}}" if name.isidentifier() else name  # a setting's name, or the caller's own words
        raise SettingError(f"{label} {problem}" + (f" ({why})" if why else ""), field=name)
    return value


def seconds_problem(value: Any) -> str | None:
    """What is wrong with ``value`` as a positive, finite number of seconds; None if nothing."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < math.inf:
        return f"must be a positive number of seconds, got {value!r}"
    return None


def integer_option(minimum: int, maximum: int | None = None) -> Callable[[str], int]:
    """An argparse ``type``: the integer rule of ``whole_number``, read from the command line's text."""
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
        problem = whole_number_problem(value, minimum, maximum)
        if problem:
            raise argparse.ArgumentTypeError(problem)
        return value
    return parse


# --- neutral fields -----------------------------------------------------------------------------------------------------

NEUTRAL = {"neutral": True}  # field metadata: how a result is computed (devices, batch sizes, where data lives), not what


def neutral(default: Any = None) -> Any:
    """A dataclass field that changes no result: identities (a request's, a sweep job's) leave it out."""
    return dataclasses.field(default=default, metadata=NEUTRAL)


def neutral_fields(cls: type) -> tuple[str, ...]:
    """The fields of the dataclass ``cls`` marked ``neutral``, in their order."""
    return tuple(item.name for item in dataclasses.fields(cls) if item.metadata.get("neutral"))
