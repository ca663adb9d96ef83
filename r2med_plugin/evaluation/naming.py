"""How results are named: the model name they are filed under, prompt labels, reranked names and revisions."""

from __future__ import annotations

import hashlib
import re

from r2med_plugin.data.expansions import ExpansionName, resolve_local_expansion
from r2med_plugin.evaluation.result import TaskRunResult
from r2med_plugin.identifiers import Expansion, ResultName
from r2med_plugin.retrieval.dense import E5_TEMPLATE
from r2med_plugin.types import TaskData, TaskSpec


def official_query_prompt(spec_or_data: TaskSpec | TaskData) -> str:
    """The official instruction prompt of a task ("Instruct: <instruction>\\nQuery: "), what --instruction uses."""
    spec = spec_or_data.spec if isinstance(spec_or_data, TaskData) else spec_or_data
    return E5_TEMPLATE.format(instruction=spec.instruction)


def prompt_label(spec_or_data: TaskSpec | TaskData, prompt: str | None) -> str:
    """"+instruction" for the task's official prompt, "+prompt-<hash>" for any other, "" for none.

    An empty prompt is not "none": it switches off a model's built-in query prompt, so it is filed apart."""
    if prompt is None:
        return ""
    if prompt == official_query_prompt(spec_or_data):
        return "+instruction"
    return "+prompt-" + hashlib.sha256(prompt.encode("utf-8")).hexdigest()[:8]


def prompt_suffix(result: TaskRunResult) -> str:
    """The query prompt's label in a result's name (see prompt_label)."""
    return prompt_label(result.data, result.query_prompt)


def result_name(result: TaskRunResult) -> ResultName:
    """What a result is filed under: the retriever, its expansion ("hyde/o3-mini+bm25-lucene") and its query prompt
    ("+instruction"), so runs with and without a prompt or expansion never overwrite each other."""
    if result.rerank is not None:
        return ResultName.parse(result.retriever)
    expansion = None
    if result.expansion:
        name = ExpansionName(result.expansion)
        expansion = Expansion(name.method, name.llm)
        if name.is_local:  # filed as "local/hyde/my-llm@<folder id>"
            local = resolve_local_expansion(result.data.spec, name)
            expansion = Expansion(local.method, local.llm, local=True, folder=local.folder_id)
    return ResultName(result.retriever, expansion=expansion, prompt=prompt_suffix(result).removeprefix("+") or None)


def result_model_name(result: TaskRunResult) -> str:
    """The model name results are filed under (see result_name)."""
    return result_name(result).format()


def reranked_model_name(reranker: str, first_stage: str, depth: int) -> str:
    """The name a reranked result is filed under; never equal to the first stage's own name."""
    return ResultName(reranker, first_stage=first_stage, depth=depth).format()


def reranked_revision(reranker_revision: str, first_stage_revision: str) -> str:
    """The model revision a reranked result is filed under: the reranker's, then the first stage's (short).

    Two first stages of one name (two revisions of an encoder, two run files in folders of one name)
    never overwrite each other's reranked results."""
    short = first_stage_revision
    if not re.fullmatch(r"[\w.+-]{1,24}", short):
        short = hashlib.sha256(first_stage_revision.encode("utf-8")).hexdigest()[:12]
    return f"{reranker_revision}+first-stage-{short}"


def data_entry(data: TaskData) -> dict[str, object]:
    """What a verdict computed on ``data`` stands on: its dataset revision, whether the files proved it, the
    fingerprint of the files read and how the counts differ from the dataset card ({} when they match)."""
    return {"dataset_revision": data.revision, "verified": data.revision_verified,
            "files_fingerprint": data.files_fingerprint, "count_drift": dataset_count_drift(data)}


def dataset_count_drift(data: TaskData) -> dict[str, dict[str, int]]:
    """How the data's counts differ from the dataset card's (evaluated with --accept-drift); {} when they match."""
    return {} if data.report.synthetic_sample else {name: dict(counts) for name, counts in data.report.count_drift.items()}
