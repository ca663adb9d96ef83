"""LLM rerankers (listwise, pointwise, reasoning, setwise, groupwise) and the OpenAI-compatible client they share with ``r2med generate``.

Nothing here imports ``openai`` at import time; it is loaded when a request is first sent.
"""

from r2med_plugin.llm.config import Endpoint, LLMRerankerConfig
from r2med_plugin.llm.rerankers import (
    LLM_RERANKER_KINDS,
    GroupwiseLLMReranker,
    ListwiseLLMReranker,
    PointwiseLLMReranker,
    ReasoningLLMReranker,
    RerankReport,
    SetwiseLLMReranker,
    llm_reranker,
)

__all__ = [
    "Endpoint", "GroupwiseLLMReranker", "LLMRerankerConfig", "LLM_RERANKER_KINDS", "ListwiseLLMReranker", "PointwiseLLMReranker",
    "ReasoningLLMReranker", "RerankReport", "SetwiseLLMReranker", "llm_reranker",
]
