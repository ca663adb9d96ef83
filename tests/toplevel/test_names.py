"""ResultName and DatasetRevision: format and parse are exact inverses (property tests), and the names
results were filed under before these values existed still parse to what they meant."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from r2med_plugin.identifiers import EXPANSION_METHODS, DatasetRevision, Expansion, ResultName

_WORD = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789._-", min_size=1, max_size=12).filter(
    lambda word: not word.startswith(("-", ".")))
_RETRIEVER = st.one_of(
    st.sampled_from(["bm25-lucene", "bm25-robertson"]),
    _WORD,
    st.builds(lambda org, name: f"{org}/{name}", _WORD, _WORD),
).filter(lambda name: not any(name.startswith(f"{method}/") for method in EXPANSION_METHODS) and not name.startswith("local/"))
_HEX8 = st.text(alphabet="0123456789abcdef", min_size=8, max_size=8)
_EXPANSION = st.builds(
    lambda method, llm, local, folder: Expansion(method, llm, local=local, folder=folder if local else None),
    st.sampled_from(EXPANSION_METHODS), _WORD, st.booleans(), st.one_of(st.none(), _HEX8),
)
_PROMPT = st.one_of(st.none(), st.just("instruction"), st.builds(lambda h: f"prompt-{h}", _HEX8))
_PLAIN = st.builds(lambda retriever, expansion, prompt: ResultName(retriever, expansion=expansion, prompt=prompt),
                   _RETRIEVER, st.one_of(st.none(), _EXPANSION), _PROMPT)
_RERANKED = st.builds(lambda reranker, first, prompt, depth: ResultName(reranker, first_stage=first + (f"+{prompt}" if prompt else ""), depth=depth),
                      _RETRIEVER, _RETRIEVER, _PROMPT, st.integers(min_value=1, max_value=1000))


@given(st.one_of(_PLAIN, _RERANKED))
def test_result_names_round_trip(name: ResultName):
    assert ResultName.parse(name.format()) == name
    assert ResultName.parse(name.format()).format() == name.format()


@given(st.one_of(_HEX8, st.builds(lambda h: f"local-{h}", _HEX8), st.just("synthetic-sample")),
       st.one_of(st.none(), _HEX8), st.booleans())
def test_dataset_revisions_round_trip(commit: str, files: str | None, drift: bool):
    revision = DatasetRevision(commit, files, drift)
    assert DatasetRevision.parse(revision.format()) == revision


def test_names_filed_by_earlier_releases_parse_to_what_they_meant():
    name = ResultName.parse("local/hyde/qwen-7b@1a2b3c4d+org/model+instruction")
    assert name.retriever == "org/model" and name.prompt == "instruction"
    assert name.expansion == Expansion("hyde", "qwen-7b", local=True, folder="1a2b3c4d")
    assert ResultName.parse("hyde/o3-mini+bm25-lucene").is_bm25
    reranked = ResultName.parse("cross-encoder/ms-marco|minilm+instruction|top_10")
    assert (reranked.retriever, reranked.first_stage, reranked.depth, reranked.reranked) == ("cross-encoder/ms-marco", "minilm+instruction", 10, True)
    assert not ResultName.parse("org/bm25-lucene-ft").is_bm25
    revision = DatasetRevision.parse("abc123+unverified-files-0f0f0f0f0f0f0f0f+count-drift")
    assert (revision.commit, revision.files, revision.count_drift, revision.unverified) == ("abc123", "0f0f0f0f0f0f0f0f", True, True)
    assert DatasetRevision.parse("local-0f0f0f0f").files == "0f0f0f0f" and not DatasetRevision.parse("abc").unverified
