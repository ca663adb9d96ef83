"""Each rule of an evaluation request lives once, in the type that owns it; the CLI, sweep specs and
evaluate_task all come through it (one test per rule, at its type, then that every front end says it)."""

from __future__ import annotations

from pathlib import Path

import pytest

from r2med_plugin.catalog import get_task_spec
from r2med_plugin.cli import main
from r2med_plugin.evaluation.request import RequestError, Scoring
from r2med_plugin.llm.config import build_reranker_config, settings_unused_by
from r2med_plugin.rules import SettingError
from r2med_plugin.sweep.spec import SpecError, parse_spec
from tests.support.requests import requested

NANO, R2MED = "NanoR2MEDBiology", "R2MEDBiology"


@pytest.mark.parametrize("settings, api, flags, keyed", [
    (dict(hybrid=True, candidates=("bm25",), candidates_only=True),
     "hybrid (--hybrid) fuses full-corpus runs, which candidates_only (--candidates-only) skips; drop one of the two",
     "--hybrid fuses full-corpus runs, which --candidates-only skips; drop one of the two",
     "`hybrid` fuses full-corpus runs, which candidates_only skips; drop one of the two"),
    (dict(candidates=("bm26",)),
     "candidates (--candidates) holds 'bm26', an unknown candidate subset; choose from ['bm25', 'dense', 'hybrid']",
     "--candidates holds 'bm26', an unknown candidate subset; choose from ['bm25', 'dense', 'hybrid']",
     "`candidates` holds 'bm26', an unknown candidate subset; choose from ['bm25', 'dense', 'hybrid']"),
    (dict(candidates_only=True),
     "candidates_only (--candidates-only) needs at least one candidate subset (the lists to rank); add candidates "
     "(--candidates) bm25, dense or hybrid, or drop candidates_only (--candidates-only)",
     "--candidates-only needs at least one candidate subset (the lists to rank); add --candidates bm25, dense or hybrid, "
     "or drop --candidates-only",
     "`candidates_only` needs at least one candidate subset (the lists to rank); add candidates bm25, dense or hybrid, "
     "or drop candidates_only"),
    (dict(top_k=5), "top_k (--top-k) must be at least 10: the main score is nDCG@10; got 5; raise it (default 1000)",
     "--top-k must be at least 10: the main score is nDCG@10; got 5; raise it (default 1000)",
     "`top_k` must be at least 10: the main score is nDCG@10; got 5; raise it (default 1000)"),
])
def test_scoring_refuses_what_no_task_could_run(settings: dict, api: str, flags: str, keyed: str):
    """One refusal, worded once, rendered for the Python API, the CLI and a sweep spec's key."""
    with pytest.raises(RequestError) as raised:
        Scoring(**settings)
    error = raised.value
    field = keyed.split("`")[1]
    assert error.field == field and str(error) == api and error.flag_message == flags
    assert error.keyed(f"`{field}`") == keyed


def test_scoring_checks_what_depends_on_the_task():
    with pytest.raises(ValueError, match="R2MEDBiology has no stored candidate lists"):
        Scoring(candidates=("bm25",)).check_task(get_task_spec(R2MED))
    with pytest.raises(ValueError, match="expansions apply to the R2MED tasks, candidate subsets to NanoR2MED"):
        Scoring(candidates=("bm25",), expansion="hyde/gpt4").check_task(get_task_spec(NANO))
    with pytest.raises(KeyError, match="Did you mean"):
        Scoring(expansion="hyde/gtp4").check_task(get_task_spec(R2MED))
    Scoring(expansion="hyde/gpt4").check_task(get_task_spec(R2MED))
    assert Scoring(candidates=("hybrid", "bm25", "hybrid")).candidates == ("hybrid", "bm25")


def test_one_scoring_rule_three_front_ends(mirror_env: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    """The same refusal, worded for each front end, from the one rule."""
    with pytest.raises(RequestError, match=r"top_k \(--top-k\) must be at least 10"):
        requested(NANO, "bm25-lucene", top_k=5)
    assert main(["evaluate", "--task", NANO, "--retriever", "bm25-lucene", "--top-k", "5"]) == 2
    assert "r2med: error: --top-k must be at least 10: the main score is nDCG@10; got 5" in capsys.readouterr().err
    with pytest.raises(SpecError, match=r"`top_k` must be at least 10: the main score is nDCG@10; got 5; raise it"):
        parse_spec({"output": str(tmp_path), "tasks": [NANO], "retrievers": ["bm25-lucene"], "top_k": 5}, tmp_path / "s.yaml")
    with pytest.raises(SpecError, match=r"`hybrid` fuses full-corpus runs, which candidates_only skips; drop one"):
        parse_spec({"output": str(tmp_path), "tasks": [NANO], "retrievers": ["bm25-lucene"], "hybrid": True,
                    "candidates": ["bm25"], "candidates_only": True}, tmp_path / "s.yaml")


def test_the_tasks_own_bm25():
    assert get_task_spec(R2MED).own_bm25 == "bm25-lucene" and get_task_spec(NANO).own_bm25 == "bm25-hakari"
    from r2med_plugin.evaluation.plan import extra_scorers
    from r2med_plugin.evaluation.request import hybrid_partner

    assert extra_scorers(get_task_spec(NANO))[0].partner == "bm25-hakari"
    assert hybrid_partner(get_task_spec(NANO), "bm25-hakari") == "bm25-lucene"  # never fused with itself
    assert hybrid_partner(get_task_spec(NANO), "bm25-robertson") == "bm25-hakari"  # another BM25: the task's own
    assert hybrid_partner(get_task_spec(NANO), "bm25-hakari:regex") == "bm25-hakari"
    assert hybrid_partner(get_task_spec(R2MED), "bm25-lucene") == "bm25-robertson"


def test_llm_settings_each_kind_reads():
    setwise = {"set_size", "setwise_method", "setwise_k"}
    groupwise = {"group_size", "grouping", "group_seed", "regroup"}  # groupwise, InsertRank, reasoning effort
    assert set(settings_unused_by("listwise")) == setwise | groupwise
    assert set(settings_unused_by("pointwise")) == {"window", "step", "max_tokens", "show_scores", "reasoning_effort"} | setwise | groupwise
    assert set(settings_unused_by("reasoning")) == {"window", "step", "show_scores"} | setwise | groupwise
    assert set(settings_unused_by("setwise")) == {"window", "step", "show_scores"} | groupwise
    assert set(settings_unused_by("groupwise")) == {"window", "step", "show_scores"} | setwise
    assert "llm-reasoning asks about one passage at a time" in settings_unused_by("reasoning")["window"]
    assert "llm-setwise asks about sets of --set-size passages" in settings_unused_by("setwise")["window"]
    assert "llm-listwise does not sort by picks from sets" in settings_unused_by("listwise")["set_size"]


def test_the_llm_settings_rule_says_the_same_in_the_cli_and_a_spec(mirror_env: Path, tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]):
    why = settings_unused_by("pointwise")["window"]
    argv = ["evaluate", "--task", NANO, "--first-stage", "bm25-lucene", "--rerank", "llm-pointwise:m",
            "--base-url", "http://127.0.0.1:9/v1", "--window", "4"]
    assert main(argv) == 2
    assert why in capsys.readouterr().err
    with pytest.raises(SpecError) as raised:
        parse_spec({"output": str(tmp_path), "tasks": [NANO], "rerankers": [
            {"model": "llm-pointwise:m", "first_stage": "bm25-lucene", "base_url": "http://127.0.0.1:9/v1", "window": 4}]},
            tmp_path / "s.yaml")
    assert why in str(raised.value) and "rerankers[0].window" in str(raised.value)


def test_one_builder_for_an_llm_rerankers_endpoint(monkeypatch: pytest.MonkeyPatch):
    config = build_reranker_config("http://127.0.0.1:8000/v1", what="x", check_key=False, concurrency=3, timeout=5.0,
                                   window=8, step=4, extra_body={"a": 1})
    assert (config.endpoint.concurrency, config.endpoint.timeout, config.window, config.step) == (3, 5.0, 8, 4)
    assert config.extra_body == {"a": 1} and build_reranker_config("http://h/v1", what="x", check_key=False).window == 20
    setwise = build_reranker_config("http://h/v1", what="x", check_key=False, set_size=5, setwise_method="bubblesort", setwise_k=4)
    assert (setwise.set_size, setwise.setwise_method, setwise.setwise_k) == (5, "bubblesort", 4)
    plain = build_reranker_config("http://h/v1", what="x", check_key=False)
    assert (plain.set_size, plain.setwise_method, plain.setwise_k) == (3, "heapsort", 10)
    with pytest.raises(SettingError) as missing:
        build_reranker_config(None, what="--rerank llm-listwise:m")
    assert missing.value.field == "base_url" and "needs an endpoint: add --base-url" in missing.value.flag_message
    with pytest.raises(SettingError) as concurrency:
        build_reranker_config("http://h/v1", what="x", check_key=False, concurrency=0)
    assert concurrency.value.field == "concurrency" and "must be an integer of at least 1" in str(concurrency.value)
    with pytest.raises(SettingError) as timeout:
        build_reranker_config("http://h/v1", what="x", check_key=False, timeout=-1)
    assert timeout.value.field == "timeout" and "must be a positive number" in str(timeout.value)
    monkeypatch.delenv("MISSING_KEY_VAR", raising=False)
    with pytest.raises(ValueError, match="MISSING_KEY_VAR"):
        build_reranker_config("http://h/v1", what="x", api_key_env="MISSING_KEY_VAR")


def test_the_instruction_rule_is_the_models(tmp_path: Path, capsys: pytest.CaptureFixture[str], mirror_env: Path):
    from r2med_plugin.models.registry import resolve

    assert resolve("minilm-packaged").instruction_refusal is None
    why, fix = resolve("official:bge").instruction_refusal
    assert "official profile" in why and fix == "drop instruction"
    assert main(["evaluate", "--task", R2MED, "--retriever", "official:bge", "--instruction"]) == 2
    assert why in capsys.readouterr().err
    with pytest.raises(SpecError) as raised:
        parse_spec({"output": str(tmp_path), "tasks": [R2MED], "retrievers": [{"model": "official:bge", "instruction": True}]},
                   tmp_path / "s.yaml")
    assert why in str(raised.value) and "retrievers[0].instruction" in str(raised.value)


# --- the typed request: each rule at the type that owns it -------------------------------------------------------------

from r2med_plugin.evaluation.request import EvaluationRequest, Outputs  # noqa: E402
from r2med_plugin.evaluation.specs import (  # noqa: E402
    Bm25Spec,
    CrossEncoderSpec,
    EndpointSpec,
    LlmRerankerSpec,
    ModelSpec,
    PrebuiltFirstStage,
    RunFileSpec,
)

URL = "http://127.0.0.1:9/v1"


@pytest.mark.parametrize("outputs, words", [
    (dict(trec=True), "--trec writes run files into the --output folder"),
    (dict(folder="o", trec_depth=50), "--depth is the depth of TREC run files"),
    (dict(folder="o", trec=True, trec_depth=0), "--depth must be a positive number"),
])
def test_outputs_refuse_what_writes_nothing(outputs: dict, words: str):
    with pytest.raises(RequestError) as raised:
        Outputs(**outputs)
    assert raised.value.flag_message.startswith(words)


@pytest.mark.parametrize("build, words", [
    (lambda: EvaluationRequest(NANO, RunFileSpec("run.trec")), "a run file is a first stage to rerank"),
    (lambda: EvaluationRequest(NANO, Bm25Spec("bm25-lucene"), first_stage_name="x"), "names what a reranker reranks"),
    (lambda: EvaluationRequest(NANO, Bm25Spec("bm25-lucene"), CrossEncoderSpec("org/ce"), Scoring(hybrid=True)),
     "reranking takes one first stage"),
    (lambda: EvaluationRequest(NANO, Bm25Spec("bm25-lucene"), CrossEncoderSpec("org/ce"), outputs=Outputs("o", True, 50)),
     "trec_depth (--depth) reaches no code here"),
    (lambda: EvaluationRequest(NANO, Bm25Spec("bm25-lucene"), scoring=Scoring(top_k=20), outputs=Outputs("o", True, 30)),
     "trec_depth (--depth) 30 is deeper than the run (top_k (--top-k) 20"),
    (lambda: EvaluationRequest(NANO, Bm25Spec("bm25-robertson"), bm25_workers=2), "this plan runs no bm25-lucene"),
    (lambda: EvaluationRequest("NanoR2MEDBiolgy", Bm25Spec("bm25-lucene")), "Did you mean"),
])
def test_the_request_refuses_what_no_run_could_do(build, words: str):
    with pytest.raises((ValueError, KeyError)) as raised:
        build()
    assert words in str(raised.value)


def test_workers_reach_bm25_lucene_also_as_the_hybrid_partner():
    request = EvaluationRequest(NANO, Bm25Spec("bm25-hakari"), scoring=Scoring(hybrid=True), bm25_workers=2)
    assert request.hybrid_partner == "bm25-lucene" and request.computes_bm25_lucene and request.uses("workers")
    assert not EvaluationRequest(NANO, Bm25Spec("bm25-robertson")).uses("workers")


def test_a_model_spec_resolves_once_and_owns_its_rules(mirror_env: Path):
    model = ModelSpec("minilm-packaged", instruction=True, device="cpu", batch_size=8)
    assert model.ref.kind == "packaged" and model.uses("device") and model.uses("instruction")
    assert not model.uses("base_url") and "is not one" in model.why_not("base_url")
    endpoint = ModelSpec("openai:emb", endpoint=EndpointSpec(base_url=URL, dimensions=8))
    assert not endpoint.uses("device") and endpoint.why_not("device") == "openai:emb runs on the endpoint's server"
    assert not endpoint.uses("loader") and endpoint.uses("dimensions") and endpoint.uses("timeout")
    with pytest.raises(ValueError, match=r"dimensions configure an embedding endpoint"):
        ModelSpec("minilm-packaged", endpoint=EndpointSpec(dimensions=8))
    with pytest.raises(RequestError) as raised:
        ModelSpec("official:bge", instruction=True)
    assert raised.value.field == "instruction" and "official profile" in raised.value.flag_message
    with pytest.raises(ValueError, match="Did you mean 'bm25-lucene'"):
        ModelSpec("bm25-lucen")


def test_an_llm_reranker_spec_owns_the_kinds_settings():
    spec = LlmRerankerSpec("llm-setwise:m", EndpointSpec(base_url=URL), depth=20, settings={"set_size": 4})
    assert spec.kind == "setwise" and spec.uses("set_size") and not spec.uses("window")
    assert spec.config(check_key=False).set_size == 4
    with pytest.raises(RequestError) as raised:
        LlmRerankerSpec("llm-pointwise:m", EndpointSpec(base_url=URL), settings={"window": 4})
    assert raised.value.field == "window" and settings_unused_by("pointwise")["window"] in raised.value.flag_message
    assert raised.value.keyed("`rerankers[0].window`").startswith("`rerankers[0].window` reaches no code here: llm-pointwise:m is llm-pointwise")
    with pytest.raises(ValueError, match="needs an endpoint"):
        LlmRerankerSpec("llm-listwise:m", EndpointSpec())
    with pytest.raises(ValueError, match="dimensions"):
        LlmRerankerSpec("llm-listwise:m", EndpointSpec(base_url=URL, dimensions=8))
    with pytest.raises(ValueError, match="not an LLM reranker setting"):
        LlmRerankerSpec("llm-listwise:m", EndpointSpec(base_url=URL), settings={"windw": 4})
    with pytest.raises(ValueError, match="at least 10"):
        LlmRerankerSpec("llm-listwise:m", EndpointSpec(base_url=URL), depth=5)


def test_a_cross_encoder_spec_is_not_an_llm_and_reranks_at_least_ten():
    assert CrossEncoderSpec("org/ce", depth=100).uses("rerank_revision")
    assert "sends no request" in CrossEncoderSpec("org/ce").why_not("base_url")
    with pytest.raises(ValueError, match="build it as LlmRerankerSpec"):
        CrossEncoderSpec("llm-listwise:m")
    with pytest.raises(ValueError, match="at least 10"):
        CrossEncoderSpec("org/ce", depth=5)


def test_a_request_serialises_and_its_identity_holds_only_what_changes_results(mirror_env: Path):
    def request(**changes):
        model = ModelSpec("openai:emb", endpoint=EndpointSpec(base_url=URL, **changes.pop("endpoint", {})))
        reranker = LlmRerankerSpec("llm-listwise:m", EndpointSpec(base_url=URL, concurrency=changes.pop("concurrency", None)),
                                   settings={"window": changes.pop("window", 20)})
        return EvaluationRequest(NANO, model, reranker, **changes)

    base = request()
    assert EvaluationRequest.from_dict(base.to_dict()) == base
    assert EvaluationRequest.from_dict(json_roundtrip(base.to_dict())).identity() == base.identity()
    neutral = [request(concurrency=32), request(data_dir="/elsewhere"), request(show_progress=False),
               request(endpoint={"timeout": 5.0, "max_retries": 1, "api_key_env": "HOME", "concurrency": 3})]
    assert {other.identity() for other in neutral} == {base.identity()}
    changed = [request(window=30), request(endpoint={"extra_body": {"a": 1}}), request(first_stage_name="x")]
    assert len({other.identity() for other in changed} | {base.identity()}) == 4
    with pytest.raises(ValueError, match=r"request\.first_stage\.windw: not a field of ModelSpec"):
        EvaluationRequest.from_dict({**base.to_dict(), "first_stage": {**base.to_dict()["first_stage"], "windw": 1}})
    with pytest.raises(ValueError, match="schema 1"):
        EvaluationRequest.from_dict({**base.to_dict(), "schema": 2})
    with pytest.raises(TypeError, match="does not serialise"):
        EvaluationRequest(NANO, PrebuiltFirstStage(object())).to_dict()


def json_roundtrip(payload: dict) -> dict:
    import json

    return json.loads(json.dumps(payload))


def test_a_request_from_its_dict_scores_as_evaluate_task(mirror_env: Path):
    from r2med_plugin.evaluation.runner import evaluate_task, execute

    request = EvaluationRequest(NANO, Bm25Spec("bm25-robertson"), scoring=Scoring(top_k=100, hybrid=True, candidates=("bm25",)),
                                show_progress=False)
    via_request = execute(EvaluationRequest.from_dict(json_roundtrip(request.to_dict())))
    via_api = evaluate_task(NANO, "bm25-robertson", top_k=100, hybrid=True, candidates=["bm25"], show_progress=False)
    assert via_request.scores == via_api.scores and via_request.run == via_api.run


def test_documents_with_one_text_share_one_score_on_both_search_paths(monkeypatch: pytest.MonkeyPatch):
    import numpy as np

    import r2med_plugin.retrieval.dense as dense

    rng = np.random.default_rng(0)
    vectors = rng.normal(size=(6, 8)).astype(np.float32)
    docs = vectors[[0, 1, 2, 1, 3, 4, 1, 5]]  # d1, d3 and d6 hold one text
    ids, texts = [f"d{i}" for i in range(8)], ["a", "b", "c", "b", "e", "f", "b", "g"]
    queries = rng.normal(size=(3, 8)).astype(np.float32)
    groups = dense.text_groups(texts)
    assert groups.tolist() == [0, 1, 2, 1, 4, 5, 1, 7]
    small = dense.search_vectors(["q0", "q1", "q2"], queries, ids, docs, 5, same_text=groups)
    monkeypatch.setattr(dense, "FAISS_MIN_DOCUMENTS", 0)
    large = dense.search_vectors(["q0", "q1", "q2"], queries, ids, docs, 5, same_text=groups)
    assert {q: list(run) for q, run in small.items()} == {q: list(run) for q, run in large.items()}  # faiss rounds apart
    for run in [*small.values(), *large.values()]:
        shared = [run[d] for d in ("d1", "d3", "d6") if d in run]
        assert len(set(shared)) <= 1
        listed = [d for d in run if d in ("d1", "d3", "d6")]
        assert listed == sorted(listed, reverse=True)  # ties go to the larger id, as pytrec_eval orders them


def test_evaluate_task_takes_a_request_or_its_keyword_arguments(mirror_env: Path):
    """One list of keyword arguments (TaskArguments): evaluate_task(task, retriever, ...) builds the same request as
    evaluate_task(request) runs; an unknown keyword is Python's TypeError; a request takes no other argument."""
    from r2med_plugin.evaluation.plan import as_request, request_of
    from r2med_plugin.evaluation.request import TaskArguments
    from r2med_plugin.evaluation.runner import evaluate_task

    request = request_of(NANO, "bm25-lucene", TaskArguments(top_k=20, candidates=("bm25",)))
    assert request.scoring == Scoring(top_k=20, candidates=("bm25",))
    assert as_request(NANO, "bm25-lucene", {"top_k": 20, "candidates": ["bm25"]}) == request
    assert as_request(request, None, {}) is request
    by_keywords = evaluate_task(NANO, "bm25-lucene", top_k=20, candidates=["bm25"], show_progress=False)
    by_request = evaluate_task(EvaluationRequest(NANO, Bm25Spec("bm25-lucene"), scoring=Scoring(top_k=20, candidates=("bm25",)),
                                                 show_progress=False))
    assert by_keywords.scores == by_request.scores and by_keywords.scores["ndcg_at_10"] > 0
    with pytest.raises(TypeError, match=r"evaluate_task\(\) got an unexpected keyword argument 'top_kk'"):
        evaluate_task(NANO, "bm25-lucene", top_kk=5)
    from r2med_plugin.evaluation.runner import execute

    with pytest.raises(TypeError, match="execute takes an EvaluationRequest"):
        execute(NANO)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"evaluate_task\(request\) takes the request alone"):
        evaluate_task(request, top_k=30)
    with pytest.raises(TypeError, match=r"evaluate_task\(request\) takes the request alone"):
        evaluate_task(request, "bm25-lucene")


def test_evaluate_task_keywords_are_task_arguments_fields():
    """evaluate_task spells out its keywords (typed): the same names, in the same order, with the same defaults as
    TaskArguments' fields, which build the request."""
    import dataclasses
    import inspect

    from r2med_plugin.evaluation.request import TaskArguments
    from r2med_plugin.evaluation.runner import evaluate_task

    parameters = inspect.signature(evaluate_task).parameters
    keywords = {name: p.default for name, p in parameters.items() if p.kind is inspect.Parameter.KEYWORD_ONLY}
    fields = {item.name: item.default for item in dataclasses.fields(TaskArguments)}
    assert list(parameters)[:2] == ["task", "retriever"]
    assert keywords == fields and list(keywords) == list(fields)


def test_the_options_a_front_end_checks_are_the_parts_own_declarations():
    """r2med evaluate refuses an option that no part uses; the list it checks is the options declared on the parts'
    fields (r2med_plugin.request_options), so a field's option is checked, flagged and worded without a second list to
    edit. Every declaration is held by a field of a part, and its flag's help and default come from it."""
    import argparse

    from r2med_plugin.cli import build_parser
    from r2med_plugin.evaluation.request import EvaluationRequest, Outputs, Scoring, option_owner, request_options
    from r2med_plugin.evaluation.specs import CrossEncoderSpec, EndpointSpec, LlmRerankerSpec, ModelSpec
    from r2med_plugin.request_options import DECLARED, options_of

    options = request_options()
    assert set(options) == {"model_revision", "model_name", "loader", "instruction", "device", "dtype", "batch_size",
                            "base_url", "api_key_env", "dimensions", "concurrency", "extra_body", "max_retries", "timeout",
                            "rerank_depth", "rerank_revision", "first_stage_name", "workers", "top_k", "depth"}
    held = options_of(ModelSpec, CrossEncoderSpec, LlmRerankerSpec, EndpointSpec, EvaluationRequest, Scoring, Outputs)
    assert sorted(held) == sorted(options)  # no declaration without its field, no field's option undeclared
    assert set(ModelSpec.OPTIONS) == {*options_of(ModelSpec), *options_of(EndpointSpec)}
    assert "dimensions" not in LlmRerankerSpec.options()  # an LLM answers in text: --dimensions is refused for it
    commands = next(item for item in build_parser()._actions if isinstance(item, argparse._SubParsersAction))
    evaluate = commands.choices["evaluate"]
    assert set(options) <= set(evaluate.option_defaults)
    helps = {action.dest: action.help for action in evaluate._actions}
    for name, declared in DECLARED.items():
        assert helps[name] == declared.help and evaluate.option_defaults[name] == declared.flag_default
        assert option_owner(name) == declared.configures
    assert evaluate.option_defaults["device"] == "auto" and evaluate.option_defaults["batch_size"] == 32


def test_an_option_is_declared_once():
    from r2med_plugin.request_options import declare

    with pytest.raises(TypeError, match="declared twice"):
        declare("device", "again", "it places a model", "first")
