"""The argument types of the `r2med` parser (r2med_plugin.cli.options)."""

from __future__ import annotations

import pytest


def test_non_positive_counts_are_refused_by_the_parser(capsys):
    from r2med_plugin.cli import main

    for argv in (["evaluate", "--task", "NanoR2MEDBiology", "--retriever", "org/m", "--batch-size", "0"],
                 ["evaluate", "--task", "NanoR2MEDBiology", "--retriever", "bm25-lucene", "--workers", "-1"]):
        with pytest.raises(SystemExit) as exit_info:
            main(argv)
        assert exit_info.value.code == 2 and "must be an integer of at least 1" in capsys.readouterr().err
