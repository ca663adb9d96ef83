"""Audit refusals name the setting at fault, worded per front end: the Python API names run_audit's parameter with
its flag (``threshold (--threshold)``), the CLI the flag alone, as `r2med audit` printed them before."""

from __future__ import annotations

from pathlib import Path

import pytest

from r2med_plugin.audit.report import read_audit
from r2med_plugin.audit.run import run_audit
from r2med_plugin.audit.training import resolve_columns
from r2med_plugin.rules import SettingError, SettingFileError


@pytest.mark.parametrize(("threshold", "ngram", "field", "flag"), [(0.0, 3, "threshold", "--threshold 0.0: a Jaccard"),
                                                                   (0.5, 0, "ngram", "--ngram 0: shingles are")])
def test_threshold_and_ngram_refusals_name_their_setting(threshold, ngram, field, flag):
    with pytest.raises(SettingError) as raised:
        run_audit(["train.jsonl"], threshold=threshold, ngram=ngram)  # checked before anything is read
    assert raised.value.field == field and raised.value.render("flag").startswith(flag)
    assert str(raised.value).startswith(f"{field} (--{field})")


def test_a_missing_audit_folder_is_a_missing_file_named_by_its_setting(tmp_path: Path):
    with pytest.raises(SettingFileError) as raised:
        read_audit(tmp_path / "absent")
    error = raised.value
    assert isinstance(error, FileNotFoundError) and error.field == "folder"
    assert error.render("flag").startswith(f"--audit {tmp_path / 'absent'}: no audit.json there")
    assert str(error).startswith("folder (--audit)")


def test_column_refusals_name_the_columns_setting(tmp_path: Path):
    with pytest.raises(SettingError) as raised:
        resolve_columns(tmp_path / "train.jsonl", ["a", "b"], None)
    assert raised.value.field == "columns"
    assert raised.value.render("flag").endswith("--query-column, --positive-column, --negative-column or --text-column")
    assert "columns (--query-column, " in str(raised.value)
    with pytest.raises(SettingError) as raised:
        resolve_columns(tmp_path / "train.jsonl", ["a", "b"], {"query": ["q"]})
    assert raised.value.field == "columns" and "(--query-column q)" in raised.value.render("flag")
