"""Hypothesis strategies for qrels, runs and table rows, shared by the property tests of several units."""

from __future__ import annotations

from hypothesis import strategies as st

doc_ids = st.sampled_from([f"d{i}" for i in range(12)])
query_ids = st.sampled_from([f"q{i}" for i in range(5)])
scores = st.floats(min_value=-100, max_value=100, allow_nan=False, allow_infinity=False)
qrels_strategy = st.dictionaries(query_ids, st.dictionaries(doc_ids, st.integers(0, 3), min_size=1, max_size=6), min_size=1, max_size=5)
run_strategy = st.dictionaries(query_ids, st.dictionaries(doc_ids, scores, min_size=1, max_size=12), max_size=5)
printable = st.text(st.characters(blacklist_categories=("Cc", "Cs")), min_size=1, max_size=30).filter(lambda s: s.strip())
