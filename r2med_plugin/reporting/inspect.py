"""``r2med inspect``: single queries behind the averages.

- ``inspect_query``: one query of one task, each model's top 10 with relevance marks and the ranks of all
  positives. Read from the per-query sidecars (their ``r2med_top_ranked`` metadata, written with every
  result), so neither the TREC run (``--trec``) nor the data is needed; a positive that the saved run does
  not hold (deeper than ``--top-k``) is shown as not retrieved.
- ``worst_queries``: for each model, the queries where it loses most to a baseline on one metric.
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from r2med_plugin.errors import UserError
from r2med_plugin.identifiers import described_data
from r2med_plugin.reporting.compare import DEFAULT_METRIC, aligned, load_scores, load_sidecars, our_task_names, resolve_model
from r2med_plugin.rules import SettingError


@dataclass(frozen=True)
class QueryView:
    model: str
    task: str
    query_id: str
    top: tuple[tuple[str, float, int], ...]  # (doc id, score, relevance), best first
    positives: dict[str, int | None]  # doc id -> rank in the saved run (None: not in it)
    run_depth: int
    metric: str
    value: float | None
    path: Path


WORST = {"count": "--worst"}  # worst_queries' count is `r2med inspect --worst`


def _check_task(task: str) -> str:
    names = our_task_names()
    if task not in names:
        close = difflib.get_close_matches(task, names, n=2)
        hint = f" Did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
        raise SettingError(f"{{task}} {task!r} is not an R2MED or NanoR2MED task.{hint} `r2med tasks` lists them",
                           field="task")
    return task


def inspect_query(folders: Sequence[str | Path], task: str, query_id: str, metric: str = DEFAULT_METRIC) -> list[QueryView]:
    """Each model's view of one query (see the module docstring), models in name order."""
    _check_task(task)
    sidecars = {label: files for (label, name), files in load_sidecars(folders).items() if name == task}
    if not sidecars:
        raise UserError(f"no {task} results with per-query files under {', '.join(map(str, folders))}; evaluate {task} first")
    views: list[QueryView] = []
    known: set[str] = set()
    for label in sorted(sidecars):
        holding = [sidecar for sidecar in sidecars[label] if query_id in sidecar.ranked]
        if len(holding) > 1:  # which one to show would be a guess: the first folder given, silently
            raise UserError(f"{label} has two {task} results: {holding[0].path} and {holding[1].path} (two folders, or two "
                            "dataset revisions); pass only one of them")
        for sidecar in sidecars[label]:
            known |= set(sidecar.ranked)
            entry = sidecar.ranked.get(query_id)
            if entry is None:
                continue
            values = sidecar.frame.filter((sidecar.frame["query_id"] == query_id) & (sidecar.frame["metric"] == metric))["value"]
            views.append(QueryView(
                model=label, task=task, query_id=query_id, top=tuple((str(d), float(s), int(r)) for d, s, r in entry["top"]),
                positives=dict(entry["positives"]), run_depth=int(entry.get("depth", 0)), metric=metric,
                value=float(values[0]) if len(values) else None, path=sidecar.path,
            ))
            break
    revisions = {str(view.path): sidecar_revision for view, sidecar_revision in
                 ((view, _revision_of(view.path, sidecars)) for view in views) if sidecar_revision}
    if len(set(revisions.values())) > 1:
        described = "; ".join(f"{described_data(judged)} ({path})" for path, judged in revisions.items())
        raise UserError(f"{task}: these results were computed on different dataset revisions or files ({described}): their "
                        "relevance marks may come from other qrels. Inspect results of one dataset revision and one set of "
                        "files at a time")
    if not views:
        close = difflib.get_close_matches(query_id, sorted(known), n=3, cutoff=0.5)
        hint = f" Did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
        example = f" (e.g. {sorted(known)[0]!r})" if known else ""
        raise SettingError(f"{{query_id}} {query_id!r} is not an evaluated query of {task} in these results{example}.{hint}",
                           field="query_id", flags={"query_id": "--query"})
    return views


def _revision_of(path: Path, sidecars: dict) -> str:
    for files in sidecars.values():
        for sidecar in files:
            if sidecar.path == path:
                return str(sidecar.info.get("paired_data") or "")  # filled in by load_sidecars
    return ""


def render_query(views: Sequence[QueryView]) -> str:
    """Markdown: per model, the metric value, the ranks of the positives and the top 10 with relevance marks."""
    first = views[0]
    positives = sorted({doc for view in views for doc in view.positives})
    lines = [f"# {first.task}, query {first.query_id}: {len(positives)} positive(s)", ""]
    for view in views:
        value = "-" if view.value is None else f"{view.value:.4f}"
        ranks = ", ".join(f"{doc} at {rank}" if rank is not None else f"{doc} not retrieved (run depth {view.run_depth})"
                          for doc, rank in sorted(view.positives.items(), key=lambda item: (item[1] is None, item[1] or 0, item[0])))
        lines += [f"## {view.model}", "", f"- {view.metric}: {value}", f"- positives: {ranks or 'none'}", "",
                  "| Rank | Document | Score | Relevant |", "|---|---|---|---|"]
        lines += [f"| {rank} | {doc} | {score:.4f} | {'yes (' + str(rel) + ')' if rel > 0 else ''} |"
                  for rank, (doc, score, rel) in enumerate(view.top, start=1)]
        lines.append("")
    return "\n".join(lines)


@dataclass(frozen=True)
class Loss:
    model: str
    baseline: str
    task: str
    query_id: str
    value: float
    baseline_value: float

    @property
    def diff(self) -> float:
        return self.value - self.baseline_value


def worst_queries(
    folders: Sequence[str | Path], baseline: str, count: int, *, metric: str = DEFAULT_METRIC, task: str | None = None
) -> dict[str, list[Loss] | None]:
    """model -> its ``count`` largest losses to ``baseline`` (most negative differences first; only losses), or None
    for a model that shares no task with the baseline."""
    if isinstance(count, bool) or int(count) != count or count < 1:
        raise SettingError(f"{{count}} must be a positive number of queries, got {count}", field="count", flags=WORST)
    if task is not None:
        _check_task(task)
    scores = load_scores(folders, metric)
    base = resolve_model(scores, baseline)
    others = [model for model in scores.models if model != base]
    if not others:
        raise SettingError(f"{{count}} compares models with the baseline {base}, and the folders hold no other model: add one",
                           field="count", flags=WORST)
    tasks = [task] if task is not None else list(scores.tasks)
    if task is not None and scores.get(base, task) is None:
        raise UserError(f"the baseline {base} has no {task} result with {metric}")
    losses: dict[str, list[Loss] | None] = {}
    for model in others:
        found: list[Loss] = []
        shared = [name for name in tasks if scores.get(model, name) is not None and scores.get(base, name) is not None]
        if not shared:
            losses[model] = None  # nothing to compare, which is not "no loss"
            continue
        for name in shared:
            query_ids, values, base_values = aligned(scores, model, base, name)
            diff = values - base_values
            for index in np.flatnonzero(diff < 0):
                found.append(Loss(model, base, name, query_ids[index], float(values[index]), float(base_values[index])))
        found.sort(key=lambda loss: (loss.diff, loss.task, loss.query_id))
        losses[model] = found[: int(count)]
    return losses


def render_losses(losses: dict[str, list[Loss] | None], metric: str, count: int, baseline: str) -> str:
    """Each model's losses (None: it shares no task with the baseline, so nothing was compared)."""
    lines = []
    for model, rows in losses.items():
        if rows is None:
            lines += [f"## {model}: not compared with {baseline}", "", f"no task holds both {model} and {baseline}", ""]
            continue
        title = f"## {model}: {len(rows)} largest losses to {baseline} ({metric})"
        lines += [title, ""]
        if not rows:
            lines += ["no query where it scores below the baseline", ""]
            continue
        lines += ["| Task | Query | Model | Baseline | Diff. |", "|---|---|---|---|---|"]
        lines += [f"| {r.task} | {r.query_id} | {r.value:.4f} | {r.baseline_value:.4f} | {r.diff:+.4f} |" for r in rows]
        if len(rows) < count:
            lines.append(f"\n(only {len(rows)} queries where it loses)")
        lines.append("")
    return "\n".join(lines)
