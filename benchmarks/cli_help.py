"""What `r2med --help` costs: this checkout against an earlier one, side by side, in the same environment.

Each run is a new interpreter that imports `r2med_plugin.cli` from the checkout (put first on PYTHONPATH) and prints
the top-level help, as the `r2med` script does. The two checkouts alternate, their order flipping every pair, so that
drift on a shared machine hits both alike; wall time and the child's CPU time (user + system, from wait4) are
reported as medians, with the heavy libraries each run left loaded.

    python benchmarks/cli_help.py --before DIR [--pairs 15]

DIR is the earlier checkout: `git archive <commit> | tar -x -C DIR`.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
HEAVY = ("numpy", "polars", "pyarrow", "scipy", "torch", "mteb")
HELP = ("import sys\nfrom r2med_plugin.cli import main\n"
        "try:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
        f"print('LOADED', ','.join(sorted({{name.split('.')[0] for name in sys.modules}} & set({HEAVY!r}))) or '-', "
        "file=sys.stderr)\n")


def timed_help(source: Path) -> tuple[float, float, str]:
    """(wall s, CPU s, heavy libraries loaded) of one `r2med --help` importing the package from ``source``."""
    env = {**os.environ, "PYTHONPATH": str(source), "HF_HUB_OFFLINE": "1"}
    start = time.perf_counter()
    child = subprocess.Popen([sys.executable, "-c", HELP], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    _, status, usage = os.wait4(child.pid, 0)
    wall = time.perf_counter() - start
    loaded = child.stderr.read().strip().rpartition("LOADED ")[2]
    if os.waitstatus_to_exitcode(status):
        raise SystemExit(f"r2med --help failed from {source}")
    return wall, usage.ru_utime + usage.ru_stime, loaded


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", type=Path, required=True, help="the earlier checkout")
    parser.add_argument("--pairs", type=int, default=15)
    args = parser.parse_args()
    sides = {"before": args.before.resolve(), "after": REPO_ROOT}
    results: dict[str, list[tuple[float, float, str]]] = {name: [] for name in sides}
    for pair in range(args.pairs):
        order = list(sides) if pair % 2 == 0 else list(sides)[::-1]
        for name in order:
            results[name].append(timed_help(sides[name]))
    print(f"`r2med --help`, {args.pairs} runs each, medians")
    print(f"{'checkout':<8} {'wall s':>8} {'CPU s':>8}  heavy libraries loaded")
    for name, runs in results.items():
        wall, cpu = statistics.median(r[0] for r in runs), statistics.median(r[1] for r in runs)
        print(f"{name:<8} {wall:>8.3f} {cpu:>8.3f}  {runs[0][2]}")
    before, after = (statistics.median(r[1] for r in results[name]) for name in sides)
    print(f"CPU time: {before / after:.1f}x less after")


if __name__ == "__main__":
    main()
