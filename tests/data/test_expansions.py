"""Released and local expansions (r2med_plugin.data.expansions): edited or foreign expansion files are never filed as
the pinned data."""

from __future__ import annotations

import json
from pathlib import Path

import pytest


def test_an_edited_released_expansion_file_is_never_filed_as_verified_data(mirror_copy: Path, monkeypatch):
    import os

    import r2med_plugin
    from r2med_plugin.data.expansions import list_expansions, released_expansion_file
    from r2med_plugin.evaluation.runner import evaluate_task
    from tests.fixture_mirror import record_download_metadata

    spec = r2med_plugin.get_task_spec("R2MEDBioinformatics")
    record_download_metadata(mirror_copy / spec.hub_repo, spec.revision)
    expansion = list_expansions(spec.name)[0]
    run = dict(retriever="bm25-lucene", expansion=expansion, data_dir=mirror_copy, accept_drift=True, show_progress=False)
    before = evaluate_task(spec.name, **run)
    assert before.dataset_revision_verified and before.data.result_revision == f"{spec.revision}+count-drift"
    _, path = released_expansion_file(spec, expansion, data_dir=mirror_copy, accept_drift=True)
    path.write_text(path.read_text().replace("The answer", "Perhaps the answer"))
    later = path.stat().st_mtime + 60
    os.utime(path, (later, later))
    after = evaluate_task(spec.name, **run)
    assert not after.dataset_revision_verified
    assert after.data.result_revision.startswith(f"{spec.revision}+unverified-files-")
    plain = evaluate_task(spec.name, "bm25-lucene", data_dir=mirror_copy, accept_drift=True, show_progress=False)
    assert plain.dataset_revision_verified  # the task's own files are still the pinned ones


def test_released_expansion_versions_on_an_unverified_mirror_never_share_a_revision(mirror_copy: Path):
    from r2med_plugin.catalog import get_task_spec
    from r2med_plugin.data.expansions import list_expansions, released_expansion_file
    from r2med_plugin.evaluation.runner import evaluate_task

    expansion = list_expansions("R2MEDBiology")[0]
    run = dict(retriever="bm25-lucene", expansion=expansion, data_dir=mirror_copy, accept_drift=True, show_progress=False)
    first = evaluate_task("R2MEDBiology", **run).data.result_revision
    _, path = released_expansion_file(get_task_spec("R2MEDBiology"), expansion, data_dir=mirror_copy, accept_drift=True)
    path.write_text(path.read_text().replace("The answer", "Perhaps the answer"))
    assert evaluate_task("R2MEDBiology", **run).data.result_revision != first


def test_a_local_expansion_made_from_other_data_is_refused(mirror_env: Path, mirror_copy: Path, tmp_path: Path, monkeypatch):
    from r2med_plugin.evaluation.runner import evaluate_task
    from r2med_plugin.generation import generate_expansions
    from r2med_plugin.rules import SettingError
    from tests.support.loopback_openai import LoopbackOpenAI

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    with LoopbackOpenAI(api_key="sk-test", max_seconds=60) as server:
        generate_expansions("R2MEDBioinformatics", "hyde", "test-llm", server.base_url, out=tmp_path / "gen", show_progress=False)
    expansion = f"local:{tmp_path / 'gen' / 'hyde' / 'test-llm'}"
    evaluate_task("R2MEDBioinformatics", "bm25-lucene", expansion=expansion, show_progress=False)  # its own data: fine
    corpus = mirror_copy / "R2MED" / "Bioinformatics" / "corpus.jsonl"
    corpus.write_text(corpus.read_text().replace("the", "a", 1))
    with pytest.raises(SettingError) as refused:
        evaluate_task("R2MEDBioinformatics", "bm25-lucene", expansion=expansion, data_dir=mirror_copy, show_progress=False)
    assert refused.value.field == "expansion" and "was generated from R2MEDBioinformatics at dataset revision" in str(refused.value)
    assert refused.value.render("flag").startswith(f"--expansion {expansion}: ")


def test_an_expansion_name_is_parsed_once_and_stays_the_text_it_was_parsed_from():
    import copy
    import json
    import pickle

    from r2med_plugin.data.expansions import ExpansionName, expansion_name

    released, every, local = ExpansionName("hyde/o3-mini"), ExpansionName("all"), ExpansionName("local:~/exp/hyde/my-llm")
    assert (released.kind, released.method, released.llm) == ("released", "hyde", "o3-mini")
    assert (every.kind, every.is_all, every.is_local) == ("all", True, False)
    assert (local.kind, local.method, local.llm, local.is_local) == ("local", "hyde", "my-llm", True)
    assert local.folder == Path("~/exp/hyde/my-llm").expanduser()
    with pytest.raises(ValueError, match="hyde/o3-mini is a released expansion, not a local folder"):
        _ = released.folder
    # the same string everywhere it is written: identities, job ids and records do not move
    assert released == "hyde/o3-mini" and json.dumps({"e": local}) == '{"e": "local:~/exp/hyde/my-llm"}'
    assert repr(released) == "'hyde/o3-mini'"
    for copied in (copy.deepcopy(local), pickle.loads(pickle.dumps(local))):
        assert type(copied) is ExpansionName and copied.method == "hyde" and copied == local
    assert ExpansionName(released) is released and expansion_name(None) is None
    with pytest.raises(TypeError, match="an expansion is a name such as hyde/o3-mini.*got 3"):
        ExpansionName(3)


def test_a_request_carries_the_parsed_expansion_and_its_identity_holds_the_text():
    """The identity is the one computed before expansions were parsed values (commit 601aabc)."""
    from r2med_plugin.data.expansions import ExpansionName
    from r2med_plugin.evaluation.request import EvaluationRequest, Scoring
    from r2med_plugin.evaluation.specs import Bm25Spec

    scoring = Scoring(expansion="hyde/o3-mini")
    assert type(scoring.expansion) is ExpansionName and scoring.expansion.llm == "o3-mini"
    request = EvaluationRequest("R2MEDBiology", Bm25Spec("bm25-lucene"), scoring=scoring)
    payload = request.to_dict()
    assert payload["scoring"]["expansion"] == "hyde/o3-mini"
    assert EvaluationRequest.from_dict(json.loads(json.dumps(payload))).identity() == request.identity() == "197d34127612d4c7"


def test_a_missing_local_expansion_is_a_missing_file_named_by_the_expansion_setting(tmp_path: Path):
    from r2med_plugin.catalog import get_task_spec
    from r2med_plugin.data.expansions import resolve_local_expansion
    from r2med_plugin.rules import SettingFileError

    expansion = f"local:{tmp_path / 'hyde' / 'some-llm'}"
    with pytest.raises(SettingFileError) as missing:
        resolve_local_expansion(get_task_spec("R2MEDBiology"), expansion)
    assert isinstance(missing.value, FileNotFoundError) and missing.value.field == "expansion"
    assert missing.value.render("flag").startswith(f"--expansion {expansion}: no ")
    assert str(missing.value).startswith(f"expansion (--expansion) {expansion}: no ")
