"""What the base install of r2med-plugin adds to mteb's: packages and megabytes, each in a fresh venv.

Builds the wheel (or takes `--wheel`), makes two throwaway venvs, installs the same CPU build of PyTorch into both
(as scripts/bootstrap_venv.sh does: an unpinned torch would pull a multi-GB CUDA build into both alike), then
`pip install mteb` into one and `pip install <wheel>` (no extras) into the other, from the machine's package index.
Sizes are the bytes of the files each distribution's RECORD lists (compiled .pyc files included, as installed).

    python benchmarks/install_size.py [--wheel dist/r2med_plugin-0.2.0-py3-none-any.whl] [--source DIR] [--keep DIR]

`--source` builds the wheel from another checkout (`git archive <commit> | tar -x -C DIR`), to measure an earlier
version under the same conditions. Prints both totals, the difference, and every package the plugin adds, largest first.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import venv
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
TORCH = "torch==2.13.0"  # the CPU build scripts/bootstrap_venv.sh installs
MB = 1_000_000
SIZES = r"""
import json, os
from importlib.metadata import distributions
sizes = {}
for dist in distributions():
    total = 0
    for entry in dist.files or ():
        path = entry.locate()
        if os.path.isfile(path):
            total += os.path.getsize(path)
    sizes[dist.metadata["Name"].lower().replace("_", "-")] = [dist.version, total]
print(json.dumps(sizes))
"""


def build_wheel(source: Path, out: Path) -> Path:
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation", "-w", str(out),
                    str(source)], check=True)
    return next(out.glob("r2med_plugin-*.whl"))


def fresh_venv(folder: Path, requirement: str) -> dict[str, tuple[str, int]]:
    """{distribution: (version, bytes)} of a new venv holding the pinned torch and ``requirement``."""
    venv.create(folder, with_pip=True, clear=True)
    python = str(folder / "bin" / "python")
    for wanted in (TORCH, requirement):
        subprocess.run([python, "-m", "pip", "install", "--quiet", wanted], check=True)
    found = json.loads(subprocess.run([python, "-c", SIZES], check=True, capture_output=True, text=True).stdout)
    return {name: (version, size) for name, (version, size) in found.items() if name not in ("pip", "setuptools")}


def report(mteb_alone: dict[str, tuple[str, int]], plugin: dict[str, tuple[str, int]]) -> None:
    def total(found: dict[str, tuple[str, int]]) -> float:
        return sum(size for _, size in found.values()) / MB

    print(f"{'venv':<28} {'packages':>8} {'MB':>9}")
    print(f"{'mteb alone':<28} {len(mteb_alone):>8} {total(mteb_alone):>9.1f}")
    print(f"{'r2med-plugin (base)':<28} {len(plugin):>8} {total(plugin):>9.1f}")
    print(f"{'difference':<28} {len(plugin) - len(mteb_alone):>+8} {total(plugin) - total(mteb_alone):>+9.1f}")
    print(f"(mteb {mteb_alone.get('mteb', ('?',))[0]} alone, mteb {plugin.get('mteb', ('?',))[0]} with the plugin)")
    added = sorted(((size, name, version) for name, (version, size) in plugin.items() if name not in mteb_alone), reverse=True)
    print("\npackages the plugin adds, largest first:")
    for size, name, version in added:
        print(f"  {name:<28} {version:<14} {size / MB:>8.1f} MB")
    moved = [name for name in plugin if name in mteb_alone and plugin[name][0] != mteb_alone[name][0]]
    if moved:
        print("resolved to another version than with mteb alone: " + ", ".join(
            f"{name} {mteb_alone[name][0]} -> {plugin[name][0]}" for name in sorted(moved)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--wheel", type=Path, default=None, help="an existing wheel (default: build one from --source)")
    parser.add_argument("--source", type=Path, default=REPO_ROOT, help="the checkout to build the wheel from")
    parser.add_argument("--keep", type=Path, default=None, help="make the venvs here and keep them (default: a temporary folder)")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="r2med-install-size-")) if args.keep is None else args.keep
    work.mkdir(parents=True, exist_ok=True)
    try:
        wheel = args.wheel.resolve() if args.wheel else build_wheel(args.source, work / "dist")
        mteb_alone = fresh_venv(work / "mteb-alone", "mteb")
        plugin = fresh_venv(work / "plugin", str(wheel))
        report(mteb_alone, plugin)
    finally:
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
