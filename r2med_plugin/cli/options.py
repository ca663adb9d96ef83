"""Which options a command line wrote, and refusing the ones that reach no code (every `r2med` command)."""

from __future__ import annotations

import argparse
import difflib
import math
import re
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, NoReturn

from r2med_plugin.errors import UserError
from r2med_plugin.rules import flag_of, integer_option

# what argparse stores for an option written without default=, by its action
IMPLICIT_DEFAULTS = {"store_true": False, "store_false": True}


class OneLineParser(argparse.ArgumentParser):
    """A parser whose mistakes print as one line, like every other refusal (``r2med: error: ...``), with a
    did-you-mean for a mistyped choice or option, and where the options are listed (not argparse's usage block).
    Options are written in full: a prefix (--dev for --device) is an unknown option, never a guess (allow_abbrev)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        hint = _closest_choice(message) or _closest_option(message, self._option_string_actions)
        self.exit(2, f"r2med: error: {message}{hint} (`{self.prog} --help` lists the options)\n")


class CommandParser(OneLineParser):
    """The parser of one `r2med` command. It keeps each option's default itself and gives argparse none, so that an
    option is in the parsed namespace only when the command line wrote it (also with a value equal to the default);
    after parsing, ``args.given`` lists those options' dests in the order written and the others take their defaults. ``option_defaults``
    (dest -> default) and ``option_flags`` (dest -> its flags) list the command's options (the CLI reference and the
    flag contract read them). An argument the command does not know is refused by it (not left to the top-level
    parser), so that its did-you-mean draws on the command's own options."""

    built = False  # argparse's own groups (positionals, options), made while __init__ runs, are not wrapped

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.option_defaults: dict[str, Any] = {}
        self.option_flags: dict[str, tuple[str, ...]] = {}
        self.built = True

    def add_argument(self, *flags: Any, **kwargs: Any) -> argparse.Action:
        if not self.built:  # -h/--help, added by argparse itself
            return super().add_argument(*flags, **kwargs)
        return self.track(super().add_argument, flags, kwargs)

    def add_argument_group(self, *args: Any, **kwargs: Any) -> Any:
        group = super().add_argument_group(*args, **kwargs)
        return _TrackedGroup(group, self) if self.built else group

    def add_mutually_exclusive_group(self, **kwargs: Any) -> Any:
        return _TrackedGroup(super().add_mutually_exclusive_group(**kwargs), self)

    def track(self, add: Callable[..., argparse.Action], flags: tuple, kwargs: dict[str, Any]) -> argparse.Action:
        """Add an argument through ``add``; an option's default is kept here and argparse gets SUPPRESS."""
        if not flags or not str(flags[0]).startswith("-"):
            return add(*flags, **kwargs)  # a positional argument is always written
        default = kwargs.pop("default", IMPLICIT_DEFAULTS.get(str(kwargs.get("action")), None))
        action = add(*flags, default=argparse.SUPPRESS, **kwargs)
        self.option_defaults[action.dest] = default
        self.option_flags[action.dest] = tuple(action.option_strings)
        return action

    def parse_known_args(self, args: Any = None, namespace: Any = None) -> Any:
        parsed, rest = super().parse_known_args(args, namespace)
        if rest:
            self.error(f"unrecognized arguments: {' '.join(rest)}")
        given = self._written_order({dest for dest in self.option_defaults if hasattr(parsed, dest)}, args)
        for dest, default in self.option_defaults.items():
            if dest not in given:
                setattr(parsed, dest, default)
        parsed.given = given
        return parsed, rest


    def _written_order(self, given: set[str], args: Any) -> list[str]:
        """``given`` in the order the command line wrote the options (a refusal names the first one written)."""
        words = list(sys.argv[1:] if args is None else args)
        dest_of = {flag: dest for dest, flags in self.option_flags.items() for flag in flags}
        written = [dest_of.get(str(word).split("=", 1)[0]) for word in words]
        first = {dest: position for position, dest in reversed(list(enumerate(written))) if dest in given}
        return sorted(given, key=lambda dest: (first.get(dest, len(words)), dest))


_INVALID_CHOICE = re.compile(r"invalid choice: '([^']*)' \(choose from (.*)\)")


def _closest_choice(message: str) -> str:
    """"; did you mean 'bfloat16'?" for argparse's invalid-choice message, when a choice is close to what was given."""
    found = _INVALID_CHOICE.search(message)
    if not found:
        return ""
    choices = re.findall(r"'([^']*)'", found.group(2))
    close = difflib.get_close_matches(found.group(1), choices, n=1, cutoff=0.5)
    return f"; did you mean {close[0]!r}?" if close else ""


_UNRECOGNIZED = re.compile(r"unrecognized arguments: (.*)")


def _closest_option(message: str, actions: Mapping[str, argparse.Action]) -> str:
    """"; did you mean '--device'?" for argparse's unrecognized-arguments message: for the first unknown option, the
    options it begins (a prefix, not accepted), else the closest one; an option with two names (--device, --devices)
    is named once, by its first."""
    found = _UNRECOGNIZED.search(message)
    written = next((word.split("=", 1)[0] for word in found.group(1).split() if word.startswith("-")), None) if found else None
    if not written:
        return ""
    names = {option: next(name for name in action.option_strings if name.startswith("--"))
             for option, action in actions.items() if option.startswith("--")}
    longer = sorted({names[option] for option in names if option.startswith(written)})
    if longer:
        return f"; did you mean {' or '.join(map(repr, longer[:3]))}? (options are written in full)"
    close = difflib.get_close_matches(written, list(names), n=1, cutoff=0.6)
    return f"; did you mean {names[close[0]]!r}?" if close else ""


class _TrackedGroup:
    """An argument group (or mutually exclusive group) of a CommandParser: its options' defaults are kept by the parser."""

    def __init__(self, group: Any, parser: CommandParser) -> None:
        self._group, self._parser = group, parser

    def add_argument(self, *flags: Any, **kwargs: Any) -> argparse.Action:
        return self._parser.track(self._group.add_argument, flags, kwargs)

    def add_mutually_exclusive_group(self, **kwargs: Any) -> _TrackedGroup:
        return _TrackedGroup(self._group.add_mutually_exclusive_group(**kwargs), self._parser)


def flag_name(dest: str) -> str:
    return flag_of(dest)


def refuse_unreached(args: argparse.Namespace, unreached: dict[str, str]) -> None:
    """Refuse every option the user wrote that reaches no code in this command (``unreached``: dest -> why)."""
    given: list[str] = getattr(args, "given", [])
    written = [dest for dest in given if dest in unreached]  # the first one the command line wrote is refused
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
