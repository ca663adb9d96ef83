"""The scores every task run reports next to the model's own: hybrid and candidate-subset scores.

- ``hybrid_*``: reciprocal rank fusion (k=60) of the model's run and BM25 (bm25-hakari, HAKARI-Bench's,
  for NanoR2MED; the official bm25-lucene for R2MED).
- ``candidates_{bm25,dense,hybrid}_*`` (NanoR2MED): the model's scores restricted to each stored
  candidate list; positives outside a list count as misses. The hybrid list is scored with its
  safeguard row (``*_with_safeguard``) and without it (``*_without_safeguard``).

Nothing here encodes: it reuses the model's run, so the extra cost is BM25 and fusion only.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from r2med_plugin.metrics import evaluate_run
from r2med_plugin.retrieval.bm25_cache import RUN_DEPTH, bm25_run
from r2med_plugin.retrieval.candidates import restrict_run, safeguard_split
from r2med_plugin.retrieval.fusion import rrf
from r2med_plugin.retrieval.ranking import truncate_run
from r2med_plugin.types import Run, TaskData

EXTRA_METRICS = ("ndcg_at_10", "ndcg_at_100", "map_at_10", "recall_at_10", "recall_at_100", "precision_at_10", "hit_at_10", "mrr")
HYBRID_RRF_K = 60


def _prefixed(prefix: str, scores: Mapping[str, float], suffix: str = "") -> dict[str, float]:
    return {f"{prefix}{name}{suffix}": scores[name] for name in EXTRA_METRICS}


def hybrid_scores(data: TaskData, model_run: Run, bm25: Run) -> dict[str, float]:
    # Fusion at depth 1000 reads only each run's first 1000 ranks: cut deeper runs first.
    fused = rrf([truncate_run(model_run, RUN_DEPTH), truncate_run(bm25, RUN_DEPTH)], k=HYBRID_RRF_K, top_k=RUN_DEPTH)
    return _prefixed("hybrid_", evaluate_run(data.qrels, fused))


def candidate_scores(data: TaskData, model_run: Run, subsets: Sequence[str] | None = None) -> dict[str, float]:
    """The model ranking each stored candidate list (NanoR2MED); {} for tasks without lists.

    ``model_run`` must hold the model's score of every candidate (a full-depth run, or the output of
    ``score_candidate_lists``); a candidate it lacks counts as not retrieved.
    """
    scores: dict[str, float] = {}
    for key, lists in data.candidates.items():
        if subsets is not None and key not in subsets:
            continue
        if key == "hybrid":
            with_row, without = safeguard_split(model_run, lists, int(data.spec.candidate_profiles[key]["top_k"]))
            scores |= _prefixed(f"candidates_{key}_", evaluate_run(data.qrels, with_row), "_with_safeguard")
            scores |= _prefixed(f"candidates_{key}_", evaluate_run(data.qrels, without), "_without_safeguard")
        else:
            scores |= _prefixed(f"candidates_{key}_", evaluate_run(data.qrels, restrict_run(model_run, lists)))
    return scores


def extra_scores(data: TaskData, model_run: Run, *, show_progress: bool = True) -> dict[str, float]:
    """hybrid_* and candidates_* for one model run on one task."""
    return hybrid_scores(data, model_run, bm25_run(data, show_progress=show_progress)) | candidate_scores(data, model_run)
