"""Peak memory (RSS) of a bm25-lucene run on the 61,379-document task, in a fresh process.

    python benchmarks/memory.py
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

CHILD = r"""
import json, resource, sys, time
sys.path.insert(0, {bench!r})
from common import LARGEST_TASK
from r2med_plugin import load_task
from r2med_plugin.retrieval.bm25 import bm25_search
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
data = load_task(LARGEST_TASK, data_dir={root!r}, accept_drift=True)
loaded = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
start = time.perf_counter()
run = bm25_search(data.corpus, data.queries, variant="lucene", top_k=1000, show_progress=False)
seconds = time.perf_counter() - start
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({{"imports_kib": before, "after_load_kib": loaded, "peak_kib": peak, "seconds": seconds, "queries": len(run)}}))
"""


def main() -> None:
    bench = str(Path(__file__).resolve().parent)
    sys.path.insert(0, bench)
    from common import r2med_mirror

    with tempfile.TemporaryDirectory() as tmp:
        root = str(r2med_mirror(Path(tmp) / "mirror"))
        out = subprocess.run([sys.executable, "-c", CHILD.format(bench=bench, root=root)], capture_output=True, text=True, check=True)
    stats = json.loads(out.stdout.strip().splitlines()[-1])
    mib = {key: value / 1024 for key, value in stats.items() if key.endswith("_kib")}
    print("bm25-lucene on 61,379 documents, 150 queries, top-1000, fresh process")
    print(f"  peak RSS after imports {mib['imports_kib']:7.0f} MiB")
    print(f"  peak RSS after loading {mib['after_load_kib']:7.0f} MiB")
    print(f"  peak RSS of the run    {mib['peak_kib']:7.0f} MiB  (target: under 2048 MiB)  in {stats['seconds']:.1f} s")


if __name__ == "__main__":
    main()
