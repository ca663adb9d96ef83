"""`r2med evaluate`: the command line as one EvaluationRequest per task (and expansion), then each run and printed.

The options map onto the request's parts (r2med_plugin.evaluation.request and .specs); an option that no part of the
request uses reaches no code, and is refused with the part's own words, before anything loads.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from r2med_plugin.cli.options import LazyChoices, non_negative_int, positive_int, positive_seconds, price, refuse_unreached
from r2med_plugin.errors import UserError

if TYPE_CHECKING:
    from r2med_plugin.data.expansions import ExpansionName
    from r2med_plugin.request_options import Group, Option

def add_evaluate_command(commands: Any) -> None:
    evaluate = commands.add_parser("evaluate", help="evaluate BM25 or a sentence-transformers model on tasks; rerank with a "
                                   "cross-encoder or an LLM")
    for add in (_run_options, _first_options, _scoring_options, _outputs_options, _rerank_options, _endpoint_options,
                _llm_options, _cost_options):
        add(evaluate)
    evaluate.set_defaults(func=evaluate_command)


def _run_options(evaluate: argparse.ArgumentParser) -> None:
    run = evaluate.add_argument_group("what runs")
    run.add_argument("--task", nargs="+", required=True, help="task name(s), e.g. NanoR2MEDBiology")
    run.add_argument("--data-dir", default=None, help="local mirror (default: $R2MED_DATA_DIR, else the hub)")
    run.add_argument("--accept-drift", action="store_true", default=None,
                     help="evaluate data whose counts/revision differ from task_metadata (marked +count-drift; never submittable)")
    run.add_argument("--quiet", action="store_true", help="no progress bars and no library warnings (errors still print)")


def _loader_choices() -> list[str]:
    from r2med_plugin.models.registry import loader_choices  # imports polars and numpy: only when --loader is checked

    return loader_choices()


def _loader_metavar() -> str:
    """{auto,sentence-transformers,<the installed loader plugins>}, read from the entry points' names without loading
    any (a loader added with register_loader is accepted, only not listed here)."""
    from importlib.metadata import entry_points

    plugins = sorted(entry_points(group="r2med_plugin.model_loaders").names)  # registry.ENTRY_POINT_GROUP
    return "{" + ",".join(["auto", "sentence-transformers", *plugins]) + "}"


def _first_options(evaluate: argparse.ArgumentParser) -> None:
    first = evaluate.add_argument_group("first stage: BM25 or a model (--retriever; with --rerank, --first-stage)")
    first.add_argument("--retriever", default=None,
                       help="bm25-lucene, bm25-hakari[:<tokenizer>], bm25-robertson, a model name (mteb's registry, else sentence-transformers) or folder, "
                            "minilm-packaged (the packaged MiniLM, offline), official:<name> (an official R2MED profile), "
                            "or openai:<model> with --base-url (required without --rerank)")
    _declared_options(first, "first")


def _scoring_options(evaluate: argparse.ArgumentParser) -> None:
    from r2med_plugin.identifiers import CANDIDATE_SUBSETS

    scoring = evaluate.add_argument_group("scoring (without --rerank)")
    scoring.add_argument("--hybrid", action="store_true", help="also report hybrid_* (RRF, k=60, with the task's own BM25: bm25-lucene on R2MED, bm25-hakari on "
                              "NanoR2MED; a BM25 first stage that is that BM25 fuses with the other one: bm25-lucene with "
                              "bm25-robertson, bm25-hakari with bm25-lucene; bm25-robertson and bm25-hakari:<tokenizer> fuse "
                              "with the task's own)")
    scoring.add_argument("--candidates", nargs="+", choices=list(CANDIDATE_SUBSETS), help="rank the stored candidate lists (NanoR2MED)")
    scoring.add_argument("--candidates-only", action="store_true", help="skip the full corpus; encode only candidate documents")
    scoring.add_argument("--expansion", default=None,
                         help="a released LLM expansion, e.g. hyde/o3-mini, or 'all' for every released one (R2MED tasks), "
                              "or one from r2med generate: local:<folder>/<method>/<llm>")
    _declared_options(scoring, "scoring")


def _outputs_options(evaluate: argparse.ArgumentParser) -> None:
    outputs = evaluate.add_argument_group("outputs")
    outputs.add_argument("--output", default=None, help="folder for MTEB-format results and the official R2MED JSON")
    outputs.add_argument("--trec", action="store_true", help="also write TREC run files")
    _declared_options(outputs, "outputs")


def _rerank_options(evaluate: argparse.ArgumentParser) -> None:
    rerank = evaluate.add_argument_group("reranking (--rerank)")
    rerank.add_argument("--rerank", default=None, metavar="RERANKER",
                        help="rerank the top --rerank-depth of --first-stage with this cross-encoder (a name of mteb's registry, "
                             "else a sentence-transformers CrossEncoder name or folder), or an LLM behind --base-url: "
                             "llm-listwise:<model>, llm-pointwise:<model>, llm-reasoning:<model>, llm-setwise:<model>, "
                             "llm-groupwise:<model>")
    rerank.add_argument("--first-stage", default=None,
                        help="what --rerank reranks: bm25-lucene, bm25-hakari, bm25-robertson, a model, a TREC run or official topk_docs .jsonl, or a folder of <Task> run files")
    _declared_options(rerank, "rerank")


def _endpoint_options(evaluate: argparse.ArgumentParser) -> None:
    endpoint = evaluate.add_argument_group("endpoints: openai:<model> retrievers and LLM rerankers")
    _declared_options(endpoint, "endpoint")


def _declared_options(group: Any, name: Group) -> None:
    """The flags of the request options declared for this group (r2med_plugin.request_options): help, default and the
    command line's check from each declaration."""
    from r2med_plugin.request_options import DECLARED
    from r2med_plugin.rules import flag_of

    for declared in DECLARED.values():
        if declared.group == name:
            group.add_argument(flag_of(declared.name), default=declared.flag_default, help=declared.help, **_reading(declared))


def _reading(declared: Option) -> dict[str, Any]:
    """How the command line reads a declared option's text (its argparse action, type or choices)."""
    if declared.parse == "switch":
        return {"action": "store_true"}
    if declared.parse == "choice":
        return {"choices": list(declared.choices)}
    if declared.parse == "loader":
        return {"choices": LazyChoices(_loader_choices), "metavar": _loader_metavar()}
    types = {"int": int, "positive": positive_int, "count": non_negative_int, "seconds": positive_seconds}
    how: dict[str, Any] = {"type": types[declared.parse]} if declared.parse in types else {}
    return how | ({"metavar": declared.metavar} if declared.metavar else {})


def _llm_options(evaluate: argparse.ArgumentParser) -> None:
    """One flag per setting the kinds' settings classes declare (r2med_plugin.llm_settings): its help, its check as the
    flag's type or choices, and its default, from the declaration."""
    from r2med_plugin.llm_settings import declaration, declared_settings
    from r2med_plugin.rules import flag_of

    llm = evaluate.add_argument_group("LLM reranker settings (each kind reads its own)")
    for name, item in declared_settings().items():
        declared = declaration(item)
        how: dict[str, Any] = {}
        if declared.switch:
            how = {"action": "store_true"}
        elif declared.choices:
            how = {"choices": list(declared.choices)}
        elif declared.minimum is not None:
            how = {"type": positive_int if declared.minimum >= 1 else int}
        llm.add_argument(flag_of(name), **how, default=declared.flag_default, help=declared.help)


def _cost_options(evaluate: argparse.ArgumentParser) -> None:
    cost = evaluate.add_argument_group("LLM reranker cost (r2med_plugin.llm.cost)")
    cost.add_argument("--estimate-cost", action="store_true",
                      help="LLM rerankers: print what the rerank would cost (requests, prompt tokens by the model's local "
                           "tokenizer or a stated rule, completion budget, dollars with --price-in/--price-out) and send no "
                           "request")
    cost.add_argument("--price-in", type=price, default=None, metavar="USD",
                      help="LLM rerankers: US dollars per million prompt tokens, for the estimate and the cost line")
    cost.add_argument("--price-out", type=price, default=None, metavar="USD",
                      help="LLM rerankers: US dollars per million completion tokens, for the estimate and the cost line")


# --- argv -> requests -----------------------------------------------------------------------------------------------------


def llm_settings() -> tuple[str, ...]:
    from r2med_plugin.llm.config import LLM_SETTING_USERS

    return tuple(LLM_SETTING_USERS)


def first_stage_kind(value: str) -> str:
    """"bm25", "run_file" (a run file or a folder of them) or "model" for what --retriever / --first-stage names."""
    from r2med_plugin.data.runs import RUN_FILE_SUFFIXES
    from r2med_plugin.evaluation.first_stages import BM25_RETRIEVERS

    if value in BM25_RETRIEVERS:
        return "bm25"
    path = Path(value)
    is_model_folder = path.is_dir() and any((path / name).is_file() for name in ("config.json", "modules.json"))
    looks_like_run = path.is_file() or path.suffix in RUN_FILE_SUFFIXES  # a mistyped run file is reported as missing
    return "run_file" if looks_like_run or (path.is_dir() and not is_model_folder) else "model"


def _source(args: argparse.Namespace) -> str:
    """What is searched, or reranked with --rerank (its first stage)."""
    if not args.rerank:
        if args.first_stage or args.first_stage_name:
            flag = "--first-stage" if args.first_stage else "--first-stage-name"
            raise UserError(f"{flag} configures what --rerank reranks: add --rerank <cross-encoder>, or drop {flag}")
        if not args.retriever:
            raise UserError("--retriever is required (bm25-lucene, bm25-hakari, bm25-robertson, or a model name or folder), or use --rerank")
        return args.retriever
    if args.first_stage and args.retriever:
        raise UserError("with --rerank, give the first stage once: --first-stage (or --retriever), not both")
    if not (args.first_stage or args.retriever):
        raise UserError("--rerank needs --first-stage: bm25-lucene, bm25-hakari, bm25-robertson, a model, a TREC run or a topk_docs "
                        ".jsonl (file or folder)")
    return args.first_stage or args.retriever


def _endpoint(args: argparse.Namespace, takes: Sequence[str]):
    from r2med_plugin.evaluation.specs import EndpointSpec

    given = {name: getattr(args, name) for name in takes if getattr(args, name, None) is not None}
    return EndpointSpec(**given) if given else None


def _first_stage(args: argparse.Namespace, source: str):
    from r2med_plugin.evaluation.specs import REQUEST_OPTIONS as SENT
    from r2med_plugin.evaluation.specs import Bm25Spec, ModelSpec, RunFileSpec, check_retriever_name
    from r2med_plugin.models.registry import endpoint_options_of, scheme_loader

    kind = first_stage_kind(source)
    if kind == "bm25":
        return Bm25Spec(source)
    if kind == "run_file":
        return RunFileSpec(source)
    check_retriever_name(source)  # a near-miss BM25 name gets a did-you-mean before anything model-related is imported
    takes = endpoint_options_of(source)
    endpoint = _endpoint(args, (*takes, *SENT) if takes else ())
    return ModelSpec(source, revision=args.model_revision, loader=None if scheme_loader(source) else args.loader,
                     endpoint=endpoint, instruction=args.instruction, display_name=args.model_name,
                     device=None if takes else _device(args), batch_size=args.batch_size, dtype=args.dtype)


def _device(args: argparse.Namespace) -> str | None:
    """--device as a request records it: auto (the default) as None, the libraries' own choice."""
    return None if args.device.strip().lower() == "auto" else args.device


def _reranker(args: argparse.Namespace):
    from r2med_plugin.evaluation.specs import LLM_ENDPOINT_OPTIONS, CrossEncoderSpec, EndpointSpec, LlmRerankerSpec
    from r2med_plugin.llm.config import llm_reranker_kind, settings_unused_by
    from r2med_plugin.llm.reranker_kinds import is_llm_reranker_name

    if not args.rerank:
        return None
    if not is_llm_reranker_name(args.rerank):
        return CrossEncoderSpec(args.rerank, revision=args.rerank_revision, loader=args.loader, depth=args.rerank_depth,
                                device=_device(args), batch_size=args.batch_size)
    unused = settings_unused_by(llm_reranker_kind(args.rerank))
    settings = {name: getattr(args, name) for name in llm_settings() if name not in unused}
    endpoint = _endpoint(args, LLM_ENDPOINT_OPTIONS)
    return LlmRerankerSpec(args.rerank, endpoint or EndpointSpec(), depth=args.rerank_depth, settings=settings)


def _refuse_shared_extra_body(args: argparse.Namespace, first_stage, reranker) -> None:
    """One --extra-body cannot say which of two endpoints it is for."""
    from r2med_plugin.evaluation.specs import LlmRerankerSpec, ModelSpec

    if args.extra_body and isinstance(first_stage, ModelSpec) and first_stage.uses("extra_body") and isinstance(reranker, LlmRerankerSpec):
        raise UserError("--extra-body would reach two endpoints here, the embedding endpoint of the first stage and the LLM "
                        "reranker, whose requests take other fields: rerank a run file of the first stage (--first-stage "
                        "run.trec, written by evaluate --output DIR --trec), or use a sweep spec, where the retriever and "
                        "the reranker each take their own extra_body")


def task_expansions(tasks: Sequence[str], expansion: str | None) -> list[tuple[str, ExpansionName | None]]:
    """(task, expansion) pairs: "all" stands for every released expansion of each task (each task checked first)."""
    from r2med_plugin.data.expansions import ExpansionName, expansion_name, list_expansions

    parsed = expansion_name(expansion)  # parsed once; each request carries the value
    if parsed is None or not parsed.is_all:
        return [(task, parsed) for task in tasks]
    from r2med_plugin.catalog import get_task_spec
    from r2med_plugin.evaluation.request import Scoring

    for task in tasks:
        Scoring(expansion=parsed).check_task(get_task_spec(task))
    return [(task, ExpansionName(name)) for task in tasks for name in list_expansions(task)]


def requests_from_args(args: argparse.Namespace) -> list:
    """One EvaluationRequest per task (and expansion), each checked as it is built; options no part uses are refused."""
    from r2med_plugin.evaluation.request import EvaluationRequest, Outputs, RequestError, Scoring, request_options

    repeated = sorted({task for task in args.task if args.task.count(task) > 1})
    if repeated:
        raise UserError(f"--task names {', '.join(repeated)} more than once: each task runs once, give it once")
    try:
        first_stage, reranker = _first_stage(args, _source(args)), _reranker(args)
        _refuse_shared_extra_body(args, first_stage, reranker)
        searched = reranker is None and not args.candidates_only
        outputs = Outputs(args.output, args.trec, args.depth)
        requests = []
        for task, expansion in task_expansions(args.task, args.expansion):
            scoring = Scoring(top_k=args.top_k if searched else 1000, hybrid=args.hybrid, candidates=tuple(args.candidates or ()),
                              candidates_only=args.candidates_only, expansion=expansion)
            requests.append(EvaluationRequest(task, first_stage, reranker, scoring, outputs,
                                              first_stage_name=args.first_stage_name if reranker else None,
                                              data_dir=args.data_dir, accept_drift=args.accept_drift, show_progress=not args.quiet))
    except RequestError as error:
        raise UserError(error.flag_message) from None
    if args.workers is not None and requests[0].computes_bm25_lucene:
        requests = [replace(request, bm25_workers=args.workers) for request in requests]
    refuse_unreached(args, {option: requests[0].why_not(option)
                            for option in (*request_options(), *llm_settings()) if not requests[0].uses(option)})
    return requests


# --- running -------------------------------------------------------------------------------------------------------------


def evaluate_command(args: argparse.Namespace) -> int:
    if args.quiet:
        from r2med_plugin.quiet import silence_libraries

        silence_libraries()
    from r2med_plugin.endpoints.client import EndpointError
    from r2med_plugin.endpoints.extra_body import extra_body_of

    args.extra_body = extra_body_of(args.extra_body)  # a JSON object, checked before anything else
    try:
        requests = requests_from_args(args)
        _check_cost_options(args, requests)
        requests = _load_parts(args, requests)
        if args.estimate_cost:  # what the run would cost; nothing is sent
            from r2med_plugin.evaluation.cost import estimate_request_cost
            from r2med_plugin.llm.cost import render_estimates

            print(render_estimates([estimate_request_cost(request) for request in requests], args.price_in, args.price_out),
                  end="")
            return 0
        from r2med_plugin.cli.evaluate_run import run_requests

        return run_requests(args, requests)
    except EndpointError as error:  # an LLM reranker's endpoint refused or kept failing; answers so far are cached
        if not args.rerank:
            raise
        print(f"r2med: error: {error}", file=sys.stderr)
        return 1


COST_OPTIONS = ("estimate_cost", "price_in", "price_out")


def _check_cost_options(args: argparse.Namespace, requests: list) -> None:
    """--estimate-cost and the prices reach an LLM reranker only; with --estimate-cost nothing is sent nor written."""
    from r2med_plugin.evaluation.specs import LlmRerankerSpec
    from r2med_plugin.llm.cost import check_prices

    if not isinstance(requests[0].reranker, LlmRerankerSpec):
        what = f"--rerank {args.rerank} is a cross-encoder" if args.rerank else "no --rerank is given"
        refuse_unreached(args, {dest: "it estimates or prices an LLM reranker's requests (--rerank llm-<kind>:<model>), "
                                      f"and {what}" for dest in COST_OPTIONS})
    if args.estimate_cost:
        refuse_unreached(args, {dest: "--estimate-cost sends no request and writes no result" for dest in
                                ("concurrency", "max_retries", "timeout", "output", "trec")})
    check_prices(args.price_in, args.price_out)


def _load_parts(args: argparse.Namespace, requests: list) -> list:
    """The requests, each holding the encoder and the reranker they share (evaluation.preparation.prepare), each model's
    device said on stderr unless --quiet."""
    from r2med_plugin.evaluation.preparation import prepare
    from r2med_plugin.models.placement import report_device

    return prepare(requests, sends=not args.estimate_cost,
                   loaded=lambda name, model: report_device(name, model, quiet=args.quiet))
