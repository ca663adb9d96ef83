"""The audit's report: counts per task (and their share of the task), the Markdown table, and reading an audit
folder back (what `r2med leaderboard --audit` attaches)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

from r2med_plugin.audit.index import CORPUS, PAIR, QUERY, RELEVANT
from r2med_plugin.rules import SettingError, SettingFileError

AUDIT_FORMAT = "r2med-audit/1"
SUMMARY_FILE, HITS_FILE, REPORT_FILE = "audit.json", "hits.jsonl", "report.md"
COLUMNS = ((QUERY, "eval queries hit"), (RELEVANT, "relevant docs hit"), (PAIR, "pairs hit"))


def task_rows(found: Mapping[str, Mapping[str, int]], totals: Mapping[str, Mapping[str, int]]) -> dict[str, dict]:
    """Task -> {kind: {"hit": n, "total": n, "percent": p}} for the kinds the task was searched for."""
    rows = {}
    for task, kinds in totals.items():
        rows[task] = {kind: _share(found.get(task, {}).get(kind, 0), total) for kind, total in kinds.items()}
    return rows


def _share(hit: int, total: int) -> dict:
    return {"hit": hit, "total": total, "percent": round(100.0 * hit / total, 2) if total else 0.0}


def overlapped(task_row: Mapping[str, Mapping[str, float]]) -> bool:
    """Whether the training data overlapped the task's evaluation data (queries, relevant documents or pairs)."""
    return any(task_row.get(kind, {}).get("hit", 0) for kind, _ in COLUMNS)


def render_report(summary: Mapping) -> str:
    """The Markdown report: one table row per task, the corpus overlap apart, the training files and their counts."""
    lines = [f"# Train/eval overlap audit (threshold {summary['threshold']}, word {summary['ngram']}-grams)", "",
             "| Task | " + " | ".join(label for _, label in COLUMNS) + " | training rows hit |",
             "|---|" + "---|" * (len(COLUMNS) + 1)]
    for task, row in summary["tasks"].items():
        cells = [f"{row[kind]['hit']} / {row[kind]['total']} ({row[kind]['percent']:.2f}%)" for kind, _ in COLUMNS]
        lines.append(f"| {task} | " + " | ".join(cells) + f" | {summary['training_rows_hit'].get(task, 0)} |")
    if summary.get("corpus"):
        lines += ["", "## Corpus overlap (--corpus; every document, relevant or not)", "",
                  "| Task | corpus docs hit |", "|---|---|"]
        lines += [f"| {task} | {row[CORPUS]['hit']} / {row[CORPUS]['total']} ({row[CORPUS]['percent']:.2f}%) |"
                  for task, row in summary["tasks"].items()]
    lines += ["", "## Training data", ""] + [_source_line(source) for source in summary["training"]]
    lines += _declared_lines(summary.get("declared_training_data"))
    return "\n".join(lines) + "\n"


def _source_line(source: Mapping) -> str:
    line = (f"- {source['label']}: {source['format']}, layout {source['layout']}, {source['rows']} rows, "
            f"{source['texts']} texts, {source['rows_hit']} rows hit")
    clean = source.get("clean")
    if clean:
        line += f"; cleaned copy {clean['path']}: {clean['kept']} rows kept of {clean['rows']} ({clean['dropped']} dropped)"
    return line


def render_declared(declared: Mapping) -> str:
    """The declared-training-data block alone (`r2med audit --model NAME` without TRAIN)."""
    return "\n".join(_declared_lines(declared)).strip() + "\n"


def _declared_lines(declared: Mapping | None) -> list[str]:
    if not declared:
        return []
    lines = ["", f"## Declared training data of {declared['model']} (mteb's ModelMeta)", ""]
    if not declared["known_to_mteb"]:
        return lines + ["mteb's registry does not know this model: no declared training data to check."]
    if declared["training_datasets"] is None:
        return lines + ["mteb knows the model but records no training data for it (training_datasets is None)."]
    lines.append(f"{len(declared['training_datasets'])} datasets: {', '.join(declared['training_datasets']) or 'none'}")
    lines += ["", "R2MED sources among them:" if declared["r2med_sources"] else "None of them is one of R2MED's sources."]
    lines += [f"- {s['dataset']}: {s['source']} ({s['relation']}; {', '.join(s['tasks'])}): {s['note']}. {s['citation']}, {s['url']}"
              for s in declared["r2med_sources"]]
    return lines


AUDIT = {"folder": "--audit"}  # read_audit's folder is what `r2med leaderboard --audit` names


def read_audit(folder: str | Path) -> dict:
    """The summary of an audit folder written by `r2med audit --out FOLDER`, checked."""
    path = Path(folder) / SUMMARY_FILE if Path(folder).is_dir() else Path(folder)
    if not path.is_file():
        raise SettingFileError(f"{{folder}} {folder}: no {SUMMARY_FILE} there; run `r2med audit TRAIN --out {folder}` first",
                               field="folder", flags=AUDIT)
    try:
        summary = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as error:
        raise SettingError(f"{{folder}} {folder}: {path} is not JSON ({error}); run the audit again", field="folder",
                           flags=AUDIT) from None
    if not isinstance(summary, dict) or summary.get("format") != AUDIT_FORMAT:
        raise SettingError(f"{{folder}} {folder}: {path} is not an r2med audit summary ({AUDIT_FORMAT}); run the audit again",
                           field="folder", flags=AUDIT)
    return summary
