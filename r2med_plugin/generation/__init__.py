"""New query expansions with any LLM behind an OpenAI-compatible endpoint (the official generate_hydoc mode)."""

from r2med_plugin.endpoints.client import GenerationError
from r2med_plugin.generation.config import GenerationConfig, GenerationRequest
from r2med_plugin.generation.generate import GenerationReport, estimate_generation_cost, generate_expansions
from r2med_plugin.generation.prompts import GENERATION_METHODS

__all__ = ["GENERATION_METHODS", "GenerationConfig", "GenerationError", "GenerationReport", "GenerationRequest",
           "estimate_generation_cost", "generate_expansions"]
