"""Each LLM reranker kind's settings class (r2med_plugin.llm_settings) drives everything about its settings: which kind
reads which (``LLM_SETTING_USERS``), the "reaches no code" refusal for the other kinds, the keywords
``build_reranker_config`` takes, the CLI's flags and a sweep spec's keys, and the checks of each value."""

from __future__ import annotations

import argparse
import copy
import dataclasses
import pickle
from pathlib import Path

import pytest

from r2med_plugin.cli import build_parser
from r2med_plugin.cli.options import positive_int
from r2med_plugin.evaluation.request import RequestError, option_owner
from r2med_plugin.evaluation.specs import EndpointSpec, LlmRerankerSpec
from r2med_plugin.llm import Endpoint, LLMRerankerConfig
from r2med_plugin.llm.config import LLM_SETTING_USERS, build_reranker_config, settings_unused_by
from r2med_plugin.llm.reranker_kinds import LLM_RERANKER_KINDS, llm_reranker, register_llm_reranker
from r2med_plugin.llm.strategy import LLMReranker
from r2med_plugin.llm_settings import (
    KIND_SETTINGS,
    AnswerSettings,
    GroupwiseSettings,
    KindSettings,
    ListwiseSettings,
    SetwiseSettings,
    setting,
)
from r2med_plugin.rules import SettingError
from r2med_plugin.sweep.entries import read_rerankers

URL = "http://127.0.0.1:9/v1"

# the table the settings classes replace, as it was written by hand: the derived one must say the same
HAND_WRITTEN_USERS = {
    "window": ("listwise",), "step": ("listwise",), "max_tokens": ("listwise", "reasoning", "setwise", "groupwise"),
    "set_size": ("setwise",), "setwise_method": ("setwise",), "setwise_k": ("setwise",),
    "group_size": ("groupwise",), "grouping": ("groupwise",), "group_seed": ("groupwise",), "regroup": ("groupwise",),
    "show_scores": ("listwise",), "reasoning_effort": ("listwise", "reasoning", "setwise", "groupwise"),
}

# every flag as it was added by hand: (flag, type or choices or action, default)
HAND_WRITTEN_FLAGS = {
    "--window": (positive_int, 20), "--step": (positive_int, 10), "--max-tokens": (positive_int, None),
    "--set-size": (positive_int, None), "--setwise-method": (("heapsort", "bubblesort"), None),
    "--setwise-k": (positive_int, None), "--group-size": (positive_int, None),
    "--grouping": (("random", "first-stage"), None), "--group-seed": (int, None), "--regroup": (positive_int, None),
    "--show-scores": ("store_true", None),
    "--reasoning-effort": (("none", "minimal", "low", "medium", "high", "xhigh"), None),
}


def _llm_flags() -> dict[str, argparse.Action]:
    parser = build_parser()
    commands = next(action for action in parser._actions if isinstance(action, argparse._SubParsersAction))
    evaluate = commands.choices["evaluate"]
    group = next(group for group in evaluate._action_groups if group.title and group.title.startswith("LLM reranker settings"))
    return {action.option_strings[0]: action for action in group._group_actions}


def _default(action: argparse.Action) -> object:
    """An option's default, as the command's parser keeps it (cli.options.CommandParser)."""
    parser = build_parser()
    commands = next(item for item in parser._actions if isinstance(item, argparse._SubParsersAction))
    return commands.choices["evaluate"].option_defaults[action.dest]


def _how(action: argparse.Action) -> object:
    if isinstance(action, argparse._StoreTrueAction):
        return "store_true"
    return tuple(action.choices) if action.choices else action.type


@pytest.fixture
def yesno():
    """A throwaway kind, llm-yesno, whose settings class declares one setting of its own (``answer_tokens``),
    registered for the test (removed after it by the conftest's ``registered_llm_kinds_restored``)."""

    @dataclasses.dataclass(frozen=True)
    class YesNoSettings(KindSettings):
        answer_tokens: int = setting(2, minimum=1, maximum=16, help="llm-yesno: the answer's budget in tokens (default 2)")

    class YesNoLLMReranker(LLMReranker):
        kind = "yesno"
        settings_class = YesNoSettings
        own_prompts = {"yesno": "Does the passage answer the query? Answer yes or no."}

        def questions(self, task):  # pragma: no cover - never asked here
            yield from ()
            return {}

    return register_llm_reranker(YesNoLLMReranker)


def test_a_registered_kind_is_gone_after_its_test(yesno):
    assert "yesno" in KIND_SETTINGS and "llm-yesno" in LLM_RERANKER_KINDS


def test_the_derived_table_is_the_hand_written_one():
    assert dict(LLM_SETTING_USERS) == HAND_WRITTEN_USERS
    for name, kind in LLM_RERANKER_KINDS.items():  # each built-in kind reads what its settings class declares
        assert KIND_SETTINGS[kind.kind] is kind.settings_class and name == f"llm-{kind.kind}"
    # a setting several kinds read is one declaration, inherited
    assert dataclasses.fields(SetwiseSettings)[0] is dataclasses.fields(GroupwiseSettings)[0]
    assert {item.name for item in dataclasses.fields(AnswerSettings)} == {"max_tokens", "reasoning_effort"}


def test_the_cli_flags_are_generated_with_their_spelling_type_and_default():
    flags = _llm_flags()
    assert set(flags) == set(HAND_WRITTEN_FLAGS)
    for flag, (how, default) in HAND_WRITTEN_FLAGS.items():
        assert (_how(flags[flag]), _default(flags[flag])) == (how, default), flag
    assert flags["--window"].help == "llm-listwise: passages per window (RankGPT: 20)"


def test_each_settings_class_checks_its_own_values():
    with pytest.raises(SettingError) as step:
        ListwiseSettings(window=10, step=10)
    assert step.value.field == "step"
    with pytest.raises(SettingError) as size:
        SetwiseSettings(set_size=24)
    assert size.value.field == "set_size" and "labelled A to W" in str(size.value)
    with pytest.raises(SettingError) as method:
        SetwiseSettings(setwise_method="quicksort")
    assert method.value.field == "setwise_method" and "heapsort, bubblesort" in str(method.value)
    with pytest.raises(SettingError) as seed:
        GroupwiseSettings(grouping="first-stage", group_seed=1)
    assert seed.value.field == "group_seed"
    with pytest.raises(SettingError) as shown:
        ListwiseSettings(show_scores="yes")
    assert shown.value.field == "show_scores" and "switch" in str(shown.value)
    assert GroupwiseSettings().seed == 0 and GroupwiseSettings(group_seed=7).seed == 7


def test_the_config_keeps_its_keywords_and_each_kind_reads_its_own():
    config = LLMRerankerConfig(Endpoint(URL), window=6, step=3, set_size=4)
    assert (config.window, config.step, config.set_size, config.max_tokens, config.grouping) == (6, 3, 4, None, "random")
    assert config.for_kind(ListwiseSettings) == ListwiseSettings(window=6, step=3)
    assert llm_reranker("llm-setwise:m", config).settings == SetwiseSettings(set_size=4)
    with pytest.raises(TypeError, match="unexpected keyword argument 'windows'"):
        LLMRerankerConfig(Endpoint(URL), windows=6)
    with pytest.raises(AttributeError):
        config.not_a_setting  # noqa: B018
    # replace, copies and pickles keep the settings (a sweep ships its rerankers to worker processes)
    assert dataclasses.replace(config, step=2).settings == {"window": 6, "step": 2, "set_size": 4}
    assert pickle.loads(pickle.dumps(config)) == config == copy.deepcopy(config)


def test_a_kinds_new_setting_reaches_every_front_end(yesno, tmp_path: Path):
    assert LLM_SETTING_USERS["answer_tokens"] == ("yesno",)
    assert "llm-yesno" in option_owner("answer_tokens")
    # the other kinds refuse it, and the new kind refuses theirs
    assert "llm-listwise never reads it" in settings_unused_by("listwise")["answer_tokens"]
    assert set(settings_unused_by("yesno")) == set(HAND_WRITTEN_USERS)
    with pytest.raises(RequestError) as refused:
        LlmRerankerSpec("llm-listwise:m", EndpointSpec(base_url=URL), settings={"answer_tokens": 3})
    assert refused.value.field == "answer_tokens" and "reaches no code" in str(refused.value)
    with pytest.raises(RequestError) as window:
        LlmRerankerSpec("llm-yesno:m", EndpointSpec(base_url=URL), settings={"window": 5})
    assert window.value.field == "window" and "reaches no code" in str(window.value)
    # build_reranker_config takes it, checks it, and the kind reads it
    config = build_reranker_config(URL, what="x", check_key=False, answer_tokens=5)
    reranker = llm_reranker("llm-yesno:m", config)
    assert reranker.settings.answer_tokens == 5 and reranker.name == "m (yesno @127.0.0.1-9 answer_tokens=5)"
    assert reranker.revision.startswith("yesno-prompt-")
    with pytest.raises(SettingError) as bad:
        build_reranker_config(URL, what="x", check_key=False, answer_tokens=17)
    assert bad.value.field == "answer_tokens" and "from 1 to 16" in str(bad.value)
    spec = LlmRerankerSpec("llm-yesno:m", EndpointSpec(base_url=URL), settings={"answer_tokens": 3})
    assert spec.uses("answer_tokens") and not spec.uses("window")
    # its flag and its sweep-spec key
    flag = _llm_flags()["--answer-tokens"]
    assert (flag.type, _default(flag), flag.help) == (positive_int, None, "llm-yesno: the answer's budget in tokens (default 2)")
    entry = {"model": "llm-yesno:m", "base_url": URL, "answer_tokens": 4}
    read = read_rerankers(tmp_path / "spec.yaml", {"rerankers": [entry]})
    assert read[0]["llm_reranker"]["answer_tokens"] == 4


def test_a_kind_may_not_declare_a_shared_setting_again(yesno):
    @dataclasses.dataclass(frozen=True)
    class Again(KindSettings):
        max_tokens: int | None = setting(None, minimum=1, help="another budget")

    class Budgeted(LLMReranker):
        kind = "budgeted"
        settings_class = Again

        def questions(self, task):  # pragma: no cover
            yield from ()

    with pytest.raises(TypeError, match="declares the setting 'max_tokens' again"):
        register_llm_reranker(Budgeted)

    @dataclasses.dataclass(frozen=True)
    class Endpointish(KindSettings):
        timeout: float = setting(1.0, help="a timeout")

    Budgeted.settings_class = Endpointish
    with pytest.raises(TypeError, match="named like an endpoint option"):
        register_llm_reranker(Budgeted)
    assert "llm-budgeted" not in LLM_RERANKER_KINDS and "budgeted" not in KIND_SETTINGS


def test_a_subclassed_kind_reads_its_parents_settings_and_its_own(yesno):
    @dataclasses.dataclass(frozen=True)
    class WiderSettings(ListwiseSettings):
        passes: int = setting(1, minimum=1, help="llm-wider: passes over the list (default 1)")

    from r2med_plugin.llm.listwise import ListwiseLLMReranker

    class WiderLLMReranker(ListwiseLLMReranker):
        kind = "wider"
        settings_class = WiderSettings

    register_llm_reranker(WiderLLMReranker)
    assert LLM_SETTING_USERS["window"] == ("listwise", "wider") and LLM_SETTING_USERS["passes"] == ("wider",)
    assert "passes" in settings_unused_by("listwise") and "window" not in settings_unused_by("wider")
    reranker = llm_reranker("llm-wider:m", build_reranker_config(URL, what="x", check_key=False, window=8, step=4, passes=2))
    assert (reranker.settings.window, reranker.settings.passes) == (8, 2)
