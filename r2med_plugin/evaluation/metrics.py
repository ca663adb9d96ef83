"""Moved to :mod:`r2med_plugin.metrics` (below retrieval, which uses it); the old path still works, with a warning."""

from r2med_plugin._moved import Moved, same_names

__all__ = ["DEFAULT_K_VALUES", "MIN_TOP_K", "evaluate_run", "evaluate_run_per_query", "metric_names", "pytrec_eval_per_query"]
__getattr__ = Moved(__name__, same_names("r2med_plugin.metrics", __all__))
