"""``llm-groupwise`` (GroupRank) against loopback OpenAI-compatible servers that answer by a fixed key: scores read,
groupings, regroupings, fallbacks, the cache, the CLI and sweep specs."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from r2med_plugin.cli import main
from r2med_plugin.evaluation.reranker_stage import as_reranker
from r2med_plugin.llm import Endpoint, GroupwiseLLMReranker, LLMRerankerConfig
from r2med_plugin.llm.config import build_reranker_config, settings_unused_by
from r2med_plugin.llm.prompting import groupwise_messages, parse_group_scores
from r2med_plugin.rules import SettingError, flag_of
from tests.llm.keyed_replies import (
    TASK,
    config_for,
    group_passages,
    key,
    keyed_order,
    keyed_scores,
    server_host,
    text_digest,
    toy_data,
)
from tests.support.loopback_openai import LoopbackOpenAI, trec_rankings


def group_query(body: dict) -> str:
    return body["messages"][-1]["content"].split("\n", 1)[0].removeprefix("Search query: ")


def noisy_score(body: dict, passage: str) -> float:
    """The key plus noise that depends on the whole group (another group, another score)."""
    return key(passage) + (text_digest(passage + json.dumps(body["messages"])) % 400) / 100  # 0 to 9.99: on the 0-10 scale


def noisy_scores(body: dict) -> str:
    return "\n".join(f"[{number}] {noisy_score(body, passage):.2f}" for number, passage in enumerate(group_passages(body), start=1))


@pytest.mark.parametrize("answer, expected", [
    ('{"1": 7.5, "2": 3, "3": 0}', {0: 7.5, 1: 3.0, 2: 0.0}),
    ('```json\n{"[1]": "8", "passage 2": {"score": 2.5}}\n```', {0: 8.0, 1: 2.5}),
    ("[1] 7.5\n[2] 3\n[3] 10", {0: 7.5, 1: 3.0, 2: 10.0}),
    ("1: 6\n2 - 4.5\nPassage 3 = 1", {0: 6.0, 1: 4.5, 2: 1.0}),
    ("[1] -1.5\n[2] -> -2\n[3] 3 - 4", {0: -1.5, 1: -2.0, 2: 3.0}),  # a dash before a digit is a sign
    ("Scores: [2] 9/10, [1] 4/10", {1: 9.0, 0: 4.0}),
    ("[5, 6, 7]", {0: 5.0, 1: 6.0, 2: 7.0}),                  # a list in passage order
    ('[{"id": 3, "score": 1}, {"passage": 1, "relevance": 8}]', {2: 1.0, 0: 8.0}),
    ('{"1": 9, "1 ": 2, "7": 5, "2": null, "3": "n/a"}', {0: 9.0}),  # first wins; out of range, null, text: no score
    ('{"1": NaN, "2": 4}', {1: 4.0}),
    ("<think>[1] 10 surely</think>\n{\"2\": 1}", {1: 1.0}),  # the reasoning is not the answer
    ('Here: {"1": 2, "2": 9} (passage 2 is best; {see above})', {0: 2.0, 1: 9.0}),  # text after the object
    ('{"1": 6, "2": 7.5, "3": "4",}', {0: 6.0, 1: 7.5, 2: 4.0}),  # a trailing comma: the pairs are read
    ("[2] > [1] > [3]", {}),                                  # a ranking holds no score
    ("I cannot judge these passages.", {}), ("", {}),
])
def test_group_scores_are_read_from_json_or_lines(answer: str, expected: dict):
    assert parse_group_scores(answer, 3) == expected


def test_a_group_of_one_may_be_answered_with_a_bare_number():
    assert parse_group_scores(" 7.5\n", 1) == {0: 7.5} and parse_group_scores("7.5", 2) == {}
    assert parse_group_scores("[1] 7.5", 1) == {0: 7.5} and parse_group_scores("[6]", 1) == {0: 6.0}
    assert parse_group_scores("seven", 1) == {}


def test_the_groupwise_prompt_numbers_each_passage_and_asks_for_json():
    messages = groupwise_messages("which [2] gene", ["first  passage [1]", "second " + "word " * 400])
    assert [message["role"] for message in messages] == ["system", "user"]
    user = messages[1]["content"]
    assert user.startswith("Search query: which (2) gene\n\nThe 2 passages below are numbered [1] to [2].")
    assert "[1] first passage (1)\n\n[2] second word" in user and user.count("word") == 299  # cut to 300 words
    assert 'for example {"1": 8, "2": 3.5}' in user and "from 0 (nothing to do with the query) to 10" in user


def test_groupings_cover_every_document_once_in_near_equal_groups():
    endpoint = Endpoint("http://127.0.0.1:9/v1")
    doc_ids = [f"d{i}" for i in range(45)]
    random_three = GroupwiseLLMReranker("m", LLMRerankerConfig(endpoint, group_size=20, regroup=3))
    groupings = random_three.groupings("q1", doc_ids)
    assert len(groupings) == 3
    for groups in groupings:
        assert [len(group) for group in groups] == [15, 15, 15]  # ceil(45 / 20) = 3 groups of near-equal size
        assert sorted(doc_id for group in groups for doc_id in group) == sorted(doc_ids)
    assert groupings[0] != groupings[1] != groupings[2]
    assert random_three.groupings("q1", doc_ids) == groupings  # seeded: the same every time
    assert random_three.groupings("q2", doc_ids) != groupings  # per query
    one = GroupwiseLLMReranker("m", LLMRerankerConfig(endpoint, group_size=20))
    assert one.groupings("q1", doc_ids) == groupings[:1]  # regrouping 0 is --regroup 1's grouping
    other_seed = GroupwiseLLMReranker("m", LLMRerankerConfig(endpoint, group_size=20, group_seed=7))
    assert other_seed.groupings("q1", doc_ids) != groupings[:1]
    ordered = GroupwiseLLMReranker("m", LLMRerankerConfig(endpoint, group_size=20, grouping="first-stage"))
    assert ordered.groupings("q1", doc_ids) == [[doc_ids[:15], doc_ids[15:30], doc_ids[30:]]]
    small = GroupwiseLLMReranker("m", LLMRerankerConfig(endpoint, group_size=4, grouping="first-stage"))
    assert [len(group) for group in small.groupings("q", doc_ids[:10])[0]] == [3, 3, 4]


def test_groupwise_settings_are_checked_and_named():
    endpoint = Endpoint("http://127.0.0.1:9/v1")
    for settings, field, fact in (({"group_size": 0}, "group_size", "must be an integer of at least 1"),
                                  ({"regroup": 0}, "regroup", "must be an integer of at least 1"),
                                  ({"grouping": "sorted"}, "grouping", "must be one of random, first-stage"),
                                  ({"group_seed": "x"}, "group_seed", "must be an integer"),
                                  ({"group_seed": -1}, "group_seed", "must be an integer of at least 0"),
                                  ({"grouping": "first-stage", "group_seed": 1}, "group_seed",
                                   "reaches no code with --grouping first-stage"),
                                  ({"grouping": "first-stage", "regroup": 2}, "regroup",
                                   "reaches no code with --grouping first-stage"),
                                  ({"reasoning_effort": "max"}, "reasoning_effort", "must be one of none, minimal, low"),
                                  ({"show_scores": "yes"}, "show_scores", "is a switch")):
        with pytest.raises(SettingError) as raised:
            LLMRerankerConfig(endpoint, **settings)
        assert raised.value.field == field and raised.value.flag_message.startswith(f"{flag_of(field)} {fact}")
    reranker = as_reranker("llm-groupwise:Qwen/Qwen3-32B", llm=LLMRerankerConfig(endpoint))
    assert isinstance(reranker, GroupwiseLLMReranker)
    assert reranker.name == "Qwen/Qwen3-32B (groupwise @127.0.0.1-9 g20 random seed0)"
    assert reranker.revision.startswith("groupwise-prompt-")
    named = as_reranker("llm-groupwise:m", llm=LLMRerankerConfig(endpoint, group_size=10, group_seed=3, regroup=4,
                                                                 max_tokens=2048, reasoning_effort="high"))
    assert named.name == "m (groupwise @127.0.0.1-9 g10 random seed3 regroup4 max2048 effort-high)"
    ordered = as_reranker("llm-groupwise:m", llm=LLMRerankerConfig(endpoint, grouping="first-stage"))
    assert ordered.name == "m (groupwise @127.0.0.1-9 g20 first-stage)"
    config = build_reranker_config("http://h/v1", what="x", check_key=False, group_size=5, grouping="first-stage", regroup=1)
    assert (config.group_size, config.grouping, config.group_seed, config.regroup) == (5, "first-stage", None, 1)
    with pytest.raises(SettingError) as seed:
        build_reranker_config("http://h/v1", what="x", check_key=False, group_seed=-1)
    assert seed.value.field == "group_seed" and "must be an integer of at least 0" in str(seed.value)
    assert "llm-listwise scores no groups" in settings_unused_by("listwise")["group_size"]
    assert "llm-groupwise scores groups of --group-size documents" in settings_unused_by("groupwise")["window"]
    assert "llm-pointwise reads the first answer token" in settings_unused_by("pointwise")["reasoning_effort"]
    assert "InsertRank" in settings_unused_by("groupwise")["show_scores"]


@pytest.mark.parametrize("settings", [
    {"grouping": "first-stage"}, {"grouping": "first-stage", "group_size": 7}, {"group_seed": 0}, {"group_seed": 1},
    {"group_seed": 5, "group_size": 7}, {"group_size": 30}, {"group_size": 1, "group_seed": 2},
    {"group_seed": 3, "group_size": 7, "regroup": 3},
])
def test_groupwise_order_is_the_keys_order_for_any_grouping(own_cache: Path, monkeypatch, settings: dict):
    first_stage, queries, documents = toy_data(count=30, queries=2)
    with LoopbackOpenAI(reply=keyed_scores) as server:
        monkeypatch.setenv("OPENAI_API_KEY", server.api_key)
        reranker = GroupwiseLLMReranker("test-llm", config_for(server, **settings))
        run = reranker.rerank(first_stage, queries, documents, depth=30, show_progress=False)
        bodies = server.completions()
    size, regroup = settings.get("group_size", 20), settings.get("regroup", 1)
    groups = math.ceil(30 / size)
    assert len(bodies) == 2 * regroup * groups == reranker.last_report.usage["groups"]
    assert all(len(group_passages(body)) <= size for body in bodies)
    for query_id, ranked in run.items():
        assert list(ranked) == keyed_order(first_stage, documents, query_id)  # ties in the first stage's order
        assert list(ranked.values()) == [float(30 - rank) for rank in range(30)]
    assert (reranker.last_report.usage["missing_scores"], reranker.last_report.usage["unparsed_answers"]) == (0, 0)
    if settings.get("grouping") == "first-stage":  # consecutive slices of the first stage's order
        first = [documents[doc_id] for doc_id in list(first_stage["q0"])[:math.ceil(30 / groups)]]
        assert any(group_passages(body) == first for body in bodies)


def test_random_groupings_differ_by_seed_and_regroup_only_adds_groupings(own_cache: Path, monkeypatch):
    """--regroup R asks R groupings (the first is --regroup 1's, its answers reused from the cache); with a consistent
    key the order is the same; --group-seed draws other groups."""
    first_stage, queries, documents = toy_data(count=30, queries=2)
    with LoopbackOpenAI(reply=keyed_scores) as server:
        monkeypatch.setenv("OPENAI_API_KEY", server.api_key)
        runs, groups = {}, {}
        for name, settings in (("one", {"group_size": 10}), ("three", {"group_size": 10, "regroup": 3}),
                               ("seed", {"group_size": 10, "group_seed": 9})):
            before = len(server.completions())
            reranker = GroupwiseLLMReranker("test-llm", config_for(server, **settings))
            runs[name] = reranker.rerank(first_stage, queries, documents, depth=30, show_progress=False)
            groups[name] = {tuple(group_passages(body)) for body in server.completions()[before:]}
            usage = reranker.last_report.usage
            assert usage["requests"] + usage["cached_answers"] + usage["repeated_questions"] == usage["groups"]
            if name == "three":
                assert (usage["groups"], usage["requests"], usage["cached_answers"]) == (18, 12, 6)
    assert len(groups["one"]) == 6 and len(groups["three"]) == 12  # only the two new groupings are sent
    assert not groups["seed"] & groups["one"]
    assert runs["one"] == runs["three"] == runs["seed"]


def test_regroup_averages_the_scores_of_each_grouping(own_cache: Path, monkeypatch, tmp_path: Path):
    """A noisy key (each score depends on the whole group): the order is that of each document's mean score over the
    R groupings the server was asked, and the traces hold those scores."""
    first_stage, queries, documents = toy_data(count=30, queries=3)
    by_text = {text: doc_id for doc_id, text in documents.items()}
    by_query = {text: query_id for query_id, text in queries.items()}
    with LoopbackOpenAI(reply=noisy_scores) as server:
        monkeypatch.setenv("OPENAI_API_KEY", server.api_key)
        single = GroupwiseLLMReranker("test-llm", config_for(server, group_size=8)).rerank(
            first_stage, queries, documents, depth=30, show_progress=False)
        reranker = GroupwiseLLMReranker("test-llm", config_for(server, group_size=8, regroup=4, group_seed=2))
        run = reranker.rerank(first_stage, queries, documents, depth=30, show_progress=False)
        asked = [body for body in server.completions()]
    sent: dict[str, dict[str, list[float]]] = {query_id: {} for query_id in queries}
    for body in asked[-4 * 4 * 3:]:  # the regroup-4 run's 4 groupings x 4 groups x 3 queries
        for passage in group_passages(body):
            sent[by_query[group_query(body)]].setdefault(by_text[passage], []).append(round(noisy_score(body, passage), 2))
    for query_id, ranked in run.items():
        assert all(len(scores) == 4 for scores in sent[query_id].values()) and len(sent[query_id]) == 30
        means = {doc_id: math.fsum(scores) / 4 for doc_id, scores in sent[query_id].items()}
        assert list(ranked) == sorted(first_stage[query_id], key=lambda doc_id: -means[doc_id])
    assert any(list(run[query_id]) != list(single[query_id]) for query_id in queries)  # the averaging changed the order
    traces = reranker.last_report.traces
    assert reranker.last_report.traces_name == "groupwise" and len(traces) == 48
    assert sorted((trace["query_id"], trace["regrouping"], trace["group"]) for trace in traces) == [
        (trace["query_id"], trace["regrouping"], trace["group"]) for trace in traces]
    for trace in traces:
        assert [sent[trace["query_id"]][doc_id] for doc_id in trace["doc_ids"]]  # every document of it was scored
        assert all(score in sent[trace["query_id"]][doc_id] for doc_id, score in zip(trace["doc_ids"], trace["scores"], strict=True))


def garbled(body: dict) -> str:
    """One group in four answered with nothing, one with prose, one with two passages' scores missing or unreadable,
    one well."""
    passages = group_passages(body)
    choice = text_digest(json.dumps(body["messages"])) % 4
    if choice == 0:
        return ""
    if choice == 1:
        return "These passages are all somewhat relevant."
    scores = {str(number): key(passage) + 1 for number, passage in enumerate(passages, start=1)}
    if choice == 2:
        del scores["1"]
        scores["2"] = "n/a"
    return json.dumps(scores)


def _fallback_scores(body: dict) -> dict[str, float]:
    """What the documented fallback gives each passage of a ``garbled`` answer: its score, else the lowest score the
    answer gave, else 0."""
    passages, answer = group_passages(body), garbled(body)
    read = {passages[position]: score for position, score in parse_group_scores(answer, len(passages)).items()}
    floor = min(read.values()) if read else 0.0
    return {passage: read.get(passage, floor) for passage in passages}


def test_garbled_and_missing_scores_are_counted_and_fall_back(own_cache: Path, monkeypatch, caplog):
    first_stage, queries, documents = toy_data(count=30, queries=3)
    by_text = {text: doc_id for doc_id, text in documents.items()}
    with LoopbackOpenAI(reply=garbled) as server:
        monkeypatch.setenv("OPENAI_API_KEY", server.api_key)
        reranker = GroupwiseLLMReranker("test-llm", config_for(server, group_size=5, regroup=2))
        run = reranker.rerank(first_stage, queries, documents, depth=30, show_progress=False)
        bodies = server.completions()
    usage = reranker.last_report.usage
    choices = [text_digest(json.dumps(body["messages"])) % 4 for body in bodies]
    assert usage["groups"] == len(bodies) == 36 and {0, 1, 2, 3} <= set(choices)
    assert usage["empty_answers"] == choices.count(0) and usage["unparsed_answers"] == choices.count(1)
    assert usage["missing_scores"] == 5 * (choices.count(0) + choices.count(1)) + 2 * choices.count(2)
    means: dict[str, dict[str, list[float]]] = {}
    for body in bodies:
        query_id = next(query_id for query_id, text in queries.items() if text == group_query(body))
        for passage, score in _fallback_scores(body).items():
            means.setdefault(query_id, {}).setdefault(by_text[passage], []).append(score)
    for query_id, ranked in run.items():
        assert list(ranked) == sorted(first_stage[query_id], key=lambda doc_id: -sum(means[query_id][doc_id]) / 2)
    missing = next(trace for trace in reranker.last_report.traces if trace["scores"][0] is None and trace["scores"][2] is not None)
    assert missing["scores"][1] is None and missing["fallback"] == min(score for score in missing["scores"] if score is not None)
    with LoopbackOpenAI(reply=lambda body: "no idea") as server:  # every answer unreadable: the first stage's order
        monkeypatch.setenv("OPENAI_API_KEY", server.api_key)
        reranker = GroupwiseLLMReranker("test-llm", config_for(server, own_cache / "none", group_size=5))
        with caplog.at_level("WARNING"):
            run = reranker.rerank(first_stage, queries, documents, depth=30, show_progress=False)
    assert all(list(ranked) == list(first_stage[query_id]) for query_id, ranked in run.items())
    assert reranker.last_report.usage["unparsed_answers"] == 18 and reranker.last_report.usage["missing_scores"] == 90
    assert "18 of 18 groups (100%) were unparsed or empty (each scored its documents 0)" in caplog.text


def beyond_the_scale(body: dict) -> str:
    """Passage [1] scored 15 and passage [2] -1 on the prompt's 0-10 scale; the others their key (0 to 6)."""
    scores = {str(number): key(passage) for number, passage in enumerate(group_passages(body), start=1)}
    return json.dumps(scores | {"1": 15, "2": -1})


def test_scores_outside_the_scale_are_counted_warned_and_fall_back(own_cache: Path, monkeypatch, caplog):
    first_stage, queries, documents = toy_data(count=30, queries=2)
    by_text = {text: doc_id for doc_id, text in documents.items()}
    with LoopbackOpenAI(reply=beyond_the_scale) as server:
        monkeypatch.setenv("OPENAI_API_KEY", server.api_key)
        reranker = GroupwiseLLMReranker("test-llm", config_for(server, group_size=5))
        with caplog.at_level("WARNING"):
            run = reranker.rerank(first_stage, queries, documents, depth=30, show_progress=False)
        bodies = server.completions()
    usage = reranker.last_report.usage
    assert len(bodies) == 2 * 30 // 5 == 12
    assert (usage["out_of_scale_scores"], usage["missing_scores"], usage["unparsed_answers"]) == (2 * 12, 0, 0)
    assert "test-llm" in caplog.text and "24 score(s) outside the 0-10 scale the prompt asks for were read as no score" in caplog.text
    expected: dict[str, dict[str, float]] = {}
    for body in bodies:  # [1] and [2] get the lowest in-scale score of their group, the others their key
        passages = group_passages(body)
        floor = min(key(passage) for passage in passages[2:])
        query_id = next(query_id for query_id, text in queries.items() if text == group_query(body))
        expected.setdefault(query_id, {}).update({by_text[passage]: floor if position < 2 else key(passage)
                                                  for position, passage in enumerate(passages)})
    for query_id, ranked in run.items():
        assert list(ranked) == sorted(first_stage[query_id], key=lambda doc_id: -expected[query_id][doc_id])
    trace = reranker.last_report.traces[0]
    assert trace["out_of_scale"] == {"1": 15.0, "2": -1.0} and trace["scores"][:2] == [None, None]
    assert trace["fallback"] == min(trace["scores"][2:])


def test_groupwise_answers_are_cached_and_a_rerun_sends_nothing(own_cache: Path, monkeypatch):
    first_stage, queries, documents = toy_data(count=30, queries=3)
    documents["d29"] = documents["d28"]  # a twin: the same question may come twice
    with LoopbackOpenAI(reply=keyed_scores) as server:
        monkeypatch.setenv("OPENAI_API_KEY", server.api_key)
        reranker = GroupwiseLLMReranker("test-llm", config_for(server, group_size=6, regroup=2))
        first = reranker.rerank(first_stage, queries, documents, depth=30, show_progress=False)
        sent, first_usage = len(server.completions()), reranker.last_report.usage
        again = reranker.rerank(first_stage, queries, documents, depth=30, show_progress=False)
        assert len(server.completions()) == sent  # the rerun sends no request
    usage = reranker.last_report.usage
    assert again == first and first_usage["requests"] == sent == 30
    assert (usage["requests"], usage["cached_answers"], usage["groups"]) == (0, 30, 30)


def test_groupwise_end_to_end_from_the_cli(mirror_env: Path, own_cache: Path, tmp_path: Path, monkeypatch, capsys):
    with LoopbackOpenAI(reply=keyed_scores) as server:
        monkeypatch.setenv("OPENAI_API_KEY", server.api_key)
        argv = ["evaluate", "--task", TASK, "--rerank", "llm-groupwise:test-llm", "--first-stage", "bm25-robertson",
                "--rerank-depth", "20", "--group-size", "8", "--group-seed", "4", "--regroup", "2",
                "--base-url", server.base_url, "--output", str(tmp_path / "out"), "--trec", "--quiet"]
        assert main(argv) == 0
        printed = capsys.readouterr().out
        sent = len(server.completions())
        assert main(argv) == 0
        again = capsys.readouterr().out
        assert len(server.completions()) == sent
    name = f"test-llm (groupwise @{server_host(server)} g8 random seed4 regroup2)"
    (path,) = (tmp_path / "out" / "results").glob(f"{name.replace(' ', '_')}--bm25-robertson--top_20/*/{TASK}.json")
    provenance = json.loads(path.read_text())["r2med_provenance"]
    assert provenance["reranker"] == name and provenance["reranker_revision"].startswith("groupwise-prompt-")
    usage = provenance["rerank_usage"]
    assert usage["groups"] == sent and usage["requests"] == 0 and usage["missing_scores"] == 0
    assert f"rerank usage: {sent} groups: {sent} requests + 0 answers from the cache" in printed
    assert f"rerank usage: {sent} groups: 0 requests + {sent} answers from the cache" in again
    assert "groups: 0 unparsed_answers, 0 empty_answers, 0 missing_scores" in again
    traces = [json.loads(line) for line in path.with_name(f"{TASK}.groupwise.jsonl").read_text().splitlines()]
    assert len(traces) == sent and {trace["regrouping"] for trace in traces} == {0, 1}
    assert not path.with_name(f"{TASK}.reasoning.jsonl").exists()
    from r2med_plugin.data.loader import load_task

    data = load_task(TASK)
    texts = dict(zip(data.corpus["id"].to_list(), data.corpus["text"].to_list(), strict=True))
    shown = {doc_id: " ".join(text.strip().split()[:300]).replace("[", "(").replace("]", ")") for doc_id, text in texts.items()}
    reranked = _trec(next((tmp_path / "out" / "runs").rglob(f"{TASK}.trec")))
    for ranked in reranked.values():
        keys = [key(shown[doc_id]) for doc_id in ranked]
        assert keys == sorted(keys, reverse=True)  # the key's order (ties: the first stage's)


_trec = trec_rankings


def _sweep_spec(tmp_path: Path, reranker: dict) -> Path:
    import yaml

    path = tmp_path / "sweep.yaml"
    path.write_text(yaml.safe_dump({"output": str(tmp_path / "sweep-out"), "tasks": [TASK], "rerankers": [reranker]}))
    return path


def test_a_sweep_spec_names_a_groupwise_reranker(mirror_env: Path, own_cache: Path, tmp_path: Path, monkeypatch):
    from r2med_plugin.sweep import expand_jobs, load_spec, run_sweep

    with LoopbackOpenAI(reply=keyed_scores) as server:
        monkeypatch.setenv("OPENAI_API_KEY", server.api_key)
        entry = {"model": "llm-groupwise:test-llm", "first_stage": "bm25-robertson", "depth": 10, "base_url": server.base_url,
                 "group_size": 5, "grouping": "random", "group_seed": 1, "regroup": 2, "reasoning_effort": "low"}
        spec = load_spec(_sweep_spec(tmp_path, entry))
        assert run_sweep(spec, show_progress=False).count("done") == 1
        assert {body["reasoning_effort"] for body in server.completions()} == {"low"}
        other = load_spec(_sweep_spec(tmp_path, entry | {"regroup": 3}))
    assert [job.job_id for job in expand_jobs(other)] != [job.job_id for job in expand_jobs(spec)]
    (path,) = (tmp_path / "sweep-out" / "results").glob(
        f"test-llm_(groupwise_@*_g5_random_seed1_regroup2_effort-low)--bm25-robertson--top_10/*/{TASK}.json")
    assert json.loads(path.read_text())["r2med_provenance"]["rerank_usage"]["groups"] > 0


@pytest.mark.parametrize(("entry", "words"), [
    ({"model": "llm-listwise:m", "group_size": 10}, r"rerankers\[0\]\.group_size.*llm-listwise.*llm-groupwise's"),
    ({"model": "llm-setwise:m", "regroup": 2}, r"rerankers\[0\]\.regroup.*llm-setwise"),
    ({"model": "llm-groupwise:m", "show_scores": True}, r"rerankers\[0\]\.show_scores.*llm-groupwise.*InsertRank"),
    ({"model": "llm-groupwise:m", "window": 10}, r"rerankers\[0\]\.window.*llm-groupwise scores groups"),
    ({"model": "llm-pointwise:m", "reasoning_effort": "high"}, r"rerankers\[0\]\.reasoning_effort.*llm-pointwise"),
    ({"model": "llm-groupwise:m", "grouping": "first-stage", "group_seed": 2}, r"group_seed reaches no code with grouping first-stage"),
    ({"model": "llm-listwise:m", "show_scores": "yes"}, r"show_scores is a switch"),
    ({"model": "org/cross-encoder", "base_url": None, "regroup": 2}, r"rerankers\[0\]\.regroup.*is a cross-encoder"),
])
def test_groupwise_and_listwise_sweep_settings_are_refused_where_unread(tmp_path: Path, entry: dict, words: str):
    from r2med_plugin.sweep import load_spec
    from r2med_plugin.sweep.spec import SpecError

    entry = {"first_stage": "bm25-robertson", "base_url": "http://127.0.0.1:9/v1"} | entry
    with pytest.raises(SpecError, match=words):
        load_spec(_sweep_spec(tmp_path, {name: value for name, value in entry.items() if value is not None}))
