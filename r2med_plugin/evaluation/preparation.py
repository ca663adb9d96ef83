"""Before the first task of a multi-task run loads: every check that needs no data, then the models its requests
share, loaded once (``r2med evaluate`` runs one first stage and reranker over many tasks)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from r2med_plugin.evaluation.request import EvaluationRequest
from r2med_plugin.evaluation.specs import CrossEncoderSpec, LlmRerankerSpec, ModelSpec, RunFileSpec


def prepare(requests: Sequence[EvaluationRequest], *, sends: bool = True,
            loaded: Callable[[str, object], object] | None = None) -> list[EvaluationRequest]:
    """``requests`` (one first stage and reranker, one per task) holding their shared encoder and reranker, loaded once
    after every check that needs no model: the device (a typo would otherwise surface as a torch traceback), the output
    folder (writable before any work starts), every task's run file (found and readable), an LLM reranker's key
    variable and, when ``sends``, the openai client it sends through (not needed to estimate its cost).
    ``loaded(name, model)`` is called after each model loads (e.g. to say where it runs)."""
    first = requests[0]
    _check_device(first)
    if first.outputs.folder:
        from r2med_plugin.reporting.export import check_output_dir

        check_output_dir(first.outputs.folder, "--output")
    llm = first.reranker.load(sends=sends) if isinstance(first.reranker, LlmRerankerSpec) else None
    if isinstance(first.first_stage, RunFileSpec):
        for request in requests:
            first.first_stage.check_task(request.task)
    encoder = first.first_stage.load(show_progress=first.show_progress) if isinstance(first.first_stage, ModelSpec) else None
    if encoder is not None and loaded is not None:
        loaded(encoder.name, encoder)
    reranker = llm
    if llm is None and isinstance(first.reranker, CrossEncoderSpec):
        reranker = first.reranker.load()
        if loaded is not None:
            loaded(first.reranker.name, reranker)
    return [request.with_loaded(encoder, reranker) for request in requests]


def _check_device(request: EvaluationRequest) -> None:
    from r2med_plugin.models.checks import check_device

    for part in (request.first_stage, request.reranker):
        if isinstance(part, (ModelSpec, CrossEncoderSpec)) and part.uses("device"):
            check_device(part.device)
