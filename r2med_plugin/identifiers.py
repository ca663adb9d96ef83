"""The identifiers results carry, and the one definition of each name list they are made of.

Result names and dataset revisions as values: one place that writes them (``format``) and reads them
back (``parse``), so no other module builds or takes apart these strings (r2med_plugin.evaluation.naming
says which name an evaluation's result gets).

``ResultName`` — the model name a result is filed under:

- ``bm25-lucene``, ``org/model``: a retriever;
- ``hyde/o3-mini+bm25-lucene``: with a released LLM expansion (``method/llm+retriever``);
- ``local/hyde/my-llm@1a2b3c4d+org/model``: with an expansion from ``r2med generate`` (``@`` the folder id);
- ``...+instruction`` / ``...+prompt-<hash8>``: with the task's official query prompt / another one;
- ``<reranker>|<first stage>|top_<k>``: a reranked first stage (the first stage may carry its prompt).

``DatasetRevision`` — what a result records as ``dataset_revision``: the commit (or ``local-<fingerprint>``
for a mirror without one, ``synthetic-sample`` for the demo), ``+unverified-files-<fingerprint>`` when a
mirror does not prove the commit it names, ``+count-drift`` when the counts differ from the dataset card.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

# The one definition of each name list.
EXPANSION_METHODS = ("hyde", "query2doc", "lamer", "search-r1", "search-o1")  # released expansions (R2MED's GAR configs)
GENERATION_METHODS = ("hyde", "query2doc", "lamer")  # what `r2med generate` makes (the official prompts)
# bm25-hakari: HAKARI-Bench's BM25 (its english_porter_stop tokenizer); bm25-hakari:<tokenizer>: its other tokenizers
HAKARI_BM25 = "bm25-hakari"
HAKARI_TOKENIZERS = ("regex", "english_regex", "english_porter", "stemmer", "whitespace")
BM25_VARIANTS = {"bm25-lucene": "lucene", "bm25-robertson": "robertson", HAKARI_BM25: "hakari",
                 **{f"{HAKARI_BM25}:{tokenizer}": f"hakari:{tokenizer}" for tokenizer in HAKARI_TOKENIZERS}}
BM25_NAMES = tuple(BM25_VARIANTS)
CANDIDATE_SUBSETS = ("bm25", "dense", "hybrid")  # NanoR2MED's stored candidate lists
Bm25Variant = str  # a value of BM25_VARIANTS: "lucene", "robertson", "hakari" or "hakari:<tokenizer>"
TieOrder = Literal["doc_id", "corpus"]  # pytrec_eval's (score desc, doc id desc), or the official stable sort
OfficialLayoutName = Literal["bm25", "dense"]
UNVERIFIED_MARKER = "+unverified-files-"
COUNT_DRIFT = "+count-drift"
SYNTHETIC_REVISION = "synthetic-sample"
LOCAL_REVISION_PREFIX = "local-"



def is_hakari_bm25(name: str) -> bool:
    """A bm25-hakari retriever: its runs keep bm25s's rank order (ties included), which a TREC file must keep."""
    return name == HAKARI_BM25 or name.startswith(HAKARI_BM25 + ":") and name in BM25_VARIANTS


_PROMPT = re.compile(r"\+(?P<prompt>instruction|prompt-[0-9a-f]{8})$")
_RERANKED = re.compile(r"^(?P<reranker>[^|]+)\|(?P<first_stage>[^|]+)\|top_(?P<depth>\d+)$")
_EXPANSION = re.compile(
    rf"^(?P<local>local/)?(?P<method>{'|'.join(EXPANSION_METHODS)})/(?P<llm>[^+@/]+)(?:@(?P<folder>[0-9a-f]{{8}}))?\+(?P<rest>.+)$"
)


@dataclass(frozen=True)
class Expansion:
    """An LLM query expansion in a result name: released (``hyde/o3-mini``) or local (``local/hyde/llm@folder``)."""

    method: str
    llm: str
    local: bool = False
    folder: str | None = None  # a local expansion's folder id

    def format(self) -> str:
        name = f"{'local/' if self.local else ''}{self.method}/{self.llm}"
        return f"{name}@{self.folder}" if self.folder else name


@dataclass(frozen=True)
class ResultName:
    retriever: str  # the retriever; for a reranked result, the reranker
    expansion: Expansion | None = None
    prompt: str | None = None  # "instruction" or "prompt-<hash8>"
    first_stage: str | None = None  # a reranked result's first stage (with its own prompt label)
    depth: int | None = None  # a reranked result's depth

    @property
    def reranked(self) -> bool:
        return self.first_stage is not None

    @property
    def is_bm25(self) -> bool:
        return not self.reranked and self.retriever in BM25_NAMES

    def format(self) -> str:
        if self.reranked:
            return f"{self.retriever}|{self.first_stage}|top_{self.depth}"
        name = f"{self.expansion.format()}+{self.retriever}" if self.expansion else self.retriever
        return name + (f"+{self.prompt}" if self.prompt else "")

    @classmethod
    def parse(cls, text: str) -> ResultName:
        reranked = _RERANKED.match(text)
        if reranked:
            return cls(reranked["reranker"], first_stage=reranked["first_stage"], depth=int(reranked["depth"]))
        prompt = _PROMPT.search(text)
        core = text[: prompt.start()] if prompt else text
        match = _EXPANSION.match(core)
        expansion = None
        if match:
            expansion = Expansion(match["method"], match["llm"], local=bool(match["local"]), folder=match["folder"])
            core = match["rest"]
        return cls(core, expansion=expansion, prompt=prompt["prompt"] if prompt else None)


@dataclass(frozen=True)
class DatasetRevision:
    commit: str  # a commit, "local-<fingerprint>" (a mirror that records none) or "synthetic-sample"
    unverified_files: str | None = None  # the fingerprint of the files read, when the mirror does not prove the commit
    count_drift: bool = False

    @property
    def unverified(self) -> bool:
        return self.unverified_files is not None

    @property
    def local(self) -> bool:
        """A mirror that records no commit: the revision is a fingerprint of the files."""
        return self.commit.startswith(LOCAL_REVISION_PREFIX)

    @property
    def synthetic(self) -> bool:
        return self.commit == SYNTHETIC_REVISION

    @property
    def files(self) -> str | None:
        """The fingerprint that tells two sets of unproven files apart (unverified or local), else None."""
        if self.unverified_files:
            return self.unverified_files
        return self.commit[len(LOCAL_REVISION_PREFIX):] if self.local else None

    def format(self) -> str:
        return (self.commit + (f"{UNVERIFIED_MARKER}{self.unverified_files}" if self.unverified_files else "")
                + (COUNT_DRIFT if self.count_drift else ""))

    @classmethod
    def parse(cls, text: str) -> DatasetRevision:
        drift = text.endswith(COUNT_DRIFT)
        core = text[: -len(COUNT_DRIFT)] if drift else text
        commit, marker, files = core.partition(UNVERIFIED_MARKER)
        return cls(commit, files if marker else None, drift)


FILES_MARKER = "+files-"


def judged_data(dataset_revision: str, files_fingerprint: str | None, verified: bool = False) -> str:
    """What a result was judged on, as one value two results are compared by: the dataset revision, plus the
    fingerprint of the files read (``+files-<fingerprint>``) unless the revision already proves them (a commit whose
    files were verified, a hub snapshot with no fingerprint) or already names them (``local-``, unverified). A label
    alone (``synthetic-sample``, a commit of an unproven mirror) never makes two results on edited files comparable."""
    if not files_fingerprint or verified or files_fingerprint in dataset_revision:
        return dataset_revision
    return f"{dataset_revision}{FILES_MARKER}{files_fingerprint}"


def judged_files(judged: str) -> str:
    """The short name of the files a judged-data value stands for, as labels show it ("2f17d0ec")."""
    _, marker, files = judged.rpartition(FILES_MARKER)
    if marker:
        return files[:8]
    revision = DatasetRevision.parse(judged)
    if revision.synthetic:
        return "not recorded"  # a result of an earlier release, which recorded no fingerprint of the sample's files
    return (revision.files or judged)[:8]


def described_data(judged: str) -> str:
    """A judged-data value as messages say it: "dataset revision X" or "dataset revision X, files <fingerprint>"."""
    revision, marker, files = judged.partition(FILES_MARKER)
    return f"dataset revision {revision}" + (f", files {files}" if marker else "")
