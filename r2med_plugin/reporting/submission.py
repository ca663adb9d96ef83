"""A leaderboard submission folder, and TREC runs from saved MTEB predictions."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable
from pathlib import Path

from r2med_plugin.catalog import list_tasks
from r2med_plugin.errors import MissingFileError, UserError
from r2med_plugin.identifiers import COUNT_DRIFT, SYNTHETIC_REVISION, DatasetRevision, OfficialLayoutName, ResultName, judged_files
from r2med_plugin.io import atomic_folder, write_json_atomic
from r2med_plugin.reporting.export import TREC_DEPTH, trec_tag, write_trec_run
from r2med_plugin.reporting.grouping import grouped_records
from r2med_plugin.reporting.leaderboard import rank_rows, split_model_name, user_rows
from r2med_plugin.reporting.official_files import official_model_name, write_official_results
from r2med_plugin.reporting.render import render
from r2med_plugin.reporting.result_files import read_result_folders
from r2med_plugin.rules import SettingError
from r2med_plugin.version import __version__

logger = logging.getLogger(__name__)

SUBMISSION_FILES = ("summary.md", "summary.csv", "model_card.json", "README.md")  # and one <HubName>.json per task

SUBMISSION_README = """# R2MED submission: {model}

Made by r2med-plugin {version} from MTEB result files.

- `<Task>.json`: per task, a JSON in the layout the official R2MED evaluator writes (test split;
  BM25 runs: nDCG, MAP, Recall and Precision at 1, 10, 25, 50, 100 and MRR; other models: at 1, 3,
  5, 10, 100; rounded to 5 decimals). The values are the MTEB scores of the result files; for
  values computed the official way, run `r2med evaluate --output` (its `official/` folder).
- `summary.md` / `summary.csv`: the leaderboard row (nDCG@10 x 100, official task order).
- `model_card.json`: the model description the R2MED maintainers ask for (size, whether an LLM was
  used and which), plus the dataset revisions the scores were computed on.
{missing}
To submit, send this folder to the R2MED maintainers as the project page asks (r2med.github.io;
an issue or pull request on the R2MED/R2MED GitHub repository), with a link to the model.
"""


def export_submission(
    folders: Iterable[str | Path],
    model: str,
    out_dir: str | Path,
    *,
    model_size: str | None = None,
    uses_llm: bool | None = None,
    description: str = "",
    allow_incomplete: bool = False,
    force: bool = False,
) -> list[Path]:
    """Write the official per-task JSON files, the summary row, the model card and a README.

    A set with missing tasks, or tasks run on mirror files that do not prove the pinned commit, is refused
    unless ``allow_incomplete`` (``--allow-incomplete``); then its README says what it lacks.

    The folder is written whole, never mixed with what it held: a new or empty folder, or the same model's
    submission, is (re)written; another model's submission, or a submission beside other files, is refused unless
    ``force`` (``--force``), which replaces the folder whole; a non-empty folder that holds no submission is
    always refused (it may be a results folder)."""
    records = [r for r in read_result_folders(folders) if r.model == model]
    by_task = {spec.name: spec for spec in list_tasks("r2med")}
    ours = _one_revision_set(records, model)
    if not ours:
        _refuse_no_results(records, model, folders, by_task)
    _refuse_drift(ours, model)
    missing = [spec.hub_name for name, spec in by_task.items() if name not in ours]
    unverified = sorted(name for name, record in ours.items() if DatasetRevision.parse(record.dataset_revision).unverified)
    if (missing or unverified) and not allow_incomplete:
        _refuse_incomplete(ours, model, missing, unverified, len(by_task))
    out = Path(out_dir)
    _check_submission_folder(out, model, {f"{spec.hub_name}.json" for spec in by_task.values()} | set(SUBMISSION_FILES), force)
    relative: list[Path] = []

    def write(folder: Path) -> None:
        written = _write_submission(folder, ours, by_task, model, missing, unverified, model_size, uses_llm, description)
        relative.extend(path.relative_to(folder) for path in written)

    atomic_folder(out, write)
    return [out / path for path in relative]


def _refuse_no_results(records: list, model: str, folders: Iterable[str | Path], by_task: dict) -> None:
    builtin = {spec.mteb_builtin_task for spec in by_task.values()}
    hint = " (only mteb's built-in R2MED*Retrieval results were found: they lack @25/@50; run our R2MED<Domain> tasks)" if any(
        r.task in builtin for r in records) else ""
    nano = {spec.name for spec in list_tasks("nano")}
    if not hint and any(r.task in nano for r in records):
        hint = (" (only NanoR2MED results were found: NanoR2MED ranks 10,000-document samples of each corpus, so its "
                "scores are not comparable with the R2MED leaderboard, which takes the full corpora; run "
                "`r2med evaluate --task R2MEDBiology ...` or `mteb run -t R2MEDBiology ...` on the 8 R2MED<Domain> tasks)")
    known = sorted({r.model for r in read_result_folders(folders)})
    raise UserError(f"no R2MED results for model {model!r}{hint}; models found: {', '.join(known) or 'none'}")


def _refuse_drift(ours: dict, model: str) -> None:
    drifted = {name: record for name, record in ours.items() if record.count_drift or DatasetRevision.parse(record.dataset_revision).count_drift}
    if drifted:
        described = "; ".join(f"{name} [{_drift_text(record.count_drift)}] in {record.path}" for name, record in sorted(drifted.items()))
        raise SettingError(f"{model!r} was evaluated on data whose counts differ from the dataset card ({{accept_drift}}): "
                           f"{described}. A submission needs the pinned R2MED data: download it again and re-run these tasks",
                           field="accept_drift")


def _refuse_incomplete(ours: dict, model: str, missing: list[str], unverified: list[str], task_count: int) -> None:
    problems = []
    if missing:
        problems.append(f"no results for {', '.join(missing)} (the leaderboard ranks a model on all {task_count} tasks)")
    if unverified:
        problems.append(f"{', '.join(unverified)} ran on mirror files that do not prove the pinned commit "
                        f"({'; '.join(str(ours[name].path) for name in unverified)})")
    raise SettingError(f"the submission of {model!r} is not complete: {'; '.join(problems)}. Run the missing tasks on data "
                       "downloaded with `huggingface-cli download --local-dir` (which records the commit), or pass "
                       "{allow_incomplete} to write it anyway (its README says what it lacks)", field="allow_incomplete")


def _check_submission_folder(out: Path, model: str, ours: set[str], force: bool) -> None:
    """Refuse to write a submission where it would mix with, or silently delete, what the folder holds."""
    if out.exists() and not out.is_dir():
        raise SettingError(f"{{out_dir}} {out} is a file; give a folder for the submission (it is created when missing)",
                           field="out_dir")
    present = sorted(path.name for path in out.iterdir()) if out.is_dir() else []
    if not present:
        return
    card = out / "model_card.json"
    if not card.is_file():
        raise SettingError(f"{{out_dir}} {out} is not empty and holds no submission (no model_card.json): "
                           f"{', '.join(present[:5])}{' ...' if len(present) > 5 else ''}; give an empty or new folder "
                           "({force} replaces only a submission folder)", field="out_dir")
    try:
        previous = json.loads(card.read_text(encoding="utf-8")).get("model_name")
    except (OSError, ValueError, AttributeError):
        previous = None
    others = [name for name in present if name not in ours]
    if force:
        return
    if previous != model:
        held = f"the submission of {previous!r}" if previous else "a submission whose model_card.json names no model"
        raise SettingError(f"{{out_dir}} {out} holds {held}; writing {model!r} there would mix the two "
                           "models' task files: give another {out_dir} folder, or add {force} to replace that folder whole",
                           field="out_dir")
    if others:
        raise SettingError(f"{{out_dir}} {out} holds {model!r}'s submission and also {', '.join(others[:5])}"
                           f"{' ...' if len(others) > 5 else ''}, which are no part of it; move them away, or add {{force}} "
                           "to replace the folder whole", field="out_dir")


def _write_submission(out: Path, ours: dict, by_task: dict, model: str, missing: list[str], unverified: list[str],
                      model_size: str | None, uses_llm: bool | None, description: str) -> list[Path]:
    written = []
    retriever = split_model_name(model)[1]
    layout: OfficialLayoutName = "bm25" if ResultName.parse(model).is_bm25 else "dense"
    for name, record in ours.items():
        spec = by_task[name]
        written.append(write_official_results(
            out / f"{spec.hub_name}.json", dataset_name=spec.hub_name, model_name=official_model_name(retriever),
            scores=record.scores, layout=layout,
            evaluation_time=float(json.loads(record.path.read_text(encoding="utf-8")).get("evaluation_time") or 0.0),
        ))
    rows = rank_rows(user_rows([ours[name] for name in ours], "r2med"))
    (out / "summary.md").write_text(render(rows, "md"), encoding="utf-8")
    (out / "summary.csv").write_text(render(rows, "csv"), encoding="utf-8")
    llm, retriever, method = split_model_name(model)
    card = {
        "model_name": model,
        "retriever": retriever,
        "model_size": model_size,
        "uses_llm": bool(llm) if uses_llm is None else uses_llm,
        "llm": llm or None,
        "expansion_method": method or None,
        "description": description,
        "dataset_revisions": {name: json.loads(r.path.read_text(encoding="utf-8")).get("dataset_revision") for name, r in ours.items()},
        "made_with": f"r2med-plugin {__version__}",
    }
    written.append(write_json_atomic(out / "model_card.json", card))
    note = f"\n**Incomplete:** no results for {', '.join(missing)}; the average is not computed.\n" if missing else ""
    if missing:
        logger.warning("incomplete submission: no results for %s; the leaderboard ranks a model on all %d tasks "
                       "(run the missing ones, then export again)", ", ".join(missing), len(by_task))
    if unverified:
        note += (f"\n**Unverified data:** {', '.join(unverified)} ran on mirror files that do not prove the pinned "
                 "commit (no download record, or edited after the download).\n")
        logger.warning("%s ran on mirror files that do not prove the pinned commit: download the data with "
                       "`huggingface-cli download --local-dir` (which records the commit) and re-run before submitting",
                       ", ".join(unverified))
    (out / "README.md").write_text(SUBMISSION_README.format(model=model, version=__version__, missing=note), encoding="utf-8")
    return written + [out / "summary.md", out / "summary.csv", out / "README.md"]


def _drift_text(drift: dict) -> str:
    """"documents 24 of 57359, queries 6 of 103": found of expected (an mteb result records only the marker)."""
    if not drift:
        return f"dataset revision marked {COUNT_DRIFT}"
    return ", ".join(f"{key} {value.get('found')} of {value.get('expected')}" if isinstance(value, dict) else key
                     for key, value in sorted(drift.items()))


def _one_revision_set(records: list, model: str) -> dict:
    """Task name -> record, from exactly one (dataset revision set, model revision) of ``model``; refuse mixing,
    and refuse picking: two results of one task on different files or weights name both files."""
    grouping = grouped_records(records, "r2med")
    groups = {group: per_task for group, per_task in grouping.full.items() if not group.builtin and per_task}
    if any(group.revisions == SYNTHETIC_REVISION for group in groups):
        raise UserError(f"results of {model!r} on the synthetic demo sample (dataset_revision: synthetic-sample) cannot be "
                        "submitted: they are not R2MED data; remove them from the folders")
    if len(groups) > 1:
        described = "; ".join(f"dataset revisions {group.revisions or 'pinned'}, model revision {group.model_revision}: "
                              f"{len(per_task)} tasks" + _files_of(per_task, grouping, group)
                              for group, per_task in groups.items())
        raise UserError(f"the results of {model!r} come from {len(groups)} different revision sets ({described}); a submission "
                        "takes one: keep one set in the folders (or re-run the other tasks at the same revisions)")
    for group in groups:
        hidden = grouping.superseded.get(group, [])
        if hidden:
            older = sorted({older.model_revision for older in hidden})
            files = sorted({str(record.path) for older in hidden for record in _records_of(older, records)})
            raise UserError(f"the results of {model!r} hold model revision {group.model_revision} and also "
                            f"{', '.join(older)} ({'; '.join(files)}); a submission takes one set of weights: remove "
                            "the other revision's result files from the folders")
    return {record.task: record for per_task in groups.values() for record in per_task.values()}


def _records_of(group, records: list) -> list:
    """The result records of one (possibly dropped) row group."""
    return [record for record in records if record.model == group.model and record.revision == group.model_revision]


def _files_of(per_task: dict, grouping, group) -> str:
    """ " (Biology: <file>)" for the tasks whose results exist on other mirror files too."""
    conflicting = grouping.conflicting_files.get((group.model, group.builtin, group.revisions, group.model_revision), set())
    shown = [f"{hub} files {judged_files(per_task[hub].judged_data)}: {per_task[hub].path}"
             for hub in sorted(conflicting) if hub in per_task]
    return f" ({'; '.join(shown)})" if shown else ""


def export_trec_runs(folders: Iterable[str | Path], out_dir: str | Path, *, depth: int = TREC_DEPTH) -> list[Path]:
    """One TREC run file per MTEB predictions file (<Task>_predictions.json) found under the folders.

    Same convention as ``r2med evaluate --trec``: ``<out>/<model>/<revision>/<Task>.trec``, each query's
    top ``depth`` (default 1000), tagged with the model name as filed.
    """
    written = []
    for folder in folders:
        if not Path(folder).is_dir():
            raise MissingFileError(f"{folder}: no such folder; give the folder mteb wrote predictions into "
                                   "(mteb run ... --prediction-folder DIR)")
        for path in sorted(Path(folder).rglob("*_predictions.json")):
            payload = json.loads(path.read_text(encoding="utf-8"))
            meta = payload.get("mteb_model_meta") or {}
            # mteb 2 writes "model_name", earlier versions "name"
            model, revision = meta.get("model_name") or meta.get("name"), meta.get("revision") or "no_revision_available"
            if not model:
                raise UserError(f"{path}: names no model (mteb_model_meta.model_name is missing), so its run cannot be tagged; "
                                "add it to the file's mteb_model_meta, or re-run mteb with --prediction-folder, which records it")
            task = path.name.removesuffix("_predictions.json")
            for subset, splits in payload.items():
                if subset == "mteb_model_meta" or not isinstance(splits, dict):
                    continue
                for split, run in splits.items():
                    suffix = "" if (subset, split) == ("default", "test") else f".{subset}.{split}"
                    target = Path(out_dir) / trec_tag(model) / revision / f"{task}{suffix}.trec"
                    if target in written:  # two prediction files of one model, revision and task: never let one overwrite the other
                        raise UserError(f"{path}: a second {task} run of {model!r} at revision {revision!r} among the folders; "
                                        "export them one folder at a time")
                    written.append(write_trec_run(target, run, trec_tag(model), depth=depth))
    if not written:
        raise UserError("no MTEB predictions files (<Task>_predictions.json) found; run mteb with --prediction-folder")
    return written
