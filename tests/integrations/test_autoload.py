"""The autoload hook's entry-point lookup (r2med_plugin.integrations._autoload)."""

from __future__ import annotations

from importlib.metadata import entry_points

import pytest

from r2med_plugin.integrations._autoload import group_entry_points


@pytest.mark.parametrize("group", ["mteb.tasks", "ir_datasets.datasets", "r2med_plugin.model_loaders", "console_scripts",
                                   "no.such.group"])
def test_group_entry_points_are_importlib_s(group: str):
    """Only the files that mention the group are parsed; what is found is what importlib.metadata finds, in order."""
    assert group_entry_points(group) == list(entry_points(group=group))


def test_our_own_entry_points_are_found():
    assert [entry.value for entry in group_entry_points("mteb.tasks") if entry.name == "r2med"] == [
        "r2med_plugin.integrations.mteb:register"]
    assert [entry.value for entry in group_entry_points("ir_datasets.datasets") if entry.name == "r2med"] == [
        "r2med_plugin.integrations.ir_datasets:register"]
