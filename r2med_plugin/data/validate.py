"""Checks on loaded tables; every error names the file and the (1-based) row."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import polars as pl

from r2med_plugin.errors import UserError


def first_row(mask: pl.Series) -> int:
    return int(mask.arg_true()[0]) + 1


def check_unique(frame: pl.DataFrame, columns: list[str], path: Path, what: str) -> None:
    duplicated = frame.select(pl.struct(columns).is_first_distinct().not_()).to_series()
    if duplicated.any():
        row = first_row(duplicated)
        value = frame.row(row - 1, named=True)
        shown = ", ".join(f"{name}={value[name]!r}" for name in columns)
        raise UserError(f"{path}, row {row}: duplicate {what} ({shown}); each must occur once")


def check_texts(frame: pl.DataFrame, path: Path) -> None:
    empty = frame["text"].str.strip_chars().str.len_chars() == 0
    if empty.any():
        row = first_row(empty)
        raise UserError(f"{path}, row {row}: empty text for id {frame['id'][row - 1]!r}")


@dataclass(frozen=True)
class UniqueRows:
    """A text table with each id once (its first row), and what was folded away."""

    frame: pl.DataFrame  # columns id, text: the first row of every id, in file order
    rows: int  # rows in the file
    repeated_ids: dict[str, int]  # id -> rows holding it, for ids on more than one row (identical text)

    @property
    def repeated_rows(self) -> int:
        """Rows that repeat an earlier row's id."""
        return self.rows - self.frame.height


def fold_repeated_ids(frame: pl.DataFrame, path: Path, what: str) -> UniqueRows:
    """Keep the first row of each id. A later row of the same id must repeat its text exactly (the real
    PMC-Treatment corpus has 145 such rows; the official code and mteb both accept them); one with other text
    is refused, naming both rows, since which text a scorer would use is then a guess."""
    first = frame.select(pl.col("id").is_first_distinct()).to_series()
    if first.all():
        return UniqueRows(frame, frame.height, {})
    numbered = frame.with_row_index("row", offset=1)
    later = numbered.filter(~first)
    earliest = numbered.filter(first & pl.col("id").is_in(later["id"].implode()))
    paired = later.join(earliest, on="id", suffix="_first").sort("row")
    conflict = paired.filter(pl.col("text") != pl.col("text_first"))
    if conflict.height:
        row = conflict.row(0, named=True)
        raise UserError(
            f"{path}, rows {row['row_first']} and {row['row']}: {what} {row['id']!r} occurs twice with different text; "
            "an id must name one text (a repeated row is accepted only when its text is identical). The file is damaged "
            "or was edited: re-download it"
        )
    counts = later.group_by("id", maintain_order=True).len()
    repeated = {doc_id: int(extra) + 1 for doc_id, extra in zip(counts["id"], counts["len"], strict=True)}
    return UniqueRows(frame.filter(first), frame.height, repeated)


def near_empty_ids(frame: pl.DataFrame) -> list[str]:
    """Ids whose text, stripped of white space, has at most one character: documents with (almost) no tokens.
    They are kept, as the official code and mteb keep them (the real Biology corpus has a 1-character one)."""
    tiny = frame["text"].str.strip_chars().str.len_chars() <= 1
    return frame.filter(tiny)["id"].to_list()


def rows_repeating_a_text(frame: pl.DataFrame) -> int:
    """Rows whose text equals an earlier row's (any id): what the real-file audit counts."""
    return int((~frame["text"].is_first_distinct()).sum())


def check_known(values: pl.Series, known: pl.Series, path: Path, what: str) -> None:
    unknown = ~values.is_in(known.implode())
    if unknown.any():
        row = first_row(unknown)
        count = int(unknown.sum())
        raise UserError(
            f"{path}, row {row}: {what} {values[row - 1]!r} is not in the {what.split()[0]} table "
            f"({count} row(s) like this); the files are from different revisions or incomplete"
        )


def count_differences(expected: dict[str, int], found: dict[str, int]) -> dict[str, dict[str, int]]:
    return {
        key: {"expected": expected[key], "found": found[key]}
        for key in expected
        if key in found and expected[key] != found[key]
    }
