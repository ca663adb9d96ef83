"""`--write-clean`: a copy of a training source without the rows that hit, in the source's own format."""

from __future__ import annotations

import gzip
from collections.abc import Set
from pathlib import Path

from r2med_plugin.audit.training import TrainingSource, text_lines
from r2med_plugin.io import atomic_folder, atomic_write


def write_clean(source: TrainingSource, dropped: Set[int], target: Path) -> dict:
    """Write ``source`` less the rows in ``dropped`` (0-based record numbers) to ``target``; returns the row counts."""
    writers = {"jsonl": _clean_lines, "text": _clean_lines, "parquet": _clean_parquet, "arrow": _clean_arrow}
    rows = writers[source.format](source, dropped, target)
    return {"path": str(target), "rows": rows, "dropped": len(dropped), "kept": rows - len(dropped)}


def _clean_lines(source: TrainingSource, dropped: Set[int], target: Path) -> int:
    """Line-based files: every non-blank line is a row; kept lines are copied byte for byte."""
    counted = {"rows": 0}

    def write(temporary: Path) -> None:
        opener = gzip.open if target.name.lower().endswith(".gz") else open
        with opener(temporary, "wt", encoding="utf-8", newline="") as out:
            for _, line in text_lines(source.path):
                if not line.strip():
                    continue
                if counted["rows"] not in dropped:
                    out.write(line if line.endswith("\n") else line + "\n")
                counted["rows"] += 1

    atomic_write(target, write)
    return counted["rows"]


def _clean_parquet(source: TrainingSource, dropped: Set[int], target: Path) -> int:
    import pyarrow as pa
    import pyarrow.parquet as pq

    counted = {"rows": 0}

    def write(temporary: Path) -> None:
        reader = pq.ParquetFile(source.path)
        with pq.ParquetWriter(temporary, reader.schema_arrow) as out:
            for batch in reader.iter_batches(batch_size=10_000):
                first = counted["rows"]
                keep = pa.array([first + i not in dropped for i in range(batch.num_rows)])
                out.write_batch(batch.filter(keep))
                counted["rows"] += batch.num_rows

    atomic_write(target, write)
    return counted["rows"]


def _clean_arrow(source: TrainingSource, dropped: Set[int], target: Path) -> int:
    """A datasets folder (one split): the kept rows selected and saved with save_to_disk (memory-mapped, not loaded)."""
    import datasets
    import numpy as np

    dataset = datasets.load_from_disk(str(source.path))
    keep = np.setdiff1d(np.arange(len(dataset)), np.fromiter(dropped, dtype=np.int64, count=len(dropped)))
    bars = datasets.is_progress_bar_enabled()
    try:
        datasets.disable_progress_bars()
        atomic_folder(target, lambda folder: dataset.select(keep).save_to_disk(str(folder)))
    finally:
        if bars:
            datasets.enable_progress_bars()
    return len(dataset)
