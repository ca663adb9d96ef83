"""Where LLM requests go (``Endpoint``) and how an LLM reranker is set up (``LLMRerankerConfig``)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

DEFAULT_WINDOW = 20  # RankGPT's sliding window (Sun et al., 2023) and rank-llm's defaults
DEFAULT_STEP = 10
DEFAULT_REASONING_TOKENS = 8192  # Rank1's reasoning budget


@dataclass(frozen=True)
class Endpoint:
    """An OpenAI-compatible endpoint; the key is read from ``api_key_env`` (default OPENAI_API_KEY), never stored."""

    base_url: str
    api_key_env: str | None = None
    concurrency: int = 8
    max_retries: int = 6
    timeout: float = 600.0

    def __post_init__(self) -> None:
        if isinstance(self.concurrency, bool) or not isinstance(self.concurrency, int) or self.concurrency < 1:
            raise ValueError(f"--concurrency must be at least 1, got {self.concurrency}")


@dataclass(frozen=True)
class LLMRerankerConfig:
    """How an LLM reranker asks: the endpoint, RankGPT's window and step (listwise), the completion budget
    (``max_tokens``: listwise answer, reasoning budget; pointwise asks for one token) and where answers are cached
    (default: ``$R2MED_CACHE_DIR/llm-responses``)."""

    endpoint: Endpoint
    window: int = DEFAULT_WINDOW
    step: int = DEFAULT_STEP
    max_tokens: int | None = None
    cache_dir: str | os.PathLike | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.endpoint, Endpoint):
            raise TypeError("LLMRerankerConfig(endpoint=...) takes an Endpoint, e.g. Endpoint('http://localhost:8000/v1')")
        for name in ("window", "step"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"--{name} must be a positive integer, got {value!r}")
        if self.window < 2:
            raise ValueError(f"--window must be at least 2 (a window ranks passages against each other), got {self.window}")
        if self.step >= self.window:
            raise ValueError(f"--step ({self.step}) must be smaller than --window ({self.window}): windows must overlap for a "
                             "passage to move up past a window's edge (RankGPT: --window 20 --step 10)")
        if self.max_tokens is not None and (isinstance(self.max_tokens, bool) or not isinstance(self.max_tokens, int) or self.max_tokens < 1):
            raise ValueError(f"--max-tokens must be a positive integer, got {self.max_tokens!r}")

    @property
    def cache_path(self) -> Path | None:
        return Path(self.cache_dir) if self.cache_dir is not None else None
