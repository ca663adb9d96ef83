"""LLM rerankers (listwise, pointwise, reasoning, setwise, groupwise), the OpenAI-compatible client they share with
``r2med generate``, and what their requests cost before they are sent (``LLMReranker.estimate_cost``,
r2med_plugin.llm.cost). A kind is one class on ``LLMReranker`` whose ``questions`` generator yields its requests
(r2med_plugin.llm.strategy), registered by ``register_llm_reranker``.

Nothing here imports ``openai`` at import time; it is loaded when a request is first sent.
"""

from r2med_plugin.llm.config import Endpoint, LLMRerankerConfig
from r2med_plugin.llm.cost import CostEstimate, RequestPlan, token_counter
from r2med_plugin.llm.reranker_kinds import (
    LLM_RERANKER_KINDS,
    GroupwiseLLMReranker,
    ListwiseLLMReranker,
    LLMReranker,
    PointwiseLLMReranker,
    ReasoningLLMReranker,
    RerankReport,
    SetwiseLLMReranker,
    llm_reranker,
    register_llm_reranker,
)

__all__ = [
    "CostEstimate", "Endpoint", "GroupwiseLLMReranker", "LLMReranker", "LLMRerankerConfig", "LLM_RERANKER_KINDS",
    "ListwiseLLMReranker", "PointwiseLLMReranker", "ReasoningLLMReranker", "RequestPlan", "RerankReport", "SetwiseLLMReranker", "llm_reranker",
    "register_llm_reranker", "token_counter",
]
