"""The package's user errors: one base class, so a front end can tell a user's mistake from a bug.

``UserError`` subclasses ``ValueError`` (callers' ``except ValueError`` keep working). A name the package does not
know is an ``UnknownNameError`` (also a ``KeyError``); a missing file or folder a ``MissingFileError`` (also a
``FileNotFoundError``); a source that cannot be reached an ``UnreachableError`` (also a ``ConnectionError``); a missing
optional dependency a ``MissingExtraError`` (also an ``ImportError``, in r2med_plugin.optional_dependencies). The CLI prints a
``UserError`` as one line and exits 2; anything else is a bug and propagates with its traceback.

A user error may name settings: ``render(front_end)`` words it as a front end spells them (the Python API's keyword,
the CLI's flag, a sweep spec's key); a plain one reads the same in each (see ``rules.SettingError``).
"""

from __future__ import annotations

from typing import Literal

FrontEnd = Literal["api", "flag", "key"]  # the Python API, the CLI, a sweep spec


class UserError(ValueError):
    """Something the user gave (a setting, a file, a name) that cannot give a right number; the message says the fix."""

    def render(self, front_end: FrontEnd = "api", label: str | None = None) -> str:
        """The message as ``front_end`` ("api", "flag" or "key") words it; the same text in each unless it names
        settings."""
        return str(self)

    @property
    def flag_message(self) -> str:
        """The message as the CLI prints it (settings named by their flags)."""
        return self.render("flag")


class UnknownNameError(UserError, KeyError):
    """A task, benchmark, model, expansion or dataset name the package does not know."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""


class MissingFileError(UserError, FileNotFoundError):
    """A file or folder the user named (a run, a spec, a result folder, a mirror) that is not there."""

    def __str__(self) -> str:  # one message, as a ValueError shows it (not OSError's errno form)
        return str(self.args[0]) if self.args else ""


class UnreachableError(UserError, ConnectionError):
    """A source the run needs (the Hugging Face hub, an endpoint) that cannot be reached; the message says the way
    around (a mirror, the offline switches, another URL)."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class InputFileError(UserError):
    """A file given as input (a result, a run, an expansion, a spec) that cannot be used as it is: names file and row."""
