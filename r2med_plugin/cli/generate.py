"""`r2med generate`: new query expansions from any OpenAI-compatible LLM endpoint, or their cost estimated first."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from r2med_plugin.cli.options import non_negative_int, positive_int, positive_seconds, price, refuse_unreached

if TYPE_CHECKING:
    from r2med_plugin.generation.config import GenerationRequest
    from r2med_plugin.llm.config import Endpoint


def add_generate_command(commands: Any) -> None:
    from r2med_plugin.identifiers import GENERATION_METHODS

    generate = commands.add_parser("generate", help="new query expansions (hyde, query2doc, lamer) from any OpenAI-compatible LLM endpoint")
    generate.add_argument("--task", nargs="+", required=True, help="R2MED task name(s), or 'all'")
    generate.add_argument("--method", required=True, choices=list(GENERATION_METHODS))
    generate.add_argument("--llm", required=True, help="the model id the endpoint serves, e.g. Qwen/Qwen2.5-7B-Instruct")
    generate.add_argument("--name", default=None, help="the LLM's name in folders and results (default: --llm made folder-safe)")
    generate.add_argument("--base-url", required=True, help="OpenAI-compatible endpoint, e.g. http://localhost:8000/v1")
    generate.add_argument("--api-key-env", default=None, help="environment variable holding the API key (default OPENAI_API_KEY)")
    generate.add_argument("--concurrency", type=positive_int, default=8, help="requests in flight at once (default 8)")
    generate.add_argument("--preset", choices=["api", "vllm"], default="api",
                          help="official sampling defaults: api (temperature 0.8, top_p 0.8) or vllm (temperature 0.7, seed 42, max_tokens 10240)")
    generate.add_argument("--temperature", type=float, default=None)
    generate.add_argument("--top-p", type=float, default=None)
    generate.add_argument("--max-tokens", type=int, default=None)
    generate.add_argument("--seed", type=int, default=None)
    generate.add_argument("--first-stage", default=None, help="lamer only: bm25-lucene (official, the default) or a TREC / topk_docs JSONL run file")
    generate.add_argument("--extra-body", default=None, help="JSON merged into each request body (server-specific options)")
    generate.add_argument("--max-retries", type=non_negative_int, default=6, help="retries per request on 429, 5xx, timeouts and dropped connections")
    generate.add_argument("--timeout", type=positive_seconds, default=600.0, help="seconds per request before it is retried")
    generate.add_argument("--max-failures", type=int, default=10, help="stop the run after this many queries failed every retry")
    generate.add_argument("--out", default="r2med-expansions", help="local expansions folder (default ./r2med-expansions)")
    generate.add_argument("--overwrite", action="store_true", help="start the (task, method, name) folders again instead of resuming")
    generate.add_argument("--data-dir", default=None)
    generate.add_argument("--accept-drift", action="store_true", default=None)
    generate.add_argument("--quiet", action="store_true", help="no progress bars")
    generate.add_argument("--estimate-cost", action="store_true",
                          help="print what the run would cost (requests, prompt tokens, completion budget, dollars with "
                               "--price-in/--price-out) and send no request")
    generate.add_argument("--price-in", type=price, default=None, metavar="USD", help="US dollars per million prompt tokens")
    generate.add_argument("--price-out", type=price, default=None, metavar="USD", help="US dollars per million completion tokens")
    generate.set_defaults(func=generate_command)


def generate_command(args: argparse.Namespace) -> int:
    from r2med_plugin.catalog import task_names
    from r2med_plugin.generation import GenerationError, generate_expansions
    from r2med_plugin.llm.config import Endpoint

    tasks = task_names("r2med") if args.task == ["all"] else args.task
    if args.method != "lamer":
        refuse_unreached(args, {"first_stage": f"only lamer prompts hold first-stage passages; {args.method} prompts hold the query alone"})
    from r2med_plugin.endpoints.extra_body import extra_body_of

    extra_body = extra_body_of(args.extra_body, example='{"chat_template_kwargs": {"enable_thinking": true}}')
    from r2med_plugin.llm.cost import check_prices

    check_prices(args.price_in, args.price_out)
    if args.estimate_cost:  # what the run would cost; nothing is sent
        return _estimate_generation(args, tasks, extra_body)
    for task in tasks:
        try:
            report = generate_expansions(_generation_request(args, task, extra_body, Endpoint(
                args.base_url, api_key_env=args.api_key_env, concurrency=args.concurrency, max_retries=args.max_retries,
                timeout=args.timeout)))
        except (GenerationError, ImportError) as error:
            print(f"r2med: error: {error}", file=sys.stderr)
            return 1
        except KeyboardInterrupt:
            print(f"r2med: interrupted; the finished queries of {task} are saved: run the same command again to continue", file=sys.stderr)
            return 130
        print(f"{report.task}: {report.already_done + report.generated}/{report.total} queries in {report.folder} "
              f"({report.generated} generated now, {report.prompt_tokens} prompt + {report.completion_tokens} completion tokens)")
        _print_generation_cost(args, report)
    from r2med_plugin.generation.store import slug_name

    folder = Path(args.out) / args.method / (args.name or slug_name(args.llm))
    print(f"evaluate with: r2med evaluate --task {' '.join(tasks)} --retriever bm25-lucene --expansion local:{folder}")
    return 0


def _estimate_generation(args: argparse.Namespace, tasks: Sequence[str], extra_body: dict | None) -> int:
    """`r2med generate --estimate-cost`: each task's requests, tokens and dollars; nothing sent."""
    from r2med_plugin.generation import estimate_generation_cost
    from r2med_plugin.llm.cost import render_estimates

    refuse_unreached(args, {dest: "--estimate-cost sends no request" for dest in
                            ("api_key_env", "concurrency", "max_retries", "timeout", "max_failures")})
    estimates = [estimate_generation_cost(_generation_request(args, task, extra_body)) for task in tasks]
    print(render_estimates(estimates, args.price_in, args.price_out), end="")
    return 0


def _generation_request(args: argparse.Namespace, task: str, extra_body: dict | None, endpoint: Endpoint | None = None) -> GenerationRequest:
    """The GenerationRequest of one task of `r2med generate` (an estimate's has no endpoint: it sends nothing)."""
    from r2med_plugin.generation.config import GenerationConfig, GenerationRequest

    config = GenerationConfig(args.method, args.llm, name=args.name, preset=args.preset, temperature=args.temperature,
                              top_p=args.top_p, max_tokens=args.max_tokens, seed=args.seed,
                              first_stage=args.first_stage or "bm25-lucene", extra_body=extra_body)
    return GenerationRequest(task, config, endpoint, out=args.out, max_failures=args.max_failures, overwrite=args.overwrite,
                             data_dir=args.data_dir, accept_drift=args.accept_drift, show_progress=not args.quiet)


def _print_generation_cost(args: argparse.Namespace, report) -> None:
    """The estimate made before a generation run, beside what it used."""
    if report.estimate is None:
        return
    from r2med_plugin.llm.cost import render_side_by_side

    used = {"requests": report.generated, "cached_answers": report.already_done, "prompt_tokens": report.prompt_tokens,
            "completion_tokens": report.completion_tokens}
    print(render_side_by_side(report.estimate, used, args.price_in, args.price_out))
