"""A leaderboard row and the table's columns: what the leaderboard builds and what renders and plots read."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from r2med_plugin.catalog import list_tasks

BENCHMARKS = ("r2med", "nano")
MAIN_METRIC = "ndcg_at_10"
NANO_EXTRA_METRICS = (  # the NanoR2MED table's extra columns: the score keys rows hold them under
    "hybrid_ndcg_at_10",
    "candidates_bm25_ndcg_at_10",
    "candidates_dense_ndcg_at_10",
    "candidates_hybrid_ndcg_at_10_with_safeguard",
)
EXTRA_LABELS = {  # how the table and the charts name them (display only)
    "hybrid_ndcg_at_10": "Hybrid",
    "candidates_bm25_ndcg_at_10": "Cand. BM25",
    "candidates_dense_ndcg_at_10": "Cand. dense",
    "candidates_hybrid_ndcg_at_10_with_safeguard": "Cand. hybrid",
}
BENCHMARK_TITLES = {"r2med": "R2MED", "nano": "NanoR2MED"}


@dataclass
class LeaderboardRow:
    llm: str
    retriever: str
    scores: dict[str, float]  # hub name -> nDCG@10 x 100
    source: str  # "yours" or "published"
    note: str = ""
    extras: dict[str, float] = field(default_factory=dict)  # score key (NANO_EXTRA_METRICS) -> average x100
    task_extras: dict[str, dict[str, float]] = field(default_factory=dict)  # hub name -> score key -> x100
    published_average: float | None = None  # the average as published (it may differ in the last digit)
    average: float | None = None
    missing: list[str] = field(default_factory=list)
    excluded: str = ""  # why the row is never ranked, whatever its scores (e.g. synthetic next to real rows)
    synthetic: bool = False
    count_drift: bool = False  # computed on data whose counts differ from the dataset card
    revision_set: str = ""  # the dataset revision set of its results ("" the pinned commits); rows on other sets differ in data
    task_revisions: dict[str, str] = field(default_factory=dict)  # hub name -> the dataset revision of that task's result
    task_data: dict[str, str] = field(default_factory=dict)  # hub name -> what that result was judged on (revision + files)
    expansion: str = ""  # the LLM expansion of its queries (its file is part of the revision): rows compare per expansion
    model: str = ""  # the name its results are filed under (r2med_plugin.identifiers.ResultName); "" for a published row
    reranked: bool = False  # a reranker over a first stage's top k (yours or the official reranker results)
    # r2med leaderboard --significance (r2med_plugin.reporting.leaderboard_significance)
    sources: dict[str, Path] = field(default_factory=dict)  # hub name -> the result file of that task's score
    interval: tuple[float, float] | None = None  # 95% interval of the average
    versus_best: str = ""  # "best", "tied", "below", or "-" (not tested: the reason is in significance)
    significance: str = ""  # a note under the table (the method, or why the row was not tested)
    versus_above: str = ""  # "tied" (not separable from the nearest tested row above), "below", "-" (not tested)
    above_detail: str = ""  # the row versus_above was tested against and the p-value, or why it was not tested
    adjacent_note: str = ""  # the method of versus_above, on the first tested row (the HTML page shows it)
    # r2med leaderboard --audit (r2med_plugin.reporting.leaderboard_audit)
    overlap: dict[str, str] = field(default_factory=dict)  # hub name -> what the model's training data overlapped there
    audit_note: str = ""  # a note under the table (what the audit found)

    @property
    def ranked(self) -> bool:
        return self.average is not None


def task_columns() -> list[str]:
    return [spec.hub_name for spec in list_tasks("r2med")]
