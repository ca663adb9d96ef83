"""Readers for JSONL and parquet tables: polars, no per-row Python, errors that name file and row."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import polars as pl
from polars.datatypes import DataTypeClass

from r2med_plugin.errors import UserError

MAX_LINE_BYTES_ENV = "R2MED_MAX_LINE_BYTES"
DEFAULT_MAX_LINE_BYTES = 16 * 1024 * 1024
_CONTROL_CHARACTERS = r"[\x00-\x1f\x7f]"
# a table's columns and their polars types (pl.Utf8 is a type class, pl.List(pl.Utf8) an instance)
ColumnTypes = Mapping[str, pl.DataType | DataTypeClass]



class DamagedFileError(UserError):
    """A data file that cannot be parsed at all (truncated or corrupt): a fresh download may mend it."""


def max_line_bytes() -> int:
    return int(os.environ.get(MAX_LINE_BYTES_ENV) or DEFAULT_MAX_LINE_BYTES)


def read_table(path: Path, columns: ColumnTypes) -> pl.DataFrame:
    """Read ``columns`` from a .jsonl or .parquet file, with their dtypes; every value must be present."""
    if path.suffix == ".jsonl":
        frame = _read_jsonl(path, columns)
    elif path.suffix == ".parquet":
        frame = _read_parquet(path, columns)
    else:
        raise UserError(f"{path}: unsupported file type {path.suffix!r} (expected .jsonl or .parquet)")
    _require_values(frame, path)
    return frame


def _check_line_lengths(path: Path) -> None:
    """Refuse a JSONL file with a line longer than the limit before parsing it (no 50 MB records)."""
    limit = max_line_bytes()
    if path.stat().st_size <= limit:
        return
    data = np.fromfile(path, dtype=np.uint8)
    ends = np.concatenate([[-1], np.flatnonzero(data == 10), [data.size]])
    lengths = np.diff(ends) - 1
    longest = int(np.argmax(lengths))
    if lengths[longest] > limit:
        raise UserError(
            f"{path}, line {longest + 1}: {int(lengths[longest]):,} bytes, over the {limit:,}-byte limit for one record; "
            f"the file is damaged or not a dataset file (raise the limit with {MAX_LINE_BYTES_ENV} if it is genuine)"
        )


def _read_jsonl(path: Path, columns: ColumnTypes) -> pl.DataFrame:
    _check_line_lengths(path)
    try:
        frame = pl.read_ndjson(path, schema=columns)
    except Exception as error:  # polars reports no line number: find it ourselves
        raise _locate_jsonl_error(path, error) from error
    absent = [name for name in columns if frame.height and frame[name].null_count() == frame.height]
    if absent:
        raise UserError(f"{path}: missing column(s) {absent}; every line needs the fields {list(columns)}")
    return frame


def _locate_jsonl_error(path: Path, error: Exception) -> UserError:
    with path.open("rb") as handle:
        for line_number, raw in enumerate(handle, start=1):
            if not raw.strip():
                continue
            try:
                record = json.loads(raw)
            except (json.JSONDecodeError, UnicodeDecodeError) as bad:
                truncated = " (the line looks truncated: re-download the file)" if not raw.endswith(b"\n") else ""
                return DamagedFileError(f"{path}, line {line_number}: malformed JSON ({bad}){truncated}")
            if not isinstance(record, dict):
                return UserError(f"{path}, line {line_number}: expected a JSON object, got {type(record).__name__}")
    return DamagedFileError(f"{path}: could not be read as JSON lines ({error})")


def _read_parquet(path: Path, columns: ColumnTypes) -> pl.DataFrame:
    try:
        frame = pl.read_parquet(path)
    except Exception as error:
        raise DamagedFileError(f"{path}: not a readable parquet file ({error}); re-download it") from error
    absent = [name for name in columns if name not in frame.columns]
    if absent:
        raise UserError(f"{path}: missing column(s) {absent}; found {frame.columns}")
    try:
        return frame.select([pl.col(name).cast(dtype) for name, dtype in columns.items()])
    except Exception as error:
        raise UserError(f"{path}: columns {list(columns)} do not have the expected types ({error})") from error


def check_ids(frame: pl.DataFrame, columns: list[str], path: Path) -> None:
    """Ids must be printable: control characters in an id are refused (file and row named)."""
    for name in columns:
        bad = frame[name].str.contains(_CONTROL_CHARACTERS)
        if bad.any():
            row = int(bad.arg_true()[0]) + 1
            raise UserError(f"{path}, row {row}: the {name!r} value {frame[name][row - 1]!r} contains control characters")


def _require_values(frame: pl.DataFrame, path: Path) -> None:
    for name in frame.columns:
        nulls = frame[name].is_null()
        if nulls.any():
            row = int(nulls.arg_true()[0]) + 1
            raise UserError(f"{path}, row {row}: no value for {name!r}; every row needs one")
