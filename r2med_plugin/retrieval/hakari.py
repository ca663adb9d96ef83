"""``bm25-hakari``: HAKARI-Bench's BM25, the one that built and scores NanoR2MED (DESIGN.md §5).

HAKARI-Bench (``hakari_bench/bm25.py``, read at commit 217c872) indexes an English task with bm25s (okapi:
``method="robertson"``, k1=1.5, b=0.75) over its own tokenizer, ``english_porter_stop``: tokens ``[A-Za-z0-9]+``
matched on the text as written and lower-cased after (one-character tokens kept), its own 74 stop words dropped,
then NLTK's Porter stemmer (NLTK_EXTENSIONS mode), which ``r2med_plugin.retrieval.porter`` reproduces word for word
without nltk. ``bm25-hakari:<tokenizer>`` selects its other tokenizers:

- ``regex``: ``\\w+`` (Python's Unicode word characters), lower-cased;
- ``english_regex``: ``[A-Za-z0-9]+``, lower-cased;
- ``english_porter``: ``english_regex`` then NLTK's Porter stemmer, no stop words;
- ``stemmer``: ``regex`` then PyStemmer's ``english`` (Snowball) stemmer;
- ``whitespace``: lower-cased, split on white space.

Its corpus holds each id once (first position, as a dict built from the rows keeps it) and leaves out documents
whose text is empty; its rankings are bm25s's own ``retrieve`` at depth ``min(top_k, documents)``, so tied scores
come out in bm25s's order (numpy's partition and sort), which the run's insertion order keeps. The text work is
done once per distinct token (lower-casing, stop words, stemming), not once per occurrence.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from functools import lru_cache
from itertools import chain
from typing import cast

import numpy as np
from tqdm.auto import tqdm

from r2med_plugin.errors import UserError
from r2med_plugin.quiet import bar_disabled
from r2med_plugin.retrieval.porter import PORTER_REVISION
from r2med_plugin.retrieval.porter import stem as porter_stem
from r2med_plugin.types import Run

K1, B = 1.5, 0.75
DEFAULT_TOKENIZER = "english_porter_stop"
RANK_DEPTH = 1000  # the depth whose bm25s order the head of every run keeps (see hakari_search)
TOKENIZERS = ("english_porter_stop", "regex", "english_regex", "english_porter", "stemmer", "whitespace")

_ENGLISH_TOKEN = re.compile(r"[A-Za-z0-9]+")
_WORD_TOKEN = re.compile(r"\w+")  # HAKARI writes \b\w+\b: a maximal run of \w is bounded by \b on both sides anyway

# HAKARI-Bench's English stop words (its _ENGLISH_STOPWORDS): a fact of its recipe, listed here as data.
STOP_WORDS = frozenset(
    "a an and are as at be been being but by for from had has have he her hers him his i if in into is it its itself "
    "me my myself of on or our ours ourselves she so than that the their theirs them themselves then there these they "
    "this those to too up very was we were what when where which who whom why will with you your yours yourself "
    "yourselves".split()
)


def check_tokenizer(tokenizer: str) -> str:
    if tokenizer not in TOKENIZERS:
        raise UserError(f"unknown HAKARI-Bench BM25 tokenizer {tokenizer!r}: use one of {', '.join(TOKENIZERS)}")
    return tokenizer


@lru_cache(maxsize=1)
def _snowball_english() -> Callable[[str], str]:
    import Stemmer

    return Stemmer.Stemmer("english").stemWord


def _raw_tokens(text: str, tokenizer: str) -> list[str]:
    if tokenizer == "whitespace":
        return text.lower().split()  # HAKARI lower-cases the whole text, then splits
    pattern = _WORD_TOKEN if tokenizer in ("regex", "stemmer") else _ENGLISH_TOKEN
    return pattern.findall(text)


def _term_of(tokenizer: str) -> Callable[[str], str | None]:
    """What one distinct raw token becomes: its term, or None where the tokenizer drops it."""
    if tokenizer == "english_porter_stop":
        return lambda token: None if (low := token.lower()) in STOP_WORDS else porter_stem(low)
    if tokenizer == "english_porter":
        return lambda token: porter_stem(token.lower())
    if tokenizer == "stemmer":
        snowball = _snowball_english()
        return lambda token: str(snowball(token.lower()))
    return str if tokenizer == "whitespace" else str.lower


def hakari_tokens(texts: Sequence[str], tokenizer: str = DEFAULT_TOKENIZER, *, show_progress: bool = False,
                  desc: str = "bm25-hakari: tokenising") -> list[list[str]]:
    """Each text's terms as HAKARI-Bench's ``tokenize_texts`` gives them for ``tokenizer``."""
    check_tokenizer(tokenizer)
    raw = [_raw_tokens(text, tokenizer) for text in tqdm(texts, desc=desc, disable=bar_disabled(show_progress), unit="text")]
    term_of = _term_of(tokenizer)
    terms = {token: term_of(token) for token in set(chain.from_iterable(raw))}
    if all(term is not None for term in terms.values()):
        return [[cast(str, terms[token]) for token in tokens] for tokens in raw]  # none is None here
    return [[term for token in tokens if (term := terms[token]) is not None] for tokens in raw]


def build_hakari_index(documents: Sequence[str], tokenizer: str = DEFAULT_TOKENIZER, *, show_progress: bool = True):
    """The bm25s index HAKARI-Bench builds: okapi (bm25s ``robertson``), k1=1.5, b=0.75."""
    import bm25s

    if not documents:
        raise UserError("the corpus is empty: there is nothing to index")
    tokens = hakari_tokens(documents, tokenizer, show_progress=show_progress, desc="bm25-hakari: tokenising documents")
    if not any(tokens):
        raise UserError(f"bm25-hakari:{tokenizer}: the corpus gives no BM25 tokens; HAKARI-Bench refuses such a corpus too")
    retriever = bm25s.BM25(k1=K1, b=B, method="robertson")
    retriever.index(tokens, show_progress=False)
    return retriever


def hakari_search(doc_ids: Sequence[str], documents: Sequence[str], query_ids: Sequence[str], queries: Sequence[str], *,
                  tokenizer: str = DEFAULT_TOKENIZER, top_k: int = 1000, show_progress: bool = True) -> Run:
    """HAKARI-Bench's computed BM25 run: each query's top ``top_k``, best first (the dict's order).

    The first ``RANK_DEPTH`` documents are bm25s's own ``retrieve`` at that depth, as HAKARI-Bench's evaluator ranks
    them (``run_hakari.py`` asks for 1000); bm25s breaks tied scores by numpy's partial sort, whose order depends on
    the depth asked for, so one depth fixes one order whatever ``top_k`` is: a shorter run is its head, a deeper one
    (a candidate-subset scorer reads every document) continues with the rest by score, then corpus position.
    ``doc_ids``/``documents``: the corpus, each id once; documents with empty text are left out, as HAKARI-Bench's
    loader leaves them out (they would change N and the average length)."""
    if len(doc_ids) != len(documents) or len(query_ids) != len(queries):
        raise ValueError("ids and texts must have the same length")
    if top_k < 1:
        raise UserError(f"top_k must be a positive integer, got {top_k}")
    kept = [index for index, text in enumerate(documents) if text]
    ids = np.asarray([doc_ids[index] for index in kept], dtype=object)
    retriever = build_hakari_index([documents[index] for index in kept], tokenizer, show_progress=show_progress)
    if not query_ids:
        return {}
    query_tokens = hakari_tokens(queries, tokenizer, desc="bm25-hakari: tokenising queries")
    head = min(RANK_DEPTH, len(ids))
    ranked, scores = retriever.retrieve(query_tokens, k=head, show_progress=False,
                                        return_as="tuple")
    ranked, scores = np.asarray(ranked, dtype=np.int64)[:, :top_k], np.asarray(scores, dtype=np.float64)[:, :top_k]
    if min(top_k, len(ids)) > head:
        ranked, scores = _continued(retriever, query_tokens, ranked, scores, min(top_k, len(ids)))
    return {
        query_id: dict(zip(ids[row].tolist(), values.tolist(), strict=True)) for query_id, row, values in zip(query_ids, ranked, scores, strict=True)
    }


def _continued(retriever, query_tokens: list[list[str]], ranked: np.ndarray, scores: np.ndarray, depth: int):
    """Each query's ranking past bm25s's head: the other documents by score descending, then corpus position."""
    from r2med_plugin.retrieval.ranking import top_k_indices

    documents = retriever.scores["num_docs"]
    positions = np.arange(documents, dtype=np.int64)
    rows, values = [], []
    for tokens, head, head_scores in zip(query_tokens, ranked, scores, strict=True):
        known = [token for token in tokens if token in retriever.vocab_dict]
        row = retriever.get_scores(known).astype(np.float64) if known else np.zeros(documents)
        row[head] = -np.inf
        rest = top_k_indices(row, positions, depth - len(head))
        rows.append(np.concatenate([head, rest]))
        values.append(np.concatenate([head_scores, row[rest]]))
    return np.vstack(rows), np.vstack(values)


def hakari_config(tokenizer: str = DEFAULT_TOKENIZER, top_k: int = RANK_DEPTH) -> dict[str, object]:
    """The BM25 configuration HAKARI-Bench records for a computed BM25 (its ``bm25_config_payload``'s fields)."""
    return {"backend": "bm25s", "algorithm": "okapi", "source": "computed_bm25s", "tokenizer": check_tokenizer(tokenizer),
            "tokenizer_name": None, "stemmer_algorithm": "english", "top_k": top_k, "k1": K1, "b": B,
            "show_progress": False, "auto_selected": False, "auto_detected_language": None,
            "auto_detection_language_counts": None, "auto_detection_sample_size": None}


def hakari_versions() -> str:
    """What the scores and the tie order depend on beyond the texts: bm25s, numpy and PyStemmer's versions and
    our Porter stemmer's revision."""
    from importlib.metadata import version

    packages = (f"{name}={version(name)}" for name in ("bm25s", "numpy", "PyStemmer"))
    return ",".join((*packages, f"porter={PORTER_REVISION}"))
