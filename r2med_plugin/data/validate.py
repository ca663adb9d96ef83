"""Checks on loaded tables; every error names the file and the (1-based) row."""

from __future__ import annotations

from pathlib import Path

import polars as pl


def first_row(mask: pl.Series) -> int:
    return int(mask.arg_true()[0]) + 1


def check_unique(frame: pl.DataFrame, columns: list[str], path: Path, what: str) -> None:
    duplicated = frame.select(pl.struct(columns).is_first_distinct().not_()).to_series()
    if duplicated.any():
        row = first_row(duplicated)
        value = frame.row(row - 1, named=True)
        shown = ", ".join(f"{name}={value[name]!r}" for name in columns)
        raise ValueError(f"{path}, row {row}: duplicate {what} ({shown}); each must occur once")


def check_texts(frame: pl.DataFrame, path: Path) -> None:
    empty = frame["text"].str.strip_chars().str.len_chars() == 0
    if empty.any():
        row = first_row(empty)
        raise ValueError(f"{path}, row {row}: empty text for id {frame['id'][row - 1]!r}")


def check_known(values: pl.Series, known: pl.Series, path: Path, what: str) -> None:
    unknown = ~values.is_in(known.implode())
    if unknown.any():
        row = first_row(unknown)
        count = int(unknown.sum())
        raise ValueError(
            f"{path}, row {row}: {what} {values[row - 1]!r} is not in the {what.split()[0]} table "
            f"({count} row(s) like this); the files are from different revisions or incomplete"
        )


def count_differences(expected: dict[str, int], found: dict[str, int]) -> dict[str, dict[str, int]]:
    return {
        key: {"expected": expected[key], "found": found[key]}
        for key in expected
        if key in found and expected[key] != found[key]
    }
