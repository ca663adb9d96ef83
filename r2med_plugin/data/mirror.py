"""Write dataset repos in the exact hub layouts (R2MED JSONL repos, the NanoR2MED parquet repo).

Used for local mirrors built from other sources, for the test fixtures and for the demo sample.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import polars as pl
import yaml

from r2med_plugin.data.layout import README


def front_matter(configs: Mapping[str, Mapping[str, str]], pretty_name: str) -> str:
    """README.md text whose YAML front matter declares ``configs`` (config -> split -> relative path)."""
    entries = [
        {"config_name": config, "data_files": [{"split": split, "path": path} for split, path in splits.items()]}
        for config, splits in configs.items()
    ]
    header = yaml.safe_dump({"configs": entries, "pretty_name": pretty_name}, sort_keys=False)
    return f"---\n{header}---\n\n# {pretty_name}\n"


def write_r2med_repo(
    root: Path,
    *,
    corpus: pl.DataFrame,
    queries: pl.DataFrame,
    qrels: pl.DataFrame,
    expansions: Mapping[str, Mapping[str, pl.DataFrame]] | None = None,
    pretty_name: str = "R2MED",
) -> Path:
    """An R2MED repo: corpus/query/qrels JSONL (id/text; q_id/p_id/score) and GAR configs.

    ``expansions`` maps method -> hub split name (underscores) -> frame with id, text, hy_doc, doc_id.
    """
    root.mkdir(parents=True, exist_ok=True)
    configs: dict[str, dict[str, str]] = {}
    for config, frame in (("corpus", corpus), ("query", queries), ("qrels", qrels)):
        _write_jsonl(frame, root / f"{config}.jsonl")
        configs[config] = {config: f"{config}.jsonl"}
    for method, by_split in (expansions or {}).items():
        for split, frame in by_split.items():
            relative = f"{method}/{split.replace('_', '-')}/query_with_hydoc.jsonl"
            _write_jsonl(frame, root / relative)
            configs.setdefault(method, {})[split] = relative
    (root / README).write_text(front_matter(configs, pretty_name), encoding="utf-8")
    return root


def write_nano_repo(root: Path, splits: Mapping[str, Mapping[str, pl.DataFrame]], pretty_name: str = "NanoR2MED") -> Path:
    """The NanoR2MED repo: ``splits`` maps split name -> config name -> frame, written as <config>/<split>.parquet."""
    root.mkdir(parents=True, exist_ok=True)
    configs: dict[str, dict[str, str]] = {}
    for split, tables in splits.items():
        for config, frame in tables.items():
            relative = f"{config}/{split}.parquet"
            (root / config).mkdir(parents=True, exist_ok=True)
            frame.write_parquet(root / relative)
            configs.setdefault(config, {})[split] = relative
    (root / README).write_text(front_matter(configs, pretty_name), encoding="utf-8")
    return root


def candidate_frame(candidates: Mapping[str, Sequence[str]]) -> pl.DataFrame:
    return pl.DataFrame(
        {"query-id": list(candidates), "corpus-ids": [list(ids) for ids in candidates.values()]},
        schema={"query-id": pl.Utf8, "corpus-ids": pl.List(pl.Utf8)},
    )


def _write_jsonl(frame: pl.DataFrame, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    frame.write_ndjson(path)
