"""What each LLM reranker kind reads: one frozen settings class per kind, each setting declared once as its field.

A setting is a field made by ``setting(default, help=..., ...)``: its default, the help of its CLI flag, its check
(integer bounds, choices, a switch) and, for the kinds that do not read it, why (``unused``, worded with ``{kind}``;
``unused_by_kind`` where a kind's own words fit better). A settings class (``KindSettings``) runs the checks of its
fields and its own rules between them (``check``). Everything else is derived from these declarations
(r2med_plugin.llm.config): which kinds read which setting (``LLM_SETTING_USERS``), the "reaches no code" refusal of a
setting a kind does not read, the keywords ``build_reranker_config`` takes, and the CLI's flags (``--window``, ...).

``KIND_SETTINGS`` is the index the front ends read, kind -> its settings class: the built-in kinds' here, and
``register_llm_reranker`` adds a new kind's (its class's ``settings_class``). This module sits beside, not in,
r2med_plugin.llm so that the CLI's parser reads the declarations without importing the rerankers (``r2med --help``
loads neither numpy nor polars).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from r2med_plugin.request_options import DECLARED
from r2med_plugin.rules import SettingError, whole_number

DEFAULT_WINDOW = 20  # RankGPT's sliding window (Sun et al., 2023) and rank-llm's defaults
DEFAULT_STEP = 10
DEFAULT_REASONING_TOKENS = 8192  # Rank1's reasoning budget
# Setwise (Zhuang et al., 2024): passages per question (the paper's c = 3; llm-rankers' num_child = c - 1 = 2), how the
# picks sort the list, and how many documents they sort to the top (llm-rankers' k)
DEFAULT_SET_SIZE = 3
SETWISE_METHODS = ("heapsort", "bubblesort")
DEFAULT_SETWISE_K = 10
MAX_SET_SIZE = 23  # the labels A to W (llm-rankers' CHARACTERS)
# Groupwise (GroupRank, arXiv 2511.11653): documents per group (the paper's 20), how groups are drawn (random: the
# paper's best; first-stage: consecutive slices of the first stage's order) and how many random groupings are averaged
DEFAULT_GROUP_SIZE = 20
GROUPINGS = ("random", "first-stage")
# what --reasoning-effort may say (OpenAI's values; vLLM takes low, medium and high for the models that read it)
REASONING_EFFORTS = ("none", "minimal", "low", "medium", "high", "xhigh")

SETTING = "setting"  # the field metadata key of a setting's declaration


@dataclass(frozen=True, eq=False)
class Setting:
    """A setting's declaration, beside its field: the help of its CLI flag, its check, and why a kind that does not
    read it refuses it. ``minimum``/``maximum``: an integer's bounds (``rules.whole_number``, with ``why`` added to the
    refusal); ``choices``: the values it takes; ``switch``: true or false (an on-flag); ``flag_default``: the flag's
    default (None: unset, the setting's default applies where it is read)."""

    help: str
    minimum: int | None = None
    maximum: int | None = None
    why: str = ""
    choices: tuple[str, ...] = ()
    switch: bool = False
    flag_default: Any = None
    unused: str = ""
    unused_by_kind: Mapping[str, str] = dataclasses.field(default_factory=dict)

    def check(self, name: str, value: Any) -> None:
        """Refuse ``value`` for the setting ``name`` (a SettingError naming it); None (unset) passes."""
        if value is None:
            return
        if self.switch and not isinstance(value, bool):
            raise SettingError(f"{{{name}}} is a switch (true or false), got {value!r}", field=name)
        if self.choices and value not in self.choices:
            raise SettingError(f"{{{name}}} must be one of {', '.join(self.choices)}, got {value!r}", field=name)
        if self.minimum is not None:
            whole_number(name, value, self.minimum, self.maximum, why=self.why)

    def unused_reason(self, kind: str, readers: tuple[str, ...]) -> str:
        """Why llm-``kind`` refuses this setting: its own words, else the general ones, else who reads it."""
        text = self.unused_by_kind.get(kind) or self.unused
        if not text:
            text = f"it is read by {' and '.join(f'llm-{reader}' for reader in readers)}; llm-{{kind}} never reads it"
        return text.replace("{kind}", kind)


def setting(default: Any = None, *, help: str, minimum: int | None = None, maximum: int | None = None, why: str = "",
            choices: tuple[str, ...] = (), switch: bool = False, flag_default: Any = None, unused: str = "",
            unused_by_kind: Mapping[str, str] | None = None) -> Any:
    """A field of a kind's settings class, declared once: its default and its ``Setting`` (as ``rules.neutral`` marks
    a field, in its metadata)."""
    declared = Setting(help, minimum, maximum, why, choices, switch, flag_default, unused, dict(unused_by_kind or {}))
    return dataclasses.field(default=default, metadata={SETTING: declared})


def declaration(item: dataclasses.Field) -> Setting:
    """The ``Setting`` of a settings class's field (a field made by ``setting``)."""
    declared = item.metadata.get(SETTING)
    if not isinstance(declared, Setting):
        raise TypeError(f"the settings field {item.name} is not made by setting(...): give it its help and check there")
    return declared


S = TypeVar("S", bound="KindSettings")


@dataclass(frozen=True)
class KindSettings:
    """The settings an LLM reranker kind reads (its ``settings_class``): each field made by ``setting``. Building one
    runs each field's check, then the rules between fields (``check``)."""

    def __post_init__(self) -> None:
        for item in dataclasses.fields(self):
            declaration(item).check(item.name, getattr(self, item.name))
        self.check()

    def check(self) -> None:
        """Rules between this kind's settings (a SettingError naming the setting at fault); none by default."""

    @classmethod
    def declared(cls) -> dict[str, Setting]:
        """Setting -> its declaration, the kind's own fields first, then the shared ones (max_tokens, ...)."""
        own = cls.__dict__.get("__annotations__", {})
        items = sorted(dataclasses.fields(cls), key=lambda item: item.name not in own)
        return {item.name: declaration(item) for item in items}

    @classmethod
    def of(cls: type[S], given: Mapping[str, Any]) -> S:
        """This kind's settings from ``given`` (every kind's, None for unset): the ones it reads, the rest at their
        defaults."""
        names = {item.name for item in dataclasses.fields(cls)}
        return cls(**{name: value for name, value in given.items() if name in names and value is not None})


_ONE_AT_A_TIME = "RankGPT's sliding window is listwise; llm-{kind} asks about one passage at a time"
_WINDOW_ELSEWHERE = {
    "setwise": "RankGPT's sliding window is listwise; llm-setwise asks about sets of --set-size passages",
    "groupwise": "RankGPT's sliding window is listwise; llm-groupwise scores groups of --group-size documents",
}
_SETWISE_ONLY = "the set size, sort method and k are llm-setwise's; llm-{kind} does not sort by picks from sets"
_GROUPWISE_ONLY = "the group size, grouping, its seed and the regroupings are llm-groupwise's; llm-{kind} scores no groups"


@dataclass(frozen=True)
class AnswerSettings(KindSettings):
    """The completion budget and reasoning effort: what every kind that lets the model write an answer reads."""

    max_tokens: int | None = setting(
        None, minimum=1,
        help="llm-reasoning: the reasoning budget (default 8192); llm-listwise, llm-setwise, llm-groupwise: the answer's "
             "budget, a reasoning model's reasoning included (default: the server's)",
        unused="llm-pointwise asks for a one-token answer (its log-probabilities) or a short label")
    reasoning_effort: str | None = setting(
        None, choices=REASONING_EFFORTS,
        help="llm-listwise, llm-setwise, llm-groupwise, llm-reasoning: sent as reasoning_effort with every request (left "
             "out, with a warning, where the endpoint refuses it)",
        unused="llm-pointwise reads the first answer token's log-probabilities, which a model reasoning first never "
               "reaches (for a reasoning model use llm-reasoning, or llm-listwise/llm-groupwise)")


@dataclass(frozen=True)
class ListwiseSettings(AnswerSettings):
    """RankGPT's window and step, and InsertRank's first-stage scores in the prompt."""

    window: int = setting(DEFAULT_WINDOW, minimum=1, flag_default=DEFAULT_WINDOW,
                          help="llm-listwise: passages per window (RankGPT: 20)", unused=_ONE_AT_A_TIME,
                          unused_by_kind=_WINDOW_ELSEWHERE)
    step: int = setting(DEFAULT_STEP, minimum=1, flag_default=DEFAULT_STEP,
                        help="llm-listwise: how far the window moves up (RankGPT: 10)", unused=_ONE_AT_A_TIME,
                        unused_by_kind=_WINDOW_ELSEWHERE)
    show_scores: bool = setting(
        False, switch=True, help="llm-listwise: show each passage's first-stage score in the prompt, 4 decimals (InsertRank)",
        unused="InsertRank's first-stage scores go into RankGPT's listwise prompt; llm-{kind} shows none")

    def check(self) -> None:
        if self.window < 2:
            raise SettingError(f"{{window}} must be at least 2 (a window ranks passages against each other), got {self.window}",
                               field="window")
        if self.step >= self.window:
            raise SettingError(f"{{step}} must be smaller than {{window}} (got {self.step} and {self.window}): windows must "
                               "overlap for a passage to move up past a window's edge (RankGPT: window 20, step 10)",
                               field="step")


@dataclass(frozen=True)
class PointwiseSettings(KindSettings):
    """Nothing beyond the endpoint: one yes/no (or 0-3 label) question per pair."""


@dataclass(frozen=True)
class ReasoningSettings(AnswerSettings):
    """Rank1's reasoning budget (``max_tokens``, default 8192) and the reasoning effort."""

    @property
    def budget(self) -> int:
        return self.max_tokens or DEFAULT_REASONING_TOKENS


@dataclass(frozen=True)
class SetwiseSettings(AnswerSettings):
    """Setwise's passages per question, sort method and documents sorted to the top."""

    set_size: int = setting(DEFAULT_SET_SIZE, minimum=2, maximum=MAX_SET_SIZE, why="passages per setwise question, labelled A to W",
                            help="llm-setwise: passages per question, from 2 to 23 (default 3, the paper's c; llm-rankers' "
                                 "num_child is one less)", unused=_SETWISE_ONLY)
    setwise_method: str = setting("heapsort", choices=SETWISE_METHODS, unused=_SETWISE_ONLY,
                                  help="llm-setwise: how the picks sort the list (default heapsort)")
    setwise_k: int = setting(DEFAULT_SETWISE_K, minimum=1, unused=_SETWISE_ONLY,
                             help="llm-setwise: documents sorted to the top, in order (default 10; at most --rerank-depth); "
                                  "the rest keep the first stage's order")


@dataclass(frozen=True)
class GroupwiseSettings(AnswerSettings):
    """GroupRank's group size, how groups are drawn, the random grouping's seed and the groupings averaged."""

    group_size: int = setting(DEFAULT_GROUP_SIZE, minimum=1, unused=_GROUPWISE_ONLY,
                              help="llm-groupwise: documents scored per request, at most (default 20, GroupRank's)")
    grouping: str = setting("random", choices=GROUPINGS, unused=_GROUPWISE_ONLY,
                            help="llm-groupwise: groups drawn at random with --group-seed (default) or cut from the first "
                                 "stage's order")
    # None: seed 0 (random grouping); refused with first-stage grouping, which draws nothing
    group_seed: int | None = setting(None, minimum=0, unused=_GROUPWISE_ONLY,
                                     help="llm-groupwise: the seed of --grouping random (default 0)")
    regroup: int = setting(1, minimum=1, unused=_GROUPWISE_ONLY,
                           help="llm-groupwise: average each document's scores over this many random groupings (default 1)")

    def check(self) -> None:
        if self.grouping != "first-stage":
            return
        why = "{grouping} first-stage cuts the first stage's order into consecutive groups, the same every time"
        if self.group_seed is not None:
            raise SettingError(f"{{group_seed}} reaches no code with {{grouping}} first-stage: {why}; drop {{group_seed}} "
                               "(or use {grouping} random)", field="group_seed")
        if self.regroup > 1:
            raise SettingError(f"{{regroup}} reaches no code with {{grouping}} first-stage: {why}, so {self.regroup} "
                               "groupings would ask the same questions; drop {regroup} (or use {grouping} random)",
                               field="regroup")

    @property
    def seed(self) -> int:
        """The random grouping's seed (0 unless ``group_seed`` is given)."""
        return self.group_seed if self.group_seed is not None else 0


# kind -> the settings class it reads: the built-in kinds' (r2med_plugin.llm.reranker_kinds registers their classes,
# each naming its settings_class; register_llm_reranker adds a new kind's here)
KIND_SETTINGS: dict[str, type[KindSettings]] = {
    "listwise": ListwiseSettings, "pointwise": PointwiseSettings, "reasoning": ReasoningSettings,
    "setwise": SetwiseSettings, "groupwise": GroupwiseSettings,
}

# what build_reranker_config and LLMRerankerConfig take besides the settings: no setting may be named so
NOT_SETTING_NAMES = frozenset({"what", "check_key", "sends", "endpoint", "cache_dir", "settings",
                               *(name for name, declared in DECLARED.items() if declared.group == "endpoint")})


def declared_settings() -> dict[str, dataclasses.Field]:
    """Every kind's settings, name -> its field: one declaration each (a setting several kinds read is one field,
    shared by inheritance: ``AnswerSettings``)."""
    found: dict[str, dataclasses.Field] = {}
    for settings_class in KIND_SETTINGS.values():
        fields = {item.name: item for item in dataclasses.fields(settings_class)}
        for name in settings_class.declared():
            found.setdefault(name, fields[name])
    return found


def add_kind_settings(kind: str, settings_class: type[KindSettings]) -> None:
    """Index ``settings_class`` as what llm-``kind`` reads (``register_llm_reranker``). Its fields must be made by
    ``setting``, and a setting another kind reads must be the same declaration (inherit it), so one flag, one default
    and one check hold for every kind that reads it."""
    if not (isinstance(settings_class, type) and issubclass(settings_class, KindSettings)
            and dataclasses.is_dataclass(settings_class)):
        raise TypeError(f"llm-{kind}'s settings_class must be a frozen dataclass subclassing KindSettings, got {settings_class!r}")
    known = declared_settings()
    for name, declared in settings_class.declared().items():
        if name in NOT_SETTING_NAMES:
            raise TypeError(f"llm-{kind}'s setting {name!r} is named like an endpoint option: give it another name")
        if name in known and declaration(known[name]) is not declared and KIND_SETTINGS.get(kind) is not settings_class:
            raise TypeError(f"llm-{kind} declares the setting {name!r} again: inherit its declaration (e.g. from "
                            "AnswerSettings) so one flag, one default and one check hold for every kind")
    KIND_SETTINGS[kind] = settings_class
