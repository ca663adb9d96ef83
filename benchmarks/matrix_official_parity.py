"""Every BM25 row of the reproduction matrix against the official R2MED code, run unchanged, on the same files.

    python benchmarks/matrix_official_parity.py --official-src WORK/src [--oracle-tools ../shared/tools/official-r2med]

The files: the test suite's fixture mirror (tests/fixture_mirror.py), which carries every released expansion file
of every task. Our side: one `r2med reproduce --matrix --output OUT` (the 14 BM25 rows x 8 tasks). The official
side: ``eval_BM25.eval_bm25(gar_method, gar_llm, task_names=[<hub name>])`` of src/ (R2MED/R2MED@62b7074) for each
row and task, as benchmarks/official_bm25_parity.py runs it (pyserini's analyzer served from real Lucene 9.9.1).
The ``test`` dicts of the two official JSON files are compared key for key (value and type).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from benchmarks.official_bm25_parity import DEFAULT_TOOLS, compare, official_file  # noqa: E402


def our_files(mirror: Path, work: Path) -> Path:
    out = work / "matrix"
    env = {**os.environ, "R2MED_DATA_DIR": str(mirror), "R2MED_CACHE_DIR": str(work / "cache"), "R2MED_ACCEPT_DRIFT": "1"}
    done = subprocess.run([sys.executable, "-m", "r2med_plugin.cli", "reproduce", "--matrix", "--quiet", "--output", str(out)],
                          env=env, capture_output=True, text=True)
    if done.returncode not in (0, 1):  # 1: the fixture's numbers are not the published ones
        raise SystemExit(f"the matrix failed:\n{done.stderr[-3000:]}")
    return out


def ours_for(out: Path, task: str, expansion: str | None) -> dict:
    folder = "bm25-lucene" if expansion is None else f"{expansion.replace('/', '__')}+bm25-lucene"
    (path,) = (out / "official" / folder).glob(f"*/{task}.json")
    return json.loads(path.read_text(encoding="utf-8"))["test"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--official-src", type=Path, required=True, help="src/ of R2MED/R2MED at 62b7074")
    parser.add_argument("--oracle-tools", type=Path, default=DEFAULT_TOOLS, help="folder holding the pyserini stand-in")
    parser.add_argument("--first-row", type=int, default=1, help="start at this BM25 row (1-14), to finish a run in parts")
    args = parser.parse_args()
    for switch in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE"):
        os.environ[switch] = "1"
    from r2med_plugin.catalog import list_tasks
    from r2med_plugin.evaluation.matrix import matrix_rows
    from tests.fixture_mirror import build_fixture_mirror

    failures = compared = 0
    with tempfile.TemporaryDirectory() as folder:
        work = Path(folder)
        mirror = build_fixture_mirror(work / "mirror")
        out = our_files(mirror, work)
        print("| row | expansion | tasks with identical official JSON `test` (21 keys) |")
        print("|---|---|---|")
        for row in [row for row in matrix_rows() if row.on_cpu][args.first_row - 1:]:
            method, llm = row.expansion.split("/") if row.expansion else ("", "")
            same = 0
            for spec in list_tasks("r2med"):
                theirs = official_file(args.official_src, work, mirror, spec.hub_name, method, llm, args.oracle_tools)
                differ = compare(theirs["test"], ours_for(out, spec.name, row.expansion))
                same += not differ
                compared += 1
                for line in differ:
                    print(f"    {row.label} {spec.name}: {line}")
            failures += 8 - same
            print(f"| {row.label} | {row.expansion or '-'} | {same}/8 |")
    print(f"\n{compared - failures}/{compared} (row, task) pairs identical")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
