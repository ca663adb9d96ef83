"""Python start-up time with and without the r2med-plugin autoload .pth file, side by side.

Builds the wheel, installs it (no dependencies needed) into a throwaway venv, then times
`python -c pass` alternately with the .pth file present and moved away.

    python benchmarks/startup.py [--runs 40]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
PTH = "r2med_plugin_autoload.pth"


def _time_once(python: Path) -> float:
    start = time.perf_counter()
    subprocess.run([str(python), "-c", "pass"], check=True)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=40)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        subprocess.run([sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", str(root / "dist"), str(REPO_ROOT)],
                       check=True, capture_output=True)
        subprocess.run([sys.executable, "-m", "venv", str(root / "venv")], check=True)
        python = root / "venv" / "bin" / "python"
        subprocess.run([python, "-m", "pip", "install", "--quiet", "--no-deps", str(next((root / "dist").glob("*.whl")))], check=True)
        site = Path(subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                   check=True, capture_output=True, text=True).stdout.strip())
        with_pth, without_pth = [], []
        for _ in range(args.runs):  # alternate, so machine noise hits both sides alike
            with_pth.append(_time_once(python))
            (site / PTH).rename(root / PTH)
            without_pth.append(_time_once(python))
            (root / PTH).rename(site / PTH)
    med_with, med_without = statistics.median(with_pth), statistics.median(without_pth)
    print(f"python -c pass, median of {args.runs}: with autoload {med_with * 1000:.1f} ms, "
          f"without {med_without * 1000:.1f} ms, difference {(med_with - med_without) * 1000:+.1f} ms "
          f"(ratio {med_with / med_without:.3f})")


if __name__ == "__main__":
    main()
