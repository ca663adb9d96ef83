"""LaMer's first stage: each query's ranked documents come from the first stages reranking uses
(r2med_plugin.evaluation.first_stages: the official BM25 with ties in corpus order, cached; or a TREC /
topk_docs run file read and checked by r2med_plugin.data.runs). This module checks what LaMer needs of them."""

from __future__ import annotations

from r2med_plugin.errors import UserError
from r2med_plugin.types import TaskData


def check_ranking(ranking: dict[str, list[str]], data: TaskData, origin: str) -> None:
    """Every evaluated query has a ranking, and every ranked document is in the corpus."""
    missing = [q for q in data.queries["id"].to_list() if not ranking.get(q)]
    if missing:
        raise UserError(f"{origin}: no ranked documents for {len(missing)} queries of {data.name} (e.g. {missing[0]!r})")
    known = set(data.corpus["id"].to_list())
    for query_id in data.queries["id"].to_list():
        unknown = [d for d in ranking[query_id][:10] if d not in known]
        if unknown:
            raise UserError(f"{origin}: query {query_id!r} ranks {unknown[0]!r}, which is not a document of {data.name}")
