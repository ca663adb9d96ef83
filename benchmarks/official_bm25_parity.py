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
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tools.resolve()), str(code / "src")])}  # the run's cwd is elsewhere
    ran = subprocess.run([sys.executable, "-c", call], cwd=code / "src", env=env, capture_output=True, text=True)
    if ran.returncode:
        raise SystemExit(f"the official eval_bm25 failed on {hub_name}:\n{ran.stderr[-3000:]}")
    folder = code / "results" / ("base retriever/bm25" if not method else f"gar/{method}/{llm}/bm25")
    return json.loads((folder / f"{hub_name}.json").read_text(encoding="utf-8"))


def official_run(work: Path, hub_name: str, method: str, llm: str, tools: Path) -> dict:
    """The official top-100 run with its scores: ``load_retrieval_data`` and ``retrieval_bm25`` of eval_BM25.py
    (unchanged) called as ``eval_bm25`` calls them; eval_bm25 itself keeps the run only with save_top_k."""
    code = work / "official"
    call = (f"import json, eval_BM25, base; r1 = {llm!r} in base.r1_model_list; "
            f"d, i, q, qi, gt = eval_BM25.load_retrieval_data('../dataset/{hub_name}/', {method!r}, {llm!r}, r1); "
            f"scores, run = eval_BM25.retrieval_bm25(q, qi, d, i, gt); print(json.dumps(run))")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tools.resolve()), str(code / "src")])}  # the run's cwd is elsewhere
    out = subprocess.run([sys.executable, "-c", call], cwd=code / "src", env=env, check=True, capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def our_runs(mirror: Path, task: str, method: str, llm: str) -> tuple[dict, dict]:
    """Our bm25-lucene run (every row in the statistics), and the same with the unique ids alone indexed."""
    from r2med_plugin.data.loader import load_task
    from r2med_plugin.evaluation.first_stages import bm25_queries
    from r2med_plugin.retrieval.bm25 import bm25_search

    data = load_task(task, data_dir=mirror, accept_drift=True)
    queries = bm25_queries(data, f"{method}/{llm}" if method else None, mirror)
    every_row = bm25_search(data.corpus, queries, top_k=100, ties="corpus", show_progress=False,
                            row_counts=data.document_row_counts())
    unique_only = bm25_search(data.corpus, queries, top_k=100, ties="corpus", show_progress=False)
    return every_row, unique_only


def largest_difference(theirs: dict, ours: dict) -> float:
    """Max |score| difference over the official top 100 (inf when a listed document is missing)."""
    worst = 0.0
    for query_id, ranked in theirs.items():
        if query_id not in ours:  # a query without qrels: the official code ranks it, pytrec_eval skips it, we drop it
            continue
        for doc_id, score in ranked.items():
            if doc_id not in ours.get(query_id, {}):
                return float("inf")
            worst = max(worst, abs(score - ours[query_id][doc_id]))
    return worst


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
        print("| case | rows indexed (official) | unique ids ranked (ours) | keys | identical | max score diff, top 100 | same, unique ids only indexed |")
        print("|---|---|---|---|---|---|---|")
        for task, method, llm in CASES:
            hub_name = get_task_spec(task).hub_name
            theirs = official_file(args.official_src, work, mirror, hub_name, method, llm, args.oracle_tools)
            ours, metadata = our_file(work, mirror, task, method, llm)
            differ = compare(theirs["test"], ours["test"])
            every_row, unique_only = our_runs(mirror, task, method, llm)
            run = official_run(work, hub_name, method, llm, args.oracle_tools)
            worst, without_rows = largest_difference(run, every_row), largest_difference(run, unique_only)
            if worst > 1e-5:
                differ.append(f"run scores differ by {worst:.3g}")
            rows = metadata["dataset_rows"]
            case = f"{task}{' ' + method + '/' + llm if method else ''}"
            print(f"| {case} | {rows['corpus_rows']} | {rows['unique_document_ids']} | {len(theirs['test'])} | "
                  f"{'yes' if not differ else 'NO'} | {worst:.2g} | {without_rows:.2g} |")
            for line in differ:
                print(f"    {line}")
            failures += bool(differ)
    print("all identical" if not failures else f"{failures} case(s) differ")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
