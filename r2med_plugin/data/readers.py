"""Readers for JSONL and parquet tables: polars, no per-row Python, errors that name file and row."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl


def read_table(path: Path, columns: dict[str, pl.DataType]) -> pl.DataFrame:
    """Read ``columns`` from a .jsonl or .parquet file, with their dtypes; every value must be present."""
    if path.suffix == ".jsonl":
        frame = _read_jsonl(path, columns)
    elif path.suffix == ".parquet":
        frame = _read_parquet(path, columns)
    else:
        raise ValueError(f"{path}: unsupported file type {path.suffix!r} (expected .jsonl or .parquet)")
    _require_values(frame, path)
    return frame


def _read_jsonl(path: Path, columns: dict[str, pl.DataType]) -> pl.DataFrame:
    try:
        frame = pl.read_ndjson(path, schema=columns)
    except Exception as error:  # polars reports no line number: find it ourselves
        raise _locate_jsonl_error(path, error) from error
    absent = [name for name in columns if frame.height and frame[name].null_count() == frame.height]
    if absent:
        raise ValueError(f"{path}: missing column(s) {absent}; every line needs the fields {list(columns)}")
    return frame


def _locate_jsonl_error(path: Path, error: Exception) -> ValueError:
    with path.open("rb") as handle:
        for line_number, raw in enumerate(handle, start=1):
            if not raw.strip():
                continue
            try:
                record = json.loads(raw)
            except (json.JSONDecodeError, UnicodeDecodeError) as bad:
                truncated = " (the line looks truncated: re-download the file)" if not raw.endswith(b"\n") else ""
                return ValueError(f"{path}, line {line_number}: malformed JSON ({bad}){truncated}")
            if not isinstance(record, dict):
                return ValueError(f"{path}, line {line_number}: expected a JSON object, got {type(record).__name__}")
    return ValueError(f"{path}: could not be read as JSON lines ({error})")


def _read_parquet(path: Path, columns: dict[str, pl.DataType]) -> pl.DataFrame:
    try:
        frame = pl.read_parquet(path)
    except Exception as error:
        raise ValueError(f"{path}: not a readable parquet file ({error}); re-download it") from error
    absent = [name for name in columns if name not in frame.columns]
    if absent:
        raise ValueError(f"{path}: missing column(s) {absent}; found {frame.columns}")
    try:
        return frame.select([pl.col(name).cast(dtype) for name, dtype in columns.items()])
    except Exception as error:
        raise ValueError(f"{path}: columns {list(columns)} do not have the expected types ({error})") from error


def _require_values(frame: pl.DataFrame, path: Path) -> None:
    for name in frame.columns:
        nulls = frame[name].is_null()
        if nulls.any():
            row = int(nulls.arg_true()[0]) + 1
            raise ValueError(f"{path}, row {row}: no value for {name!r}; every row needs one")
