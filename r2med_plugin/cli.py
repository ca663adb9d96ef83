"""The `r2med` command: argument parsing and printing only."""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Sequence
from pathlib import Path

from r2med_plugin.cli_options import bounded, given_options, refuse_unreached


def _tasks(args: argparse.Namespace) -> int:
    from r2med_plugin.catalog import list_tasks

    specs = list_tasks(args.kind)
    rows = [(spec.name, spec, "docs", spec.expected_counts["documents"]) for spec in specs]
    rows += [(spec.name + "Reranking", spec, "cands", 101) for spec in specs if spec.kind == "nano"]  # the MTEB
    # reranking task over the same data (reranking_hybrid lists: 100 candidates and at most one safeguard row)
    width = max((len(name) for name, *_ in rows), default=0)
    for name, spec, unit, count in rows:
        print(f"{name:<{width}}  {spec.hub_repo:<24} {spec.expected_counts['queries']:>4} queries {count:>6} {unit:<5} "
              f"{spec.revision or 'resolved at load'}")
    return 0


def _check(args: argparse.Namespace) -> int:
    from r2med_plugin.data.loader import load_task

    data = load_task(args.task, data_dir=args.data_dir, accept_drift=args.accept_drift)
    summary = {
        "task": data.name,
        "source": data.source,
        "revision": data.revision,
        "documents": data.corpus.height,  # unique ids; the file's rows are report.corpus_rows
        "corpus_rows": data.report.corpus_rows,
        "queries": data.queries.height,
        "qrels_queries": len(data.qrels),
        "candidate_lists": {key: len(lists) for key, lists in data.candidates.items()},
        "report": dict(data.report),
    }
    print(json.dumps(summary, indent=2, default=str))
    return 0


def _computes_bm25_lucene(args: argparse.Namespace, first_stage: str | None) -> bool:
    """Whether the command analyses a corpus with the Lucene analyzer (what --workers parallelises)."""
    from r2med_plugin.catalog import get_task_spec

    if args.rerank:
        return first_stage == "bm25-lucene"
    if args.retriever == "bm25-lucene":
        return True
    if not args.hybrid or args.candidates_only:
        return False
    from r2med_plugin.evaluation.plan import hybrid_partner

    return any(hybrid_partner(get_task_spec(task), args.retriever, args.expansion) == "bm25-lucene" for task in args.task)


ENDPOINT_OPTIONS = ("base_url", "api_key_env", "dimensions", "concurrency", "extra_body")


def _endpoint_settings(args: argparse.Namespace) -> dict[str, object]:
    return {dest: getattr(args, dest) for dest in ENDPOINT_OPTIONS}


def _evaluate_unreached(args: argparse.Namespace, first_stage: str | None, encoder_name: str | None = None) -> dict[str, str]:
    """Option -> why it reaches no code, for the mode chosen: ``first_stage`` is the BM25 name or run file
    that is searched or reranked, None for an encoder (``encoder_name``: its name)."""
    from r2med_plugin.evaluation.first_stages import BM25_RETRIEVERS
    from r2med_plugin.models.registry import endpoint_options_of, scheme_loader

    encoder = first_stage is None
    bm25 = first_stage in BM25_RETRIEVERS
    unreached = {}
    takes = endpoint_options_of(encoder_name) if encoder and encoder_name is not None else ()
    endpoint_unreached = {}
    if not takes:
        what = "an encoder first stage" if encoder else "the BM25 retriever" if bm25 else "a run-file first stage"
        for dest in ENDPOINT_OPTIONS:
            endpoint_unreached[dest] = f"it configures an embedding endpoint (--retriever openai:<model>), and {what} is not one"
    else:
        from r2med_plugin.llm.rerankers import is_llm_reranker_name

        if not args.rerank or is_llm_reranker_name(args.rerank):  # a local --rerank model runs on --device
            unreached["device"] = f"{encoder_name} runs on the endpoint's server"
        for dest in set(ENDPOINT_OPTIONS) - set(takes):
            endpoint_unreached[dest] = (f"{encoder_name} sends the official code's requests as they are" if dest == "extra_body"
                                        else f"{encoder_name} embeds at its model's official size")
    if encoder and encoder_name is not None and scheme_loader(encoder_name) is not None and not args.rerank:
        unreached["loader"] = f"{encoder_name} names its loader itself ({encoder_name.split(':', 1)[0]}:)"
    if not encoder and not args.rerank:
        unreached["loader"] = f"it chooses how a model loads, and {'the BM25 retriever' if bm25 else 'a run file'} loads none"
    if not encoder:
        what = "the BM25 retriever" if bm25 else "a run-file first stage"
        for dest in ("model_revision", "model_name"):
            unreached[dest] = f"it names an encoder's weights, and {what} loads none"
        if not args.rerank:
            unreached |= {"device": "BM25 loads no model", "batch_size": "BM25 encodes nothing"}
        if args.rerank and not bm25:
            unreached["instruction"] = "a run-file first stage is read, not searched with the queries"
    if not args.rerank:
        for dest in ("rerank_depth", "rerank_revision"):
            unreached[dest] = "it configures --rerank, which is not given"
    else:
        unreached |= {"top_k": "the reranked run is the first stage's top --rerank-depth, and first_stage_* scores a "
                               "first stage computed here at its own result's depth (1000), a run file at the file's depth",
                      "depth": "a reranked run (and its TREC file) holds each query's reranked top --rerank-depth only"}
    llm_unreached = _llm_unreached(args, encoder)
    for dest in {**endpoint_unreached, **llm_unreached}:
        if dest in endpoint_unreached and dest in llm_unreached:  # an option of both endpoints (--base-url, ...): neither is used
            unreached[dest] = ("it configures an endpoint: an embedding endpoint (--retriever openai:<model>) or an LLM reranker "
                               "(--rerank llm-listwise:<model>, ...), and neither is given")
        elif dest not in set(ENDPOINT_OPTIONS) & set(LLM_OPTIONS):  # used by no other endpoint
            unreached[dest] = llm_unreached.get(dest) or endpoint_unreached[dest]
    if not takes and _llm_kind(args) is None:
        for dest in REQUEST_OPTIONS:
            unreached[dest] = ("it configures requests to an endpoint: an embedding endpoint (--retriever openai:<model>, "
                               "official:openai, official:voyage) or an LLM reranker (--rerank llm-listwise:<model>, ...), "
                               "and neither is given")
    if args.candidates_only:
        unreached["top_k"] = "--candidates-only ranks the stored candidate lists, not the corpus"
    if not _computes_bm25_lucene(args, first_stage):
        unreached["workers"] = "it sets the processes of bm25-lucene's corpus analysis, and this command runs no bm25-lucene"
    return unreached


LLM_OPTIONS = ("base_url", "api_key_env", "concurrency", "window", "step", "max_tokens", "extra_body", "set_size",
               "setwise_method", "setwise_k")
REQUEST_OPTIONS = ("max_retries", "timeout")  # of every endpoint: embeddings and LLM rerankers


def _endpoint_takes(name: str | None) -> tuple[str, ...]:
    from r2med_plugin.models.registry import endpoint_options_of

    return endpoint_options_of(name) if name else ()


def _llm_kind(args: argparse.Namespace) -> str | None:
    """"listwise", "pointwise" or "reasoning" when --rerank names an LLM reranker, else None."""
    from r2med_plugin.llm.rerankers import is_llm_reranker_name

    from r2med_plugin.llm.config import llm_reranker_kind

    if not is_llm_reranker_name(args.rerank):
        return None
    return llm_reranker_kind(args.rerank)


def _llm_unreached(args: argparse.Namespace, encoder: bool) -> dict[str, str]:
    """The LLM reranker options that reach no code: all of them without an LLM reranker, and per kind."""
    kind = _llm_kind(args)
    if kind is None:
        what = f"--rerank {args.rerank} is a cross-encoder" if args.rerank else "no --rerank is given"
        return {dest: f"it configures an LLM reranker (--rerank llm-listwise:<model>, llm-pointwise or llm-reasoning), and {what}"
                for dest in LLM_OPTIONS}
    unreached = {"rerank_revision": "an LLM endpoint serves one revision of its model; it is recorded by the prompt and settings"}
    if not encoder:
        unreached |= {"device": "the LLM runs behind --base-url, and this first stage loads no model",
                      "batch_size": "LLM requests go --concurrency at a time, and this first stage encodes nothing"}
    from r2med_plugin.llm.config import settings_unused_by

    return unreached | settings_unused_by(kind)


def _llm_reranker(args: argparse.Namespace):
    """The LLM reranker --rerank names, with its endpoint and settings (checked before any data loads)."""
    from r2med_plugin.evaluation.rerankers import as_reranker
    from r2med_plugin.llm.config import build_reranker_config

    config = build_reranker_config(args.base_url, what=f"--rerank {args.rerank}", api_key_env=args.api_key_env,
                                   concurrency=args.concurrency, window=args.window, step=args.step,
                                   max_tokens=args.max_tokens, extra_body=args.extra_body, set_size=args.set_size,
                                   setwise_method=args.setwise_method, setwise_k=args.setwise_k, **_request_options(args))
    return as_reranker(args.rerank, llm=config)


def _print_usage(result) -> None:
    """The cost line of an LLM reranker: requests, tokens and wall time (answers from the cache cost nothing), and how
    its pairs (or listwise windows) were scored: by log-probabilities, labels or the said word, undecided, unparsed."""
    from r2med_plugin.llm.rerankers import ANSWER_COUNTS

    usage = getattr(getattr(result, "rerank", None), "usage", None)
    if usage:
        counts = ", ".join(f"{usage[key]} {key}" for key in ANSWER_COUNTS if key in usage)
        unit = next((unit for unit in ("comparisons", "windows", "pairs") if unit in usage),
                    "windows" if "unparsed_answers" in usage or "empty_answers" in usage else "pairs")
        asked = usage.get(unit, usage["requests"] + usage["cached_answers"])
        repeated = usage.get("repeated_questions", 0)
        probes = [f"{usage[key]} {what}" for key, what in (("probe_requests", "request"), ("probe_cached_answers", "from the cache"))
                  if usage.get(key)]
        print(f"  rerank usage: {asked} {unit}: {usage['requests']} requests + {usage['cached_answers']} answers from the cache"
              + (f" + {repeated} repeated questions (a passage text asked before)" if repeated else "")
              + (f"; log-probability probe: {', '.join(probes)}" if probes else "")
              + f"; {usage['prompt_tokens']} prompt + {usage['completion_tokens']} completion tokens, {usage['wall_seconds']:.1f} s"
              + (f"; {unit}: {counts}" if counts else ""))


def _check_model_options(args: argparse.Namespace) -> None:
    """The device is checked before any model loads (a typo would otherwise surface as a torch traceback)."""
    from r2med_plugin.models.checks import check_device

    check_device(args.device)


def _check_output(args: argparse.Namespace) -> None:
    """--output must be a writable folder before any work starts, not after a long model run."""
    if args.output:
        from r2med_plugin.reporting.export import check_output_dir

        check_output_dir(args.output, "--output")


def _announce(args: argparse.Namespace, what: str) -> float:
    """With --quiet (no progress bars), one line when a task starts, so a long encode is not silent."""
    import time

    if args.quiet:
        print(f"{what}: started", flush=True)
    return time.perf_counter()


def _announce_end(args: argparse.Namespace, task: str, started: float) -> None:
    import time

    if args.quiet:
        print(f"{task}: finished in {time.perf_counter() - started:.1f} s", flush=True)


def _print_scores(result, keys: Sequence[str]) -> None:
    shown = [key for key in keys if key in result.scores]
    expansion = f" + {result.expansion}" if result.expansion else ""
    from r2med_plugin.evaluation.naming import dataset_count_drift

    unverified = "" if getattr(result, "dataset_revision_verified", True) else ", UNVERIFIED: the local mirror does not prove this commit"
    from r2med_plugin.identifiers import DatasetRevision

    if unverified and DatasetRevision.parse(str(result.dataset_revision)).local:
        unverified = ", UNVERIFIED: no commit recorded, a fingerprint of the mirror's files"
    data = getattr(result, "data", None)
    drift = "; COUNTS DIFFER from the dataset card (--accept-drift)" if data is not None and dataset_count_drift(data) else ""
    print(f"{result.task}  {result.retriever}{expansion}  (dataset revision {result.dataset_revision}{unverified}{drift})")
    if getattr(result, "query_prompt", None):
        print(f"  query prompt: {result.query_prompt!r}")
    if getattr(result, "hybrid_with", None):
        print(f"  hybrid = RRF({result.retriever}{expansion}, {result.hybrid_with})")
    for key in shown:
        print(f"  {key:<48} {result.scores[key]:.5f}")


def _task_expansions(tasks: Sequence[str], expansion: str | None) -> list[tuple[str, str | None]]:
    """(task, expansion) pairs: "all" sweeps every released expansion of each task."""
    if expansion != "all":
        return [(task, expansion) for task in tasks]
    from r2med_plugin.data.expansions import list_expansions

    return [(task, name) for task in tasks for name in list_expansions(task)]


_positive_int = bounded(int, low=1, message="must be a positive integer, got {value}")
_non_negative_int = bounded(int, low=0, message="must be 0 or more, got {value}")
_positive_float = bounded(float, low=0, strict=True, message="must be a positive number of seconds, got {value}")


def _first_stage_name_or_folder(value: str) -> str | None:
    """``value`` when it is a BM25 name, a run file or a folder of run files; None when it names a model."""
    from r2med_plugin.data.runs import RUN_FILE_SUFFIXES
    from r2med_plugin.evaluation.first_stages import BM25_RETRIEVERS

    path = Path(value)
    is_model_folder = path.is_dir() and any((path / name).is_file() for name in ("config.json", "modules.json"))
    looks_like_run = path.is_file() or path.suffix in RUN_FILE_SUFFIXES  # a mistyped run file is reported as missing
    if value in BM25_RETRIEVERS or looks_like_run or (path.is_dir() and not is_model_folder):
        return value
    return None


def _resolved(name: str, args: argparse.Namespace, *, revision: str | None, settings: dict | None = None):
    """What a model name is and how it loads (r2med_plugin.models.registry: mteb's registry, an endpoint,
    sentence-transformers), with --loader and the endpoint options; nothing is loaded yet."""
    from r2med_plugin.models.registry import resolve

    return resolve(name, revision, loader=args.loader, settings=_endpoint_settings(args) if settings is None else settings)


def _refuse_prompt_for_mteb(args: argparse.Namespace, ref) -> None:
    refusal = ref.instruction_refusal if ref is not None else None
    if refusal is not None:
        why, fix = refusal
        refuse_unreached(args, {"instruction": f"{why} ({fix})"})


def _load_encoder(ref, args: argparse.Namespace):
    """The encoder a resolved name stands for (a sentence-transformers model, mteb's implementation, an endpoint;
    --device is for a local model: an endpoint's first stage leaves it to the --rerank model)."""
    from r2med_plugin.models.registry import endpoint_options_of

    endpoint = bool(endpoint_options_of(ref.name))
    return ref.load_encoder(device=None if endpoint else args.device, batch_size=args.batch_size, show_progress=not args.quiet,
                            name=args.model_name, **(_request_options(args) if endpoint else {}))


def _request_options(args: argparse.Namespace) -> dict[str, object]:
    """--max-retries and --timeout, where given (an endpoint's defaults otherwise)."""
    return {dest: getattr(args, dest) for dest in REQUEST_OPTIONS if getattr(args, dest, None) is not None}


def _evaluate_reranked(args: argparse.Namespace) -> int:
    from r2med_plugin.catalog import get_task_spec
    from r2med_plugin.evaluation.plan import build_plan
    from r2med_plugin.evaluation.naming import official_query_prompt

    if args.first_stage and args.retriever:
        raise ValueError("with --rerank, give the first stage once: --first-stage (or --retriever), not both")
    if args.hybrid or args.candidates or args.candidates_only or args.expansion:
        raise ValueError("--rerank takes one first stage: drop --hybrid, --candidates and --expansion")
    from r2med_plugin.evaluation.plan import check_arguments
    from r2med_plugin.metrics import check_rerank_depth

    check_rerank_depth(args.rerank_depth, "--rerank-depth")  # before any model loads or request is sent

    for task in args.task:  # every task is checked before the first one runs or a model loads
        check_arguments(task)
    if args.trec and not args.output:  # a flag that would reach no code
        raise ValueError("--trec writes run files into the --output folder: add --output DIR")
    source = args.first_stage or args.retriever
    if not source:
        raise ValueError("--rerank needs --first-stage: bm25-lucene, bm25-robertson, a model, a TREC run or a topk_docs .jsonl (file or folder)")
    if args.model_name is not None:
        from r2med_plugin.models.checks import check_model_name

        check_model_name(args.model_name)
    first_stage = _first_stage_name_or_folder(source)
    if args.model_name is not None and first_stage is not None:  # a flag that would reach no code
        raise ValueError("--model-name names an encoder first stage; name a BM25 or run-file first stage with --first-stage-name")
    refuse_unreached(args, _evaluate_unreached(args, first_stage, source))
    if args.extra_body and first_stage is None and _llm_kind(args) is not None and "extra_body" in _endpoint_takes(source):
        raise ValueError("--extra-body would reach two endpoints here, the embedding endpoint of the first stage and the LLM "
                         "reranker, whose requests take other fields: rerank a run file of the first stage (--first-stage "
                         "run.trec, written by evaluate --output DIR --trec), or use a sweep spec, where the retriever and "
                         "the reranker each take their own extra_body")
    llm = _llm_reranker(args) if _llm_kind(args) is not None else None  # checked before any model or data loads
    reranker_ref = None if llm is not None else _resolved(args.rerank, args, revision=args.rerank_revision, settings={})
    encoder_ref = _resolved(source, args, revision=args.model_revision) if first_stage is None else None
    _refuse_prompt_for_mteb(args, encoder_ref)
    _check_model_options(args)
    _check_output(args)
    first_stage = first_stage if first_stage is not None else _load_encoder(encoder_ref, args)
    if isinstance(first_stage, str) and Path(first_stage).is_dir():  # every task's run file found and readable first
        from r2med_plugin.data.runs import read_run_file
        from r2med_plugin.evaluation.first_stages import task_run_file

        for task in args.task:
            spec = get_task_spec(task)
            read_run_file(task_run_file(Path(first_stage), spec.name, spec.hub_name))
    reranker = llm if llm is not None else reranker_ref.load_cross_encoder(device=args.device, batch_size=args.batch_size)
    plans = [(task, build_plan(
        task, rerank=reranker, first_stage=first_stage, rerank_depth=args.rerank_depth, first_stage_name=args.first_stage_name,
        rerank_batch_size=args.batch_size, data_dir=args.data_dir, accept_drift=args.accept_drift,
        query_prompt=official_query_prompt(get_task_spec(task)) if args.instruction else None, show_progress=not args.quiet,
        bm25_workers=args.workers,
    )) for task in args.task]
    keys = [f"{prefix}{key}" for key in ("ndcg_at_10", "recall_at_10", "mrr") for prefix in ("", "first_stage_")]
    return _run_plans(args, plans, lambda result: keys)


def _duration(seconds: float) -> str:
    minutes, rest = divmod(round(seconds), 60)
    return f"{minutes // 60} h {minutes % 60:02d} min" if minutes >= 60 else f"{minutes} min {rest:02d} s"


def progress_line(done: int, sizes: Sequence[int], elapsed: float) -> str:
    """"3/8 tasks done in 4 min 10 s; about 6 min 02 s left": the time left estimated from the elapsed time per
    document so far (the tasks' corpus sizes as their cards count them), so a 60,000-document task counts 6 times a
    10,000-document one."""
    finished, total = sum(sizes[:done]), sum(sizes)
    text = f"{done}/{len(sizes)} tasks done in {_duration(elapsed)}"
    if done == len(sizes) or finished == 0:
        return text
    return f"{text}; about {_duration(elapsed * (total - finished) / finished)} left (estimated by corpus size)"


def _run_plans(args: argparse.Namespace, plans: list, keys_of) -> int:
    """Execute each (label, plan), print its scores (``keys_of(result)``) and write its files."""
    import time

    from r2med_plugin.catalog import get_task_spec
    from r2med_plugin.evaluation.runner import execute
    from r2med_plugin.evaluation.writers import write_outputs

    sizes = [get_task_spec(plan.task).expected_counts["documents"] for _, plan in plans]
    command_started = time.perf_counter()
    for index, (label, plan) in enumerate(plans):
        started = _announce(args, label)
        result = execute(plan)
        _announce_end(args, plan.task, started)
        if len(plans) > 1:
            print(progress_line(index + 1, sizes, time.perf_counter() - command_started), flush=True)
        _print_scores(result, keys_of(result))
        _print_usage(result)
        if args.output:
            depth = {} if plan.reranker is not None else {"trec_depth": args.depth}
            for kind, path in write_outputs(result, args.output, trec=args.trec, **depth).items():
                print(f"  wrote {kind}: {path}")
    return 0


def _evaluate(args: argparse.Namespace) -> int:
    from r2med_plugin.evaluation.first_stages import BM25_RETRIEVERS
    from r2med_plugin.evaluation.plan import check_arguments, check_retriever_name

    if args.quiet:
        from r2med_plugin.quiet import silence_libraries

        silence_libraries()
    from r2med_plugin.llm.config import extra_body_of

    args.extra_body = extra_body_of(args.extra_body)  # a JSON object, checked before anything else
    if args.rerank:
        from r2med_plugin.llm.client import EndpointError

        try:
            return _evaluate_reranked(args)
        except EndpointError as error:  # an LLM reranker's endpoint refused or kept failing; answers so far are cached
            print(f"r2med: error: {error}", file=sys.stderr)
            return 1
    if args.first_stage or args.first_stage_name:
        flag = "--first-stage" if args.first_stage else "--first-stage-name"
        raise ValueError(f"{flag} configures what --rerank reranks: add --rerank <cross-encoder>, or drop {flag}")
    if not args.retriever:
        raise ValueError("--retriever is required (bm25-lucene, bm25-robertson, or a model name or folder), or use --rerank")
    # Every argument of every task is checked before the first task runs or a model loads.
    check_retriever_name(args.retriever)
    from r2med_plugin.evaluation.request import RequestError

    for task in args.task:
        try:
            check_arguments(task, candidates=args.candidates or (), candidates_only=args.candidates_only,
                            expansion=args.expansion, hybrid=args.hybrid, top_k=args.top_k)
        except RequestError as error:
            raise ValueError(error.flag_message) from None
    if args.depth < 1:
        raise ValueError(f"--depth must be a positive number of documents per query, got {args.depth}")
    if args.depth != 1000 and not args.trec:  # a flag that would reach no code
        raise ValueError("--depth is the depth of TREC run files: add --trec (and --output DIR), or drop --depth")
    if args.depth != 1000 and args.depth > args.top_k:  # the run holds --top-k documents per query
        raise ValueError(f"--depth {args.depth} is deeper than the run (--top-k {args.top_k} documents per query): "
                         f"raise --top-k to {args.depth}, or lower --depth")
    repeated = sorted({task for task in args.task if args.task.count(task) > 1})
    if repeated:
        raise ValueError(f"--task names {', '.join(repeated)} more than once: each task runs once, give it once")
    if args.trec and not args.output:  # a flag that would reach no code
        raise ValueError("--trec writes run files into the --output folder: add --output DIR")
    if args.instruction and args.retriever in BM25_RETRIEVERS:
        raise ValueError("--instruction is a prompt for dense models; BM25 would ignore it (drop --instruction)")
    if args.model_name is not None:
        from r2med_plugin.models.checks import check_model_name

        if args.retriever in BM25_RETRIEVERS:
            raise ValueError("--model-name names a model's results; BM25 results are named by the retriever (drop --model-name)")
        check_model_name(args.model_name)
    refuse_unreached(args, _evaluate_unreached(args, args.retriever if args.retriever in BM25_RETRIEVERS else None, args.retriever))
    ref = None
    if args.retriever not in BM25_RETRIEVERS:
        ref = _resolved(args.retriever, args, revision=args.model_revision)
        _refuse_prompt_for_mteb(args, ref)
        _check_model_options(args)
    _check_output(args)
    return _evaluate_tasks(args, ref)


def _evaluate_tasks(args: argparse.Namespace, ref) -> int:
    from r2med_plugin.catalog import get_task_spec
    from r2med_plugin.evaluation.plan import build_plan
    from r2med_plugin.evaluation.naming import official_query_prompt

    retriever = args.retriever if ref is None else _load_encoder(ref, args)
    plans = []
    for task, expansion in _task_expansions(args.task, args.expansion):  # every plan is built before the first task runs
        prompt = official_query_prompt(get_task_spec(task)) if args.instruction else None
        plans.append((task + (f" + {expansion}" if expansion else ""), build_plan(
            task, retriever, hybrid=args.hybrid, candidates=args.candidates or (), candidates_only=args.candidates_only,
            data_dir=args.data_dir, accept_drift=args.accept_drift, top_k=args.top_k, query_prompt=prompt,
            expansion=expansion, show_progress=not args.quiet, bm25_workers=args.workers,
        )))

    def keys_of(result) -> list[str]:
        keys = [result.main_score, "ndcg_at_10", "recall_at_100", "hit_at_10", "mrr", "hybrid_ndcg_at_10"] + [
            key for key in result.scores if key.startswith("candidates_") and "ndcg_at_10" in key
        ]
        return list(dict.fromkeys(keys))

    return _run_plans(args, plans, keys_of)


def _leaderboard(args: argparse.Namespace) -> int:
    from r2med_plugin.reporting.leaderboard import BENCHMARK_TITLES, build_leaderboards, render_many
    from r2med_plugin.reporting.plots import PLOT_SUFFIXES

    if not args.plot:
        refuse_unreached(args, {"plot_rows": "it chooses the rows of the --plot chart, which is not asked for"})
    elif Path(args.plot).suffix.lower() not in PLOT_SUFFIXES:
        raise ValueError(f"--plot {args.plot}: the chart is written as {' or '.join(PLOT_SUFFIXES)}; name the file e.g. chart.png")
    if args.html:  # refused before any result is read
        from r2med_plugin.reporting.leaderboard_page import check_page_folder

        check_page_folder(args.html)
    tables = build_leaderboards(args.results, benchmark=args.benchmark, compare_published=args.compare_published)
    if args.significance:  # intervals on the averages, rows tied with the best (per-query files)
        from r2med_plugin.reporting.leaderboard_significance import significance_for_tables

        tables = significance_for_tables(tables)
    if args.audit:  # mark the tasks where an audited model's training data overlapped the evaluation data
        from r2med_plugin.reporting.leaderboard_audit import attach_audits

        tables = attach_audits(tables, args.audit)
    text = render_many(tables, args.format)
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(text, encoding="utf-8")
        print(f"wrote {args.out}")
    else:
        print(text, end="")
    if args.html:  # the same tables as the text above, as a page
        from r2med_plugin.reporting.leaderboard_page import write_leaderboard_page

        print(f"wrote {write_leaderboard_page(tables, args.html)}")
    if args.plot:
        from r2med_plugin.reporting.plots import plot_leaderboard

        for benchmark, rows in tables.items():
            path = Path(args.plot)
            if len(tables) > 1 and benchmark == "nano":
                path = path.with_name(f"{path.stem}-nano{path.suffix}")
            written, dropped = plot_leaderboard(rows, path, benchmark=benchmark, selection=args.plot_rows)
            print(f"wrote {written}" + (f" ({BENCHMARK_TITLES[benchmark]})" if len(tables) > 1 else ""))
            if dropped:
                print(f"  not plotted ({len(dropped)} rows; choose with --plot-rows, or --plot-rows all): {'; '.join(dropped)}")
    return 0


def _export(args: argparse.Namespace) -> int:
    from r2med_plugin.reporting.submission import export_submission, export_trec_runs

    if args.submission:
        refuse_unreached(args, {"depth": "it is the depth of --trec run files; a submission holds scores"})
        if not args.model:
            raise ValueError("--submission needs --model NAME (the model name in the result folders)")
        paths = export_submission(args.submission, args.model, args.out, model_size=args.model_size,
                                  uses_llm=args.uses_llm, description=args.description, allow_incomplete=args.allow_incomplete,
                                  force=args.force)
    else:
        why = "it describes a --submission; --trec exports runs as they are"
        refuse_unreached(args, {dest: why for dest in ("model", "model_size", "uses_llm", "description", "allow_incomplete", "force")})
        paths = export_trec_runs(args.trec, args.out, depth=args.depth)
    for path in paths:
        print(f"wrote {path}")
    return 0


def _cache_packaged_model(args: argparse.Namespace) -> int:
    from r2med_plugin.models.identity import cache_packaged_model, default_hf_home

    name, revision, snapshot = cache_packaged_model(args.alias, args.hf_home)
    home = Path(args.hf_home) if args.hf_home is not None else default_hf_home()
    print(f"{name} at revision {revision}: {snapshot} (links to the packaged files)")
    print(f"  HF_HOME={home} HF_HUB_OFFLINE=1 mteb run -t NanoR2MEDBioinformatics -m {name}")
    return 0


def _demo(args: argparse.Namespace) -> int:
    from r2med_plugin.integrations.demo import run_demo

    if args.quiet:
        from r2med_plugin.quiet import silence_libraries

        silence_libraries()
    run_demo(args.out, show_progress=not args.quiet)
    return 0


def _generate(args: argparse.Namespace) -> int:
    from r2med_plugin.catalog import task_names
    from r2med_plugin.generation import GenerationError, generate_expansions

    tasks = task_names("r2med") if args.task == ["all"] else args.task
    if args.method != "lamer":
        refuse_unreached(args, {"first_stage": f"only lamer prompts hold first-stage passages; {args.method} prompts hold the query alone"})
    from r2med_plugin.llm.config import extra_body_of

    extra_body = extra_body_of(args.extra_body, example='{"chat_template_kwargs": {"enable_thinking": true}}')
    for task in tasks:
        try:
            report = generate_expansions(
                task, args.method, args.llm, args.base_url, out=args.out, name=args.name, api_key_env=args.api_key_env,
                concurrency=args.concurrency, preset=args.preset, temperature=args.temperature, top_p=args.top_p,
                max_tokens=args.max_tokens, seed=args.seed, first_stage=args.first_stage or "bm25-lucene", extra_body=extra_body,
                max_retries=args.max_retries, timeout=args.timeout, max_failures=args.max_failures, overwrite=args.overwrite,
                data_dir=args.data_dir, accept_drift=args.accept_drift, show_progress=not args.quiet,
            )
        except (GenerationError, ImportError) as error:
            print(f"r2med: error: {error}", file=sys.stderr)
            return 1
        except KeyboardInterrupt:
            print(f"r2med: interrupted; the finished queries of {task} are saved: run the same command again to continue", file=sys.stderr)
            return 130
        print(f"{report.task}: {report.already_done + report.generated}/{report.total} queries in {report.folder} "
              f"({report.generated} generated now, {report.prompt_tokens} prompt + {report.completion_tokens} completion tokens)")
    folder = Path(args.out) / args.method / (args.name or _default_name(args.llm))
    print(f"evaluate with: r2med evaluate --task {' '.join(tasks)} --retriever bm25-lucene --expansion local:{folder}")
    return 0


def _default_name(llm: str) -> str:
    from r2med_plugin.generation.store import slug_name

    return slug_name(llm)


def _reproduce(args: argparse.Namespace) -> int:
    from r2med_plugin.evaluation.reproduce import render_report, reproduce

    report = reproduce(
        expected=args.expected, data_dir=args.data_dir, accept_drift=args.accept_drift, tolerance=args.tolerance,
        nano=not args.skip_nano, output=args.output, show_progress=not args.quiet,
    )
    print(render_report(report), end="")
    return 0 if report.passed else 1


def _sweep(args: argparse.Namespace) -> int:
    from r2med_plugin.sweep import load_spec, plan, run_sweep, status_table
    from r2med_plugin.sweep.driver import SUMMARY_FILE

    if args.dry_run:
        refuse_unreached(args, {dest: "--dry-run runs nothing" for dest in ("engine", "address", "workers", "retries")})
    if args.engine != "ray":
        refuse_unreached(args, {"address": "it names a Ray cluster, used with --engine ray only"})
    if args.quiet:  # before any library is imported: jobs in worker processes inherit the switches too
        from r2med_plugin.quiet import silence_libraries

        silence_libraries()
    spec = load_spec(args.spec)
    devices = [device.strip() for device in args.devices.split(",")] if args.devices else None
    if args.dry_run:
        statuses = plan(spec, devices=devices)
        for status in statuses:
            print(f"{'skip' if status.status == 'skipped' else 'run '}  {status.job.job_id}  {status.job.label}")
        print(f"{len(statuses)} jobs: {sum(s.status == 'skipped' for s in statuses)} already done")
        return 0
    summary = run_sweep(spec, engine=args.engine, workers=args.workers, address=args.address, devices=devices,
                        retries=args.retries, show_progress=not args.quiet, quiet=args.quiet)
    print(status_table(summary))
    for benchmark, table in summary.leaderboards.items():
        print(f"\n{benchmark} leaderboard (this sweep's results)\n\n{table}", end="")
    counts = ", ".join(f"{summary.count(status)} {status}" for status in ("done", "skipped", "failed"))
    print(f"\n{len(summary.jobs)} jobs: {counts}; {summary.wall_s:.1f} s\nwrote {spec.output / SUMMARY_FILE}")
    return 0 if summary.ok else 1


def build_parser() -> argparse.ArgumentParser:
    from r2med_plugin.identifiers import CANDIDATE_SUBSETS, GENERATION_METHODS
    from r2med_plugin.models.registry import loader_choices
    from r2med_plugin.version import __version__

    parser = argparse.ArgumentParser(prog="r2med", description="R2MED and NanoR2MED retrieval evaluation.")
    parser.add_argument("--version", action="version", version=f"r2med-plugin {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)
    tasks = commands.add_parser("tasks", help="list the tasks with their hub source and revision")
    tasks.add_argument("--kind", choices=["r2med", "nano"], default=None)
    tasks.set_defaults(func=_tasks)
    check = commands.add_parser("check", help="load one task, validate it and print what was found")
    check.add_argument("task")
    check.add_argument("--data-dir", default=None, help="local mirror (default: $R2MED_DATA_DIR, else the hub)")
    check.add_argument("--accept-drift", action="store_true", default=None, help="accept counts/revision that differ from task_metadata")
    check.set_defaults(func=_check)
    evaluate = commands.add_parser("evaluate", help="evaluate BM25 or a sentence-transformers model on tasks; rerank with a cross-encoder or an LLM")
    evaluate.add_argument("--task", nargs="+", required=True, help="task name(s), e.g. NanoR2MEDBiology")
    evaluate.add_argument("--retriever", default=None,
                          help="bm25-lucene, bm25-robertson, a model name (mteb's registry, else sentence-transformers) or folder, "
                               "or openai:<model> with --base-url (required without --rerank)")
    evaluate.add_argument("--hybrid", action="store_true", help="also report hybrid_* (RRF with the task's BM25)")
    evaluate.add_argument("--candidates", nargs="+", choices=list(CANDIDATE_SUBSETS), help="rank the stored candidate lists (NanoR2MED)")
    evaluate.add_argument("--candidates-only", action="store_true", help="skip the full corpus; encode only candidate documents")
    evaluate.add_argument("--instruction", action="store_true", help="prepend the official 'Instruct: ...\\nQuery: ' prompt to queries")
    evaluate.add_argument("--expansion", default=None,
                          help="a released LLM expansion, e.g. hyde/o3-mini, or 'all' for every released one (R2MED tasks), "
                               "or one from r2med generate: local:<folder>/<method>/<llm>")
    evaluate.add_argument("--output", default=None, help="folder for MTEB-format results and the official R2MED JSON")
    evaluate.add_argument("--trec", action="store_true", help="also write TREC run files")
    evaluate.add_argument("--depth", type=int, default=1000, help="documents per query in TREC run files (default 1000)")
    evaluate.add_argument("--top-k", type=int, default=1000,
                          help="documents retrieved per query (default 1000, at least 10); deeper metrics are left out below 1000")
    evaluate.add_argument("--model-revision", default=None,
                          help="hub revision of the model (default: what the cache holds); for a folder, a label filed with its fingerprint")
    evaluate.add_argument("--model-name", default=None,
                          help="the name results are filed under (default: the hub name, or the folder's path), e.g. my-org/minilm-ft")
    evaluate.add_argument("--device", default="cpu", help="device for the model: cpu (default), cuda, cuda:1, mps")
    evaluate.add_argument("--batch-size", type=_positive_int, default=32, help="encoder (and cross-encoder) batch size (default 32)")
    evaluate.add_argument("--data-dir", default=None, help="local mirror (default: $R2MED_DATA_DIR, else the hub)")
    evaluate.add_argument("--accept-drift", action="store_true", default=None,
                          help="evaluate data whose counts/revision differ from task_metadata (marked +count-drift; never submittable)")
    evaluate.add_argument("--quiet", action="store_true", help="no progress bars and no library warnings (errors still print)")
    evaluate.add_argument("--rerank", default=None, metavar="RERANKER",
                          help="rerank the top --rerank-depth of --first-stage with this cross-encoder (a name of mteb's registry, "
                               "else a sentence-transformers CrossEncoder name or folder), or an LLM behind --base-url: "
                               "llm-listwise:<model>, llm-pointwise:<model>, llm-reasoning:<model>, llm-setwise:<model>")
    evaluate.add_argument("--first-stage", default=None,
                          help="what --rerank reranks: bm25-lucene, bm25-robertson, a model, a TREC run or official topk_docs .jsonl, or a folder of <Task> run files")
    evaluate.add_argument("--rerank-depth", type=_positive_int, default=10, help="documents reranked per query, at least 10 (official: 10 or 100; default 10)")
    evaluate.add_argument("--rerank-revision", default=None, help="the cross-encoder's hub revision (default: what the cache holds)")
    evaluate.add_argument("--first-stage-name", default=None, help="the first stage's name in result names (default: the retriever, or the run folder)")
    evaluate.add_argument("--workers", type=_positive_int, default=None, help="processes for bm25-lucene corpus analysis (default: all cores)")
    evaluate.add_argument("--loader", default=None, choices=loader_choices(),
                          help="how --retriever / --rerank models load (default auto: through mteb when mteb's registry has the "
                               "name, with its prompts and revision; else sentence-transformers)")
    evaluate.add_argument("--base-url", default=None,
                          help="the OpenAI-compatible endpoint of --retriever openai:<model> (embeddings) or of an LLM reranker "
                               "(--rerank llm-...), e.g. http://localhost:8000/v1")
    evaluate.add_argument("--api-key-env", default=None,
                          help="openai:<model> / LLM rerankers: environment variable holding the API key (default OPENAI_API_KEY)")
    evaluate.add_argument("--dimensions", type=int, default=None,
                          help="openai:<model>: ask the endpoint for embeddings of this many dimensions (checked in every answer)")
    evaluate.add_argument("--concurrency", type=_positive_int, default=None,
                          help="openai:<model> / LLM rerankers: requests in flight at once (default 8); --batch-size texts per "
                               "embeddings request")
    evaluate.add_argument("--max-retries", type=_non_negative_int, default=None,
                          help="openai:<model>, official:openai/voyage and LLM rerankers: retries per request on 429, 5xx, "
                               "timeouts and dropped connections (default 6)")
    evaluate.add_argument("--timeout", type=_positive_float, default=None,
                          help="openai:<model>, official:openai/voyage and LLM rerankers: seconds per request before it is "
                               "retried (default: 120 for embeddings, 600 for LLM rerankers)")
    evaluate.add_argument("--extra-body", default=None, metavar="JSON",
                          help="openai:<model> / LLM rerankers: a JSON object merged into every request body (server "
                               "options; part of the results' identity), e.g. vLLM embeddings: '{\"truncate_prompt_tokens\": 256}', "
                               "Qwen3: '{\"chat_template_kwargs\": {\"enable_thinking\": false}}'")
    evaluate.add_argument("--window", type=_positive_int, default=20, help="llm-listwise: passages per window (RankGPT: 20)")
    evaluate.add_argument("--step", type=_positive_int, default=10, help="llm-listwise: how far the window moves up (RankGPT: 10)")
    evaluate.add_argument("--max-tokens", type=_positive_int, default=None,
                          help="llm-reasoning: the reasoning budget (default 8192); llm-listwise, llm-setwise: the answer's budget "
                               "(default: the server's)")
    evaluate.add_argument("--set-size", type=_positive_int, default=None,
                          help="llm-setwise: passages per question, from 2 to 23 (default 3, the paper's c; llm-rankers' "
                               "num_child is one less)")
    evaluate.add_argument("--setwise-method", choices=["heapsort", "bubblesort"], default=None,
                          help="llm-setwise: how the picks sort the list (default heapsort)")
    evaluate.add_argument("--setwise-k", type=_positive_int, default=None,
                          help="llm-setwise: documents sorted to the top, in order (default 10; at most --rerank-depth); "
                               "the rest keep the first stage's order")
    evaluate.set_defaults(func=_evaluate)
    generate = commands.add_parser("generate", help="new query expansions (hyde, query2doc, lamer) from any OpenAI-compatible LLM endpoint")
    generate.add_argument("--task", nargs="+", required=True, help="R2MED task name(s), or 'all'")
    generate.add_argument("--method", required=True, choices=list(GENERATION_METHODS))
    generate.add_argument("--llm", required=True, help="the model id the endpoint serves, e.g. Qwen/Qwen2.5-7B-Instruct")
    generate.add_argument("--name", default=None, help="the LLM's name in folders and results (default: --llm made folder-safe)")
    generate.add_argument("--base-url", required=True, help="OpenAI-compatible endpoint, e.g. http://localhost:8000/v1")
    generate.add_argument("--api-key-env", default=None, help="environment variable holding the API key (default OPENAI_API_KEY)")
    generate.add_argument("--concurrency", type=_positive_int, default=8, help="requests in flight at once (default 8)")
    generate.add_argument("--preset", choices=["api", "vllm"], default="api",
                          help="official sampling defaults: api (temperature 0.8, top_p 0.8) or vllm (temperature 0.7, seed 42, max_tokens 10240)")
    generate.add_argument("--temperature", type=float, default=None)
    generate.add_argument("--top-p", type=float, default=None)
    generate.add_argument("--max-tokens", type=int, default=None)
    generate.add_argument("--seed", type=int, default=None)
    generate.add_argument("--first-stage", default=None, help="lamer only: bm25-lucene (official, the default) or a TREC / topk_docs JSONL run file")
    generate.add_argument("--extra-body", default=None, help="JSON merged into each request body (server-specific options)")
    generate.add_argument("--max-retries", type=_non_negative_int, default=6, help="retries per request on 429, 5xx, timeouts and dropped connections")
    generate.add_argument("--timeout", type=_positive_float, default=600.0, help="seconds per request before it is retried")
    generate.add_argument("--max-failures", type=int, default=10, help="stop the run after this many queries failed every retry")
    generate.add_argument("--out", default="r2med-expansions", help="local expansions folder (default ./r2med-expansions)")
    generate.add_argument("--overwrite", action="store_true", help="start the (task, method, name) folders again instead of resuming")
    generate.add_argument("--data-dir", default=None)
    generate.add_argument("--accept-drift", action="store_true", default=None)
    generate.add_argument("--quiet", action="store_true", help="no progress bars")
    generate.set_defaults(func=_generate)
    board = commands.add_parser("leaderboard", help="the R2MED leaderboard table from MTEB result folders")
    board.add_argument("results", nargs="+", help="MTEB result folders (ResultCache layout)")
    board.add_argument("--benchmark", choices=["r2med", "nano"], default=None,
                       help="one benchmark's table (default: every benchmark the folders hold)")
    board.add_argument("--format", choices=["md", "csv", "html"], default="md")
    board.add_argument("--out", default=None, help="write the table here instead of printing it")
    board.add_argument("--plot", default=None, help="also draw a chart (.png or .svg)")
    board.add_argument("--html", default=None, metavar="DIR",
                       help="also write the table as a sortable, filterable page, DIR/index.html (opens from file://)")
    board.add_argument("--plot-rows", nargs="+", default=None, metavar="ROW",
                       help="rows to plot: 'all', row numbers as printed (1 = first row) or labels ('o3-mini | bm25-lucene (hyde)')")
    board.add_argument("--compare-published", action="store_true", help="place the rows among the published leaderboard")
    board.add_argument("--significance", action="store_true",
                       help="95%% intervals on your rows' averages and which rows tie with the best (needs per-query files)")
    board.add_argument("--audit", nargs="+", default=None, metavar="[MODEL=]DIR",
                       help="mark the tasks where a model's training data overlapped (folders of `r2med audit --out DIR`; "
                            "MODEL= when the audit was run without --model)")
    board.set_defaults(func=_leaderboard)
    export = commands.add_parser("export", help="a leaderboard submission folder, or TREC runs from MTEB predictions")
    source = export.add_mutually_exclusive_group(required=True)
    source.add_argument("--submission", nargs="+", metavar="RESULTS_DIR", help="MTEB result folders")
    source.add_argument("--trec", nargs="+", metavar="PREDICTIONS_DIR", help="folders with MTEB <Task>_predictions.json files")
    export.add_argument("--model", default=None, help="the model name as it appears in the results")
    export.add_argument("--out", required=True)
    export.add_argument("--model-size", default=None, help="e.g. 22.7M or 7B")
    export.add_argument("--uses-llm", action=argparse.BooleanOptionalAction, default=None)
    export.add_argument("--description", default="")
    export.add_argument("--depth", type=int, default=1000, help="documents per query in TREC run files (default 1000)")
    export.add_argument("--allow-incomplete", action="store_true",
                        help="write a submission although tasks are missing or ran on unverified mirror files (marked in its README)")
    export.add_argument("--force", action="store_true",
                        help="replace a submission folder of another model (or with other files in it) whole; never mixed")
    export.set_defaults(func=_export)
    repro = commands.add_parser(
        "reproduce", help="official BM25 on the 8 R2MED tasks vs the published row, NanoR2MED candidate profiles vs task_metadata",
        description="Exit status 0 when every check passes, 1 on any mismatch, 2 on an error (e.g. data not reachable).",
    )
    repro.add_argument("--expected", default=None, metavar="FILE",
                       help='JSON {"bm25_ndcg_at_10": {task: nDCG@10 x 100}, "candidate_profiles": {NanoTask: {list: {metric: value}}}}; '
                            "default: the published BM25 row and task_metadata")
    repro.add_argument("--tolerance", type=float, default=0.1, help="largest |ours - published| in nDCG@10 points (default 0.1)")
    repro.add_argument("--skip-nano", action="store_true", help="skip the NanoR2MED candidate-profile check")
    repro.add_argument("--output", default=None, help="also write the result files (MTEB and official JSON) here")
    repro.add_argument("--data-dir", default=None)
    repro.add_argument("--accept-drift", action="store_true", default=None)
    repro.add_argument("--quiet", action="store_true", help="no progress bars")
    repro.set_defaults(func=_reproduce)
    demo = commands.add_parser("demo", help="BM25, MiniLM, hybrid and candidate subsets on the shipped synthetic sample, offline")
    demo.add_argument("--out", default="r2med-demo", help="folder for the results, table and chart (default: ./r2med-demo)")
    demo.add_argument("--quiet", action="store_true")
    demo.set_defaults(func=_demo)
    packaged = commands.add_parser("cache-packaged-model", help="lay the packaged MiniLM out as a Hugging Face cache, so "
                                   "`mteb run -m sentence-transformers/all-MiniLM-L6-v2` works offline")
    packaged.add_argument("alias", nargs="?", default="minilm-packaged", help="the packaged model (default: minilm-packaged)")
    packaged.add_argument("--hf-home", default=None, help="the Hugging Face home to write into (default: $HF_HOME or ~/.cache/huggingface)")
    packaged.set_defaults(func=_cache_packaged_model)
    sweep = commands.add_parser("sweep", help="run a YAML spec of tasks x retrievers x expansions, locally or on Ray, resumably")
    sweep.add_argument("spec", help="the sweep spec (YAML); see README, 'Sweeps and clusters'")
    sweep.add_argument("--engine", choices=["local", "ray"], default="local", help="local: this machine (default); ray: Ray tasks (needs r2med-plugin[ray])")
    sweep.add_argument("--address", default=None, help="Ray cluster: auto, or ray://HEAD:10001 (default: start a local Ray)")
    sweep.add_argument("--workers", type=_positive_int, default=1, help="local: jobs at once (processes); ray: CPUs of a local Ray")
    sweep.add_argument("--devices", default=None, help="encode each model on these devices, e.g. cuda:0,cuda:1 or cpu,cpu")
    sweep.add_argument("--retries", type=int, default=None, help="extra attempts for a failed job (default: the spec's, else 1)")
    sweep.add_argument("--dry-run", action="store_true", help="list the jobs and which are already done; run nothing")
    sweep.add_argument("--quiet", action="store_true", help="no progress bars and no library warnings, in every job (errors still print)")
    sweep.set_defaults(func=_sweep)
    from r2med_plugin.cli_compare import add_commands  # r2med compare, r2med inspect

    add_commands(commands)
    from r2med_plugin.cli_audit import add_commands as add_audit  # r2med audit

    add_audit(commands)
    return parser


class _OncePerMessage(logging.Filter):
    """Within one command, a warning whose text was already shown is not shown again (the unverified-mirror
    warning is the same for every task of a mirror, and would repeat per task and per expansion)."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: set[str] = set()

    def filter(self, record: logging.LogRecord) -> bool:
        text = record.getMessage()
        if text in self.seen:
            return False
        self.seen.add(text)
        return True


def _package_messages() -> logging.Handler:
    """The package's warnings on stderr, each text once per command."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setLevel(logging.WARNING)
    handler.setFormatter(logging.Formatter("%(message)s"))
    handler.addFilter(_OncePerMessage())
    return handler


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    args = parser.parse_args(argv)
    args.given = given_options(parser, argv)
    package_logger = logging.getLogger("r2med_plugin")
    handler = _package_messages()
    package_logger.addHandler(handler)
    try:
        return args.func(args)
    except KeyboardInterrupt:
        # Result files are written atomically: an interrupted run leaves no partial file behind.
        print("r2med: interrupted (Ctrl-C); files already written are complete, none is partial", file=sys.stderr)
        return 130
    except (KeyError, ValueError, FileNotFoundError, ConnectionError) as error:
        message = error.args[0] if isinstance(error, KeyError) and error.args else error
        print(f"r2med: error: {message}", file=sys.stderr)
        return 2
    finally:
        package_logger.removeHandler(handler)
        from r2med_plugin.quiet import restore_libraries

        restore_libraries()


if __name__ == "__main__":
    sys.exit(main())
