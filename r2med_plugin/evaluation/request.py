"""The parts of an evaluation request that own their rules: each checks itself once, when it is built.

``Scoring`` is what a retriever's result is scored on (its depth, hybrid fusion, the stored candidate lists, an LLM
expansion). ``evaluate_task``/``build_plan``, the CLI and sweep specs all state these settings through it, so that each
rule below is written once:

- hybrid scores fuse full-corpus runs, which ``candidates_only`` skips: not both;
- candidate subsets are bm25, dense and hybrid, and ``candidates_only`` needs one;
- the run is at least 10 deep (the main score is nDCG@10);
- candidate subsets exist for tasks with stored lists (NanoR2MED), released expansions for R2MED tasks, and the two
  never go together.

A refusal is a ``RequestError``: its message reads as the Python API's (``top_k (--top-k) ...``), its
``flag_message`` as the CLI's (``--top-k ...``), and ``keyed(label)`` under a sweep spec's key (`` `top_k` ...``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from r2med_plugin.data.expansions import llm_name
from r2med_plugin.metrics import MIN_TOP_K
from r2med_plugin.identifiers import CANDIDATE_SUBSETS
from r2med_plugin.types import TaskSpec


class RequestError(ValueError):
    """A request that cannot run, found without any data. Its message is the Python API's; ``flag_message`` says the
    same with the CLI's flags, and ``keyed(label)`` with a sweep spec's key (``field`` is the setting at fault)."""

    def __init__(self, message: str, *, field: str, problem: str, fix: str, flag_message: str) -> None:
        super().__init__(message)
        self.field, self.problem, self.fix, self.flag_message = field, problem, fix, flag_message

    def keyed(self, label: str) -> str:
        return f"{label} {self.problem}; {self.fix}"


def _refuse(message: str, field: str, problem: str, fix: str, flag_message: str) -> RequestError:
    return RequestError(message, field=field, problem=problem, fix=fix, flag_message=flag_message)


@dataclass(frozen=True)
class Scoring:
    """What a retriever's result is scored on; refused at construction when no task could run it."""

    top_k: int = 1000
    hybrid: bool = False
    candidates: tuple[str, ...] = ()
    candidates_only: bool = False
    expansion: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "candidates", tuple(dict.fromkeys(self.candidates)))
        if self.hybrid and self.candidates_only:
            raise _refuse("hybrid scores (--hybrid) fuse full-corpus runs, which candidates_only (--candidates-only) skips: "
                          "drop one of the two", "hybrid", "fuses full-corpus runs, which candidates_only skips",
                          "drop one of the two",
                          "--hybrid fuses full-corpus runs, which --candidates-only skips: drop one of the two")
        unknown = [name for name in self.candidates if name not in CANDIDATE_SUBSETS]
        if unknown:
            raise _refuse(f"unknown candidate subset(s) {unknown}; choose from {list(CANDIDATE_SUBSETS)}",
                          "candidates", f"holds {unknown[0]!r}", f"choose from {list(CANDIDATE_SUBSETS)}",
                          f"--candidates {unknown[0]}: unknown candidate subset; choose from {list(CANDIDATE_SUBSETS)}")
        if self.candidates_only and not self.candidates:
            raise _refuse("candidates_only (--candidates-only) needs at least one candidate subset (--candidates bm25, "
                          "dense or hybrid)", "candidates_only", "is true but `candidates` names no subset",
                          "add candidates: [bm25, dense, hybrid] (the lists to rank), or remove candidates_only",
                          "--candidates-only needs at least one candidate subset: add --candidates bm25, dense or hybrid")
        if isinstance(self.top_k, bool) or not isinstance(self.top_k, int) or self.top_k < MIN_TOP_K:
            problem = f"must be at least {MIN_TOP_K}: the main score is nDCG@10; got {self.top_k}"
            raise _refuse(f"top_k (--top-k) {problem}", "top_k", problem, "raise it (default 1000)", f"--top-k {problem}")

    def check_task(self, spec: TaskSpec) -> None:
        """The rules that depend on the task: stored candidate lists (NanoR2MED), released expansions (R2MED)."""
        if self.candidates and not spec.candidate_profiles:
            raise ValueError(f"{spec.name} has no stored candidate lists; candidate subsets (--candidates) exist for the "
                             f"NanoR2MED tasks only: run {spec.name} in a command without --candidates")
        if self.expansion is None:
            return
        if self.candidates:
            raise ValueError("expansions apply to the R2MED tasks, candidate subsets to NanoR2MED: use one or the other")
        if ":" in self.expansion:  # a locally generated expansion ("local:..."): checked where it is read
            return
        known = [f"{method}/{llm_name(split)}" for method, splits in spec.gar_configs.items() for split in splits]
        if not known:
            raise ValueError(f"{spec.name} has no released expansions; they exist for the R2MED tasks")
        if self.expansion != "all" and self.expansion not in known:
            from r2med_plugin.catalog import unknown_name_message

            raise KeyError(unknown_name_message("expansion", self.expansion, [*known, "all"]))


def scoring_of(*, top_k: int = 1000, hybrid: bool = False, candidates: Sequence[str] = (), candidates_only: bool = False,
               expansion: str | None = None) -> Scoring:
    """``Scoring`` from ``evaluate_task``'s keyword arguments (a list of subsets is accepted as given)."""
    return Scoring(top_k=top_k, hybrid=hybrid, candidates=tuple(candidates), candidates_only=candidates_only,
                   expansion=expansion)
