"""The table readers (r2med_plugin.data.readers): hostile rows are refused with their file and line, and JSONL and
Parquet round trip."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import r2med_plugin
from r2med_plugin.data.readers import read_table
from tests.fixture_mirror import fixture_document_count
from tests.support.strategies import printable

BIOLOGY_ROWS = fixture_document_count("biology")  # the fixture's Biology corpus: one row per id


def test_fifty_megabyte_line_is_refused(mirror_copy: Path):
    corpus = mirror_copy / "R2MED" / "Biology" / "corpus.jsonl"
    with corpus.open("a") as handle:
        handle.write(json.dumps({"id": "huge", "text": "x" * (50 * 1024 * 1024)}) + "\n")
    with pytest.raises(ValueError, match=rf"corpus.jsonl, line {BIOLOGY_ROWS + 1}: 52,428,\d+ bytes, over the 16,777,216-byte limit"):
        r2med_plugin.load_task("R2MEDBiology", data_dir=mirror_copy, accept_drift=True)


def test_binary_garbage_is_refused(mirror_copy: Path):
    (mirror_copy / "R2MED" / "Biology" / "query.jsonl").write_bytes(os.urandom(4096))
    with pytest.raises(ValueError, match=r"query.jsonl(, line \d+: malformed JSON|: could not be read)"):
        r2med_plugin.load_task("R2MEDBiology", data_dir=mirror_copy, accept_drift=True)


@pytest.mark.parametrize("bad_id", ["doc\x00one", "doc\nline", "doc\x1b[31m"])
def test_ids_with_control_characters_are_refused(mirror_copy: Path, bad_id: str):
    corpus = mirror_copy / "R2MED" / "Biology" / "corpus.jsonl"
    with corpus.open("a") as handle:
        handle.write(json.dumps({"id": bad_id, "text": "t"}) + "\n")
    with pytest.raises(ValueError, match=f"corpus.jsonl, row {BIOLOGY_ROWS + 1}: the 'id' value .* contains control characters"):
        r2med_plugin.load_task("R2MEDBiology", data_dir=mirror_copy, accept_drift=True)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(printable, printable), min_size=1, max_size=20, unique_by=lambda row: row[0]))
def test_jsonl_and_parquet_round_trip(rows):
    frame = pl.DataFrame({"id": [r[0] for r in rows], "text": [r[1] for r in rows]}, schema={"id": pl.Utf8, "text": pl.Utf8})
    with tempfile.TemporaryDirectory() as tmp:
        jsonl, parquet = Path(tmp) / "t.jsonl", Path(tmp) / "t.parquet"
        frame.write_ndjson(jsonl)
        frame.write_parquet(parquet)
        for path in (jsonl, parquet):
            back = read_table(path, {"id": pl.Utf8, "text": pl.Utf8})
            assert back.to_dict(as_series=False) == frame.to_dict(as_series=False)
