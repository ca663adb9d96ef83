"""Setwise reranking: ours (r2med_plugin.llm.SetwiseLLMReranker) against llm-rankers' own implementation
(OpenAiSetwiseLlmRanker, llmrankers/setwise.py of llm-rankers 0.0.2), both against the same scripted loopback
OpenAI-compatible server, on the fixture NanoR2MEDBiology task (BM25 top k). The server picks by a hidden order (the
passage's hash) and, one answer in six each, answers empty, in prose with no label, with a label beyond the set, in a
sentence ("The most relevant is Passage C.") or with the bare label (for bubblesort the label beyond the set is
prose too: llm-rankers' bubble sort then swaps with a passage outside the set, or fails with an IndexError). Per
setting it prints, per query, whether the prompts (the distinct questions, in the order first asked) and the final
rankings are identical, the number of comparisons each side made and how many sets of fewer than 2 passages each
sent. A second table runs every answer right (no malformed ones) and counts the queries whose top k is the hidden
order's top k: what a sort must give when every pick is right; a third does so without a server over 50 random
orders per setting, with llm-rankers' own sort code (its ``compare`` answering by the hidden order).

llm-rankers 0.0.2 calls the API through openai<1 (``openai.ChatCompletion``) while this package needs openai>=1, so
it runs in its own environment, in a subprocess; it imports torch and transformers at import time (never used by its
OpenAI ranker):

    python -m venv VENV
    VENV/bin/pip install --no-deps llm-rankers==0.0.2
    VENV/bin/pip install "openai==0.28.1" tiktoken torch transformers
    python benchmarks/setwise_parity.py --llm-rankers-python VENV/bin/python   # or set LLM_RANKERS_PYTHON

(``VENV``: any folder outside the project tree.)

tiktoken's ``encoding_for_model`` is stubbed there: it would download an encoding (and knows no model "test-llm"),
and the ranker uses it only in ``truncate``, which ``rerank`` never calls.

Set size c is the number of passages per question: llm-rankers' ``num_child`` is c - 1.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from r2med_plugin.llm import Endpoint, LLMRerankerConfig, SetwiseLLMReranker  # noqa: E402
from tests.support.loopback_openai import LoopbackOpenAI  # noqa: E402

LABELS = "ABCDEFGHIJKLMNOPQRSTUVW"

# run by the llm-rankers environment's interpreter: argv[1] the request file, argv[2] where to write the rankings
THEIRS = r'''
import json, sys, types
import tiktoken
tiktoken.encoding_for_model = lambda name: types.SimpleNamespace(encode=str.split, decode=" ".join)
import openai
from llmrankers.rankers import SearchResult
from llmrankers.setwise import OpenAiSetwiseLlmRanker
job = json.load(open(sys.argv[1]))
openai.api_base = job["base_url"]
ranker = OpenAiSetwiseLlmRanker("test-llm", job["api_key"], num_child=job["set_size"] - 1, method=job["method"], k=job["k"])
rankings, comparisons = {}, 0
for qid, query, docs in job["requests"]:
    ranked = ranker.rerank(query, [SearchResult(docid=doc_id, score=None, text=text) for doc_id, text in docs])
    rankings[qid] = [result.docid for result in ranked]
    comparisons += ranker.total_compare
json.dump({"rankings": rankings, "comparisons": comparisons}, open(sys.argv[2], "w"))
'''

# every pick right, no server: llm-rankers' own sorts (its rerank, with compare answering by a hidden order) over many
# random orders; argv[1] the settings file, argv[2] the output file
THEIRS_ORACLE = r'''
import json, random, sys, types
import tiktoken
tiktoken.encoding_for_model = lambda name: types.SimpleNamespace(encode=str.split, decode=" ".join)
from llmrankers.rankers import SearchResult
from llmrankers.setwise import OpenAiSetwiseLlmRanker

class Oracle(OpenAiSetwiseLlmRanker):
    def compare(self, query, docs):
        self.total_compare += 1
        return self.CHARACTERS[min(range(len(docs)), key=lambda i: self.hidden[docs[i].docid])] if docs else "A"

job, out = json.load(open(sys.argv[1])), {}
for method, set_size, n, k, seeds in job:
    right = 0
    for seed in range(seeds):
        hidden = {i: random.Random(seed).sample(range(n), n)[i] for i in range(n)}
        ranker = Oracle("test-llm", "key", num_child=set_size - 1, method=method, k=k)
        ranker.hidden = hidden
        ranked = ranker.rerank("q", [SearchResult(docid=i, score=None, text="t") for i in range(n)])
        right += [r.docid for r in ranked[:k]] == sorted(range(n), key=hidden.get)[:k]
    out[f"{method} {set_size} {n} {k}"] = right
json.dump(out, open(sys.argv[2], "w"))
'''
ORACLE_SETTINGS = [(method, set_size, n, k, 50) for method in ("heapsort", "bubblesort") for set_size in (2, 3, 4, 6, 10)
                   for n, k in ((10, 10), (30, 10), (50, 5), (100, 10))]


def oracle_rows(python: str, work: Path) -> list[str]:
    """Every pick right, 50 random hidden orders per setting: how often each side's top k is the true top k."""
    import asyncio
    import random

    from r2med_plugin.llm.reranker_kinds import bubble_top, heap_top

    (work / "oracle.json").write_text(json.dumps(ORACLE_SETTINGS))
    subprocess.run([python, "-c", THEIRS_ORACLE, str(work / "oracle.json"), str(work / "oracle.out.json")], check=True,
                   stdout=subprocess.DEVNULL, timeout=1200)
    theirs = json.loads((work / "oracle.out.json").read_text())
    rows = []
    for method, set_size, n, k, seeds in ORACLE_SETTINGS:
        right = 0
        for seed in range(seeds):
            hidden = {i: random.Random(seed).sample(range(n), n)[i] for i in range(n)}

            async def pick(doc_ids, hidden=hidden):
                return min(range(len(doc_ids)), key=lambda index: hidden[doc_ids[index]])

            items = list(range(n))
            top = asyncio.run(heap_top(items, min(k, n), set_size - 1, pick) if method == "heapsort"
                              else bubble_top(items, min(k, n), set_size, pick))
            right += top == sorted(range(n), key=hidden.get)[:k]
        rows.append(f"| {method} | {set_size} | {n} | {k} | {right} / {seeds} | {theirs[f'{method} {set_size} {n} {k}']} / {seeds} |")
    return rows


def _set_of(body: dict) -> tuple[str, list[str]]:
    """The query and the passages of a setwise question."""
    user = body["messages"][-1]["content"]
    query = user.split('Given a query "', 1)[1].split('", which of the following passages', 1)[0]
    listed = user.split("most relevant one to the query?\n\n", 1)[1].rsplit("\n\nOutput only the passage label", 1)[0]
    if not listed.strip():  # llm-rankers' bubble sort can ask about an empty set
        return query, []
    passages = [part.split(': "', 1)[1][:-1] for part in listed.split('\n\nPassage ')]
    return query, passages


def _hidden(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def scripted_reply(malformed: bool, beyond: bool = True):
    """``beyond``: a label beyond the set is one of the malformed answers (llm-rankers' bubble sort swaps with a passage
    outside the set on one, or fails with an IndexError: for bubblesort such answers are prose instead)."""
    def reply(body: dict) -> str:
        _, passages = _set_of(body)
        if not passages:
            return "Passage A"
        label = LABELS[min(range(len(passages)), key=lambda i: _hidden(passages[i]))]
        kind = int(_hidden(json.dumps(body["messages"])), 16) % 6 if malformed else 5
        if kind == 2 and not beyond:
            kind = 1
        return {0: "", 1: "I cannot tell which passage is the most relevant.", 2: f"Passage {LABELS[len(passages)]}",
                3: f"The most relevant is Passage {label}.", 4: label}.get(kind, f"Passage {label}")
    return reply


def _by_query(bodies: list[dict]) -> dict[str, list[str]]:
    """query text -> its distinct questions, in the order first sent."""
    asked: dict[str, list[str]] = {}
    for body in bodies:
        query, _ = _set_of(body)
        prompt = json.dumps(body["messages"], ensure_ascii=False)
        if prompt not in asked.setdefault(query, []):
            asked[query].append(prompt)
    return asked


def run_setting(python: str, work: Path, run, queries, texts, method: str, set_size: int, depth: int, k: int,
                malformed: bool) -> dict:
    from r2med_plugin.retrieval.rerank import top_document_ids

    lists = top_document_ids(run, depth)
    tag = f"{method}-c{set_size}-d{depth}-k{k}-{'malformed' if malformed else 'right'}"
    with LoopbackOpenAI(reply=scripted_reply(malformed, beyond=method == "heapsort")) as server:
        os.environ["OPENAI_API_KEY"] = server.api_key
        config = LLMRerankerConfig(Endpoint(server.base_url, concurrency=4), set_size=set_size, setwise_method=method,
                                   setwise_k=k, cache_dir=work / f"cache-{tag}")
        reranker = SetwiseLLMReranker("test-llm", config)
        ours = {qid: list(ranked) for qid, ranked in reranker.rerank(run, queries, texts, depth=depth, show_progress=False).items()}
        sent = len(server.completions())
        job = {"base_url": server.base_url, "api_key": server.api_key, "set_size": set_size, "method": method, "k": k,
               "requests": [(qid, queries[qid], [(doc_id, texts[doc_id]) for doc_id in lists[qid]]) for qid in lists]}
        (work / f"{tag}.json").write_text(json.dumps(job))
        subprocess.run([python, "-c", THEIRS, str(work / f"{tag}.json"), str(work / f"{tag}.out.json")], check=True,
                       stdout=subprocess.DEVNULL, timeout=1200)  # llm-rankers retries a failed request forever
        theirs = json.loads((work / f"{tag}.out.json").read_text())
        our_prompts, their_prompts = _by_query(server.completions()[:sent]), _by_query(server.completions()[sent:])
        small = [sum(len(_set_of(body)[1]) < 2 for body in bodies) for bodies in (server.completions()[:sent], server.completions()[sent:])]
    key_top = {qid: sorted(lists[qid], key=lambda doc_id: _hidden(texts[doc_id]))[:k] for qid in lists}
    return {
        "same_prompts": sum(our_prompts.get(queries[qid]) == their_prompts.get(queries[qid]) for qid in lists),
        "same_ranking": sum(ours[qid] == theirs["rankings"][qid] for qid in lists),
        "queries": len(lists), "ours": reranker.last_report.usage["comparisons"], "theirs": theirs["comparisons"],
        "ours_key_top": sum(ours[qid][:k] == key_top[qid] for qid in lists),
        "theirs_key_top": sum(theirs["rankings"][qid][:k] == key_top[qid] for qid in lists),
        "small_sets": small,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--llm-rankers-python", default=os.environ.get("LLM_RANKERS_PYTHON"),
                        help="the interpreter of an environment with llm-rankers 0.0.2 and openai<1 "
                             "(default: $LLM_RANKERS_PYTHON)")
    parser.add_argument("--oracle-only", action="store_true", help="only the third table (no server)")
    args = parser.parse_args()
    if not args.llm_rankers_python:
        parser.error("--llm-rankers-python (or LLM_RANKERS_PYTHON) is required: the set-up is in this script's docstring")
    import logging

    logging.getLogger("r2med_plugin.llm").setLevel(logging.ERROR)  # the malformed answers are on purpose (strategy.py warns)
    if args.oracle_only:
        print("\n".join(oracle_rows(args.llm_rankers_python, Path(tempfile.mkdtemp(prefix="setwise-oracle-")))))
        return 0
    from r2med_plugin.data.loader import load_task
    from r2med_plugin.evaluation.first_stages import Bm25
    from tests.fixture_mirror import build_fixture_mirror

    work = Path(tempfile.mkdtemp(prefix="setwise-parity-"))
    os.environ["R2MED_DATA_DIR"] = str(build_fixture_mirror(work / "mirror"))
    os.environ["R2MED_ACCEPT_DRIFT"] = "1"
    os.environ["R2MED_CACHE_DIR"] = str(work / "cache")
    data = load_task("NanoR2MEDBiology")
    texts = dict(zip(data.corpus["id"].to_list(), data.corpus["text"].to_list(), strict=True))
    queries = dict(zip(data.queries["id"].to_list(), data.queries["text"].to_list(), strict=True))
    run = Bm25("bm25-robertson").search(data, 100, show_progress=False)
    settings = [("heapsort", 3, 10, 10), ("heapsort", 3, 30, 10), ("heapsort", 3, 100, 10), ("heapsort", 2, 30, 10),
                ("heapsort", 4, 50, 10), ("heapsort", 5, 100, 20), ("heapsort", 10, 100, 10), ("heapsort", 3, 20, 20),
                ("bubblesort", 3, 30, 10), ("bubblesort", 4, 50, 10), ("bubblesort", 2, 20, 5)]
    identical = True
    for malformed in (True, False):
        print("\n" + ("malformed answers one in six each (empty, prose, a label beyond the set (bubblesort: prose), a sentence, "
                      "a bare label):" if malformed else "every answer right:"))
        print("| method | set size c | depth | k | comparisons (ours) | comparisons (llm-rankers) | same prompts | same final ranking |"
              " sets of 0-1 passages sent (ours / llm-rankers) |" + (" top k = hidden top k (ours) | (llm-rankers) |" if not malformed else ""))
        print("|---|---|---|---|---|---|---|---|---|" + ("---|---|" if not malformed else ""))
        for method, set_size, depth, k in settings:
            row = run_setting(args.llm_rankers_python, work, run, queries, texts, method, set_size, depth, k, malformed)
            n = row["queries"]
            if method == "heapsort":
                identical &= row["same_prompts"] == n and row["same_ranking"] == n and row["ours"] == row["theirs"]
            print(f"| {method} | {set_size} | {depth} | {k} | {row['ours']} | {row['theirs']} | {row['same_prompts']} / {n} | "
                  f"{row['same_ranking']} / {n} | {row['small_sets'][0]} / {row['small_sets'][1]} |" + (f" {row['ours_key_top']} / {n} | {row['theirs_key_top']} / {n} |" if not malformed else ""),
                  flush=True)
    print("\nevery pick right, no server, 50 random hidden orders per setting (llm-rankers' own sort code, its compare "
          "answering by the hidden order):")
    print("| method | set size c | passages | k | top k = hidden top k (ours) | (llm-rankers) |")
    print("|---|---|---|---|---|---|")
    print("\n".join(oracle_rows(args.llm_rankers_python, work)))
    print("\nheapsort: " + ("identical" if identical else "DIFFERENT"))
    return 0 if identical else 1


if __name__ == "__main__":
    sys.exit(main())
