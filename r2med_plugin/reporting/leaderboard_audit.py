"""`r2med leaderboard --audit [MODEL=]DIR`: attach a train/eval overlap audit to a model's rows.

Like mteb's mark on models that are not zero-shot, a task whose evaluation data the model's training data
overlapped (an evaluation query, a relevant document or a query-positive pair found in it) is marked: its
score carries a dagger and the row's note says on how many tasks it is not zero-shot. Rows are copied, never
changed in place."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from pathlib import Path

from r2med_plugin.audit.report import COLUMNS, overlapped, read_audit
from r2med_plugin.catalog import get_task_spec
from r2med_plugin.reporting.rows import LeaderboardRow
from r2med_plugin.rules import SettingError

MARK = "†"


AUDIT = {"values": "--audit"}  # the [MODEL=]DIR values are `r2med leaderboard --audit`'s


def parse_audits(values: Sequence[str]) -> list[tuple[str, str, dict]]:
    """(model, folder, summary) for each ``[MODEL=]DIR``; without MODEL=, the model the audit recorded (--model)."""
    audits = []
    for value in values:
        model, folder = value.split("=", 1) if "=" in value and not Path(value).exists() else (None, value)
        summary = read_audit(folder)
        model = model or summary.get("model")
        if not model:
            raise SettingError(f"{{values}} {value}: the audit names no model; write {{values}} MODEL={folder} (or audit "
                               "with `r2med audit TRAIN --model MODEL`)", field="values", flags=AUDIT)
        audits.append((model, folder, summary))
    return audits


def attach_audits(tables: Mapping[str, Sequence[LeaderboardRow]], values: Sequence[str]) -> dict[str, list[LeaderboardRow]]:
    """New tables whose rows of each audited model carry the audit's marks (see the module docstring)."""
    audits = parse_audits(values)
    out = {benchmark: list(rows) for benchmark, rows in tables.items()}
    for model, folder, summary in audits:
        found = False
        for benchmark, rows in out.items():
            for position, row in enumerate(rows):
                if _of_model(row, model):
                    rows[position] = _marked(row, benchmark, folder, summary)
                    found = True
        if not found:
            labels = sorted({row.retriever for rows in out.values() for row in rows})
            raise SettingError(f"{{values}} {folder}: no row of model {model!r} in the table (rows: {', '.join(labels)}); "
                               "write {values} MODEL=DIR with the model name as the table shows it", field="values", flags=AUDIT)
    return out


def _of_model(row: LeaderboardRow, model: str) -> bool:
    return model == row.retriever or model in row.retriever.split(" | ")


def _marked(row: LeaderboardRow, benchmark: str, folder: str, summary: Mapping) -> LeaderboardRow:
    overlap, audited = {}, []
    for task, counts in summary.get("tasks", {}).items():
        spec = get_task_spec(task)
        if spec.kind != benchmark:
            continue
        audited.append(spec.hub_name)
        if overlapped(counts):
            overlap[spec.hub_name] = ", ".join(f"{counts[kind]['hit']} {label.replace(' hit', '')}" for kind, label in COLUMNS
                                               if counts.get(kind, {}).get("hit"))
    mark = (f"not zero-shot: training data overlaps {len(overlap)} of {len(audited)} audited tasks" if overlap
            else f"zero-shot on the {len(audited)} audited tasks")
    detail = "; ".join(f"{hub}: {what}" for hub, what in overlap.items())
    audit_note = f"{row.retriever}: audit {folder}: {mark}" + (f" ({MARK} {detail})" if detail else "")
    return dataclasses.replace(row, note=", ".join(part for part in (row.note, mark) if part), overlap=overlap,
                               audit_note=audit_note)
