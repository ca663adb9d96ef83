"""Holm and Bonferroni in numpy (r2med_plugin.significance.corrected) against statsmodels' multipletests."""

from __future__ import annotations

import gc

import numpy as np
import pytest
from statsmodels.stats.multitest import multipletests

from r2med_plugin import significance as sig


def _vectors() -> list[np.ndarray]:
    """Random p-value families of 1 to 40 tests: uniform, clustered near alpha, coarse (many ties), with exact 0s,
    1s and NaNs mixed in."""
    rng = np.random.default_rng(43)
    vectors = []
    for _ in range(500):
        size = int(rng.integers(1, 41))
        kind = int(rng.integers(0, 4))
        if kind == 0:
            p = rng.random(size)
        elif kind == 1:
            p = rng.uniform(0.0, 0.1, size)
        elif kind == 2:
            p = rng.integers(0, 11, size) / 10.0  # 0.0, 0.1, ... 1.0: ties, 0 and 1
        else:
            p = rng.choice([0.0, 0.001, 0.01, 0.0125, 0.025, 0.05, 1.0], size)
        if rng.random() < 0.25:
            p[rng.random(size) < 0.2] = np.nan
        vectors.append(p)
    return vectors


@pytest.mark.parametrize("correction", ["holm", "bonferroni"])
@pytest.mark.parametrize("alpha", [0.01, 0.05, 0.1])
def test_corrections_equal_statsmodels_bit_for_bit(correction, alpha, monkeypatch):
    # multipletests' holm branch runs a full gc.collect() per call (0.1-0.6 s here); it changes no value
    monkeypatch.setattr(gc, "collect", lambda *args: 0)
    vectors = _vectors()
    assert sum(np.isnan(p).any() for p in vectors) > 40 and sum(len(set(p.tolist())) < len(p) for p in vectors) > 150
    for p in vectors:
        original = p.copy()
        adjusted, rejected = sig.corrected(p, correction, alpha)
        reference_rejected, reference_adjusted, _, _ = multipletests(p, alpha=alpha, method=correction)
        assert adjusted.tobytes() == np.asarray(reference_adjusted, dtype=np.float64).tobytes(), p  # NaN where NaN
        assert rejected.tolist() == reference_rejected.tolist(), p
        assert adjusted.dtype == np.float64 and rejected.dtype == bool
        assert np.array_equal(p, original, equal_nan=True)  # the input is not touched


def test_holm_by_hand_with_ties_nan_and_the_ends():
    adjusted, rejected = sig.corrected([0.01, 0.04, 0.03], "holm")
    assert adjusted.tolist() == pytest.approx([0.03, 0.06, 0.06]) and rejected.tolist() == [True, False, False]
    # tied p-values share one adjusted value; 0 stays 0; 1 and anything pushed over 1 is 1
    adjusted, rejected = sig.corrected([0.02, 0.0, 0.02, 1.0, 0.4], "holm")
    assert adjusted.tolist() == pytest.approx([0.08, 0.0, 0.08, 1.0, 0.8]) and rejected.tolist() == [False, True, False, False, False]
    # NaN counts in the family (3 tests), is sorted last and stays NaN
    adjusted, rejected = sig.corrected([np.nan, 0.01, 0.02], "holm")
    assert np.isnan(adjusted[0]) and adjusted[1:].tolist() == pytest.approx([0.03, 0.04])
    assert rejected.tolist() == [True, True, True]  # as multipletests: a NaN never stops the step-down


def test_bonferroni_and_none_by_hand():
    adjusted, rejected = sig.corrected([0.01, 0.3, np.nan, 0.0], "bonferroni", 0.05)
    assert adjusted[[0, 1, 3]].tolist() == pytest.approx([0.04, 1.0, 0.0]) and np.isnan(adjusted[2])
    assert rejected.tolist() == [True, False, False, True]
    adjusted, rejected = sig.corrected([0.01, 0.3], "none", 0.05)
    assert adjusted.tolist() == [0.01, 0.3] and rejected.tolist() == [True, False]
    empty, none_rejected = sig.corrected([], "holm")
    assert empty.shape == (0,) and none_rejected.shape == (0,)
    with pytest.raises(ValueError, match="unknown correction 'fdr_bh'.*--correction"):
        sig.corrected([0.1], "fdr_bh")


def test_significance_needs_no_statsmodels(tmp_path):
    """corrected() runs where statsmodels cannot be imported (it is in the test extra only)."""
    import subprocess
    import sys

    code = ("import sys; sys.modules['statsmodels'] = None\n"
            "from r2med_plugin import significance as sig\n"
            "print(sig.corrected([0.01, 0.04, 0.03], 'holm')[0].round(6).tolist())")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[0.03, 0.06, 0.06]"
