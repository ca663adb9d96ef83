"""`r2med reproduce --matrix`: every row of the published R2MED leaderboard (68), its command, and the rows this
machine recomputes (by default the 14 BM25 rows: plain BM25 and BM25 over 13 LLMs' released expansion files). The
board's one reranked row (ReasonRank(32B) over E5-mistral-7b-instruct) is listed with the command that runs its
setup; the matrix itself computes first stages only.

Which expansion file a leaderboard LLM name means is data (task_metadata/leaderboard_expansions.json, generated
with its source); each file is combined with the queries by the official rule of its method and LLM
(r2med_plugin.retrieval.expansion), through the same plan ``r2med evaluate`` runs. Per task, the corpus is
analysed and indexed once and every BM25 row searches that index (expansions change only the queries).

A finished (row, task) is recorded under ``<state>/<row>/<task>.json`` with the key it was computed on: the
dataset revision, the content fingerprint of the files it read (corpus, queries, qrels and the expansion file)
and the analyzer's version. A rerun reads what matches and computes the rest; edited files never match.
"""

from __future__ import annotations

import fnmatch
import json
import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from decimal import ROUND_HALF_UP, Decimal
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from tqdm.auto import tqdm

from r2med_plugin.catalog import list_tasks, metadata_dir
from r2med_plugin.errors import UserError
from r2med_plugin.quiet import bar_disabled
from r2med_plugin.types import TaskData

if TYPE_CHECKING:  # the evaluation modules load when a row is computed
    from r2med_plugin.evaluation.result import TaskRunResult

T = TypeVar("T")

MATRIX_RETRIEVER = "bm25-lucene"
STATE_FOLDER = "reproduce-matrix"
AVG = "avg"
# Parameters of each official dense profile's model (its model card), for what a row needs.
_PARAMETERS = {"contriever": 0.11, "medcpt": 0.11, "inst-l": 0.34, "inst-xl": 1.5, "bmr-410m": 0.41, "bmr-2b": 2.0,
               "bmr-7b": 7.1, "bge": 0.34, "e5": 7.1, "grit": 7.2, "sfr": 7.1, "nv": 7.9}
_GPU_FROM = 1.0  # billions of parameters from which a row needs a GPU (below: a GPU helps, the CPU works)
_VOYAGE_REASON = ("Voyage-3's own API (api.voyageai.com) is not OpenAI-compatible, and the official code reaches it "
                  "through an OpenAI client: no command here calls it directly. The command runs it through an "
                  "OpenAI-compatible proxy you host for voyage-3 (e.g. LiteLLM at http://localhost:4000/v1)")


@dataclass(frozen=True)
class RerankSetup:
    """How a published reranker ran (its authors' code), and the `r2med evaluate` options closest to it."""

    options: str  # what follows --first-stage in the command
    needs: str
    reason: str  # why that command does not reproduce the published row exactly
    source: str


_REASONRANK_SOURCE = ("github.com/8421BCD/ReasonRank: run_rank_llm.sh (window_size 20, step_size 10, retrieval_num 100, "
                      "reasoning_maxlen 3072, prompt_mode rank_GPT_reasoning) and runs/r2med_<Task>/"
                      "e5-mistral-7b-instruct_top100.txt; model liuwenhan/reasonrank-32B")
RERANKERS = {  # the board's reranker name -> its setup
    "ReasonRank(32B)": RerankSetup(
        options=("--rerank-depth 100 --rerank llm-listwise:liuwenhan/reasonrank-32B --base-url http://localhost:8000/v1 "
                 "--window 20 --step 10"),
        needs="ReasonRank-32B behind an OpenAI-compatible endpoint (e.g. `vllm serve liuwenhan/reasonrank-32B "
              "--port 8000`: 32B parameters, about 65 GB in bfloat16)",
        reason=("ReasonRank answers in its own reasoning format, asked by its own system prompt (<think> ... </think> "
                "<answer> ... </answer>, listwise_prompt_r1.toml); llm-listwise sends RankGPT's prompt, so the command "
                "runs ReasonRank-32B in the published setup (E5-mistral-7b-instruct's top 100, windows of 20, step 10) "
                "with another prompt: close to the published row, not a reproduction of it"),
        source=_REASONRANK_SOURCE,
    ),
}


@dataclass(frozen=True)
class MatrixRow:
    """One published row: its LLM (None: no expansion) and retriever as the reference file names them, the
    published nDCG@10 x 100 (hub task names and ``avg``), and how this package recomputes it."""

    llm: str | None
    retriever: str
    published: dict[str, float]
    expansion: str | None  # "method/llm", the released file
    retriever_id: str  # what `r2med evaluate --retriever` takes
    needs: str
    base_url: str | None = None
    reason: str | None = None  # why no command here recomputes the row as published (None: the command does)
    reranker: str | None = None  # the board's reranker (None: a first stage alone); ``retriever`` is then "Reranker | Retriever"

    @property
    def label(self) -> str:
        return f"{self.llm} + {self.retriever}"

    @property
    def names(self) -> tuple[str, ...]:
        """What --rows matches: the label, and for an expansion row "<method>/<llm> + <Retriever>" too."""
        return (self.label, f"{self.expansion} + {self.retriever}") if self.expansion else (self.label,)

    @property
    def slug(self) -> str:
        """A folder name for the row's state: the label's letters and digits."""
        return re.sub(r"[^a-z0-9]+", "-", self.label.lower()).strip("-")

    @property
    def on_cpu(self) -> bool:
        return self.retriever_id == MATRIX_RETRIEVER

    def command(self) -> str:
        """The `r2med evaluate` command that computes this row's 8 tasks."""
        tasks = " ".join(spec.name for spec in list_tasks("r2med"))
        if self.reranker:  # the retriever is the first stage of the reranker's setup
            parts = [f"r2med evaluate --task {tasks} --first-stage {self.retriever_id} {RERANKERS[self.reranker].options}"]
        else:
            parts = [f"r2med evaluate --task {tasks} --retriever {self.retriever_id}"]
        if self.expansion:
            parts.append(f"--expansion {self.expansion}")
        if self.base_url:
            parts.append(f"--base-url {self.base_url}")
        return " ".join(parts) + " --output results/matrix"


@lru_cache(maxsize=1)
def leaderboard_expansions() -> dict[str, dict[str, str]]:
    """LLM name of the leaderboard -> {"expansion", "method", "source"} (task_metadata/leaderboard_expansions.json)."""
    from r2med_plugin.catalog import LEADERBOARD_EXPANSIONS_FILE

    path = metadata_dir() / LEADERBOARD_EXPANSIONS_FILE
    return json.loads(path.read_text(encoding="utf-8"))["llms"]


def _official_profiles() -> dict[str, str]:
    """Published retriever name -> official profile short name (models/official/profiles.json, published_row)."""
    from importlib import resources

    profiles = json.loads(resources.files("r2med_plugin.models.official").joinpath("profiles.json").read_text(encoding="utf-8"))
    return {profile["published_row"]: name for name, profile in profiles["profiles"].items()}


def _retriever_of(retriever: str) -> tuple[str, str, str | None, str | None]:
    """(retriever id, needs, base URL, reason) of a published retriever name."""
    if retriever == "BM25":
        return MATRIX_RETRIEVER, "CPU", None, None
    short = _official_profiles().get(retriever)
    if short is None:
        raise UserError(f"the published retriever {retriever!r} has no official profile (models/official/profiles.json)")
    if short == "openai":
        return "official:openai", "API key: OPENAI_API_KEY (paid OpenAI embeddings)", "https://api.openai.com/v1", None
    if short == "voyage":
        return "official:voyage", "API key: Voyage, behind an OpenAI-compatible proxy", "http://localhost:4000/v1", _VOYAGE_REASON
    billions = _PARAMETERS[short]
    memory = f"{billions:g}B parameters, about {max(1, round(billions * 2 + 1))} GB in float16"
    needs = f"GPU ({memory})" if billions >= _GPU_FROM else f"GPU recommended ({memory}; the CPU works, slowly)"
    return f"official:{short}", needs, None, None


def matrix_rows() -> list[MatrixRow]:
    """Every row of the published leaderboard, in its order."""
    from r2med_plugin.reporting.published import published_label, published_table

    mapping = leaderboard_expansions()
    rows = []
    for entry in published_table()["rows"]:
        retriever_id, needs, base_url, reason = _retriever_of(entry["retriever"])
        setup = RERANKERS[entry["reranker"]] if entry.get("reranker") else None
        if setup is not None:
            needs, reason = f"{needs}; {setup.needs}", setup.reason
        expansion = mapping[entry["llm"]]["expansion"] if entry["llm"] is not None else None
        published = {**{name: float(value) for name, value in entry["scores"].items()}, AVG: float(entry["avg"])}
        rows.append(MatrixRow(entry["llm"], published_label(entry), published, expansion, retriever_id, needs, base_url,
                              reason, entry.get("reranker")))
    return rows


def select_rows(rows: Sequence[MatrixRow], pattern: str | None) -> list[MatrixRow]:
    """The rows a case-insensitive glob over "<LLM> + <Retriever>" or "<method>/<llm> + <Retriever>" (the expansion
    file) selects; without one, the CPU rows. A pattern that selects nothing is an UnknownNameError listing every name."""
    if pattern is None:
        return [row for row in rows if row.on_cpu]
    chosen = [row for row in rows if any(fnmatch.fnmatchcase(name.lower(), pattern.lower()) for name in row.names)]
    if not chosen:
        from r2med_plugin.rules import SettingNameError

        names = "; ".join(" or ".join(f"'{name}'" for name in row.names) for row in rows)
        raise SettingNameError(f"{{pattern}} {pattern!r} selects no row; rows are named '<LLM> + <Retriever>' or, with an "
                               f"expansion, '<method>/<llm> + <Retriever>' (e.g. 'o3-mini + BM25', 'hyde/*', "
                               f"'hyde/gpt4 + *', '* + NV-Embed-v2'). The {len(rows)} rows: {names}", field="pattern",
                               flags={"pattern": "--rows"})
    return chosen


def render_list(rows: Sequence[MatrixRow]) -> str:
    """--list: every row, what it needs, its command, and why a row has no command that reproduces it here."""
    lines = [f"{len(rows)} published rows (nDCG@10 x 100, average over the 8 R2MED tasks)", ""]
    for number, row in enumerate(rows, 1):
        where = "the matrix computes it (CPU)" if row.on_cpu else f"needs {row.needs}"
        lines.append(f"{number:>2}. {row.label}  [published avg {row.published[AVG]:.2f}; {where}]")
        lines.append(f"    {row.command()}")
        if row.expansion and row.llm:  # a row on an expansion names its LLM
            lines.append(f"    expansion file: {row.expansion} ({leaderboard_expansions()[row.llm]['source']})")
        if row.reranker:
            lines.append(f"    reranker: {row.reranker}, as its authors ran it: {RERANKERS[row.reranker].source}")
        if row.reason:
            lines.append(f"    why no command reproduces it as published: {row.reason}")
    return "\n".join(lines) + "\n"


# --- running the rows ---------------------------------------------------------------------------------------------


@dataclass
class RowOutcome:
    row: MatrixRow
    ours: dict[str, float] = field(default_factory=dict)  # hub name -> nDCG@10 x 100, and avg when all 8 ran
    not_run: str | None = None  # why the row was not computed

    def delta(self) -> dict[str, float]:
        return {key: round(value - self.row.published[key], 2) for key, value in self.ours.items()}

    def status(self, tolerance: float) -> str:
        if self.not_run:
            return f"not run: {self.not_run}"
        return "PASS" if all(abs(value) <= tolerance + 1e-9 for value in self.delta().values()) else "FAIL"


@dataclass
class MatrixReport:
    tolerance: float
    outcomes: list[RowOutcome]
    indexes_built: int = 0  # corpus indexes built (at most one per task)
    computed: int = 0  # (row, task) pairs computed; the others were read from the state
    reused: int = 0
    data: dict[str, dict] = field(default_factory=dict)  # hub name -> what its verdicts stand on (naming.data_entry)

    def data_label(self, outcome: RowOutcome) -> str | None:
        """The leaderboard's words for the data a row's verdict stands on when it is not proven pinned data, else None."""
        from r2med_plugin.reporting.grouping import data_label

        return data_label(self.data[name] for name in outcome.ours if name in self.data)

    def verdict(self, outcome: RowOutcome) -> str:
        """The row's status, and what data it stands on when that is not proven pinned data."""
        label = None if outcome.not_run else self.data_label(outcome)
        return outcome.status(self.tolerance) + (f" (data: {label})" if label else "")

    @property
    def passed(self) -> bool:
        return all(outcome.status(self.tolerance) == "PASS" for outcome in self.outcomes if not outcome.not_run)


def half_up(value: float) -> float:
    """Two decimals, half up (as the leaderboard rounds)."""
    return float(Decimal(repr(round(value, 9))).quantize(Decimal("0.01"), rounding=ROUND_HALF_UP))


def why_not_run(row: MatrixRow, selected: bool, pattern: str | None) -> str | None:
    """None for a row the matrix computes (a selected row; without --rows, the BM25 rows); else why not."""
    if row.reranker:
        return f"reranked by {row.reranker}: the matrix computes first stages only; run its command (--list)"
    if selected:
        return None
    if pattern is not None:
        return "not selected (--rows)"
    if row.needs.startswith("API key"):
        return f"needs an API key ({row.needs.removeprefix('API key: ')}): select it with --rows, or run its command"
    return f"needs {row.needs}: select it with --rows (on a machine with one: --device auto uses it), or run its command"


@dataclass(frozen=True)
class MatrixOptions:
    data_dir: str | os.PathLike | None = None
    accept_drift: bool | None = None
    output: str | os.PathLike | None = None
    device: str = "auto"  # for the rows that load a model (auto: CUDA when there is one)
    show_progress: bool = True


def run_matrix(
    rows: Sequence[MatrixRow] | None = None,
    *,
    pattern: str | None = None,
    data_dir: str | os.PathLike | None = None,
    accept_drift: bool | None = None,
    tolerance: float = 0.1,
    output: str | os.PathLike | None = None,
    device: str = "auto",
    show_progress: bool = True,
) -> MatrixReport:
    """Compute the selected rows (default: the BM25 rows), resuming from the state under ``output`` (else the
    cache folder). BM25 rows run task by task on one index per task; a model or endpoint row loads its encoder
    once for its 8 tasks (rows sharing a retriever share it). Rows not computed say why."""
    rows = list(rows if rows is not None else matrix_rows())
    chosen = {row.label for row in select_rows(rows, pattern)}
    outcomes = [RowOutcome(row, not_run=why_not_run(row, row.label in chosen, pattern)) for row in rows]
    report = MatrixReport(tolerance, outcomes)
    options = MatrixOptions(data_dir, accept_drift, output, device, show_progress)
    state = MatrixState(_state_root(output))
    _check_matrix_inputs([outcome.row for outcome in outcomes if not outcome.not_run], options)
    bm25 = [outcome for outcome in outcomes if not outcome.not_run and outcome.row.on_cpu]
    for spec in tqdm(list_tasks("r2med") if bm25 else (), desc=f"matrix: {len(bm25)} BM25 rows", unit="task",
                     disable=bar_disabled(show_progress)):
        _run_task(spec.name, bm25, report, state, _bm25_computer(report, options), options)
    models: dict[str, list[RowOutcome]] = {}
    for outcome in outcomes:
        if not outcome.not_run and not outcome.row.on_cpu:
            models.setdefault(outcome.row.retriever_id, []).append(outcome)
    for group in models.values():
        compute = _model_computer(group[0].row, options)
        for spec in tqdm(list_tasks("r2med"), desc=f"matrix: {group[0].row.retriever_id}", unit="task", disable=bar_disabled(show_progress)):
            _run_task(spec.name, group, report, state, compute, options)
    for outcome in outcomes:
        if not outcome.not_run:
            outcome.ours[AVG] = half_up(sum(outcome.ours.values()) / len(outcome.ours))
    return report


def _check_matrix_inputs(rows: Sequence[MatrixRow], options: MatrixOptions) -> None:
    """Every R2MED task's files and every expansion file the rows read, checked before the first row is computed (one
    task in memory at a time), so that bad input stops the matrix before any result is written."""
    from r2med_plugin.evaluation.runner import TaskInputs, check_inputs

    data_dir = None if options.data_dir is None else os.fspath(options.data_dir)
    expansions = list(dict.fromkeys(row.expansion for row in rows))
    check_inputs([TaskInputs(spec.name, data_dir, options.accept_drift, expansion)
                  for spec in (list_tasks("r2med") if rows else ()) for expansion in expansions])


def _state_root(output: str | os.PathLike | None) -> Path:
    from r2med_plugin.cache import cache_dir

    return Path(output) / ".matrix-state" if output is not None else cache_dir() / STATE_FOLDER


def _run_task(task: str, outcomes: list[RowOutcome], report: MatrixReport, state: MatrixState,
              compute: Callable[[TaskData, MatrixRow], TaskRunResult], options: MatrixOptions) -> None:
    """One task's rows: each read from the state when its key matches, else computed (``compute(data, row)``)."""
    from r2med_plugin.data.loader import load_task
    from r2med_plugin.evaluation.naming import data_entry

    data = load_task(task, data_dir=options.data_dir, accept_drift=options.accept_drift)
    report.data[data.spec.hub_name] = data_entry(data)
    for outcome in outcomes:
        key = state_key(data, outcome.row, options.data_dir)
        official = state.read(outcome.row, task, key)
        if official is None:
            result = compute(data, outcome.row)
            official = result.official
            if official is None:
                raise ValueError(f"{task}: the row {outcome.row.label} computed no official scores")
            if options.output is not None:
                from r2med_plugin.evaluation.writers import write_outputs

                write_outputs(result, options.output)
            state.write(outcome.row, task, key, official)
            report.computed += 1
        else:
            report.reused += 1
        outcome.ours[data.spec.hub_name] = half_up(official["ndcg_at_10"] * 100)


def _bm25_computer(report: MatrixReport, options: MatrixOptions) -> Callable[[TaskData, MatrixRow], TaskRunResult]:
    """Computes a BM25 row on a task, on the task's index (built at the first row that needs it, once per task)."""
    indexes: dict[str, object] = {}

    def compute(data: TaskData, row: MatrixRow):
        if data.name not in indexes:
            indexes.clear()  # one task's index at a time
            indexes[data.name] = _built_index(data, report, options.show_progress)
        return _evaluate_row(data, row, indexes[data.name], options.data_dir, options.accept_drift, options.show_progress)
    return compute


def _model_computer(row: MatrixRow, options: MatrixOptions) -> Callable[[TaskData, MatrixRow], TaskRunResult]:
    """Computes a model or endpoint row on a task, its encoder loaded at the first task that needs it."""
    from r2med_plugin.evaluation.plan import request_of
    from r2med_plugin.evaluation.request import TaskArguments
    from r2med_plugin.evaluation.runner import execute

    def load():
        from r2med_plugin.models.registry import load_encoder

        endpoint = {"settings": {"base_url": row.base_url}} if row.base_url else {}
        device = {} if row.base_url else {"device": options.device}
        return load_encoder(row.retriever_id, **endpoint, **device, show_progress=options.show_progress)

    encoder = _lazy(load)
    def compute(data: TaskData, row: MatrixRow) -> TaskRunResult:
        arguments = TaskArguments(expansion=row.expansion, data_dir=options.data_dir, accept_drift=options.accept_drift,
                                  show_progress=options.show_progress)
        return execute(request_of(data.name, encoder(), arguments), data)
    return compute


def _lazy(build: Callable[[], T]) -> Callable[[], T]:
    made: list[T] = []

    def get() -> T:
        if not made:
            made.append(build())
        return made[0]
    return get


def _built_index(data: TaskData, report: MatrixReport, show_progress: bool):
    from r2med_plugin.retrieval.bm25 import lucene_index_of

    report.indexes_built += 1
    return lucene_index_of(data.corpus, row_counts=data.document_row_counts(), show_progress=show_progress)


def _evaluate_row(data: TaskData, row: MatrixRow, index, data_dir, accept_drift, show_progress: bool) -> TaskRunResult:
    """The row's request as `r2med evaluate` builds it, its BM25 searching the task's shared index."""
    from r2med_plugin.evaluation.plan import request_of
    from r2med_plugin.evaluation.request import TaskArguments
    from r2med_plugin.evaluation.runner import execute

    arguments = TaskArguments(expansion=row.expansion, data_dir=data_dir, accept_drift=accept_drift, show_progress=show_progress)
    return execute(request_of(data.name, MATRIX_RETRIEVER, arguments).with_loaded(index), data)


def state_key(data: TaskData, row: MatrixRow, data_dir: str | os.PathLike | None) -> str:
    """What a (row, task) result depends on: the revision, the files' content, the retriever (the analyzer for BM25,
    the model's files or hub commit for a model row), the package."""
    from r2med_plugin.cache import key_of
    from r2med_plugin.data.expansions import released_expansion_file
    from r2med_plugin.data.fingerprint import file_sha256
    from r2med_plugin.data.loader import drift_accepted
    from r2med_plugin.retrieval.analyzed import analyzer_version
    from r2med_plugin.version import __version__

    expansion_part = ""
    if row.expansion is not None:
        _, path = released_expansion_file(data.spec, row.expansion, data_dir=data_dir, accept_drift=drift_accepted(None))
        expansion_part = f"{row.expansion}={file_sha256(path)}"
    retriever = f"{row.retriever_id}@{analyzer_version()}" if row.on_cpu else f"{row.retriever_id}@{_model_stamp(row)}"
    return key_of(data.name, data.revision, data.files_fingerprint, expansion_part, retriever, __version__)


def _model_stamp(row: MatrixRow) -> str:
    """What a model row's model is, without loading it: the folder's files or the hub commit (an endpoint: its host and model)."""
    from r2med_plugin.models.registry import resolve

    return resolve(row.retriever_id, settings={"base_url": row.base_url} if row.base_url else None).stamp()


@dataclass(frozen=True)
class MatrixState:
    """Finished (row, task) results: ``<root>/<row slug>/<task>.json`` = {"key", "official"}."""

    root: Path

    def path(self, row: MatrixRow, task: str) -> Path:
        return self.root / row.slug / f"{task}.json"

    def read(self, row: MatrixRow, task: str, key: str) -> dict | None:
        path = self.path(row, task)
        try:
            payload = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        return payload["official"] if isinstance(payload, dict) and payload.get("key") == key else None

    def write(self, row: MatrixRow, task: str, key: str, official: dict) -> None:
        from r2med_plugin.io import write_text_atomic

        payload = {"row": row.label, "task": task, "key": key, "official": official}
        write_text_atomic(self.path(row, task), json.dumps(payload, indent=2, sort_keys=True) + "\n")


# --- output -------------------------------------------------------------------------------------------------------


def matrix_json(report: MatrixReport) -> dict:
    """``{"tolerance", "data", "rows": [...]}``: ``data`` per hub task name the data the verdicts stand on
    (dataset_revision, verified, files_fingerprint, count_drift); per row llm, retriever, published, ours, delta,
    status, data_label (the leaderboard's words for unproven data, else null), command (dicts keyed by task + avg)."""
    return {"tolerance": report.tolerance, "data": dict(report.data), "rows": [
        {"llm": outcome.row.llm, "retriever": outcome.row.retriever, "expansion": outcome.row.expansion,
         "published": outcome.row.published, "ours": dict(outcome.ours) or None, "delta": outcome.delta() or None,
         "status": outcome.status(report.tolerance), "data_label": None if outcome.not_run else report.data_label(outcome),
         "needs": outcome.row.needs, "command": outcome.row.command()}
        for outcome in report.outcomes]}


def render_matrix(report: MatrixReport) -> str:
    """The terminal table: each computed row per task (published, ours, delta, PASS/FAIL), then the others."""
    hub_names = [spec.hub_name for spec in list_tasks("r2med")] + [AVG]
    lines = [f"Reproduction matrix: nDCG@10 x 100, published vs ours (PASS within {report.tolerance:g} points)"]
    for outcome in report.outcomes:
        if outcome.not_run:
            continue
        lines += ["", f"{outcome.row.label}: {report.verdict(outcome)}",
                  f"  {'task':<18} {'published':>9} {'ours':>9} {'delta':>7}"]
        delta = outcome.delta()
        for name in hub_names:
            if name in outcome.ours:
                lines.append(f"  {name:<18} {outcome.row.published[name]:>9.2f} {outcome.ours[name]:>9.2f} {delta[name]:>+7.2f}")
    skipped = [outcome for outcome in report.outcomes if outcome.not_run]
    if skipped:
        lines += ["", f"not run here ({len(skipped)} rows; `r2med reproduce --matrix --list` gives each command):"]
        unselected = sum("not selected" in (outcome.not_run or "") for outcome in skipped)
        lines += [f"  {outcome.row.label}: {outcome.not_run}" for outcome in skipped if "not selected" not in (outcome.not_run or "")]
        if unselected:
            lines.append(f"  {unselected} more rows not selected (--rows)")
    ran = [outcome for outcome in report.outcomes if not outcome.not_run]
    failed = [outcome.row.label for outcome in ran if outcome.status(report.tolerance) != "PASS"]
    lines += ["", f"{len(ran) - len(failed)}/{len(ran)} rows PASS; {report.computed} task results computed, "
                  f"{report.reused} read from the state, {report.indexes_built} corpus indexes built"]
    if failed:
        lines.append(f"MISMATCH: {', '.join(failed)}")
    unproven = [outcome.row.label for outcome in ran if report.data_label(outcome)]
    if unproven:
        lines.append(f"{len(unproven)}/{len(ran)} verdicts stand on data that proves no pinned R2MED commit (marked "
                     "\"data: ...\"): download it with `huggingface-cli download --local-dir` for verdicts on R2MED data")
    return "\n".join(lines) + "\n"
