"""The OpenAI-compatible client's helpers that the LLM rerankers, `r2med generate` and the embedding endpoint share."""

from __future__ import annotations

import pytest

from r2med_plugin.endpoints.client import api_key, endpoint_host, host_label, redact
from r2med_plugin.endpoints.extra_body import extra_body_key, extra_body_label, extra_body_of, refuse_reserved
from r2med_plugin.errors import UserError


def test_the_host_names_scheme_host_and_port_only():
    assert endpoint_host("http://127.0.0.1:8000/v1") == "http://127.0.0.1:8000"
    assert endpoint_host("https://api.example.org/v1/") == "https://api.example.org"
    assert host_label("http://[::1]:9000/v1") == "[--1]-9000"
    assert host_label("http://localhost:8000/v1") == "localhost-8000"


@pytest.mark.parametrize("url", ["http://user:pw@h/v1", "http://h/v1?key=x", "ftp://h/v1", "h:8000"])
def test_a_url_that_could_leak_a_credential_or_send_nowhere_is_refused(url: str):
    with pytest.raises(UserError) as raised:
        endpoint_host(url)
    assert raised.value.field == "base_url"
    assert "pw" not in str(raised.value) and "key=x" not in str(raised.value)


def test_keys_come_from_the_named_variable(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    assert api_key(None) == "EMPTY"  # a local server needs none
    monkeypatch.setenv("MY_KEY", " sk-123 ")
    assert api_key("MY_KEY") == "sk-123"
    monkeypatch.delenv("MY_KEY")
    with pytest.raises(UserError) as unset:
        api_key("MY_KEY")
    assert unset.value.field == "api_key_env" and "MY_KEY" in str(unset.value)
    with pytest.raises(UserError) as empty:
        api_key(" ")
    assert empty.value.field == "api_key_env"


def test_secrets_are_redacted_but_short_strings_are_not():
    assert redact("key sk-abcdef failed", ["sk-abcdef", "ab"]) == "key *** failed"


def test_an_extra_body_is_a_json_object_with_a_canonical_key_and_label():
    body = extra_body_of('{"b": 1, "a": [true, null]}')
    assert body == {"b": 1, "a": [True, None]}
    assert extra_body_key(body) == '{"a":[true,null],"b":1}'
    assert extra_body_label(body).startswith("body-") and len(extra_body_label(body)) == len("body-") + 8
    assert extra_body_label({"a": [True, None], "b": 1}) == extra_body_label(body)  # key order does not matter
    assert extra_body_of(None) is None and extra_body_of("{}") is None and extra_body_label(None) == ""


@pytest.mark.parametrize("value", ["not json", "[1, 2]", {"x": float("nan")}, {"x": object()}])
def test_an_extra_body_that_is_no_json_object_is_refused(value: object):
    with pytest.raises(UserError) as raised:
        extra_body_of(value)
    assert raised.value.field == "extra_body"


def test_an_extra_body_may_not_replace_what_the_request_carries():
    refuse_reserved({"seed": 1}, {"temperature": "--temperature"})
    with pytest.raises(UserError) as raised:
        refuse_reserved({"temperature": 0.5}, {"temperature": "--temperature"})
    assert raised.value.field == "extra_body" and "temperature" in str(raised.value)
