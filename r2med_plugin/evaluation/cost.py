"""What an LLM rerank of a task would cost, before any request is sent (r2med_plugin.llm.cost): the task's data
loads and the first stage runs (both cached, as for the real run), the reranker builds the requests it would send
with its own code, and nothing is sent. ``r2med evaluate --rerank llm-<kind>:<model> --estimate-cost`` prints it."""

from __future__ import annotations

import dataclasses
import os

from r2med_plugin.data.loader import load_task
from r2med_plugin.errors import UserError
from r2med_plugin.evaluation.plan import plan_of, request_of
from r2med_plugin.evaluation.request import EvaluationRequest, TaskArguments
from r2med_plugin.evaluation.runner import rerank_inputs
from r2med_plugin.llm.config import LLMRerankerConfig
from r2med_plugin.llm.cost import CostEstimate
from r2med_plugin.llm.reranker_kinds import LLMReranker
from r2med_plugin.types import TaskData


def estimate_request_cost(request: EvaluationRequest, data: TaskData | None = None, *,
                          tokenizer: str | None = None) -> CostEstimate:
    """The cost of running ``request`` when its reranker is an LLM (requests, prompt tokens, completion budget),
    without sending a request: its first stage runs (cached, as for the real run). ``tokenizer``: see
    r2med_plugin.llm.cost.token_counter."""
    if request.reranker is None:
        raise UserError(f"{request.task}: the request reranks nothing; a cost estimate is for an LLM reranker "
                        "(rerank='llm-<kind>:<model>')")
    plan = plan_of(request)
    if data is None:
        data = load_task(plan.task, data_dir=plan.data_dir, accept_drift=plan.accept_drift)
    inputs = rerank_inputs(plan, data)
    if not isinstance(inputs.reranker, LLMReranker):
        raise UserError(f"{getattr(inputs.reranker, 'name', inputs.reranker)!r} sends no request to an endpoint (a local "
                        "cross-encoder): a cost estimate is for the LLM rerankers, llm-<kind>:<model>")
    estimated = inputs.reranker.estimate_cost(inputs.run, inputs.queries, inputs.documents, depth=inputs.depth, tokenizer=tokenizer,
                              show_progress=plan.show_progress)
    return dataclasses.replace(estimated, what=f"{data.name}  {inputs.reranker.name} over {inputs.stage.name}, top {inputs.depth}")


def estimate_rerank_cost(
    task: str,
    rerank: object,
    *,
    first_stage: object,
    llm: LLMRerankerConfig | None = None,
    rerank_depth: int | None = None,
    data_dir: str | os.PathLike | None = None,
    accept_drift: bool | None = None,
    show_progress: bool = True,
    bm25_workers: int | None = None,
    tokenizer: str | None = None,
) -> CostEstimate:
    """What ``evaluate_task(task, rerank=rerank, first_stage=first_stage, ...)`` with an LLM reranker
    ("llm-<kind>:<model>" with ``llm``, or a built LLMReranker) would cost, without sending a request: the number of
    requests (exact, or with a worst case where it depends on the answers), prompt tokens, the completion budget;
    ``CostEstimate.dollars(price_in, price_out)`` prices it."""
    from r2med_plugin.evaluation.reranker_stage import as_reranker

    reranker = as_reranker(rerank, llm=llm) if llm is not None else rerank
    request = request_of(task, None, TaskArguments(rerank=reranker, first_stage=first_stage, rerank_depth=rerank_depth,
                                                   data_dir=data_dir, accept_drift=accept_drift, show_progress=show_progress,
                                                   bm25_workers=bm25_workers))
    return estimate_request_cost(request, tokenizer=tokenizer)
