"""Moved to :mod:`r2med_plugin.metrics` (below retrieval, which uses it); kept so that imports keep working."""

from r2med_plugin.metrics import (
    DEFAULT_K_VALUES,
    MIN_TOP_K,
    evaluate_run,
    evaluate_run_per_query,
    metric_names,
    pytrec_eval_per_query,
)

__all__ = ["DEFAULT_K_VALUES", "MIN_TOP_K", "evaluate_run", "evaluate_run_per_query", "metric_names", "pytrec_eval_per_query"]
