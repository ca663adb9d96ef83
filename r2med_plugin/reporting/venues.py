"""`r2med export --submission RESULTS --model M --venue mteb|hakari --out DIR`: one model's results in the layout
of another venue (``--venue r2med``, the R2MED leaderboard's, is reporting/submission.py).

- ``mteb``: mteb's results repository, ``DIR/results/<org__model>/<revision>/<Task>.json`` with ``model_meta.json``
  and ``run_settings.jsonl`` beside them, as mteb's ``ResultCache.save_to_cache`` writes them; the result files
  are copied unchanged (mteb's keys and values; mteb ignores our ``r2med_*`` keys).
- ``hakari``: HAKARI-Bench's results warehouse, ``DIR/hakari-results/<model>/hakari-bench__NanoR2MED/<Task>.json.xz``
  (lzma JSON) per NanoR2MED task, in the payload HAKARI-Bench's ``run_or_load_task`` writes, built from the
  ``<Task>.hakari.json.xz`` record ``r2med evaluate`` keeps beside each NanoR2MED result (HAKARI's metric conventions:
  evaluation/hakari_metrics.py); plus ``DIR/<model>_results_pr.md``, the pull-request body HAKARI's
  docs/contributing_results.md asks for.

Folder names come from model names a result file carries: each is encoded as its venue encodes it (HAKARI's
``safe_path_part``, mteb's ``org__model``); a name that would still leave ``DIR``, or still holds a character some file
system cannot (``<>:"|?*``, a backslash, a control character), is refused.

What data a result stands on decides whether a venue takes it, the same on every venue: results on the synthetic demo
sample or on data whose counts differ from the dataset card are refused; results on mirror files that prove no hub
commit (no download record, edited files) are refused unless ``allow_incomplete`` (``--allow-incomplete``), and then
what is written says so (mteb: ``r2med_provenance.dataset_revision_verified: false``; HAKARI: ``resolved`` null and
the reason). A reason written into a file names no path of the user's machine.
"""

from __future__ import annotations

import hashlib
import json
import re
import shlex
from collections.abc import Iterable, Mapping
from datetime import datetime, timezone
from pathlib import Path

from r2med_plugin.catalog import list_tasks
from r2med_plugin.errors import UserError
from r2med_plugin.identifiers import COUNT_DRIFT, DatasetRevision, ResultName
from r2med_plugin.io import write_json_atomic
from r2med_plugin.reporting.hakari_files import (
    HAKARI_DATASET_NAME,
    HAKARI_RECORD_FORMAT,
    hakari_record_path,
    keeps_own_order,
    read_xz_json,
    write_xz_json,
)
from r2med_plugin.reporting.result_files import ResultRecord, read_result_folders
from r2med_plugin.rules import SettingError, SettingInputError, flag_of
from r2med_plugin.version import __version__

VENUES = ("r2med", "mteb", "hakari")
HAKARI_DATASET_ID = "hakari-bench/NanoR2MED"
HAKARI_RESULTS = "hakari-results"
HAKARI_PR_BODY = "{model_dir}_results_pr.md"  # the name HAKARI's docs give it (tmp/{model_dir}_results_pr.md)
HAKARI_SUMMARY_SUFFIXES = ("ndcg@10", "acc@100")  # what HAKARI's result summary keeps of its metrics
AGGREGATE_METRIC = "ndcg@10"
CANDIDATE_RANKING = "reranking_hybrid"  # HAKARI's default candidate ranking
_COMMIT = re.compile(r"^[0-9a-f]{40}$")


def hakari_path_part(value: str) -> str:
    """A path part as HAKARI-Bench's ``safe_path_part`` makes it: outer white space and slashes dropped, "/" (and
    "\\") become "__", every run of other characters than letters, digits, ".", "_" and "-" one "_", leading and
    trailing "." and "_" dropped; nothing left: "value". So "..", "/abs" and "a/../b" stay inside the folder."""
    text = value.strip().strip("/\\").replace("\\", "/").replace("/", "__")
    text = re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("._")
    return text or "value"


def mteb_path_part(value: str, what: str = "model name") -> str:
    """A path part as mteb's ResultCache makes it ("/" -> "__", " " -> "_"); a name that would still leave the
    folder (".", "..", empty) or holds a character some file system cannot is refused, naming the fix."""
    text = value.replace("/", "__").replace(" ", "_")
    if text in {"", ".", ".."}:
        raise SettingError(f"the {what} {value!r} makes the folder name {text!r}, which mteb's results layout cannot hold "
                           f"inside {{out_dir}}; give the results a {what} that is a hub id (org/name) or a plain word",
                           field="model" if what == "model name" else "revision")
    return portable_part(text, value, what)


NOT_PORTABLE = frozenset('<>:"|?*\\')


def portable_part(part: str, value: str, what: str) -> str:
    """``part`` (the folder name a venue made of ``value``) if every file system can hold it; else a refusal naming the
    first character that Windows, macOS or a shell-safe path cannot hold (``<>:"|?*``, backslash, control characters)."""
    for character in part:
        if character in NOT_PORTABLE or ord(character) < 32 or ord(character) == 127:
            raise UserError(f"the {what} {value!r} holds {character!r}, which not every file system can hold in the folder "
                            f"name {part!r}: give the results a {what} without it (a hub id org/name or a plain word; "
                            "r2med evaluate --model-name NAME names a model's results)")
    return part


def _records_of(folders: Iterable[str | Path], model: str, venue: str) -> list[ResultRecord]:
    records = read_result_folders(folders)
    ours = [record for record in records if record.model == model]
    if not ours:
        known = sorted({record.model for record in records})
        raise UserError(f"no results for model {model!r} to export to {venue}; models found: {', '.join(known) or 'none'}")
    return ours


def _one_per_task(records: list[ResultRecord], venue: str) -> dict[str, ResultRecord]:
    """Task -> its one record; two results of one task (other revisions or folders) are refused, naming both."""
    by_task: dict[str, ResultRecord] = {}
    for record in sorted(records, key=lambda record: str(record.path)):
        if record.task in by_task:
            raise UserError(f"two {record.task} results of {record.model!r}: {by_task[record.task].path} and {record.path}; "
                            f"{venue} takes one per task: keep one of them in the folders")
        by_task[record.task] = record
    return by_task


def _check_revisions(record: ResultRecord) -> None:
    if not record.dataset_revision:
        raise UserError(f"{record.path}: records no dataset_revision, so no venue can say what data it scored; "
                        "re-run the task with `r2med evaluate` (every result it writes records its revision)")
    if not record.revision or record.revision == "no_revision_available":
        raise SettingError(f"{record.path}: records no model revision (folder {record.revision or 'empty'!r}); re-run it "
                           "with the model's revision known (a hub model records its commit; {revision} REV)",
                           field="revision")


def refused_data(record: ResultRecord) -> str | None:
    """Why no venue takes a result's numbers, even with --allow-incomplete (the synthetic sample, counts that differ
    from the dataset card), or None. Names no path."""
    revision = DatasetRevision.parse(record.dataset_revision)
    if revision.synthetic:
        return "it ran on the synthetic demo sample (dataset_revision: synthetic-sample), which is not R2MED data"
    if revision.count_drift or record.count_drift:
        what = ", ".join(sorted(record.count_drift)) or f"dataset revision marked {COUNT_DRIFT}"
        return f"it ran on data whose counts differ from the dataset card (--accept-drift: {what})"
    return None


def unproven_data(record: ResultRecord) -> str | None:
    """Why a result's files prove no hub commit (a mirror without a download record, files edited after it), or None
    when its dataset revision is a commit the files proved. Names no path of the user's machine."""
    revision = DatasetRevision.parse(record.dataset_revision)
    if revision.unverified:
        return (f"the files read do not prove hub commit {revision.commit} (dataset revision {record.dataset_revision!r}: "
                "no download record, or files edited after the download)")
    if revision.local:
        return f"the mirror records no hub commit (dataset revision {record.dataset_revision!r} is a fingerprint of its files)"
    if not _COMMIT.match(revision.commit):
        return f"dataset revision {record.dataset_revision!r} is not a hub commit"
    return None


def check_data(record: ResultRecord, venue: str, allow_incomplete: bool) -> str | None:
    """Refuse a result no venue takes; refuse one on unproven files unless ``allow_incomplete``, else return why its
    files are unproven (None: proven), for the venue's files to say."""
    refused = refused_data(record)
    if refused:
        raise SettingInputError(f"{record.path}: {refused}; no venue publishes such numbers, with or without "
                                "{allow_incomplete}: re-run the task on data downloaded with `huggingface-cli download "
                                "--local-dir` and export that result", field="allow_incomplete")
    why = unproven_data(record)
    if why and not allow_incomplete:
        raise SettingInputError(f"{record.path}: {why}; {venue} records the data a result stands on: download the data "
                                "with `huggingface-cli download --local-dir` (which records the commit) and re-run, or pass "
                                "{allow_incomplete} to write it marked as unverified", field="allow_incomplete")
    return why


def export_mteb(folders: Iterable[str | Path], model: str, out_dir: str | Path, *, allow_incomplete: bool = False,
                force: bool = False) -> list[Path]:
    """``model``'s results in mteb's results-repository layout under ``out_dir`` (see module doc); a result on unproven
    files (only with ``allow_incomplete``) keeps ``r2med_provenance.dataset_revision_verified: false``."""
    listed = {spec.name for spec in list_tasks()} | {spec.mteb_builtin_task for spec in list_tasks() if spec.mteb_builtin_task}
    records = []
    for record in _records_of(folders, model, "mteb"):
        if record.candidates_only:
            raise SettingError(f"{record.path}: a {{candidates_only}} result ranks stored lists, not the corpus; mteb's "
                               "results hold full-corpus task results: move it out of the folders, or export the full-corpus "
                               "run", field="candidates_only")
        if record.task not in listed:
            raise UserError(f"{record.path}: task {record.task!r} is neither an R2MED/NanoR2MED task of r2med-plugin nor "
                            "mteb's R2MED<Domain>Retrieval; export it with mteb's own tools")
        _check_revisions(record)
        records.append((record, check_data(record, "mteb", allow_incomplete)))
    written: list[Path] = []
    by_folder: dict[Path, list[ResultRecord]] = {}
    unproven = {record.path: why for record, why in records}
    for task, record in _one_per_task([record for record, _ in records], "mteb").items():
        folder = Path(out_dir) / "results" / mteb_path_part(model) / mteb_path_part(record.revision, "model revision")
        written.append(_copy_unchanged(record.path, folder / f"{task}.json", force, marked=unproven[record.path] is not None))
        by_folder.setdefault(folder, []).append(record)
    for folder, held in by_folder.items():
        written += [_model_meta(held[0], folder, model), _write_run_settings(folder, held)]
    return written


def _copy_unchanged(source: Path, target: Path, force: bool, *, marked: bool = False) -> Path:
    """The result file as it is; ``marked`` (unproven data): with ``r2med_provenance.dataset_revision_verified`` false,
    which every result r2med-plugin writes on such data already holds."""
    data = source.read_bytes()
    if marked:
        payload = json.loads(data)
        provenance = payload.get("r2med_provenance") if isinstance(payload.get("r2med_provenance"), dict) else {}
        if provenance.get("dataset_revision_verified") is not False:
            payload["r2med_provenance"] = provenance | {"dataset_revision_verified": False}
            data = (json.dumps(payload, indent=2) + "\n").encode("utf-8")
    if target.is_file() and target.read_bytes() != data and not force:
        raise SettingError(f"{target} exists and holds another result; give another {{out_dir}}, or {{force}} to replace it",
                           field="out_dir")
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(data)
    return target


def _model_meta(record: ResultRecord, folder: Path, model: str) -> Path:
    """The model_meta.json mteb reads beside results: the one beside the source result, else a minimal one."""
    source = record.path.parent / "model_meta.json"
    meta = json.loads(source.read_text(encoding="utf-8")) if source.is_file() else {}
    meta = {"name": model, "revision": record.revision, "loader": None, "framework": [], "modalities": ["text"]} | meta
    return write_json_atomic(folder / "model_meta.json", meta)


def _write_run_settings(folder: Path, records: list[ResultRecord]) -> Path:
    """run_settings.jsonl as mteb's save_to_cache writes it: one line per task (test split, default subset), with
    the versions the result recorded."""
    lines = []
    for record in sorted(records, key=lambda record: record.task):
        payload = json.loads(record.path.read_text(encoding="utf-8"))
        provenance = payload.get("r2med_provenance") or {}
        versions = {"mteb": payload.get("mteb_version"), "r2med-plugin": provenance.get("r2med_plugin_version")}
        lines.append(json.dumps({"task": record.task, "splits": ["test"], "version": versions, "encode_kwargs": {},
                                 "subsets": ["default"]}))
    path = folder / "run_settings.jsonl"
    ours = {record.task for record in records}
    kept = [line for line in _settings_lines(path) if json.loads(line).get("task") not in ours]  # other tasks' lines stay
    path.write_text("".join(line + "\n" for line in kept + lines), encoding="utf-8")
    return path


def _settings_lines(path: Path) -> list[str]:
    if not path.is_file():
        return []
    lines = [line.strip() for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    for number, line in enumerate(lines, start=1):
        try:
            if not isinstance(json.loads(line), dict):
                raise ValueError("not an object")
        except ValueError as error:
            raise SettingError(f"{path}, line {number}: not a JSON object ({error}); remove the file or give another "
                               "{out_dir}", field="out_dir") from error
    return lines


def export_hakari(folders: Iterable[str | Path], model: str, out_dir: str | Path, *, allow_incomplete: bool = False,
                  force: bool = False) -> list[Path]:
    """``model``'s NanoR2MED results as HAKARI-Bench result files under ``out_dir``, and the PR body (module doc)."""
    nano = [spec.name for spec in list_tasks("nano")]
    if ResultName.parse(model).reranked:
        raise UserError(f"{model!r} is a reranked result; the HAKARI export holds a retriever's full-corpus ranking and its "
                        "re-ranking of the stored lists: export the first stage, or evaluate the cross-encoder with "
                        "HAKARI-Bench's own reranker mode")
    records = []
    for record in _records_of(folders, model, "HAKARI-Bench"):
        if record.task not in nano:
            raise UserError(f"{record.path}: HAKARI-Bench lists NanoR2MED's tasks only, not {record.task!r}; move it out of "
                            "the folders (R2MED results go to the R2MED leaderboard: --venue r2med)")
        if not record.candidates_only:
            _check_revisions(record)
            check_data(record, "HAKARI-Bench", allow_incomplete)
            records.append(record)
    if not records:
        raise SettingError(f"no full-corpus NanoR2MED results of {model!r} (a {{candidates_only}} result ranks stored lists "
                           "only); run `r2med evaluate --task NanoR2MED<Domain> ...`", field="candidates_only")
    model_dir = Path(out_dir) / HAKARI_RESULTS / hakari_path_part(model)
    written, payloads = [], {}
    for task, record in _one_per_task(records, "HAKARI-Bench").items():
        payloads[task] = hakari_payload(record, _hakari_record(record), model, allow_incomplete=allow_incomplete)
        target = model_dir / hakari_path_part(HAKARI_DATASET_ID) / f"{hakari_path_part(task)}.json.xz"
        written.append(_write_result(target, payloads[task], force))
    missing = [name for name in nano if name not in payloads]
    body = Path(out_dir) / HAKARI_PR_BODY.format(model_dir=hakari_path_part(model))
    body.write_text(hakari_pr_body(model, payloads, missing, hakari_path_part(model)), encoding="utf-8")
    return written + [body]


def _hakari_record(record: ResultRecord) -> dict:
    path = hakari_record_path(record.path)
    if not path.is_file():
        raise UserError(f"{record.path}: no HAKARI record beside it ({path.name}); r2med-plugin 0.2.0 writes one with every "
                        f"NanoR2MED result: re-run `r2med evaluate --task {record.task} ...` into the results folder")
    content = read_xz_json(path)
    if content.get("format") != HAKARI_RECORD_FORMAT:
        raise UserError(f"{path}: format {content.get('format')!r}, not {HAKARI_RECORD_FORMAT!r}; re-run the task to write it again")
    return content


def hakari_dataset_revision(record: ResultRecord, allow_incomplete: bool) -> dict:
    """HAKARI's ``target.dataset_revision``: the hub commit the result's data was downloaded at. Data that does not
    prove a commit (a mirror without a download record, edited files) is refused, or with ``allow_incomplete`` written
    with ``resolved`` None and the reason in ``error`` (no path in it), as HAKARI writes a revision the hub did not
    resolve; the synthetic sample and count drift are always refused (``check_data``)."""
    why = check_data(record, "HAKARI-Bench", allow_incomplete)
    if why is None:
        return {"requested": None, "resolved": DatasetRevision.parse(record.dataset_revision).commit, "source": "r2med-plugin"}
    return {"requested": None, "resolved": None, "source": "r2med-plugin",
            "error": why}


def hakari_payload(record: ResultRecord, content: dict, model: str, *, allow_incomplete: bool = False) -> dict:
    """The result payload HAKARI-Bench's ``run_or_load_task`` writes, from a result and its HAKARI record."""
    provenance = json.loads(record.path.read_text(encoding="utf-8")).get("r2med_provenance") or {}
    is_bm25 = content["score_name"].startswith("bm25")
    model_payload = _hakari_model(model, record.revision, content, is_bm25)
    target = {
        "dataset_name": HAKARI_DATASET_NAME, "dataset_id": HAKARI_DATASET_ID,
        "dataset_revision": hakari_dataset_revision(record, allow_incomplete), "split_name": record.task,
        "task_name": record.task, "corpus_config": "corpus", "queries_config": "queries", "qrels_config": "qrels",
        "evaluation_scope": {"include_by_default": True, "tags": [], "reason": None},
    }
    reranked = content["candidate_rankings"].get(CANDIDATE_RANKING)
    config = _hakari_config(provenance, reranked is not None, content["retriever"])
    evaluated = datetime.fromtimestamp(record.date, timezone.utc).isoformat()
    metrics = content["metrics"]
    payload = {
        "generated_at_utc": datetime.now(timezone.utc).isoformat(),
        "model": model_payload, "environment": content.get("environment", {}), "target": target, "config": config,
        "evaluation": {
            "started_at_utc": evaluated, "finished_at_utc": evaluated, "evaluated_at_utc": evaluated,
            "aggregate_metric": AGGREGATE_METRIC, "aggregate_metric_value": _aggregate(metrics),
            "cache_hit": False, "timing": {}, "embedding_conversion": {}, "embedding_evaluations": [],
            "rerank_aggregate_metric_value": _aggregate(reranked["metrics"]) if reranked else None,
            "reranking_evaluations": [_reranking_evaluation(reranked) if reranked else _not_reranked(is_bm25)],
        },
        "metrics": _summary(metrics),
        "rerank_metrics": _summary(reranked["metrics"]) if reranked else {},
    }
    payload["artifacts"] = {"top_rankings": {
        "schema_version": 2, "generated_at_utc": payload["generated_at_utc"], "top_k": 100, "model": model_payload,
        "target": target, "qrels": [{"query_id": query_id, "relevant_corpus_ids": ids} for query_id, ids in sorted(content["qrels"].items())],
        "rankings": _ranking_rows(content["top_rankings"]),
    }}
    payload["experiment_manifest"] = {"schema_version": 2, "fingerprint_sha256": _fingerprint(payload)}
    return payload


def _hakari_model(model: str, revision: str, content: dict, is_bm25: bool) -> dict:
    source = {"type": "huggingface", "name": model, "revision": revision} if "/" in model else {
        "type": "bm25" if is_bm25 else "r2med-plugin", "name": model, "revision": revision}
    payload = {"method": "bm25" if is_bm25 else "dense", "id": model, "source": source,
               "backend_library": "bm25s" if keeps_own_order(content["retriever"]) else "r2med-plugin",
               "similarity_fn_name": None if is_bm25 else "cosine", "r2med_retriever": content["retriever"]}
    return payload | ({"total_parameters": 0, "trainable_parameters": 0, "transformer_parameters": 0, "active_parameters": 0}
                      if is_bm25 else {})


def _hakari_config(provenance: Mapping, reranked: bool, retriever: str) -> dict:
    bm25 = None
    if keeps_own_order(retriever):  # bm25-hakari[:<tokenizer>]: HAKARI-Bench's own computed BM25
        from r2med_plugin.retrieval.hakari import DEFAULT_TOKENIZER, RANK_DEPTH, hakari_config

        bm25 = hakari_config(retriever.partition(":")[2] or DEFAULT_TOKENIZER, RANK_DEPTH)
    return {
        "batch_size": None, "primary_metric": AGGREGATE_METRIC, "query_prompt": provenance.get("query_prompt"),
        "document_prompt": None, "query_prompt_name": None, "document_prompt_name": None,
        "dataset_revision": None, "candidate_ranking": CANDIDATE_RANKING if reranked else None,
        "rerank_top_k": None, "bm25": bm25,
        "r2med_plugin": {"version": provenance.get("r2med_plugin_version") or __version__, "top_k": provenance.get("top_k"),
                         "dataset_files_fingerprint": provenance.get("dataset_files_fingerprint"),
                         "request": provenance.get("request"),
                         "metric_conventions": "HAKARI-Bench's (MAP@k over min(R, k), ties by id ascending, every query with text)"},
    }


def _aggregate(metrics: Mapping[str, float]) -> float:
    """HAKARI's aggregate value: the mean of the metrics whose key ends with the aggregate metric."""
    values = [value for key, value in metrics.items() if key.lower().endswith(AGGREGATE_METRIC)]
    if not values:
        raise UserError(f"no {AGGREGATE_METRIC} among {sorted(metrics)}")
    return sum(values) / len(values)


def _summary(metrics: Mapping[str, float]) -> dict[str, float]:
    return {key: float(value) for key, value in metrics.items() if key.lower().endswith(HAKARI_SUMMARY_SUFFIXES)}


def _not_reranked(is_bm25: bool) -> dict:
    """HAKARI's entry for a candidate re-ranking that did not run: a BM25 run re-ranks nothing; an encoder's result
    holds it when `r2med evaluate` ran with --candidates hybrid."""
    reason = "bm25_has_no_candidate_reranking" if is_bm25 else "not_evaluated: run r2med evaluate with --candidates hybrid"
    return {"name": f"{CANDIDATE_RANKING}_all", "source": "dataset_candidate_subset", "status": "skipped", "reason": reason,
            "rerank_top_n": None}


def _reranking_evaluation(reranked: Mapping) -> dict:
    value = _aggregate(reranked["metrics"])
    payload = {"name": f"{CANDIDATE_RANKING}_top_{reranked['top_k']}", "source": "dataset_candidate_subset",
               "status": "available", "rerank_top_n": reranked["top_k"], "aggregate_metric": AGGREGATE_METRIC,
               "aggregate_metric_value": value, "best_score": value, "best_distance": "cosine",
               "best_score_name": reranked["score_name"]}
    if "safeguard_corpus_ids_by_query" in reranked:
        payload["safeguard"] = {"policy": "RRF top-100 plus optional safeguard positive at rank 101", "rrf_top_k": 100,
                                "safeguard_rank": 101,
                                "safeguard_query_count": len(reranked["safeguard_corpus_ids_by_query"]),
                                "safeguard_corpus_ids_by_query": reranked["safeguard_corpus_ids_by_query"]}
    return payload


def _ranking_rows(top_rankings: list[dict]) -> list[dict]:
    rows = []
    for item in top_rankings:
        safeguard = item.get("safeguard_corpus_ids_by_query") or {}
        for query_id, ids in item["rankings"].items():
            row = {key: item.get(key) for key in ("name", "ranking_kind", "embedding_variant_name", "distance", "score_name")}
            row |= {"query_id": query_id, "corpus_ids": ids[:100]}
            if item.get("safeguard_policy") is not None:
                row["safeguard_policy"] = item["safeguard_policy"]
            if query_id in safeguard:
                row["safeguard_corpus_id"] = safeguard[query_id]
            rows.append(row)
    return rows


def _fingerprint(payload: Mapping) -> str:
    """HAKARI's experiment fingerprint: SHA-256 of the canonical JSON of model, target, config and environment."""
    chosen = {key: payload.get(key) for key in ("model", "target", "config", "environment")}
    text = json.dumps(chosen, ensure_ascii=False, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _write_result(path: Path, payload: Mapping, force: bool) -> Path:
    """One HAKARI result file; another model's file there is kept unless ``force``."""
    if path.is_file() and not force:
        held = read_xz_json(path).get("model", {}).get("id")
        if held != payload["model"]["id"]:
            raise SettingError(f"{path} holds model {held!r}'s result; give another {{out_dir}}, or {{force}} to replace it",
                               field="out_dir")
    return write_xz_json(path, payload)


def _reranked_cell(payload: dict) -> str:
    """The re-ranked list's nDCG@10, or why there is none (HAKARI re-ranks candidate lists with encoders, not BM25)."""
    value = payload["evaluation"]["rerank_aggregate_metric_value"]
    if value is not None:
        return format(value, ".4f")
    return payload["evaluation"]["reranking_evaluations"][0].get("reason") or "not evaluated"


NOT_RECORDED = "not recorded (the result records no request: written by an earlier release, or of a model given as a Python object)"
# what a recorded request's parts say on the command line: field -> flag (first stage, reranker); paths on the
# evaluating machine are shown as placeholders
_FIRST_STAGE_FLAGS = {"revision": "--model-revision", "display_name": "--model-name"}
_RERANKER_FLAGS = {"revision": "--rerank-revision", "depth": "--rerank-depth"}
_SOURCES = ("variant", "name", "path")


def evaluate_command(request: Mapping | None) -> str:
    """The ``r2med evaluate`` command line of a recorded request (``r2med_provenance.request``), without the task's
    ``--task``, or ``NOT_RECORDED``. ``--output`` and ``--data-dir`` show as RESULTS and DATA_DIR."""
    if not isinstance(request, Mapping) or not isinstance(request.get("first_stage"), Mapping):
        return NOT_RECORDED
    first, reranker = request["first_stage"], request.get("reranker")
    words = ["--first-stage" if reranker else "--retriever", _source(first), *_spec_words(first, _FIRST_STAGE_FLAGS)]
    if isinstance(reranker, Mapping):
        words += ["--rerank", _source(reranker), *_spec_words(reranker, _RERANKER_FLAGS)]
    scoring, outputs = request.get("scoring") or {}, request.get("outputs") or {}
    words += _value_words({"top_k": scoring.get("top_k") if scoring.get("top_k") != 1000 else None,
                           **{key: scoring.get(key) for key in ("hybrid", "candidates", "candidates_only", "expansion")},
                           "first_stage_name": request.get("first_stage_name"), "bm25_workers": request.get("bm25_workers"),
                           "accept_drift": request.get("accept_drift"),
                           "data_dir": "DATA_DIR" if request.get("data_dir") else None,
                           "output": "RESULTS" if outputs.get("folder") else None, "trec": outputs.get("trec"),
                           "trec_depth": outputs.get("trec_depth") if outputs.get("trec_depth") != 1000 else None})
    if request.get("show_progress") is False:
        words.append("--quiet")
    return " ".join(words)


def _source(spec: Mapping) -> str:
    return shlex.quote(str(next((spec[key] for key in _SOURCES if spec.get(key)), "?")))


def _spec_words(spec: Mapping, flags: Mapping[str, str]) -> list[str]:
    values = {key: value for key, value in spec.items() if key not in (*_SOURCES, "kind", "endpoint", "settings")}
    values |= dict(spec.get("endpoint") or {}) | dict(spec.get("settings") or {})
    return _value_words(values, flags)


def _value_words(values: Mapping, flags: Mapping[str, str] | None = None) -> list[str]:
    """Each set value as its flag: True as the flag alone, a list as its items, a mapping as JSON; None and False left out."""
    words: list[str] = []
    for key, value in values.items():
        if value is None or value is False or value == [] or value == {}:
            continue
        flag = (flags or {}).get(key) or flag_of(key)
        if value is True:
            words.append(flag)
        elif isinstance(value, list):
            words += [flag, *(shlex.quote(str(item)) for item in value)]
        else:
            words += [flag, shlex.quote(json.dumps(value) if isinstance(value, Mapping) else str(value))]
    return words


def evaluate_commands(payloads: Mapping[str, dict]) -> str:
    """The ``r2med evaluate`` commands that produced the payloads' results: tasks run by the same command share one."""
    by_command: dict[str, list[str]] = {}
    for task, payload in sorted(payloads.items()):
        command = evaluate_command(payload["config"].get("r2med_plugin", {}).get("request"))
        by_command.setdefault(command, []).append(task)
    return "; ".join(f"{', '.join(tasks)}: {command}" if command == NOT_RECORDED else
                     f"`r2med evaluate --task {' '.join(tasks)} {command}`" for command, tasks in by_command.items())


def hakari_pr_body(model: str, payloads: Mapping[str, dict], missing: list[str], model_dir: str) -> str:
    """The pull-request body HAKARI-Bench's docs/contributing_results.md asks for, filled from the payloads."""
    first = next(iter(payloads.values()))
    versions = first["environment"].get("package_versions", {})
    revisions = sorted({p["target"]["dataset_revision"].get("resolved") or "none resolved (see target.dataset_revision.error)"
                        for p in payloads.values()})
    unresolved = any(p["target"]["dataset_revision"].get("resolved") is None for p in payloads.values())
    allow = " --allow-incomplete" if unresolved else ""
    rows = "\n".join(f"| {task} | {p['evaluation']['aggregate_metric_value']:.4f} | "
                     f"{_reranked_cell(p)} |"
                     for task, p in sorted(payloads.items()))
    overall = sum(p["evaluation"]["aggregate_metric_value"] for p in payloads.values()) / len(payloads)
    lines = [
        f"# Results: {model}", "",
        f"Made by r2med-plugin {__version__} (`r2med export --venue hakari`) from `r2med evaluate` results; every metric "
        "is computed with HAKARI-Bench's conventions (hakari_bench/metrics.py: MAP@k over min(R, k), ties by document "
        "id ascending, every query with text counted).", "",
        f"- Model ID and revision: `{model}` @ `{first['model']['source'].get('revision')}`",
        f"- Dataset: `{HAKARI_DATASET_ID}`, revision(s) as recorded in the result JSON: {', '.join(revisions)}",
        f"- Files: {len(payloads)} × `hakari-results/{model_dir}/{hakari_path_part(HAKARI_DATASET_ID)}/<Task>.json.xz`",
        f"- Command: {evaluate_commands(payloads)}, then `r2med export --submission RESULTS --model {shlex.quote(model)} "
        f"--venue hakari{allow} --out DIR`",
        f"- Evaluation method: {first['model']['method']}; dtype: {first['model'].get('dtype') or 'TODO'}; device: TODO; "
        f"batch size: TODO; query prompt: {json.dumps(first['config'].get('query_prompt'))}",
        f"- Candidate ranking: {first['config'].get('candidate_ranking') or 'none'}; rerank top-k: all of each list "
        f"(HAKARI's default: {first['evaluation']['reranking_evaluations'][0]['rerank_top_n'] or 'not evaluated'})",
        f"- Environment: Python {first['environment'].get('python', '').split()[0] if first['environment'].get('python') else '?'}; "
        + ", ".join(f"{package} {version}" for package, version in sorted(versions.items()) if version),
        "- GPU / CUDA: TODO", "",
        f"Overall nDCG@10 (mean of {len(payloads)} tasks): {overall:.4f}", "",
        "| task | nDCG@10 | nDCG@10 on reranking_hybrid |", "| --- | --- | --- |", rows, "",
    ]
    if missing:
        lines += [f"Not included ({len(missing)} of 8 NanoR2MED tasks): {', '.join(missing)}.", ""]
    lines += ["Notes: TODO (retries, resumed tasks, non-default settings).", ""]
    return "\n".join(lines)


__all__ = ["VENUES", "export_hakari", "export_mteb", "hakari_path_part", "hakari_payload", "hakari_pr_body",
           "mteb_path_part"]
