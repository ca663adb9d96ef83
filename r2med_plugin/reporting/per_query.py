"""The per-query sidecar of a result: ``<Task>.per_query.parquet`` beside MTEB's ``<Task>.json``.

One row per (task, query id, metric) with its value, in long form, so a reviewer can run a paired test
(``r2med compare``) or look at single queries (``r2med inspect``) without the run or the data:

    results/<model>/<revision>/<Task>.json               the MTEB result (ResultCache layout)
    results/<model>/<revision>/<Task>.per_query.parquet  this sidecar (columns task, query_id, metric, value)

Neither mteb's ResultCache (it reads ``*/*/*.json``) nor the leaderboard (``*.json``) reads a parquet file.

The file's key-value metadata holds two JSON documents: ``r2med_per_query`` (format version, task, model,
revisions, main score) and ``r2med_top_ranked`` (each query's top 10 documents with their scores and
relevance, and the rank of every positive in the saved run, ``null`` when the run does not hold it): what
``r2med inspect --query`` shows, so that it needs neither the TREC run nor the data.

Files are written atomically (a temporary file in the same folder, then a rename): a reader never sees
half a file, and an interrupted run leaves none behind.
"""

from __future__ import annotations

import json
import os
from collections.abc import Container, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import polars as pl

from r2med_plugin.errors import MissingFileError, UserError
from r2med_plugin.io import atomic_write

PER_QUERY_SUFFIX = ".per_query.parquet"
FORMAT_VERSION = 1
INFO_KEY = "r2med_per_query"
TOP_RANKED_KEY = "r2med_top_ranked"
TOP_DEPTH = 10
COLUMNS = ("task", "query_id", "metric", "value")
SCHEMA = pl.Schema({"task": pl.Utf8, "query_id": pl.Utf8, "metric": pl.Utf8, "value": pl.Float64})


def per_query_path(result_path: str | os.PathLike) -> Path:
    """The sidecar of a result file: ``.../<Task>.json`` -> ``.../<Task>.per_query.parquet``."""
    path = Path(result_path)
    if path.suffix != ".json":
        raise UserError(f"{path}: not a result file (.json); the sidecar is named after the result <Task>.json")
    return path.with_name(path.stem + PER_QUERY_SUFFIX)


def per_query_frame(
    task: str,
    values: Mapping[str, Mapping[str, float]],
    *,
    prefix: str = "",
    suffix: str = "",
    keep: Container[str] | None = None,
) -> pl.DataFrame:
    """Long table (task, query_id, metric, value) of ``values`` (query id -> metric -> value).

    Metric names get ``prefix``/``suffix`` (e.g. "official_", "_with_safeguard"); with ``keep``, only the
    metrics whose final name is in it are kept (the keys a result file reports)."""
    queries: list[str] = []
    metrics: list[str] = []
    numbers: list[float] = []
    for query_id, scores in values.items():
        for name, value in scores.items():
            metric = f"{prefix}{name}{suffix}"
            if keep is not None and metric not in keep:
                continue
            queries.append(str(query_id))
            metrics.append(metric)
            numbers.append(float(value))
    return pl.DataFrame(
        {"task": [task] * len(queries), "query_id": queries, "metric": metrics, "value": numbers}, schema=SCHEMA
    )


def top_ranked(
    qrels: Mapping[str, Mapping[str, int]], run: Mapping[str, Mapping[str, float]], depth: int = TOP_DEPTH
) -> dict[str, dict[str, Any]]:
    """query id -> {"top": [[doc id, score, relevance], ...], "positives": {doc id: rank or None}, "depth": n}.

    Ranking as pytrec_eval ranks (score descending, then document id descending), ranks from 1; a positive
    that the run does not hold has rank None. Every query of ``qrels`` is present (an empty top when the
    run lacks the query)."""
    if depth < 1:
        raise UserError(f"depth must be a positive number of documents, got {depth}")
    table: dict[str, dict[str, Any]] = {}
    for query_id, judged in qrels.items():
        ranked = run.get(query_id) or {}
        ordered = sorted(ranked.items(), key=lambda item: (float(item[1]), item[0]), reverse=True)
        ranks = {doc_id: rank for rank, (doc_id, _) in enumerate(ordered, start=1)}
        table[str(query_id)] = {
            "top": [[doc_id, float(score), int(judged.get(doc_id, 0))] for doc_id, score in ordered[:depth]],
            "positives": {doc_id: ranks.get(doc_id) for doc_id, relevance in judged.items() if int(relevance) > 0},
            "depth": len(ordered),
        }
    return table


def write_per_query(
    path: str | os.PathLike,
    frame: pl.DataFrame,
    *,
    info: Mapping[str, Any] | None = None,
    ranked: Mapping[str, Any] | None = None,
) -> Path:
    """Write the sidecar atomically; ``info`` and ``ranked`` (see top_ranked) go into the file's metadata."""
    import pyarrow.parquet as pq

    missing = [column for column in COLUMNS if column not in frame.columns]
    if missing:
        raise UserError(f"a per-query table needs the columns {list(COLUMNS)}; it lacks {missing}")
    table = frame.select(COLUMNS).cast(SCHEMA).to_arrow()
    metadata = {INFO_KEY: json.dumps({"format": FORMAT_VERSION, **dict(info or {})}, sort_keys=True)}
    if ranked is not None:
        metadata[TOP_RANKED_KEY] = json.dumps(ranked)
    table = table.replace_schema_metadata({**(table.schema.metadata or {}), **metadata})
    return atomic_write(path, lambda temporary: pq.write_table(table, temporary))


@dataclass(frozen=True)
class Sidecar:
    """A sidecar as read: the long table, its info and its top-ranked lists ({} when it has none)."""

    path: Path
    frame: pl.DataFrame
    info: dict[str, Any] = field(default_factory=dict)
    ranked: dict[str, Any] = field(default_factory=dict)

    @property
    def metrics(self) -> list[str]:
        return sorted(set(self.frame["metric"].to_list()))


def read_per_query(path: str | os.PathLike) -> Sidecar:
    """Read a sidecar; a file that is not one raises ValueError naming the file."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = Path(path)
    if not path.is_file():
        raise MissingFileError(f"{path}: no such per-query file")
    try:
        table = pq.read_table(path)
    except (OSError, pa.ArrowException) as error:
        raise UserError(f"{path}: not a readable per-query parquet file ({error}); write it again with r2med evaluate") from None
    missing = [column for column in COLUMNS if column not in table.column_names]
    if missing:
        raise UserError(f"{path}: not a per-query file: it lacks the columns {missing} (expected {list(COLUMNS)})")
    metadata = table.schema.metadata or {}
    try:
        info = json.loads(metadata.get(INFO_KEY.encode(), b"{}"))
        ranked = json.loads(metadata.get(TOP_RANKED_KEY.encode(), b"{}"))
    except ValueError as error:
        raise UserError(f"{path}: its r2med metadata is not valid JSON ({error}); write it again with r2med evaluate") from None
    # a pyarrow Table converts to a DataFrame (only an Array gives a Series)
    frame = cast(pl.DataFrame, pl.from_arrow(table.select(list(COLUMNS)))).cast(SCHEMA)
    if frame["value"].is_nan().any() or frame["value"].is_null().any():
        raise UserError(f"{path}: holds missing or NaN values; write it again with r2med evaluate")
    return Sidecar(path=path, frame=frame, info=info, ranked=ranked)
