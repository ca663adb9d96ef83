"""The autoload hook's entry-point lookup (r2med_plugin.integrations._autoload)."""

from __future__ import annotations

from importlib.metadata import entry_points
from pathlib import Path

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


IMPORT_ORDERS = {
    "ir_datasets, ours first (the README's local-expansion snippet)": (
        "from r2med_plugin.integrations.ir_datasets import register_local_expansion\n"
        "import ir_datasets\n"
        "print(ir_datasets.load('r2med/iiyi-clinical').docs_count(), ir_datasets.load('nano-r2med/bioinformatics').queries_count())\n"),
    "ir_datasets, the host first": (
        "import ir_datasets\n"
        "from r2med_plugin.integrations.ir_datasets import register_local_expansion\n"
        "print(ir_datasets.load('r2med/iiyi-clinical').docs_count(), ir_datasets.load('nano-r2med/bioinformatics').queries_count())\n"),
    "mteb, ours first": (
        "import r2med_plugin.integrations.mteb\n"
        "import mteb\n"
        "print(mteb.get_task('R2MEDIIYiClinical').metadata.name, mteb.get_task('NanoR2MEDBioinformatics').metadata.name)\n"),
}


@pytest.mark.parametrize("order", list(IMPORT_ORDERS))
def test_any_import_order_registers_the_datasets(mirror_env: Path, tmp_path: Path, order: str):
    """Importing our integration module before its host ran the host's entry point on our half-imported module: a
    circular-import warning, then KeyError: 'r2med/iiyi-clinical' (found by a third trial). A fresh interpreter, as
    the README's snippet runs."""
    import os
    import subprocess
    import sys

    env = {**os.environ, "R2MED_DATA_DIR": str(mirror_env), "IR_DATASETS_HOME": str(tmp_path / "irds"),
           "R2MED_CACHE_DIR": str(tmp_path / "cache")}
    env.pop("R2MED_PLUGIN_NO_AUTOLOAD", None)
    done = subprocess.run([sys.executable, "-c", IMPORT_ORDERS[order]], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "circular import" not in done.stderr and "failed to register" not in done.stderr, done.stderr[-3000:]
    if order.startswith("mteb"):
        assert done.stdout.split() == ["R2MEDIIYiClinical", "NanoR2MEDBioinformatics"]
    else:  # the mirror's documents and queries, read through ir_datasets
        documents, queries = (int(value) for value in done.stdout.split())
        assert documents > 0 and queries > 0
