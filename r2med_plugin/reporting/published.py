"""The published R2MED leaderboard and the official reranker results, shipped with the package."""

from __future__ import annotations

import json
from importlib import resources

from r2med_plugin.reporting.rows import LeaderboardRow


def published_table() -> dict:
    """The published leaderboard as shipped (reporting/r2med_leaderboard.json, with its source)."""
    return json.loads((resources.files("r2med_plugin") / "reporting" / "r2med_leaderboard.json").read_text(encoding="utf-8"))


def published_rows() -> list[LeaderboardRow]:
    """The published R2MED leaderboard (shipped with the package). A row with a reranker (its ``reranker`` field;
    null for the others) is labelled "Reranker | First stage" as the official reranker results are, its paper in
    the note."""
    table = published_table()
    papers = table.get("reranker_papers", {})
    return [
        LeaderboardRow(
            llm=row["llm"] or "", retriever=published_label(row), scores=dict(row["scores"]), source="published",
            published_average=float(row["avg"]), reranked=bool(row.get("reranker")),
            note=f"reranker paper: {_paper(papers[row['reranker']])}" if row.get("reranker") in papers else "",
        )
        for row in table["rows"]
    ]


def published_llm_names() -> dict[str, str]:
    """Released expansion file ("hyde/gpt4") -> the LLM name the published board gives it ("GPT4o"), as
    task_metadata/leaderboard_expansions.json maps them (with its sources)."""
    from r2med_plugin.catalog import LEADERBOARD_EXPANSIONS_FILE, metadata_dir

    llms = json.loads((metadata_dir() / LEADERBOARD_EXPANSIONS_FILE).read_text(encoding="utf-8"))["llms"]
    return {entry["expansion"]: name for name, entry in llms.items()}


def published_label(row: dict) -> str:
    """The retriever column of a published board row: its retriever, or "Reranker | Retriever" for a reranked row."""
    return f"{row['reranker']} | {row['retriever']}" if row.get("reranker") else str(row["retriever"])


def published_reranker_rows() -> list[LeaderboardRow]:
    """The official reranker results (results/reranker/<reranker>/<retriever>/top_<k>/, shipped with the
    package): one "Reranker | First stage" row per reranker, first stage and depth, nDCG@10 x 100."""
    facts = _reranker_facts()
    models = facts["models"]
    grouped: dict[tuple[str, str, int], dict[str, float]] = {}
    for result in facts["results"]:
        key = (result["reranker_name"], result["retriever_name"], int(result["topk"]))
        grouped.setdefault(key, {})[result["dataset_name"]] = 100 * float(result["test"]["NDCG@10"])
    return [
        LeaderboardRow(
            llm="", retriever=f"{_short(models.get(reranker, reranker))} | {_short(models.get(retriever, retriever))}",
            scores=scores, source="published", note=f"rerank top {depth}", reranked=True,
        )
        for (reranker, retriever, depth), scores in grouped.items()
    ]


def _reranker_facts() -> dict:
    text = (resources.files("r2med_plugin") / "reporting" / "r2med_reranker_results.json").read_text(encoding="utf-8")
    return json.loads(text)


def published_sources() -> dict[str, str]:
    """Where the published rows come from: ``leaderboard`` (the leaderboard's own source line) and ``reranker``
    (the address of the official reranker results)."""
    return {"leaderboard": str(published_table()["source"]), "reranker": str(_reranker_facts()["source"])}


def _short(model: str) -> str:
    """The model's name without its hub organisation, as the leaderboard names models (NV-Embed-v2)."""
    return model.rsplit("/", 1)[-1]


def _paper(link: str) -> str:
    """A paper's name for a note: "arXiv 2508.07050" for an arXiv link (a note holds no address), else the link."""
    return f"arXiv {link.rsplit('/', 1)[-1]}" if "arxiv.org/abs/" in link else link
