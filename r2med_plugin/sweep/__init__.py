"""Sweeps: many (task, retriever, expansion/reranker) evaluations from one YAML spec, locally or on Ray.

Nothing here imports Ray until ``--engine ray`` asks for it.
"""

from r2med_plugin.sweep.driver import SweepSummary, estimate_sweep_cost, plan, run_sweep, status_table
from r2med_plugin.sweep.spec import Job, SpecError, SweepSpec, expand_jobs, load_spec, parse_spec

__all__ = ["Job", "SpecError", "SweepSpec", "SweepSummary", "estimate_sweep_cost", "expand_jobs", "load_spec", "parse_spec", "plan",
           "run_sweep", "status_table"]
