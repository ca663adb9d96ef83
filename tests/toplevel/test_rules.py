"""r2med_plugin.rules: one integer rule, one refusal rendered per front end, neutral fields marked in the types."""

from __future__ import annotations

import argparse
from dataclasses import dataclass

import pytest

from r2med_plugin.evaluation.request import EvaluationRequest, TaskArguments
from r2med_plugin.evaluation.specs import EndpointSpec, ModelSpec  # EndpointSpec: the one Endpoint type
from r2med_plugin.llm.config import Endpoint, LLMRerankerConfig
from r2med_plugin.rules import (
    RequestError,
    SettingError,
    flag_of,
    integer_option,
    neutral,
    neutral_fields,
    render,
    whole_number,
    whole_number_problem,
)


@pytest.mark.parametrize("value, minimum, maximum, problem", [
    (True, 1, None, "must be an integer of at least 1, got True"),  # a bool is not a number of anything
    (0, 1, None, "must be an integer of at least 1, got 0"),
    (2.0, 1, None, "must be an integer of at least 1, got 2.0"),
    ("3", 1, None, "must be an integer of at least 1, got '3'"),
    (24, 2, 23, "must be an integer from 2 to 23, got 24"),
    (-1, 0, None, "must be an integer of at least 0, got -1"),
])
def test_the_integer_rule_refuses(value, minimum, maximum, problem):
    assert whole_number_problem(value, minimum, maximum) == problem
    with pytest.raises(ValueError, match=f"^--n {problem}"):
        whole_number("--n", value, minimum, maximum)


def test_the_integer_rule_accepts_and_passes_unset():
    assert whole_number_problem(1, 1) is None and whole_number_problem(23, 2, 23) is None
    assert whole_number("n", None, 1) is None and whole_number("n", 5, 1) == 5


def test_the_integer_rule_as_an_argparse_type():
    parse = integer_option(1)
    assert parse("7") == 7
    for text, words in (("0", "must be an integer of at least 1, got 0"), ("x", "'x' is not an integer")):
        with pytest.raises(argparse.ArgumentTypeError, match=words):
            parse(text)


def test_one_refusal_rendered_for_each_front_end():
    error = RequestError("trec_depth", "is deeper than {top_k}", "lower it")
    assert str(error) == "trec_depth (--depth) is deeper than top_k (--top-k); lower it"
    assert error.flag_message == "--depth is deeper than --top-k; lower it"
    assert error.keyed("`outputs.trec_depth`") == "`outputs.trec_depth` is deeper than top_k; lower it"
    assert error.key == "trec_depth" and RequestError("rerank_depth", "p", "f", key="depth").key == "depth"
    assert render("a mapping {model: NAME} and {'a': 1}", "flag") == "a mapping {model: NAME} and {'a': 1}"  # not settings


def test_neutral_fields_are_marked_in_the_types():
    @dataclass(frozen=True)
    class Example:
        what: int = 1
        how: int | None = neutral()

    assert neutral_fields(Example) == ("how",)
    assert neutral_fields(Endpoint) == ("api_key_env", "concurrency", "max_retries", "timeout")
    assert neutral_fields(ModelSpec) == ("device", "batch_size")
    assert neutral_fields(TaskArguments) == ("data_dir", "accept_drift", "show_progress")
    assert neutral_fields(EvaluationRequest) == ("bm25_workers", "data_dir", "accept_drift", "show_progress")


def test_one_endpoint_type():
    assert EndpointSpec is Endpoint
    endpoint = Endpoint("http://127.0.0.1:9/v1", dimensions=8)
    assert endpoint.concurrency is None and endpoint.given(("base_url", "dimensions", "timeout")) == {
        "base_url": "http://127.0.0.1:9/v1", "dimensions": 8}
    sent = LLMRerankerConfig(Endpoint("http://127.0.0.1:9/v1", concurrency=3)).endpoint  # defaults where requests go
    assert (sent.concurrency, sent.max_retries, sent.timeout) == (3, 6, 600.0)
    for settings, fact in (({"concurrency": 0}, "must be an integer of at least 1, got 0"),
                           ({"max_retries": True}, "must be an integer of at least 0, got True"),
                           ({"timeout": 0}, "must be a positive number of seconds, got 0"),
                           ({"extra_body": "{"}, "is not valid JSON")):
        with pytest.raises(SettingError) as raised:
            Endpoint("http://127.0.0.1:9/v1", **settings)
        name = next(iter(settings))  # the setting at fault, named as the CLI spells it
        assert raised.value.field == name and raised.value.flag_message.startswith(f"{flag_of(name)} {fact}")
    with pytest.raises(TypeError, match="an Endpoint with its URL"):
        LLMRerankerConfig(Endpoint())


def test_the_architecture_pages_refusal_example():
    """docs/explanation/architecture.md shows this refusal in its three renderings."""
    error = RequestError("top_k", "must be at least 10: the main score is nDCG@10; got 5", "raise it (default 1000)")
    tail = "must be at least 10: the main score is nDCG@10; got 5; raise it (default 1000)"
    assert (str(error), error.flag_message, error.keyed("`top_k`")) == (f"top_k (--top-k) {tail}", f"--top-k {tail}",
                                                                        f"`top_k` {tail}")


def test_a_setting_error_may_name_a_parameters_flag_of_its_own_command():
    """``flags=``: a parameter whose flag is its command's own (worst_queries' ``count`` is ``--worst``), without a
    package-wide FLAGS entry that would rename every other ``count``."""
    error = SettingError("{count} must be positive, got 0 (see {top_k})", field="count", flags={"count": "--worst"})
    assert str(error) == "count (--worst) must be positive, got 0 (see top_k (--top-k))"
    assert error.flag_message == "--worst must be positive, got 0 (see --top-k)"
    assert error.render("key") == "count must be positive, got 0 (see top_k)"
    assert flag_of("count") == "--count" and flag_of("count", {"count": "--worst"}) == "--worst"
    assert flag_of("out_dir") == "--out"  # export's folder parameter is the CLI's --out


def test_setting_errors_keep_the_builtin_types_callers_catch():
    from r2med_plugin.errors import InputFileError, MissingFileError, UnknownNameError, UserError
    from r2med_plugin.rules import SettingFileError, SettingInputError, SettingNameError

    for cls, builtin in ((SettingFileError, FileNotFoundError), (SettingNameError, KeyError),
                         (SettingInputError, InputFileError)):
        error = cls("{expansion} local:x: no such folder", field="expansion")
        assert isinstance(error, (SettingError, UserError, builtin)) and isinstance(error, builtin)
        assert str(error) == "expansion (--expansion) local:x: no such folder"  # one message, unquoted
        assert error.flag_message == "--expansion local:x: no such folder" and error.field == "expansion"
    assert issubclass(SettingFileError, MissingFileError) and issubclass(SettingNameError, UnknownNameError)
