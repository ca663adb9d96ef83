"""BM25 parity on the real files' shapes: the official R2MED ``eval_BM25.py`` (src/ of R2MED/R2MED@62b7074, run
unchanged) against ``r2med evaluate --retriever bm25-lucene`` on the test suite's fixture mirror, whose
PMC-Treatment corpus repeats ids with identical text (as the real one does: 145 rows) and whose Biology corpus
holds a blank and a 1-character document and a text repeated under another id (tests/fixture_mirror.py).

    python benchmarks/official_bm25_parity.py --official-src WORK/src [--oracle-tools ../shared/tools/official-r2med]

For each case (PMC-Treatment plain, PMC-Treatment with the released hyde/gpt4 expansion, Biology plain):

- the official side: ``eval_BM25.eval_bm25(gar_method, gar_llm, task_names=[<hub name>])`` in a subprocess, with
  cwd a byte-for-byte copy of --official-src, ``dataset/<hub name>`` a symlink to the mirror's ``R2MED/<hub name>``,
  and ``pyserini.analysis`` served from real Lucene 9.9.1 by the stand-in in --oracle-tools (its README);
- our side: ``r2med evaluate --task R2MED<Domain> --retriever bm25-lucene --output OUT --accept-drift
  [--expansion hyde/gpt4]`` on the same mirror (R2MED_DATA_DIR);
- the ``test`` dicts of the two JSON files are compared key for key (value and type).

Also printed: the rows the official code indexed (every row) against the unique ids we rank, per case.
Needs gensim and pytrec_eval (the test extras) and the lucene-oracle's setup (``oracle.py --setup``).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DEFAULT_TOOLS = REPO.parent / "shared" / "tools" / "official-r2med"
CASES = [("R2MEDPMCTreatment", "", ""), ("R2MEDPMCTreatment", "hyde", "gpt4"), ("R2MEDBiology", "", "")]


def official_file(src: Path, work: Path, mirror: Path, hub_name: str, method: str, llm: str, tools: Path) -> dict:
    """Run the official eval_bm25 unchanged in a subprocess; return its JSON."""
    code = work / "official"
    if not code.exists():
        shutil.copytree(src, code / "src")
        (code / "dataset").mkdir()
    link = code / "dataset" / hub_name
    if not link.exists():
        link.symlink_to(mirror / "R2MED" / hub_name, target_is_directory=True)
    call = f"import eval_BM25; eval_BM25.eval_bm25(gar_method={method!r}, gar_llm={llm!r}, task_names=[{hub_name!r}])"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tools), str(code / "src")])}
    subprocess.run([sys.executable, "-c", call], cwd=code / "src", env=env, check=True, capture_output=True, text=True)
    folder = code / "results" / ("base retriever/bm25" if not method else f"gar/{method}/{llm}/bm25")
    return json.loads((folder / f"{hub_name}.json").read_text(encoding="utf-8"))


def our_file(work: Path, mirror: Path, task: str, method: str, llm: str) -> tuple[dict, dict]:
    """``r2med evaluate`` into a fresh folder; (official JSON, its metadata)."""
    out = work / "ours" / f"{task}-{method or 'plain'}-{llm}"
    command = [sys.executable, "-m", "r2med_plugin.cli", "evaluate", "--task", task, "--retriever", "bm25-lucene",
               "--output", str(out), "--accept-drift", "--quiet"] + (["--expansion", f"{method}/{llm}"] if method else [])
    env = {**os.environ, "R2MED_DATA_DIR": str(mirror), "R2MED_CACHE_DIR": str(work / "cache")}
    subprocess.run(command, env=env, check=True, capture_output=True, text=True)
    found = [path for path in (out / "official").rglob(f"{task}.json")]
    if len(found) != 1:
        raise RuntimeError(f"expected one official file for {task} under {out}, found {found}")
    metadata = json.loads(found[0].with_name(f"{task}.metadata.json").read_text(encoding="utf-8"))
    return json.loads(found[0].read_text(encoding="utf-8")), metadata


def compare(theirs: dict, ours: dict) -> list[str]:
    """Keys whose value or type differ between two official ``test`` dicts (missing keys included)."""
    differ = []
    for key in sorted(set(theirs) | set(ours)):
        a, b = theirs.get(key), ours.get(key)
        if type(a) is not type(b) or a != b:
            differ.append(f"{key}: official {a!r} ours {b!r}")
    return differ


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--official-src", type=Path, required=True, help="src/ of R2MED/R2MED at 62b7074")
    parser.add_argument("--oracle-tools", type=Path, default=DEFAULT_TOOLS, help="folder holding the pyserini stand-in")
    args = parser.parse_args()
    for switch in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE"):
        os.environ[switch] = "1"
    sys.path.insert(0, str(REPO))
    from r2med_plugin.catalog import get_task_spec
    from tests.fixture_mirror import build_fixture_mirror

    failures = 0
    with tempfile.TemporaryDirectory() as folder:
        work = Path(folder)
        mirror = build_fixture_mirror(work / "mirror")
        print("| case | rows indexed (official) | unique ids ranked (ours) | keys | identical |")
        print("|---|---|---|---|---|")
        for task, method, llm in CASES:
            hub_name = get_task_spec(task).hub_name
            theirs = official_file(args.official_src, work, mirror, hub_name, method, llm, args.oracle_tools)
            ours, metadata = our_file(work, mirror, task, method, llm)
            differ = compare(theirs["test"], ours["test"])
            rows = metadata["dataset_rows"]
            case = f"{task}{' ' + method + '/' + llm if method else ''}"
            print(f"| {case} | {rows['corpus_rows']} | {rows['unique_document_ids']} | {len(theirs['test'])} | "
                  f"{'yes' if not differ else 'NO'} |")
            for line in differ:
                print(f"    {line}")
            failures += bool(differ)
    print("all identical" if not failures else f"{failures} case(s) differ")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
