"""Generate task_metadata/*.json (and the packaged published leaderboard) from the reference JSON files.

The reference facts live in the repository (reference/*.json, each with its source; reference/README.md): the one
source this script reads, so `--check` works from a fresh clone.

Never edit the outputs by hand.

Usage:
    python scripts/generate_task_metadata.py [--reference reference] [--out task_metadata]
    python scripts/generate_task_metadata.py --check   # exit 1 if the committed files are stale
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_REFERENCE = REPO_ROOT / "reference"

# Official task order of the R2MED paper and leaderboard, as hub names.
OFFICIAL_ORDER = [
    "Biology",
    "Bioinformatics",
    "Medical-Sciences",
    "MedXpertQA-Exam",
    "MedQA-Diag",
    "PMC-Treatment",
    "PMC-Clinical",
    "IIYi-Clinical",
]
INSTRUCTION_PREFIX = "Instruct: "
INSTRUCTION_SUFFIX = "\nQuery: "
NANO_CANDIDATE_CONFIGS = {"bm25": "bm25", "dense": "harrier_oss_v1_270m", "hybrid": "reranking_hybrid"}
NANO_PROFILE_KEYS = {"bm25": "bm25", "dense": "dense", "hybrid": "reranking_hybrid"}
NANO_SEED = 20260524
# The R2MED paper as mteb cites it: mteb 2.26.24, mteb/tasks/retrieval/eng/r2_med_retrieval.py (every
# R2MED<Domain>Retrieval task) and the `R2MED` benchmark, copied verbatim. mteb's tests allow one BibTeX key
# per paper, so every task and benchmark of ours cites it with mteb's key, authors and year (the catalog's
# `citation`, `@article{li2025r2med`, names the same paper). tests/integrations/test_mteb_integration.py checks that it
# still equals mteb's.
MTEB_R2MED_CITATION = r"""@misc{zhang2026r2medbenchmarkreasoningdrivenmedical,
  archiveprefix = {arXiv},
  author = {Xiangxu Zhang and Lei Li and Xiao Zhou and Zheng Liu},
  eprint = {2505.14558},
  primaryclass = {cs.IR},
  title = {R2MED: A Benchmark for Reasoning-Driven Medical Retrieval},
  url = {https://arxiv.org/abs/2505.14558},
  year = {2026},
}"""
CITATION_SOURCE = "citation: mteb 2.26.24's BibTeX entry for R2MED (mteb/tasks/retrieval/eng/r2_med_retrieval.py), one key per paper"


def domain_of(hub_name: str) -> str:
    return hub_name.replace("-", "")


def official_instruction(e5_instruction: str) -> str:
    if not (e5_instruction.startswith(INSTRUCTION_PREFIX) and e5_instruction.endswith(INSTRUCTION_SUFFIX)):
        raise ValueError(f"unexpected e5 instruction shape: {e5_instruction!r}")
    return e5_instruction[len(INSTRUCTION_PREFIX) : -len(INSTRUCTION_SUFFIX)]


def real_file_facts(hub_name: str, real_files: dict, revision: str) -> tuple[dict, dict]:
    """(published files: name -> {bytes, sha256}, the measured facts of the real files) of one task.
    Hashes are taken only when they were measured at the revision the task is pinned to."""
    facts = real_files["tasks"][hub_name]
    measured_at = facts.get("revision")
    if measured_at is not None and measured_at != revision:
        raise ValueError(f"r2med_real_files.json measured {hub_name} at {measured_at}, but the catalog pins {revision}")
    published = {name: dict(entry) for name, entry in (facts.get("files") or {}).items()}
    kept = {key: facts[key] for key in ("rows", "corpus_text_statistics", "repeated_ids") if key in facts}
    return published, {**kept, "revision": measured_at, "source": real_files["source"]}


def r2med_task(entry: dict, catalog: dict, position: int, real_files: dict) -> dict:
    hub_name = entry["name"]
    published, facts = real_file_facts(hub_name, real_files, entry["revision"])
    domain = domain_of(hub_name)
    layout = catalog["hf_layout"]
    instruction = official_instruction(entry["instructions"]["e5_nv_sfr_query"])
    return {
        "name": f"R2MED{domain}",
        "kind": "r2med",
        "domain": domain,
        "hub_name": hub_name,
        "slug": hub_name.lower(),
        "official_order": position,
        "hub_repo": entry["hf_repo"],
        "revision": entry["revision"],
        "data_format": "jsonl",
        "configs": {
            "corpus": {"config": "corpus", "split": layout["configs"]["corpus"]["split"]},
            "queries": {"config": "query", "split": layout["configs"]["query"]["split"]},
            "qrels": {"config": "qrels", "split": layout["configs"]["qrels"]["split"]},
        },
        "candidate_configs": {},
        "gar_configs": {method: spec["splits"] for method, spec in layout["gar_configs"].items()},
        "reasoning_llms": list(layout["reasoning_llms_official_names"]),
        "expected_counts": dict(entry["expected_counts"]),
        "instruction": instruction,
        "official_internal_name": entry["official_internal_name"],
        "mteb_builtin_task": entry["mteb_builtin_task"],
        "description": (
            f"R2MED {hub_name}: reasoning-driven medical retrieval. {instruction}. "
            f"{entry['expected_counts']['queries']} queries over {entry['expected_counts']['documents']:,} documents."
        ),
        "license": "cc-by-4.0",
        "citation": MTEB_R2MED_CITATION,
        "paper_stats": dict(entry["paper_stats"]),
        "candidate_profiles": {},
        "card_stats": {},
        "source": f"{catalog['source']}; {CITATION_SOURCE}",
        "published_files": published,
        "real_file_facts": facts,
    }


def pooled_profile(profile: dict) -> dict:
    """A card profile with its recall named for what it is: the dataset card's recall@100 is pooled (positives
    found in the first 100 over all positives), never the per-query mean every evaluator calls recall_at_100."""
    return {("pooled_recall_at_100" if key == "recall_at_100" else key): value for key, value in profile.items()}


def nano_task(entry: dict, profiles: dict, position: int) -> dict:
    hub_name = entry["name"]
    domain = domain_of(hub_name)
    name = f"NanoR2MED{domain}"
    profile = profiles["tasks"][name]
    counts = profile["counts"]
    instruction = official_instruction(entry["instructions"]["e5_nv_sfr_query"])
    subsets = profile["candidate_subsets"]
    return {
        "name": name,
        "kind": "nano",
        "domain": domain,
        "hub_name": hub_name,
        "slug": hub_name.lower(),
        "official_order": position,
        "hub_repo": profiles["dataset_id"],
        "revision": None,
        "data_format": "parquet",
        "configs": {
            "corpus": {"config": "corpus", "split": name},
            "queries": {"config": "queries", "split": name},
            "qrels": {"config": "qrels", "split": name},
        },
        "candidate_configs": {key: {"config": config, "split": name} for key, config in NANO_CANDIDATE_CONFIGS.items()},
        "gar_configs": {},
        "reasoning_llms": [],
        "expected_counts": {
            "queries": counts["queries"],
            "documents": counts["documents"],
            "qrels": counts["positive_qrels"],
        },
        "instruction": instruction,
        "official_internal_name": entry["official_internal_name"],
        "mteb_builtin_task": None,
        "description": (
            f"NanoR2MED {hub_name}: the R2MED {hub_name} queries over a {counts['documents']:,}-document corpus, "
            f"with stored BM25, dense and hybrid candidate lists. {instruction}."
        ),
        "license": "cc-by-4.0",
        # NanoR2MED is a sample of R2MED: cite the benchmark it comes from.
        "citation": MTEB_R2MED_CITATION,
        "paper_stats": {},
        "candidate_profiles": {key: pooled_profile(subsets[ref]) for key, ref in NANO_PROFILE_KEYS.items()},
        "hybrid_construction": {**profiles["hf_layout"]["hybrid_construction"], "seed": NANO_SEED, "rrf_k": 100},
        "card_stats": {
            "positives_per_query": dict(profile["positives_per_query"]),
            "text_stats_chars": dict(profile["text_stats_chars"]),
            # the card's training and leakage fields, as data (shown on the task pages)
            **({"learning": dict(profile["learning"])} if "learning" in profile else {}),
        },
        "source": f"{profiles['source']}; {CITATION_SOURCE}",
    }


def benchmarks(tasks: list[dict]) -> dict:
    return {
        "NanoR2MED": {
            "description": "NanoR2MED: the 876 R2MED queries over 10,000-document corpora, 8 retrieval tasks.",
            "tasks": [t["name"] for t in tasks if t["kind"] == "nano"],
        },
        "R2MED-Full": {
            "description": "R2MED: 8 reasoning-driven medical retrieval tasks over the full corpora (official protocol).",
            "tasks": [t["name"] for t in tasks if t["kind"] == "r2med"],
        },
    }


# Which released expansion file each LLM name of the published leaderboard means ("<method>/<llm>" as the
# official code spells it, hub split with "-" for "_"). Never a guess from the names alone: the source says how
# each was established.
_OFFICIAL = "R2MED/R2MED@62b7074"
_SAME_RESULTS = (f"{_OFFICIAL} results/gar/hyde/{{llm}}/bm25/*.json: its 8 nDCG@10 values, x100 and rounded, equal "
                 "the leaderboard's BM25 row of this LLM task by task")
LEADERBOARD_EXPANSIONS = {
    "o3-mini": ("hyde", "o3-mini", f"{_OFFICIAL} README.md (--gar_llm lists o3-mini) and the catalog's hf_layout "
                "(hyde split o3_mini, the only o3 expansion); the repo publishes no results file for it"),
    "GPT4o": ("hyde", "gpt4", _SAME_RESULTS.format(llm="gpt4")),
    "QwQ-32B": ("hyde", "qwq-32b", _SAME_RESULTS.format(llm="qwq-32b")),
    "HuatuoGPT-o1-70B": ("hyde", "huatuo-o1-70b", _SAME_RESULTS.format(llm="huatuo-o1-70b")),
    "DeepSeek-R1-Distill-Llama-70B": ("hyde", "r1-llama-70b", _SAME_RESULTS.format(llm="r1-llama-70b")),
    "Llama3.1-70B-Ins": ("hyde", "llama-70b", _SAME_RESULTS.format(llm="llama-70b")),
    "Qwen2.5-32B-Ins": ("hyde", "qwen-32b", _SAME_RESULTS.format(llm="qwen-32b")),
    "DeepSeek-R1-Distill-Qwen-32B": ("hyde", "r1-qwen-32b", _SAME_RESULTS.format(llm="r1-qwen-32b")),
    "Qwen2.5-7B-Ins": ("hyde", "qwen-7b", _SAME_RESULTS.format(llm="qwen-7b")),
    "Search-O1 (QwQ-32b)": ("search-o1", "qwq-32b", f"{_OFFICIAL} results/gar/search-o1/qwq-32b/ (nv, bge) and the "
                            "catalog's hf_layout (search-o1 split qwq_32b); the LLM name is the leaderboard's"),
    "Search-O1 (Qwen3-32b)": ("search-o1", "qwen3-32b", f"{_OFFICIAL} results/gar/search-o1/qwen3-32b/ (nv, bge) and "
                              "the catalog's hf_layout (search-o1 split qwen3_32b)"),
    "Search-R1 (Qwen2.5-7b-it-em-ppo)": ("search-r1", "qwen-7b-ins", f"{_OFFICIAL} results/gar/search-r1/qwen-7b-ins/ "
                                         "(nv, bge), src/base.py (qwen-7b-ins: the Search-R1 <answer> family) and the "
                                         "catalog's hf_layout (search-r1 split qwen_7b_ins)"),
    "Search-R1 (Qwen2.5-3b-it-em-ppo)": ("search-r1", "qwen-3b-ins", f"{_OFFICIAL} results/gar/search-r1/qwen-3b-ins/ "
                                         "(nv, bge), src/base.py and the catalog's hf_layout (search-r1 split qwen_3b_ins)"),
}


def leaderboard_expansions(catalog: dict, leaderboard: dict) -> dict:
    """The LLM name -> released expansion mapping, checked against the catalog's splits and the leaderboard's names."""
    splits = {method: spec["splits"] for method, spec in catalog["hf_layout"]["gar_configs"].items()}
    named = {row["llm"] for row in leaderboard["rows"] if row["llm"] is not None}
    if named != set(LEADERBOARD_EXPANSIONS):
        raise ValueError(f"leaderboard LLMs {sorted(named)} differ from the mapped ones {sorted(LEADERBOARD_EXPANSIONS)}")
    llms = {}
    for name, (method, llm, source) in LEADERBOARD_EXPANSIONS.items():
        if llm.replace("-", "_") not in splits.get(method, []):
            raise ValueError(f"{name}: {method}/{llm} is not a released expansion in the catalog's hf_layout")
        llms[name] = {"expansion": f"{method}/{llm}", "method": method, "source": source}
    return {
        "description": "The released expansion file behind each LLM name of the published R2MED leaderboard "
                       "(generated by scripts/generate_task_metadata.py; read by `r2med reproduce --matrix`).",
        "llms": llms,
    }


def generate(reference: Path) -> dict[str, dict]:
    catalog = json.loads((reference / "r2med_catalog.json").read_text(encoding="utf-8"))
    profiles = json.loads((reference / "nanor2med_task_profiles.json").read_text(encoding="utf-8"))
    real_files = json.loads((reference / "r2med_real_files.json").read_text(encoding="utf-8"))
    by_hub_name = {entry["name"]: entry for entry in catalog["tasks"]}
    if sorted(by_hub_name) != sorted(OFFICIAL_ORDER):
        raise ValueError(f"catalog tasks {sorted(by_hub_name)} differ from the official order {OFFICIAL_ORDER}")
    tasks = []
    for position, hub_name in enumerate(OFFICIAL_ORDER):
        tasks.append(r2med_task(by_hub_name[hub_name], catalog, position, real_files))
    for position, hub_name in enumerate(OFFICIAL_ORDER):
        tasks.append(nano_task(by_hub_name[hub_name], profiles, position))
    files = {f"{task['name']}.json": task for task in tasks}
    files["benchmarks.json"] = benchmarks(tasks)
    leaderboard = json.loads((reference / "r2med_leaderboard.json").read_text(encoding="utf-8"))
    files["leaderboard_expansions.json"] = leaderboard_expansions(catalog, leaderboard)
    return files


PUBLISHED_LEADERBOARD = REPO_ROOT / "r2med_plugin" / "reporting" / "r2med_leaderboard.json"


def render(payload: dict) -> str:
    return json.dumps(payload, indent=2, ensure_ascii=False, sort_keys=False) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reference", type=Path, default=DEFAULT_REFERENCE)
    parser.add_argument("--out", type=Path, default=REPO_ROOT / "task_metadata")
    parser.add_argument("--check", action="store_true", help="only compare with the files on disk")
    args = parser.parse_args(argv)
    files = generate(args.reference)
    stale = []
    for filename, payload in files.items():
        target = args.out / filename
        text = render(payload)
        if args.check:
            if not target.exists() or target.read_text(encoding="utf-8") != text:
                stale.append(filename)
            continue
        args.out.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
    published = render(json.loads((args.reference / "r2med_leaderboard.json").read_text(encoding="utf-8")))
    if args.check:
        if not PUBLISHED_LEADERBOARD.exists() or PUBLISHED_LEADERBOARD.read_text(encoding="utf-8") != published:
            stale.append(str(PUBLISHED_LEADERBOARD.relative_to(REPO_ROOT)))
    else:
        PUBLISHED_LEADERBOARD.write_text(published, encoding="utf-8")
    if args.check and stale:
        print(f"stale task_metadata files (re-run the generator): {', '.join(stale)}", file=sys.stderr)
        return 1
    print(f"{'checked' if args.check else 'wrote'} {len(files)} files in {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
