"""The package's user errors: one base class, so a front end can tell a user's mistake from a bug.

``UserError`` subclasses ``ValueError`` (callers' ``except ValueError`` keep working). A name the package does not
know is an ``UnknownNameError`` (also a ``KeyError``); a missing optional dependency a ``MissingExtraError`` (also an
``ImportError``). The CLI prints a ``UserError`` as one line and exits 2; anything else propagates with its traceback.
"""

from __future__ import annotations


class UserError(ValueError):
    """Something the user gave (a setting, a file, a name) that cannot give a right number; the message says the fix."""


class UnknownNameError(UserError, KeyError):
    """A task, benchmark, model, expansion or dataset name the package does not know."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""


class InputFileError(UserError):
    """A file given as input (a result, a run, an expansion, a spec) that cannot be used as it is: names file and row."""
