"""evaluation.preparation.prepare: the checks that need no data, then the models a multi-task run shares, loaded once."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from r2med_plugin.evaluation.preparation import prepare
from r2med_plugin.evaluation.request import EvaluationRequest, Outputs
from r2med_plugin.evaluation.specs import Bm25Spec, ModelSpec, RunFileSpec


def test_the_shared_encoder_loads_once_and_the_requests_keep_their_identity(monkeypatch: pytest.MonkeyPatch):
    loads, said = [], []
    model = SimpleNamespace(name="org/model")
    monkeypatch.setattr(ModelSpec, "load", lambda self, **k: loads.append(self.name) or model)
    spec = ModelSpec("org/model")
    requests = [EvaluationRequest(task, spec, show_progress=False) for task in ("NanoR2MEDBiology", "NanoR2MEDBioinformatics")]
    prepared = prepare(requests, loaded=lambda name, loaded: said.append((name, loaded)))
    assert loads == ["org/model"] and len(said) == 1
    assert [request.first_stage.loaded for request in prepared] == [model, model]
    assert [request.identity() for request in prepared] == [request.identity() for request in requests]
    assert [request.recorded() for request in prepared] == [request.recorded() for request in requests]


def test_a_bad_device_and_an_output_file_are_refused_before_any_model_loads(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    from r2med_plugin.errors import UserError

    monkeypatch.setattr(ModelSpec, "load", lambda self, **k: pytest.fail("loaded before the checks"))
    with pytest.raises(UserError) as raised:
        prepare([EvaluationRequest("NanoR2MEDBiology", ModelSpec("org/model", device="cdua"))])
    assert getattr(raised.value, "field", None) == "device"
    taken = tmp_path / "a-file"
    taken.write_text("x")
    with pytest.raises(UserError, match="is a file"):
        prepare([EvaluationRequest("NanoR2MEDBiology", ModelSpec("org/model"), outputs=Outputs(str(taken)))])


def test_every_task_run_file_is_checked_first(tmp_path: Path):
    from r2med_plugin.errors import MissingFileError
    from r2med_plugin.evaluation.specs import CrossEncoderSpec

    folder = tmp_path / "runs"
    folder.mkdir()
    request = EvaluationRequest("NanoR2MEDBiology", RunFileSpec(str(folder)), CrossEncoderSpec("org/cross-encoder"))
    with pytest.raises(MissingFileError):
        prepare([request])
    assert prepare([EvaluationRequest("NanoR2MEDBiology", Bm25Spec("bm25-hakari"))])[0].first_stage == Bm25Spec("bm25-hakari")


def test_a_python_object_reranker_is_kept_as_given_and_a_bm25_index_is_bm25_lucene_only():
    from r2med_plugin.evaluation.specs import PrebuiltReranker

    scorer = SimpleNamespace(name="scorer")
    request = EvaluationRequest("NanoR2MEDBiology", Bm25Spec("bm25-hakari"), PrebuiltReranker(scorer))
    assert prepare([request])[0].reranker.value is scorer  # nothing to load, nothing refused
    with pytest.raises(TypeError, match="bm25-lucene"):
        EvaluationRequest("NanoR2MEDBiology", Bm25Spec("bm25-robertson")).with_loaded(object())


def test_the_package_own_first_stage_objects_are_named_not_passed(mirror_env: Path):
    """A Bm25 object would search with its own expansion while the result named none (and fused with itself)."""
    from r2med_plugin.errors import UserError
    from r2med_plugin.evaluation.first_stages import Bm25
    from r2med_plugin.evaluation.runner import evaluate_task

    with pytest.raises(UserError, match="give its name"):
        evaluate_task("R2MEDBiology", Bm25("bm25-robertson", expansion="hyde/gpt4"), show_progress=False)
