"""Builders shared by the tests: result files as `r2med evaluate --output` lays them out (mteb's ResultCache),
written from a few numbers so that a leaderboard, report or audit test needs no model and no data."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

OFFICIAL_FAMILIES = ("ndcg", "map", "recall", "precision")
OFFICIAL_CUTOFFS = (1, 3, 5, 10, 25, 50, 100)


def score_row(ndcg: float, *, cutoffs: Sequence[int] = (), mrr: float | None = None, digits: int | None = None,
              **extra: float) -> dict[str, object]:
    """One test split as mteb writes it, around one nDCG@10 (also the main score).

    With ``cutoffs``, nDCG, MAP, recall and precision at each cut-off come first and hold ndcg / 2 (rounded to
    ``digits`` when given; nDCG@10 keeps its place and holds ``ndcg``); then ``mrr`` when given; ``extra`` last."""
    half = ndcg / 2 if digits is None else round(ndcg / 2, digits)
    row: dict[str, object] = {f"{family}_at_{k}": half for family in OFFICIAL_FAMILIES for k in cutoffs}
    if mrr is not None:
        row["mrr"] = mrr
    return row | {"ndcg_at_10": ndcg, "main_score": ndcg, "hf_subset": "default", "languages": ["eng-Latn"]} | extra


def official_row(ndcg: float, *, mrr: float = 0.1, cutoffs: Sequence[int] = OFFICIAL_CUTOFFS,
                 digits: int | None = None) -> dict[str, object]:
    """A row with every official metric at every official cut-off (what the leaderboard's official columns read)."""
    return score_row(ndcg, cutoffs=cutoffs, mrr=mrr, digits=digits)


def write_result(root: Path, model: str, task: str, scores: float | dict[str, object], dataset_revision: str = "rev", *,
                 model_revision: str = "r1", date: float = 1.0, evaluation_time: float = 1.0, **fields: object) -> Path:
    """``root/results/<model, / as __>/<model_revision>/<task>.json`` and its model_meta.json; returns the task file.

    ``scores`` is the test split's row, or an nDCG@10 for ``score_row(scores)``; ``fields`` are added to the result
    after its scores (``mteb_version``, ``r2med_provenance``, ...)."""
    folder = root / "results" / model.replace("/", "__") / model_revision
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "model_meta.json").write_text(json.dumps({"name": model, "revision": model_revision}))
    row = score_row(scores) if isinstance(scores, (int, float)) else scores
    path = folder / f"{task}.json"
    path.write_text(json.dumps({"dataset_revision": dataset_revision, "task_name": task, "date": date,
                                "evaluation_time": evaluation_time, "scores": {"test": [row]}} | fields))
    return path


def demo_copy_without_a_qrels_row(target: Path, task: str = "NanoR2MEDBiology") -> Path:
    """A copy of the shipped demo sample whose ``task`` qrels lack their first row: other data that still says
    ``dataset_revision: synthetic-sample``, as a user's edited copy does."""
    import shutil

    import polars as pl

    from r2med_plugin.integrations.demo import sample_dir

    shutil.copytree(sample_dir(), target)
    qrels = target / "hakari-bench" / "NanoR2MED" / "qrels" / f"{task}.parquet"
    pl.read_parquet(qrels)[1:].write_parquet(qrels)
    return target


def two_mirrors(tmp_path: Path) -> tuple[Path, Path]:
    """mirror A's results for every task; mirror B differs in Biology's files only (a second output folder)."""
    from r2med_plugin.catalog import list_tasks

    a, b = tmp_path / "a", tmp_path / "b"
    r2med = list_tasks("r2med")
    for spec in r2med:
        write_result(a, "org/m", spec.name, official_row(0.3322), f"{spec.revision}+unverified-files-c1f3a2b4{spec.name[:4].lower()}", date=1.0)
    biology = r2med[0]
    write_result(b, "org/m", biology.name, official_row(0.4812), f"{biology.revision}+unverified-files-48bb0000", date=2.0)
    return a, b
