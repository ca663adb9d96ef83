"""`r2med evaluate`, once its requests are built: each runs, its scores print and its files are written."""

from __future__ import annotations

import argparse
import time
from collections import Counter
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from r2med_plugin.evaluation.result import TaskRunResult


def _label(request) -> str:
    expansion = request.scoring.expansion
    return request.task + (f" + {expansion}" if expansion else "")


def _announce(args: argparse.Namespace, what: str) -> float:
    """With --quiet (no progress bars), one line when a task starts, so a long encode is not silent."""
    if args.quiet:
        print(f"{what}: started", flush=True)
    return time.perf_counter()


def cache_note(before: Counter, after: Counter) -> str:
    """What of a task came from the on-disk cache between two ``cache.lookups()`` snapshots, for its --quiet finished
    line: "" (nothing looked up), else " (embeddings from the cache)", " (BM25 run partly from the cache)"..."""
    outcomes: dict[str, set[str]] = {}
    for (kind, outcome), count in (after - before).items():
        if count:
            label = "BM25 run" if kind.startswith("bm25-") else "embeddings" if kind.startswith("embedding") else kind
            outcomes.setdefault(label, set()).add(outcome)
    parts = [f"{label} {'from' if found == {'hit'} else 'partly from'} the cache" for label, found in outcomes.items()
             if "hit" in found]
    return f" ({'; '.join(parts)})" if parts else ""


def _duration(seconds: float) -> str:
    minutes, rest = divmod(round(seconds), 60)
    return f"{minutes // 60} h {minutes % 60:02d} min" if minutes >= 60 else f"{minutes} min {rest:02d} s"


def progress_line(done: int, sizes: Sequence[int], elapsed: float) -> str:
    """"3/8 tasks done in 4 min 10 s; about 6 min 02 s left": the time left estimated from the elapsed time per
    document so far (the tasks' corpus sizes as their cards count them), so a 60,000-document task counts 6 times a
    10,000-document one."""
    finished, total = sum(sizes[:done]), sum(sizes)
    text = f"{done}/{len(sizes)} tasks done in {_duration(elapsed)}"
    if done == len(sizes) or finished == 0:
        return text
    return f"{text}; about {_duration(elapsed * (total - finished) / finished)} left (estimated by corpus size)"


def _keys_of(result, reranked: bool) -> list[str]:
    if reranked:
        return [f"{prefix}{key}" for key in ("ndcg_at_10", "recall_at_10", "mrr") for prefix in ("", "first_stage_")]
    keys = [result.main_score, "ndcg_at_10", "recall_at_100", "hit_at_10", "mrr", "hybrid_ndcg_at_10"] + [
        key for key in result.scores if key.startswith("candidates_") and "ndcg_at_10" in key]
    return list(dict.fromkeys(keys))


def run_requests(args: argparse.Namespace, requests: list) -> int:
    """Execute each request, print its scores and write its files."""
    from r2med_plugin.cache import lookups
    from r2med_plugin.catalog import get_task_spec
    from r2med_plugin.evaluation.runner import execute, validate_inputs
    from r2med_plugin.evaluation.writers import write_outputs

    sizes = [get_task_spec(request.task).expected_counts["documents"] for request in requests]
    command_started = time.perf_counter()
    preloaded = validate_inputs(requests)  # every task's files checked before the first runs
    for index, request in enumerate(requests):
        started = _announce(args, _label(request))
        data, preloaded[index] = preloaded[index], None  # held no longer than its request needs it
        before = lookups()
        result = execute(request, data)
        del data
        if args.quiet:  # a run served from the cache says so: its "0.0 s" measured no encoding
            print(f"{request.task}: finished in {time.perf_counter() - started:.1f} s{cache_note(before, lookups())}",
                  flush=True)
        if len(requests) > 1:
            print(progress_line(index + 1, sizes, time.perf_counter() - command_started), flush=True)
        print_scores(result, _keys_of(result, request.reranker is not None))
        print_usage(result, args.price_in, args.price_out)
        if args.output:
            depth = {} if request.reranker is not None else {"trec_depth": args.depth}
            for kind, path in write_outputs(result, args.output, trec=args.trec, **depth).items():
                print(f"  wrote {kind}: {path}")
    return 0


def print_scores(result: TaskRunResult, keys: Sequence[str]) -> None:
    from r2med_plugin.evaluation.naming import dataset_count_drift
    from r2med_plugin.identifiers import DatasetRevision

    shown = [key for key in keys if key in result.scores]
    expansion = f" + {result.expansion}" if result.expansion else ""
    unverified = "" if result.dataset_revision_verified else ", UNVERIFIED: the local mirror does not prove this commit"
    if unverified and DatasetRevision.parse(str(result.dataset_revision)).local:
        unverified = ", UNVERIFIED: no commit recorded, a fingerprint of the mirror's files"
    drift = "; COUNTS DIFFER from the dataset card (--accept-drift)" if dataset_count_drift(result.data) else ""
    print(f"{result.task}  {result.retriever}{expansion}  (dataset revision {result.dataset_revision}{unverified}{drift})")
    if result.query_prompt:
        print(f"  query prompt: {result.query_prompt!r}")
    if result.hybrid_with:
        print(f"  hybrid = RRF({result.retriever}{expansion}, {result.hybrid_with})")
    for key in shown:
        print(f"  {key:<48} {result.scores[key]:.5f}")


def print_usage(result: TaskRunResult, price_in: float | None = None, price_out: float | None = None) -> None:
    """The cost line of an LLM reranker: requests, tokens and wall time (answers from the cache cost nothing), and how
    its pairs (or listwise windows) were scored: by log-probabilities, labels or the said word, undecided, unparsed."""
    from r2med_plugin.llm.reranker_kinds import ANSWER_COUNTS

    usage = result.rerank.usage if result.rerank is not None else None
    if usage:
        counts = ", ".join(f"{usage[key]} {key}" for key in ANSWER_COUNTS if key in usage)
        unit = next((unit for unit in ("comparisons", "groups", "windows", "pairs") if unit in usage),
                    "windows" if "unparsed_answers" in usage or "empty_answers" in usage else "pairs")
        asked = usage.get(unit, usage["requests"] + usage["cached_answers"])
        repeated = usage.get("repeated_questions", 0)
        probes = [f"{usage[key]} {what}" for key, what in (("probe_requests", "request"), ("probe_cached_answers", "from the cache"))
                  if usage.get(key)]
        print(f"  rerank usage: {asked} {unit}: {usage['requests']} requests + {usage['cached_answers']} answers from the cache"
              + (f" + {repeated} repeated questions (a passage text asked before)" if repeated else "")
              + (f"; log-probability probe: {', '.join(probes)}" if probes else "")
              + f"; {usage['prompt_tokens']} prompt + {usage['completion_tokens']} completion tokens, {usage['wall_seconds']:.1f} s"
              + (f"; {unit}: {counts}" if counts else ""))
        if "estimate" in usage:  # the estimate made before the run, beside what it used
            from r2med_plugin.llm.cost import render_side_by_side

            print(render_side_by_side(usage["estimate"], usage, price_in, price_out))
