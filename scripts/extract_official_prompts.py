"""Extract the official R2MED expansion prompts into r2med_plugin/generation/official_prompts.json.

The prompts are facts of the protocol, so they are read from the official repository rather than
retyped: ``src/instrcution.py`` builds ``generate_hy_doc[method][internal task name]`` (query2doc
templates get ``src/example.py``'s few-shot examples at import time). This script evaluates those two
data modules from a git checkout of R2MED/R2MED at a given commit and writes the resulting strings
with their source. The system prompt, the LaMer passage format and the sampling defaults are literals
of ``src/generate_hypothetical_doc.py``; the script checks that each literal is present there.

Usage:
    python scripts/extract_official_prompts.py --git-dir /path/to/R2MED/.git [--commit SHA]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import types
from pathlib import Path

OUT = Path(__file__).resolve().parent.parent / "r2med_plugin" / "generation" / "official_prompts.json"
METHODS = ("hyde", "query2doc", "lamer")
SYSTEM_PROMPT = "You are a helpful assistant."
# (literal that must occur in generate_hypothetical_doc.py, what it establishes)
GENERATOR_LITERALS = [
    ('{"role": "system", "content": "You are a helpful assistant."}', "system prompt (API path)"),
    ('sys_prompt = "You are a helpful assistant."', "system prompt (vLLM path)"),
    ('for num, [pid, _] in enumerate(e["topk_pid"][:10]):', "LaMer: the first stage's top 10"),
    ('text = id2doc[pid].replace("\\n", " ")', "LaMer: newlines become spaces"),
    ("def cut_text(self, text, threshold=512):", "LaMer: each passage cut to 512 words"),
    ('passages = passages + f"\\n[{num+1}]. {text}"', "LaMer: passage format"),
    ("temperature=0.8, top_p=0.8", "API sampling defaults"),
    ("SamplingParams(temperature=0.7, seed=seed, max_tokens=10240)", "vLLM sampling defaults"),
    ("seed = 42", "vLLM seed"),
    ('pre_retrieval_path = f"../output/topk_docs/bm25/{task_name}.jsonl"', "LaMer first stage: BM25"),
]


def git_show(git_dir: str, commit: str, path: str) -> str:
    return subprocess.run(
        ["git", "--git-dir", git_dir, "show", f"{commit}:{path}"], check=True, capture_output=True, text=True
    ).stdout


def official_templates(git_dir: str, commit: str) -> dict[str, dict[str, str]]:
    example = types.ModuleType("example")
    exec(compile(git_show(git_dir, commit, "src/example.py"), "src/example.py", "exec"), example.__dict__)  # noqa: S102
    sys.modules["example"] = example
    namespace: dict = {}
    exec(compile(git_show(git_dir, commit, "src/instrcution.py"), "src/instrcution.py", "exec"), namespace)  # noqa: S102
    table = namespace["generate_hy_doc"]
    return {method: dict(table[method]) for method in METHODS}


def source_arguments(description: str, default_out: Path) -> tuple[argparse.Namespace, str]:
    """--git-dir, --commit and --out of an extraction script, and the full commit --commit names."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--git-dir", required=True)
    parser.add_argument("--commit", default="HEAD")
    parser.add_argument("--out", default=str(default_out))
    args = parser.parse_args()
    commit = subprocess.run(["git", "--git-dir", args.git_dir, "rev-parse", args.commit], check=True, capture_output=True,
                            text=True).stdout.strip()
    return args, commit


def main() -> int:
    args, commit = source_arguments(__doc__.splitlines()[0], OUT)
    generator = git_show(args.git_dir, commit, "src/generate_hypothetical_doc.py")
    for literal, what in GENERATOR_LITERALS:
        if literal not in generator:
            raise SystemExit(f"src/generate_hypothetical_doc.py at {commit} no longer contains the {what}: {literal!r}")
    payload = {
        "source": {
            "repository": "https://github.com/R2MED/R2MED",
            "commit": commit,
            "templates": "src/instrcution.py generate_hy_doc[method][internal task name] (query2doc examples: src/example.py Example)",
            "system_prompt": "src/generate_hypothetical_doc.py (both the API and the vLLM paths)",
            "lamer_passages": "src/generate_hypothetical_doc.py read_data + cut_text",
            "sampling": "src/generate_hypothetical_doc.py: generate_func_by_gpt defaults (API) and SamplingParams (vLLM)",
            "extracted_by": "scripts/extract_official_prompts.py (never edit the templates by hand)",
        },
        "system_prompt": SYSTEM_PROMPT,
        "fill": "template.format(TEXT=query text) for hyde and query2doc; template.format(TEXT=query text, PASSAGE=passages) for lamer",
        "lamer_passages": {"top_k": 10, "max_words": 512, "item": "\n[{rank}]. {text}", "first_stage": "bm25"},
        "sampling_presets": {
            "api": {"temperature": 0.8, "top_p": 0.8, "max_tokens": None, "seed": None},
            "vllm": {"temperature": 0.7, "top_p": None, "max_tokens": 10240, "seed": 42},
        },
        "templates": official_templates(args.git_dir, commit),
    }
    Path(args.out).write_text(json.dumps(payload, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"wrote {args.out} from R2MED/R2MED@{commit}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
