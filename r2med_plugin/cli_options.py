"""Which options a command line wrote, and refusing the ones that reach no code (every `r2med` command)."""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable, Iterator, Sequence

from r2med_plugin.errors import UserError
from r2med_plugin.rules import flag_of, integer_option


def given_options(parser: argparse.ArgumentParser, argv: Sequence[str]) -> set[str]:
    """The dests of the options written on the command line (also when a value equals the default).

    argparse accepts unique prefixes (--batch for --batch-size): they count as the option they stand for."""
    command = next((action for action in parser._actions if isinstance(action, argparse._SubParsersAction)), None)
    words = list(argv)
    subparser = parser
    if command is not None:
        name = next((word for word in words if word in command.choices), None)
        if name is None:
            return set()
        subparser = command.choices[name]
        words = words[words.index(name) + 1:]
    options = {option: action.dest for action in subparser._actions for option in action.option_strings}
    given = set()
    for word in words:
        if word == "--":
            break
        if not word.startswith("-") or word == "-":
            continue
        option = word.split("=", 1)[0]
        matches = [option] if option in options else [known for known in options if known.startswith(option) and option.startswith("--")]
        if len(matches) == 1:
            given.add(options[matches[0]])
    return given


def flag_name(dest: str) -> str:
    return flag_of(dest)


def refuse_unreached(args: argparse.Namespace, unreached: dict[str, str]) -> None:
    """Refuse every option the user wrote that reaches no code in this command (``unreached``: dest -> why)."""
    given: set[str] = getattr(args, "given", set())
    written = [dest for dest in unreached if dest in given]
    if written:
        dest = written[0]
        raise UserError(f"{flag_name(dest)} reaches no code here: {unreached[dest]}; drop {flag_name(dest)}")


def bounded(kind: type, *, low: float, strict: bool = False, high: float | None = None, message: str) -> Callable[[str], float]:
    """An argparse ``type``: ``kind`` (int or float) of at least ``low`` (above it when ``strict``), below ``high`` when
    given, finite; ``message`` (with ``{value}``) says what is wrong with another value."""
    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not {'an integer' if kind is int else 'a number'}") from None
        inside = math.isfinite(value) and (value > low if strict else value >= low) and (high is None or value < high)
        if not inside:
            raise argparse.ArgumentTypeError(message.format(value=value))
        return value
    return parse


positive_int = integer_option(1)
non_negative_int = integer_option(0)
positive_seconds = bounded(float, low=0, strict=True, message="must be a positive number of seconds, got {value}")
price = bounded(float, low=0, message="must be a price of at least 0 (US dollars per million tokens), got {value}")


class LazyChoices:
    """argparse ``choices`` computed on first use (checking a value, or listing them in an error or a help page), not
    when the parser is built: building it for ``r2med --help`` then loads nothing. Give the option a ``metavar``, as
    argparse lists the choices to validate the metavar when the option is added."""

    def __init__(self, compute: Callable[[], Sequence[str]]) -> None:
        self._compute = compute
        self._values: list[str] | None = None

    def _all(self) -> list[str]:
        if self._values is None:
            self._values = list(self._compute())
        return self._values

    def __contains__(self, value: object) -> bool:
        return value in self._all()

    def __iter__(self) -> Iterator[str]:
        return iter(self._all())

    def __len__(self) -> int:
        return len(self._all())
