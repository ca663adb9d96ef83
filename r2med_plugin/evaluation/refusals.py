"""A request's refusal, worded for each front end: the Python API, the CLI's flags and a sweep spec's keys."""

from __future__ import annotations


class RequestError(ValueError):
    """A request that cannot run, found without any data. Its message is the Python API's; ``flag_message`` says the
    same with the CLI's flags, and ``keyed(label)`` with a sweep spec's key (``field`` is the setting at fault)."""

    def __init__(self, message: str, *, field: str, problem: str, fix: str, flag_message: str) -> None:
        super().__init__(message)
        self.field, self.problem, self.fix, self.flag_message = field, problem, fix, flag_message

    def keyed(self, label: str) -> str:
        return f"{label} {self.problem}; {self.fix}"


def refuse(message: str, field: str, problem: str, fix: str, flag_message: str) -> RequestError:
    return RequestError(message, field=field, problem=problem, fix=fix, flag_message=flag_message)
