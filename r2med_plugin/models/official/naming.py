"""How results of an official profile are named: ``<weights>+official-<profile>`` (the weights and the recipe),
which published leaderboard row such a result reproduces, and the official short names of the rerankers."""

from __future__ import annotations

from r2med_plugin.models.official.profiles import RetrieverProfile, default_weights, retriever_profiles

RESULT_MARK = "+official-"  # results are filed as <weights>+official-<profile>: the weights and the recipe


def result_name(weights: str, profile: RetrieverProfile) -> str:
    """What results of ``profile`` on ``weights`` are filed under: ``<weights>+official-<name>`` (never over the
    results of the same weights loaded another way, by mteb or sentence-transformers)."""
    return f"{weights}{RESULT_MARK}{profile.name}"


def profile_of_result(model_name: str) -> RetrieverProfile | None:
    """The official profile a result name was made with (``...+official-<name>``), else None."""
    weights, mark, short = model_name.rpartition(RESULT_MARK)
    return retriever_profiles().get(short) if mark and weights else None


def published_row_of(model_name: str) -> str | None:
    """The published leaderboard row a result reproduces: an official profile on its official weights (None: not one)."""
    profile = profile_of_result(model_name)
    return profile.published_row if profile is not None and on_official_weights(model_name, profile) else None


def on_official_weights(model_name: str, profile: RetrieverProfile) -> bool:
    """Whether a result name is ``profile`` on the weights the official code loads, at its precision."""
    weights = model_name.rpartition(RESULT_MARK)[0]
    default = default_weights(profile)
    return weights == (default[1] if isinstance(default, tuple) else default)


def folder_label(name: str, local: bool) -> str:
    """A local folder's name in result names: ``<folder>+local`` where it would read as a hub id (a folder
    ``BAAI/bge-large-en-v1.5`` holding edited weights is never taken for the published checkpoint)."""
    return f"{name}+local" if local and "/" in name and not name.startswith(("/", ".")) else name


# The official short names (src/eval_reranker.py, model_path_dict) of the rerankers the paper used.
OFFICIAL_RERANKER_NAMES = {
    "BAAI/bge-reranker-v2-m3": "bge-reranker",
    "castorini/monobert-large-msmarco": "monobert",
    "castorini/rankllama-v1-7b-lora-passage": "rankllama",
}


def official_reranker_name(name: str) -> str:
    """The official short name (bge-reranker, monobert, rankllama) where one exists, else ``name``: an official
    recipe's results (``<weights>+official-<short>``) on the published weights, or those weights loaded otherwise."""
    weights, mark, short = name.rpartition(RESULT_MARK)
    if mark:
        return short if OFFICIAL_RERANKER_NAMES.get(weights) == short else name
    return OFFICIAL_RERANKER_NAMES.get(name.rstrip("/"), name)
