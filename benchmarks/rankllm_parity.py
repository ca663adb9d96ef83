"""RankGPT listwise reranking: ours (r2med_plugin.llm) against rank-llm's own implementation (SafeOpenai, the
RankGPT reranker of castorini/rank_llm), both against the same scripted loopback OpenAI-compatible server, on the
fixture NanoR2MEDBiology task (BM25 top k, several depths and windows). The server answers each window with a
permutation by a hidden order, and on purpose malformed ones: repeated and out-of-range ids, missing ids, an
empty answer, prose. Prints whether every final ranking and every prompt sent is identical.

rank-llm is not a dependency (it requires vllm); install it beside the package without its dependencies:

    pip install --no-deps --target DIR rank-llm==0.25.7 ftfy dacite wcwidth python-dotenv
    PYTHONPATH=DIR python benchmarks/rankllm_parity.py

(``DIR``: any folder outside the project tree.)

Modules rank-llm imports but SafeOpenai never uses (vllm, google.generativeai, ...) are stubbed, and so is
tiktoken, whose encodings would be downloaded: rank-llm uses it only to count tokens for a context budget that
is set far above these prompts (so it never cuts a passage).
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.abc
import importlib.machinery
import json
import os
import sys
import tempfile
import types
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from r2med_plugin.llm import Endpoint, ListwiseLLMReranker, LLMRerankerConfig  # noqa: E402
from tests.support.loopback_openai import LoopbackOpenAI, listwise_passages  # noqa: E402


def scripted_reply(body: dict) -> str:
    """A permutation by a hidden order (the passage's hash), malformed one time in two."""
    passages = listwise_passages(body)
    order = [i + 1 for i in sorted(range(len(passages)), key=lambda i: hashlib.sha256(passages[i].encode()).hexdigest())]
    kind = int(hashlib.sha256(json.dumps(body["messages"]).encode()).hexdigest(), 16) % 6
    if kind == 0:  # repeated and out-of-range identifiers
        return " > ".join(f"[{i}]" for i in [order[1], order[1], 99, 0, *order[:8]])
    if kind == 1:  # only the first half mentioned
        return " > ".join(f"[{i}]" for i in order[: len(order) // 2])
    if kind == 2:
        return ""
    if kind == 3:
        return "I am sorry, but I cannot rank these passages."
    return " > ".join(f"[{i}]" for i in order)


def _stub_attribute(name: str) -> type:
    if name.startswith("__"):
        raise AttributeError(name)
    return type(name, (), {"__init__": lambda self, *args, **kwargs: None})


class _StubFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """First on sys.meta_path: a module of the packages SafeOpenai never uses (vllm, google.generativeai, rank-llm's
    FiD models, ...) is an empty stub."""

    STUBBED = ("vllm", "google", "sglang", "tensorrt_llm", "pyserini", "fastchat", "flashrank",
               "rank_llm.rerank.listwise.rank_fid", "rank_llm.rerank.listwise.lit5")  # FiD models: other transformers

    def find_spec(self, name, path, target=None):
        if not any(name == stub or name.startswith(stub + ".") for stub in self.STUBBED):
            return None
        return importlib.machinery.ModuleSpec(name, self, is_package=True)

    def create_module(self, spec):
        module = types.ModuleType(spec.name)
        module.__path__ = []
        module.__getattr__ = _stub_attribute
        return module

    def exec_module(self, module):
        pass


class _WhitespaceEncoding:
    def encode(self, text: str) -> list[str]:
        return text.split()


def rank_llm_rankings(base_url: str, key: str, requests: list, depth: int, window: int, step: int) -> dict[str, list[str]]:
    sys.modules["tiktoken"] = types.SimpleNamespace(get_encoding=lambda name: _WhitespaceEncoding())
    sys.meta_path.insert(0, _StubFinder())
    rank_gpt = importlib.import_module("rank_llm.rerank.listwise.rank_gpt")
    data = importlib.import_module("rank_llm.data")
    prompt_mode = importlib.import_module("rank_llm.rerank.rankllm").PromptMode
    agent = rank_gpt.SafeOpenai(model="test-llm", context_size=1_000_000, prompt_mode=prompt_mode.RANK_GPT, keys=key,
                                base_url=base_url + "/", window_size=window, stride=step)
    batch = [data.Request(query=data.Query(text=text, qid=qid), candidates=[
        data.Candidate(docid=doc_id, score=float(-rank), doc={"text": doc_text}) for rank, (doc_id, doc_text) in enumerate(docs)])
        for qid, text, docs in requests]
    results = agent.rerank_batch(batch, rank_start=0, rank_end=depth, top_k_retrieve=depth)
    return {result.query.qid: [candidate.docid for candidate in result.candidates] for result in results}


def main() -> int:
    from r2med_plugin.data.loader import load_task
    from r2med_plugin.evaluation.first_stages import Bm25
    from r2med_plugin.retrieval.rerank import top_document_ids
    from tests.fixture_mirror import build_fixture_mirror

    work = Path(tempfile.mkdtemp(prefix="rankllm-parity-"))
    os.environ["R2MED_DATA_DIR"] = str(build_fixture_mirror(work / "mirror"))
    os.environ["R2MED_ACCEPT_DRIFT"] = "1"
    os.environ["R2MED_CACHE_DIR"] = str(work / "cache")
    data = load_task("NanoR2MEDBiology")
    texts = dict(zip(data.corpus["id"].to_list(), data.corpus["text"].to_list(), strict=True))
    queries = dict(zip(data.queries["id"].to_list(), data.queries["text"].to_list(), strict=True))
    run = Bm25("bm25-robertson").search(data, 100, show_progress=False)
    rows, identical_all = [], True
    for depth, window, step in [(10, 20, 10), (20, 20, 10), (30, 20, 10), (50, 20, 10), (100, 20, 10), (100, 10, 5), (45, 8, 3)]:
        lists = top_document_ids(run, depth)
        requests = [(qid, queries[qid], [(doc_id, texts[doc_id]) for doc_id in lists[qid]]) for qid in lists]
        with LoopbackOpenAI(reply=scripted_reply) as server:
            os.environ["OPENAI_API_KEY"] = server.api_key
            reranker = ListwiseLLMReranker("test-llm", LLMRerankerConfig(Endpoint(server.base_url, concurrency=4), window=window, step=step,
                                                                         cache_dir=work / f"ours-{depth}-{window}-{step}"))
            ours = {qid: list(ranked) for qid, ranked in reranker.rerank(run, queries, texts, depth=depth, show_progress=False).items()}
            our_prompts = sorted(json.dumps(body["messages"]) for body in server.completions())
            theirs = rank_llm_rankings(server.base_url, server.api_key, requests, depth, window, step)
            their_prompts = sorted(json.dumps(body["messages"]) for body in server.completions()[len(our_prompts):])
        same = sum(ours[qid] == theirs[qid] for qid in ours)
        identical_all &= same == len(ours) and our_prompts == their_prompts
        rows.append(f"| {depth} | {window} / {step} | {len(our_prompts)} | {len(their_prompts)} | {our_prompts == their_prompts} | "
                    f"{same} / {len(ours)} |")
    print("| depth | window / step | requests (ours) | requests (rank-llm) | same prompts | same final ranking |")
    print("|---|---|---|---|---|---|")
    print("\n".join(rows))
    print("identical" if identical_all else "DIFFERENT")
    return 0 if identical_all else 1


if __name__ == "__main__":
    sys.exit(main())
