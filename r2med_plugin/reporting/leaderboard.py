"""The R2MED leaderboard table from MTEB result folders, optionally among the published rows.

One row per model (an expansion run is its own "LLM | Retriever" row), the 8 tasks in the official
order as nDCG@10 x 100 and their average, two decimals. A row that lacks a task is shown but not
ranked on the average. mteb's built-in ``R2MED<Domain>Retrieval`` results form rows of their own,
labelled as such. The NanoR2MED table adds the averages of the hybrid and candidate-subset scores.
"""

from __future__ import annotations

import csv
import html
import io
import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

from r2med_plugin.catalog import list_tasks

BENCHMARKS = ("r2med", "nano")
MAIN_METRIC = "ndcg_at_10"
NANO_EXTRA_COLUMNS = {
    "Hybrid": "hybrid_ndcg_at_10",
    "Cand. BM25": "candidates_bm25_ndcg_at_10",
    "Cand. dense": "candidates_dense_ndcg_at_10",
    "Cand. hybrid": "candidates_hybrid_ndcg_at_10_with_safeguard",
}
BUILTIN_LABEL = "mteb built-in R2MED*Retrieval"
_RERANKED_MODEL = re.compile(r"^(?P<reranker>[^|]+)\|(?P<first_stage>[^|]+)\|top_(?P<depth>\d+)$")
_EXPANSION_MODEL = re.compile(r"^(?P<local>local/)?(?P<method>hyde|query2doc|lamer|search-r1|search-o1)/(?P<llm>[^+]+)\+(?P<retriever>.+)$")
LOCAL_LABEL = "generated locally"
_PROMPT_SUFFIX = re.compile(r"\+(?P<prompt>instruction|prompt-[0-9a-f]{8})$")  # r2med evaluate --instruction / a custom prompt


@dataclass(frozen=True)
class ResultRecord:
    model: str
    revision: str
    task: str
    scores: dict
    date: float
    path: Path


@dataclass
class LeaderboardRow:
    llm: str
    retriever: str
    scores: dict[str, float]  # hub name -> nDCG@10 x 100
    source: str  # "yours" or "published"
    note: str = ""
    extras: dict[str, float] = field(default_factory=dict)
    task_extras: dict[str, dict[str, float]] = field(default_factory=dict)  # hub name -> column -> x100
    published_average: float | None = None  # the average as published (it may differ in the last digit)
    average: float | None = None
    missing: list[str] = field(default_factory=list)

    @property
    def ranked(self) -> bool:
        return self.average is not None


def task_columns() -> list[str]:
    return [spec.hub_name for spec in list_tasks("r2med")]


def _task_index() -> dict[str, tuple[str, str, bool]]:
    """task name -> (benchmark, hub name, is mteb's built-in task)."""
    index = {}
    for spec in list_tasks():
        index[spec.name] = (spec.kind, spec.hub_name, False)
        if spec.mteb_builtin_task:
            index[spec.mteb_builtin_task] = ("r2med", spec.hub_name, True)
    return index


def read_result_folders(folders: Iterable[str | Path]) -> list[ResultRecord]:
    """Every MTEB TaskResult JSON under the folders (ResultCache layout: <model>/<revision>/<task>.json)."""
    records = []
    for folder in folders:
        folder = Path(folder)
        if not folder.is_dir():
            raise FileNotFoundError(f"{folder} is not a folder of MTEB results (expected results/<model>/<revision>/<task>.json)")
        for path in sorted(folder.rglob("*.json")):
            if path.name == "model_meta.json" or path.name.endswith("_predictions.json"):
                continue
            try:
                payload = json.loads(path.read_text(encoding="utf-8"))
            except (OSError, ValueError) as error:
                raise ValueError(f"{path}: not a readable result file ({error})") from error
            if not isinstance(payload, dict) or "task_name" not in payload or "scores" not in payload:
                continue
            records.append(
                ResultRecord(
                    model=_model_name(path), revision=path.parent.name, task=payload["task_name"],
                    scores=_main_split_scores(payload, path), date=float(payload.get("date") or path.stat().st_mtime), path=path,
                )
            )
    return records


def _model_name(result_path: Path) -> str:
    meta = result_path.parent / "model_meta.json"
    if meta.is_file():
        try:
            name = json.loads(meta.read_text(encoding="utf-8")).get("name")
            if name:
                return str(name)
        except (OSError, ValueError):
            pass
    return result_path.parent.parent.name.replace("__", "/")


def _main_split_scores(payload: dict, path: Path) -> dict:
    splits = payload["scores"]
    entries = splits.get("test") or next(iter(splits.values()), [])
    for entry in entries:
        if entry.get("hf_subset", "default") == "default":
            return entry
    if entries:
        return entries[0]
    raise ValueError(f"{path}: the result holds no scores")


def _split_model(model: str) -> tuple[str, str, str]:
    """(llm, retriever, note) for a model name; expansion runs are named "<method>/<llm>+<retriever>",
    runs with an expansion from `r2med generate` "local/<method>/<llm>+<retriever>" (noted as generated locally)."""
    prompt = _PROMPT_SUFFIX.search(model)
    if prompt:
        llm, retriever, note = _split_model(model[: prompt.start()])
        label = "with instruction" if prompt["prompt"] == "instruction" else f"custom {prompt['prompt']}"
        return llm, retriever, ", ".join(part for part in (note, label) if part)
    reranked = _RERANKED_MODEL.match(model)
    if reranked:  # "<reranker>|<first stage>|top_<k>" (r2med_plugin.evaluation.reranking)
        return "", f"{reranked['reranker']} | {reranked['first_stage']}", f"rerank top {reranked['depth']}"
    match = _EXPANSION_MODEL.match(model)
    if match:
        return match["llm"], match["retriever"], match["method"]
    return "", model, ""


def user_rows(records: Sequence[ResultRecord], benchmark: str = "r2med") -> list[LeaderboardRow]:
    if benchmark not in BENCHMARKS:
        raise ValueError(f"benchmark must be one of {BENCHMARKS}, got {benchmark!r}")
    index = _task_index()
    newest: dict[tuple[str, bool], dict[str, ResultRecord]] = {}
    for record in records:
        kind = index.get(record.task)
        if kind is None or kind[0] != benchmark:
            continue
        per_task = newest.setdefault((record.model, kind[2]), {})
        current = per_task.get(kind[1])
        if current is None or record.date > current.date:
            per_task[kind[1]] = record
    rows = []
    for (model, builtin), per_task in newest.items():
        llm, retriever, method = _split_model(model)
        local = LOCAL_LABEL if method and model.startswith("local/") else ""
        note = ", ".join(part for part in (method, local, BUILTIN_LABEL if builtin else "") if part)
        scores = {hub: 100 * float(record.scores[MAIN_METRIC]) for hub, record in per_task.items() if MAIN_METRIC in record.scores}
        extras: dict[str, float] = {}
        task_extras: dict[str, dict[str, float]] = {}
        if benchmark == "nano":
            for hub, record in per_task.items():
                task_extras[hub] = {c: 100 * float(record.scores[k]) for c, k in NANO_EXTRA_COLUMNS.items() if k in record.scores}
            for column, key in NANO_EXTRA_COLUMNS.items():
                values = [float(record.scores[key]) for record in per_task.values() if key in record.scores]
                if len(values) == len(task_columns()):
                    extras[column] = 100 * sum(values) / len(values)
        rows.append(
            LeaderboardRow(llm=llm, retriever=retriever, scores=scores, source="yours", note=note, extras=extras, task_extras=task_extras)
        )
    return rows


def published_rows() -> list[LeaderboardRow]:
    """The published R2MED leaderboard (shipped with the package)."""
    text = (resources.files("r2med_plugin") / "reporting" / "r2med_leaderboard.json").read_text(encoding="utf-8")
    return [
        LeaderboardRow(
            llm=row["llm"] or "", retriever=row["retriever"], scores=dict(row["scores"]), source="published",
            published_average=float(row["avg"]),
        )
        for row in json.loads(text)["rows"]
    ]


def published_reranker_rows() -> list[LeaderboardRow]:
    """The official reranker results (results/reranker/<reranker>/<retriever>/top_<k>/, shipped with the
    package): one "Reranker | First stage" row per reranker, first stage and depth, nDCG@10 x 100."""
    text = (resources.files("r2med_plugin") / "reporting" / "r2med_reranker_results.json").read_text(encoding="utf-8")
    facts = json.loads(text)
    models = facts["models"]
    grouped: dict[tuple[str, str, int], dict[str, float]] = {}
    for result in facts["results"]:
        key = (result["reranker_name"], result["retriever_name"], int(result["topk"]))
        grouped.setdefault(key, {})[result["dataset_name"]] = 100 * float(result["test"]["NDCG@10"])
    return [
        LeaderboardRow(
            llm="", retriever=f"{_short(models.get(reranker, reranker))} | {_short(models.get(retriever, retriever))}",
            scores=scores, source="published", note=f"rerank top {depth}",
        )
        for (reranker, retriever, depth), scores in grouped.items()
    ]


def _short(model: str) -> str:
    """The model's name without its hub organisation, as the leaderboard names models (NV-Embed-v2)."""
    return model.rsplit("/", 1)[-1]


def rank_rows(rows: Sequence[LeaderboardRow]) -> list[LeaderboardRow]:
    """Averages for complete rows; ranked rows by average (best first), then the incomplete ones."""
    columns = task_columns()
    for row in rows:
        row.missing = [column for column in columns if column not in row.scores]
        if row.published_average is not None:
            row.average = row.published_average
        else:
            row.average = None if row.missing else sum(row.scores[c] for c in columns) / len(columns)
    ranked = sorted((r for r in rows if r.ranked), key=lambda r: (-round(r.average, 2), r.source != "yours", r.llm, r.retriever))
    unranked = sorted((r for r in rows if not r.ranked), key=lambda r: (r.llm, r.retriever))
    return ranked + unranked


def build_leaderboard(
    folders: Iterable[str | Path], *, benchmark: str = "r2med", compare_published: bool = False
) -> list[LeaderboardRow]:
    rows = user_rows(read_result_folders(folders), benchmark)
    if compare_published:
        if benchmark != "r2med":
            raise ValueError("published rows exist for the full R2MED benchmark only (use --benchmark r2med)")
        rows += published_rows() + published_reranker_rows()
    if not rows:
        raise ValueError(
            f"no {benchmark} results found in the given folders; run `mteb run -t <task> -m <model>` or `r2med evaluate` first"
        )
    return rank_rows(rows)


# --- rendering -------------------------------------------------------------------------------------


def _header(rows: Sequence[LeaderboardRow]) -> list[str]:
    extras = [c for c in NANO_EXTRA_COLUMNS if any(c in r.extras for r in rows)]
    return ["Rank", "LLM", "Retriever", "Avg.", *task_columns(), *extras]


def table_cells(rows: Sequence[LeaderboardRow]) -> tuple[list[str], list[list[str]]]:
    header = _header(rows)
    body, rank = [], 0
    for row in rows:
        rank = rank + 1 if row.ranked else rank
        retriever = row.retriever + (f" ({row.note})" if row.note else "") + (" [published]" if row.source == "published" else "")
        cells = [str(rank) if row.ranked else "-", row.llm or "-", retriever, f"{row.average:.2f}" if row.ranked else "-"]
        cells += [f"{row.scores[c]:.2f}" if c in row.scores else "-" for c in task_columns()]
        cells += [f"{row.extras[c]:.2f}" if c in row.extras else "-" for c in header[len(cells):]]
        body.append(cells)
    return header, body


def notes(rows: Sequence[LeaderboardRow]) -> list[str]:
    return [
        f"{(row.llm + ' | ') if row.llm else ''}{row.retriever}: not ranked, missing {', '.join(row.missing)}"
        for row in rows if not row.ranked
    ]


def render(rows: Sequence[LeaderboardRow], fmt: str = "md") -> str:
    header, body = table_cells(rows)
    footnotes = notes(rows)
    if fmt == "md":
        lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
        lines += ["| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |" for cells in body]  # "Reranker | First stage"
        return "\n".join(lines + ([""] + [f"- {note}" for note in footnotes] if footnotes else [])) + "\n"
    if fmt == "csv":
        buffer = io.StringIO()
        writer = csv.writer(buffer, lineterminator="\n")
        writer.writerow(header)
        writer.writerows(body)
        return buffer.getvalue()
    if fmt == "html":
        head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
        rows_html = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in cells) + "</tr>" for cells in body)
        notes_html = "".join(f"<li>{html.escape(n)}</li>" for n in footnotes)
        return (
            "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>R2MED leaderboard</title></head><body>\n"
            f"<table border=\"1\"><thead><tr>{head}</tr></thead><tbody>{rows_html}</tbody></table>\n"
            + (f"<ul>{notes_html}</ul>\n" if notes_html else "") + "</body></html>\n"
        )
    raise ValueError(f"format must be md, csv or html, got {fmt!r}")
