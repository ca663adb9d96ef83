"""The sentence-transformers encoder (r2med_plugin.models.sentence_transformer): loading prints no bar of its own."""

from __future__ import annotations

import pytest


def test_loading_a_model_prints_no_loading_weights_bar(capfd: pytest.CaptureFixture[str]):
    """The demo printed transformers' "Loading weights" bar between its own lines; our loaders switch it off while
    a model loads, and give it back as it was."""
    from transformers.utils import logging as transformers_logging

    from r2med_plugin.integrations.demo import packaged_minilm
    from r2med_plugin.models.sentence_transformer import SentenceTransformerEncoder

    transformers_logging.enable_progress_bar()
    SentenceTransformerEncoder("minilm-packaged")
    assert packaged_minilm() is not None
    assert "Loading weights" not in capfd.readouterr().err
    assert transformers_logging.is_progress_bar_enabled()
