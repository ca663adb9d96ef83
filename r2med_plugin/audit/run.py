"""`r2med audit`: stream training sets through the evaluation index, write every hit, the report and (on request)
cleaned copies. The training side is read in batches and never held whole; only the hit rows are remembered."""

from __future__ import annotations

import datetime
import json
import shutil
import sys
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from r2med_plugin.audit.beir_pairs import CORPUS_FILE, QUERIES_FILE, beir_folders, qrels_pair_hits
from r2med_plugin.audit.clean import write_clean
from r2med_plugin.audit.index import CORPUS, PAIR, QUERY, RELEVANT, EvalIndex, build_index, task_entries, task_positives, task_totals
from r2med_plugin.audit.matching import row_hits
from r2med_plugin.audit.minhash import candidate_probability, require_datasketch
from r2med_plugin.audit.report import AUDIT_FORMAT, HITS_FILE, REPORT_FILE, SUMMARY_FILE, render_report, task_rows
from r2med_plugin.audit.training import TrainingSource, open_training, read_rows
from r2med_plugin.io import atomic_write, write_json_atomic, write_text_atomic
from r2med_plugin.rules import SettingError, SettingFileError
from r2med_plugin.types import TaskData

DEFAULT_THRESHOLD = 0.5
DEFAULT_NGRAM = 3
BATCH_ROWS = 2000


def resolve_tasks(names: Sequence[str] | None) -> list[str]:
    """Task names from ``names``: task names, or 'all' (the default), 'r2med' or 'nano' for a benchmark's tasks."""
    from r2med_plugin.catalog import get_task_spec, list_tasks

    chosen: list[str] = []
    for name in names or ["all"]:
        if name == "all":
            chosen += [spec.name for spec in list_tasks()]
        elif name in ("r2med", "nano"):
            chosen += [spec.name for spec in list_tasks("r2med" if name == "r2med" else "nano")]
        else:
            chosen.append(get_task_spec(name).name)
    return list(dict.fromkeys(chosen))


def load_index(tasks: Sequence[str], *, ngram: int, threshold: float, corpus: bool = False, data_dir: str | Path | None = None,
               accept_drift: bool | None = None, show_progress: bool = True) -> tuple[EvalIndex, dict[str, str]]:
    """The evaluation index of ``tasks`` (loaded with load_task: the hub, R2MED_DATA_DIR or ``data_dir``) and each
    task's dataset revision."""
    from tqdm.auto import tqdm

    loaded = [_load(name, data_dir, accept_drift) for name in tasks]
    entries = [entry for data in loaded for entry in task_entries(data, corpus)]
    with tqdm(total=len(entries), desc="audit: indexing evaluation texts", unit="text", disable=_quiet(show_progress)) as bar:
        index = build_index(entries, ngram=ngram, threshold=threshold, progress=bar,
                            positives={data.name: task_positives(data) for data in loaded},
                            totals={data.name: task_totals(data, corpus) for data in loaded})
    return index, {data.name: data.result_revision for data in loaded}


def _load(name: str, data_dir: str | Path | None, accept_drift: bool | None) -> TaskData:
    from r2med_plugin.data.loader import load_task

    try:
        return load_task(name, data_dir=data_dir, accept_drift=accept_drift)
    except FileNotFoundError as error:
        raise SettingFileError(f"{error} (or audit only the tasks you have: {{tasks}} nano, {{tasks}} NAME ...)", field="tasks",
                               flags={"tasks": "--task"}) from None


def _quiet(show_progress: bool) -> bool:
    return not show_progress or not sys.stderr.isatty()


class _Tally:
    """What the stream found: distinct evaluation items hit per task and kind, and the hit rows per source."""

    def __init__(self, sources: Sequence[TrainingSource]) -> None:
        self.items: dict[str, dict[str, set]] = {}
        self.task_rows: dict[str, set] = {}
        self.rows = {source.label: 0 for source in sources}
        self.texts = {source.label: 0 for source in sources}
        self.hit_rows: dict[str, set[int]] = {source.label: set() for source in sources}
        self.hits = 0

    def add(self, source: TrainingSource, rows: Sequence[dict], hits: Iterable[dict]) -> None:
        self.rows[source.label] += len(rows)
        self.texts[source.label] += sum(len(row["fields"]) for row in rows)
        for hit in hits:
            self.hits += 1
            item = (hit["eval_id"], hit["doc_id"]) if hit["kind"] == PAIR else hit["eval_id"]
            self.items.setdefault(hit["task"], {}).setdefault(hit["kind"], set()).add(item)
            self.task_rows.setdefault(hit["task"], set()).add((source.label, hit["row"]))
            self.hit_rows[source.label].add(hit["row"])

    def found(self) -> dict[str, dict[str, int]]:
        return {task: {kind: len(items) for kind, items in kinds.items()} for task, kinds in self.items.items()}


def run_audit(train: Sequence[str | Path], *, out: str | Path = "r2med-audit", tasks: Sequence[str] | None = None,
              threshold: float = DEFAULT_THRESHOLD, ngram: int = DEFAULT_NGRAM, corpus: bool = False,
              write_clean_copy: bool = False, columns: Mapping[str, Sequence[str]] | None = None, model: str | None = None,
              declared: Mapping | None = None, data_dir: str | Path | None = None, accept_drift: bool | None = None,
              show_progress: bool = True) -> dict:
    """Audit the training sets ``train`` against ``tasks``; writes audit.json, hits.jsonl and report.md (and clean/
    with ``write_clean_copy``) under ``out`` and returns the summary (what audit.json holds)."""
    _check_settings(threshold, ngram)
    require_datasketch()
    if not train:
        raise SettingError("no training set given: name TRAIN files or folders (or only {model}, for mteb's declared data)",
                           field="train")
    sources = [source for path in train for source in open_training(path, columns)]  # every input checked first
    names = resolve_tasks(tasks)
    index, revisions = load_index(names, ngram=ngram, threshold=threshold, corpus=corpus, data_dir=data_dir,
                                  accept_drift=accept_drift, show_progress=show_progress)
    out = Path(out)
    created = not out.exists()
    try:
        tally = _Tally(sources)
        atomic_write(out / HITS_FILE, lambda temporary: _stream(index, sources, tally, temporary, show_progress))
        cleaned = _clean_copies(sources, tally, out) if write_clean_copy else {}
        summary = _summary(index, sources, tally, cleaned, revisions, corpus=corpus, model=model, declared=declared)
        write_json_atomic(out / SUMMARY_FILE, summary)
        write_text_atomic(out / REPORT_FILE, render_report(summary))
    except BaseException:
        if created:  # a bad row found mid-stream, or Ctrl-C: no half-written audit folder is left
            shutil.rmtree(out, ignore_errors=True)
        raise
    return summary


def _check_settings(threshold: float, ngram: int) -> None:
    if not 0.0 < threshold <= 1.0:
        raise SettingError(f"{{threshold}} {threshold}: a Jaccard similarity above 0 and at most 1 (default {DEFAULT_THRESHOLD})",
                           field="threshold")
    if ngram < 1:
        raise SettingError(f"{{ngram}} {ngram}: shingles are word n-grams of at least 1 word (default {DEFAULT_NGRAM})",
                           field="ngram")


def _stream(index: EvalIndex, sources: Sequence[TrainingSource], tally: _Tally, temporary: Path, show_progress: bool) -> None:
    from tqdm.auto import tqdm

    folders = beir_folders({source.label: source.path for source in sources if source.id_column})
    kept: dict[str, list[dict]] = {label: [] for files in folders.values() for label in files.values()}
    with temporary.open("w", encoding="utf-8") as handle:
        for source in sources:
            with tqdm(total=source.total_rows, desc=f"audit: {Path(source.label).name}", unit="row",
                      disable=_quiet(show_progress)) as bar:
                for rows in read_rows(source, BATCH_ROWS):
                    hits = [{"file": source.label, **hit} for hit in row_hits(index, rows)]
                    handle.writelines(json.dumps(hit, ensure_ascii=False) + "\n" for hit in hits)
                    tally.add(source, rows, hits)
                    kept.get(source.label, []).extend(hits)  # a BEIR file's hits, for the pairs its qrels make
                    bar.update(len(rows))
        by_label = {source.label: source for source in sources}
        for folder, files in folders.items():  # a BEIR folder's pairs are made by its qrels
            queries = by_label[files[QUERIES_FILE]]
            pairs = [{"file": queries.label, **pair}
                     for pair in qrels_pair_hits(index, folder, kept[queries.label], kept[files[CORPUS_FILE]])]
            handle.writelines(json.dumps(pair, ensure_ascii=False) + "\n" for pair in pairs)
            tally.add(queries, [], pairs)


def _clean_copies(sources: Sequence[TrainingSource], tally: _Tally, out: Path) -> dict[str, dict]:
    cleaned, used = {}, set()
    for number, source in enumerate(sources, start=1):
        name = Path(source.label.split("[")[0]).name
        relative = Path(name) / source.label.split("[")[1].rstrip("]") if "[" in source.label else Path(name)
        if relative in used:
            relative = Path(f"{number}-{relative}")
        used.add(relative)
        cleaned[source.label] = write_clean(source, tally.hit_rows[source.label], out / "clean" / relative)
    _write_split_lists(sources, out)
    return cleaned


def _write_split_lists(sources: Sequence[TrainingSource], out: Path) -> None:
    """A cleaned DatasetDict folder gets its dataset_dict.json back, so load_from_disk reads it whole."""
    splits: dict[str, list[str]] = {}
    for source in sources:
        if "[" in source.label:
            folder, split = source.label.split("[")
            splits.setdefault(Path(folder).name, []).append(split.rstrip("]"))
    for folder, names in splits.items():
        write_json_atomic(out / "clean" / folder / "dataset_dict.json", {"splits": names}, indent=None, trailing_newline=False)


def _summary(index: EvalIndex, sources: Sequence[TrainingSource], tally: _Tally, cleaned: Mapping, revisions: Mapping,
             *, corpus: bool, model: str | None, declared: Mapping | None) -> dict:
    from r2med_plugin.version import __version__

    lsh = index.lsh
    return {
        "format": AUDIT_FORMAT, "package_version": __version__,
        "created": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "model": model, "threshold": index.threshold, "ngram": index.ngram, "corpus": corpus,
        "lsh": {"num_perm": index.hasher.num_perm, "bands": lsh.b, "rows": lsh.r,
                "candidate_probability_at_threshold": round(candidate_probability(index.threshold, lsh.b, lsh.r), 4)},
        "dataset_revisions": dict(revisions),
        "tasks": task_rows(tally.found(), index.totals),
        "training_rows_hit": {task: len(rows) for task, rows in sorted(tally.task_rows.items())},
        "training": [_source_summary(source, tally, cleaned.get(source.label)) for source in sources],
        "hits": tally.hits, "hits_file": HITS_FILE,
        "declared_training_data": dict(declared) if declared else None,
        "kinds": {QUERY: "a training text copies an evaluation query", RELEVANT: "a training text copies a relevant document",
                  PAIR: "a training query copies an evaluation query and its positive one of that query's relevant documents",
                  CORPUS: "a training text copies a corpus document (--corpus)"},
    }


def _source_summary(source: TrainingSource, tally: _Tally, clean: Mapping | None) -> dict:
    summary = {"label": source.label, "path": str(source.path), "format": source.format, "layout": source.layout,
               "columns": {role: list(names) for role, names in source.roles.items()}, "rows": tally.rows[source.label],
               "texts": tally.texts[source.label], "rows_hit": len(tally.hit_rows[source.label])}
    return {**summary, "clean": dict(clean)} if clean else summary
