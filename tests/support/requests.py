"""evaluate_task's keyword arguments as the request ``execute`` runs, and the internal plan it makes of it."""

from __future__ import annotations

from typing import Any

from r2med_plugin.evaluation.plan import Plan, as_request, plan_of
from r2med_plugin.evaluation.request import EvaluationRequest


def requested(task: str, retriever: Any = None, **arguments: Any) -> EvaluationRequest:
    """The EvaluationRequest ``evaluate_task(task, retriever, **arguments)`` would execute (refusals raised here)."""
    return as_request(task, retriever, arguments)


def planned(task: str, retriever: Any = None, **arguments: Any) -> Plan:
    """The stages and scorers ``execute`` would run for that request."""
    return plan_of(requested(task, retriever, **arguments))
