"""The local expansions folder: hub-layout files, appended one finished query at a time, resumable.

Layout (one folder per task, as the hub repos and the official ``dataset/<task>/`` folders)::

    <out>/<HubName>/<method>/<llm>/query_with_hydoc.jsonl   id, text, hy_doc, doc_id (the released fields)
    <out>/<HubName>/<method>/<llm>/usage.jsonl              id, token counts, finish reason, seconds
    <out>/<HubName>/<method>/<llm>/manifest.json            model, endpoint host, prompts' hash, sampling, dates, tokens

Each finished query is one ``write`` of one complete line, flushed at once. A run killed mid-write
can leave at most a partial last line: it is cut off when the folder is opened again, so the file
only ever holds complete, distinct queries. When every query is done the file is rewritten (atomically)
in the task's query order, like the released files.
"""

from __future__ import annotations

import json
import logging
import os
import re
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, BinaryIO

from r2med_plugin.errors import UserError
from r2med_plugin.io import write_text_atomic
from r2med_plugin.rules import SettingError
from r2med_plugin.types import TaskSpec

logger = logging.getLogger(__name__)

EXPANSION_FILE = "query_with_hydoc.jsonl"
USAGE_FILE = "usage.jsonl"
MANIFEST_FILE = "manifest.json"
LEGACY_LOCK_FILE = ".lock"  # written by r2med-plugin <= 0.2.0; the lock is now held on the folder
_SAFE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


def slug_name(llm: str) -> str:
    """A folder-safe LLM name from a served model id ("Qwen/Qwen2.5-7B-Instruct" -> "Qwen-Qwen2.5-7B-Instruct")."""
    slug = re.sub(r"[^A-Za-z0-9._-]+", "-", llm).strip("-.")
    if not slug:
        raise SettingError(f"cannot make a folder name from the model id {llm!r}; pass {{name}} NAME", field="name")
    return slug


def check_name(name: str) -> str:
    if not _SAFE_NAME.match(name):
        raise UserError(f"LLM name {name!r} must be a folder name: letters, digits, '.', '_' or '-' (e.g. qwen-7b)")
    return name


def expansion_dir(out: str | os.PathLike, spec: TaskSpec, method: str, name: str) -> Path:
    return Path(out) / spec.hub_name / method / check_name(name)


def atomic_write_text(target: Path, text: str) -> None:
    write_text_atomic(target, text)


def _complete_lines(path: Path) -> list[dict[str, Any]]:
    """The JSON lines of ``path``; a partial last line (a run killed mid-write) is cut off the file."""
    if not path.is_file():
        return []
    raw = path.read_bytes()
    if raw and not raw.endswith(b"\n"):
        keep = raw.rfind(b"\n") + 1
        logger.warning("%s: removing a half-written last line left by an interrupted run", path)
        with path.open("r+b") as stream:
            stream.truncate(keep)
        raw = raw[:keep]
    rows = []
    for number, line in enumerate(raw.decode("utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            rows.append(json.loads(line))
        except ValueError as error:
            raise SettingError(f"{path}, line {number}: not valid JSON ({error}); remove the line or pass {{overwrite}}",
                               field="overwrite") from error
    return rows


class ExpansionStore:
    """One (task, method, llm) folder: what is finished, appending, finishing, the manifest."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.expansion_path = folder / EXPANSION_FILE
        self.usage_path = folder / USAGE_FILE
        self.manifest_path = folder / MANIFEST_FILE
        self._streams: list[BinaryIO] = []

    @contextmanager
    def locked(self) -> Iterator[None]:
        """Exclusive use of the folder: a second run writing it at the same time would duplicate queries.

        The lock is held on the folder itself (no lock file is left behind), and released when the run ends."""
        self.folder.mkdir(parents=True, exist_ok=True)
        try:
            import fcntl
        except ImportError:  # not POSIX: no lock
            yield
            return
        handle = os.open(self.folder, os.O_RDONLY)
        try:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as error:
                raise SettingError(f"{self.folder} is being written by another r2med generate run; wait for it or use another "
                                   "{name}/{out}", field="out") from error
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)
        finally:
            os.close(handle)

    def remove_if_nothing_finished(self, created: Sequence[Path]) -> bool:
        """After a run that finished no query: remove its files and the folders this run created (empty ones only)."""
        if self.expansion_path.is_file() and self.expansion_path.stat().st_size:
            return False
        self.clear()
        (self.folder / LEGACY_LOCK_FILE).unlink(missing_ok=True)
        for folder in created:  # deepest first
            try:
                folder.rmdir()
            except OSError:  # not empty (another task's folder, a user's file): kept
                break
        return True

    def clear(self) -> None:
        for path in (self.expansion_path, self.usage_path, self.manifest_path):
            path.unlink(missing_ok=True)

    def read_manifest(self) -> dict[str, Any] | None:
        if not self.manifest_path.is_file():
            return None
        try:
            return json.loads(self.manifest_path.read_text(encoding="utf-8"))
        except ValueError as error:
            raise SettingError(f"{self.manifest_path}: not valid JSON ({error}); pass {{overwrite}} to start this folder again",
                               field="overwrite") from error

    def write_manifest(self, manifest: dict[str, Any]) -> None:
        atomic_write_text(self.manifest_path, json.dumps(manifest, indent=2, ensure_ascii=False, sort_keys=True) + "\n")

    def finished(self, query_ids: Sequence[str]) -> dict[str, dict[str, Any]]:
        """id -> record of the queries already generated (checked: known ids, no duplicates)."""
        known = set(query_ids)
        records: dict[str, dict[str, Any]] = {}
        for row in _complete_lines(self.expansion_path):
            query_id = row.get("id")
            if query_id not in known:
                raise SettingError(f"{self.expansion_path}: query id {query_id!r} is not a query of this task; use another "
                                   "{out} or {overwrite}", field="overwrite")
            if query_id in records:
                raise SettingError(f"{self.expansion_path}: query id {query_id!r} occurs twice; pass {{overwrite}} to start again",
                                   field="overwrite")
            records[query_id] = row
        return records

    def usage(self) -> dict[str, dict[str, Any]]:
        return {row["id"]: row for row in _complete_lines(self.usage_path) if "id" in row}

    def open(self) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        self._streams = [self.expansion_path.open("ab"), self.usage_path.open("ab")]

    def append(self, record: dict[str, Any], usage: dict[str, Any]) -> None:
        """One finished query: its line first (what resuming trusts), then its usage line."""
        for stream, row in zip(self._streams, (record, usage), strict=True):
            stream.write((json.dumps(row, ensure_ascii=False) + "\n").encode("utf-8"))
            stream.flush()

    def close(self) -> None:
        for stream in self._streams:
            os.fsync(stream.fileno())
            stream.close()
        self._streams = []

    def rewrite_in_order(self, query_ids: Sequence[str]) -> None:
        """The finished file in the task's query order (atomic); usage lines for the same ids only."""
        records = self.finished(query_ids)
        usage = self.usage()
        ordered = [records[q] for q in query_ids if q in records]
        atomic_write_text(self.expansion_path, "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in ordered))
        kept = [usage[q] for q in query_ids if q in records and q in usage]
        atomic_write_text(self.usage_path, "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in kept))
