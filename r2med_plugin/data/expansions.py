"""The released LLM query expansions (GAR configs) of the R2MED repos.

Names: the official code spells an expansion ``<method>/<llm>`` with hyphens (``hyde/o3-mini``,
``search-r1/qwen-7b-ins``); the hub split names use underscores (``o3_mini``). This module is the
one place that maps between the two.
"""

from __future__ import annotations

import os

import polars as pl

from r2med_plugin.catalog import get_task_spec, unknown_name_message
from r2med_plugin.data.hub import locate_repo
from r2med_plugin.data.layout import README, config_files, read_front_matter, resolve_split_file
from r2med_plugin.data.readers import read_table
from r2med_plugin.data.validate import check_texts, check_unique
from r2med_plugin.types import TaskSpec

METHODS = ("hyde", "query2doc", "lamer", "search-r1", "search-o1")


def llm_name(hub_split: str) -> str:
    """Hub split name -> the LLM name as the official code spells it (o3_mini -> o3-mini)."""
    return hub_split.replace("_", "-")


def hub_split(llm: str) -> str:
    """The LLM name as the official code spells it -> hub split name (o3-mini -> o3_mini)."""
    return llm.replace("-", "_")


def list_expansions(task: str) -> list[str]:
    """Every released expansion of an R2MED task as "method/llm", in the hub's order."""
    spec = get_task_spec(task)
    return [f"{method}/{llm_name(split)}" for method, splits in spec.gar_configs.items() for split in splits]


def parse_expansion(spec: TaskSpec, expansion: str) -> tuple[str, str]:
    """"method/llm" -> (method, hub split), validated against the task's released expansions."""
    known = [f"{method}/{llm_name(split)}" for method, splits in spec.gar_configs.items() for split in splits]
    if expansion not in known:
        if not known:
            raise ValueError(f"{spec.name} has no released expansions; they exist for the R2MED tasks")
        raise KeyError(unknown_name_message("expansion", expansion, known))
    method, llm = expansion.split("/", 1)
    return method, hub_split(llm)


def load_expansions(
    task: str, expansion: str, *, data_dir: str | os.PathLike | None = None, accept_drift: bool | None = None
) -> pl.DataFrame:
    """The expansion file of ``task`` as a frame with columns id, text, hy_doc (one row per query)."""
    from r2med_plugin.data.loader import drift_accepted

    spec = get_task_spec(task)
    method, split = parse_expansion(spec, expansion)
    repo = locate_repo(spec, data_dir, accept_drift=drift_accepted(accept_drift), extra_configs=[(method, split)])
    layout = config_files(read_front_matter(repo.root), repo.root / README)
    path = resolve_split_file(repo.root, layout, method, split, repo.trusted_root)
    frame = read_table(path, {"id": pl.Utf8, "text": pl.Utf8, "hy_doc": pl.Utf8})
    check_unique(frame, ["id"], path, "query id")
    check_texts(frame, path)
    return frame
