"""Write the descriptive statistics of the 24 MTEB tasks (r2med_plugin/integrations/descriptive_stats/).

Never edit the outputs by hand: every file records its provenance (source, dataset revision, mteb version,
date). See r2med_plugin/integrations/descriptive_statistics.py for the three sources.

Usage:
    # From the data, with mteb's own code: the hub at the pinned revisions, or a mirror (R2MED_DATA_DIR).
    python scripts/make_descriptive_stats.py --from-data [--tasks NAME ...] [--out DIR]
    # Where the data cannot be read: R2MED from the statistics mteb ships for the same revisions (corrected),
    # NanoR2MED from the dataset card (unknown fields null). This is what the wheel ships today.
    python scripts/make_descriptive_stats.py --without-data
    # Exit 1 if the files on disk differ from what the chosen source writes (the date aside).
    python scripts/make_descriptive_stats.py --without-data --check
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from r2med_plugin.integrations import descriptive_statistics as ds


def build(task_names: list[str], *, from_data: bool, today: str | None = None) -> dict[str, dict]:
    make = ds.from_data if from_data else ds.without_data
    return {name: make(name, today=today) for name in task_names}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--from-data", action="store_true", help="load each task and run mteb's computation")
    source.add_argument("--without-data", action="store_true", help="mteb's statistics (R2MED) and the dataset card (NanoR2MED)")
    parser.add_argument("--tasks", nargs="+", default=None, help="task names (default: all 24)")
    parser.add_argument("--out", type=Path, default=ds.SHIPPED_DIR)
    parser.add_argument("--check", action="store_true", help="only compare with the files in --out")
    args = parser.parse_args(argv)
    known = ds.task_names()
    names = args.tasks or known
    unknown = sorted(set(names) - set(known))
    if unknown:
        parser.error(f"unknown task names {unknown}; known: {', '.join(known)}")
    files = build(names, from_data=args.from_data)
    if args.check:
        stale = []
        for name, stats in files.items():
            target = args.out / f"{name}.json"
            on_disk = json.loads(target.read_text(encoding="utf-8")) if target.is_file() else None
            if on_disk is None or ds.comparable(on_disk) != ds.comparable(json.loads(ds.render(stats))):
                stale.append(name)
        if stale:
            print(f"stale descriptive statistics (re-run {ds.GENERATED_BY}): {', '.join(stale)}", file=sys.stderr)
            return 1
        print(f"checked {len(files)} files in {args.out}")
        return 0
    args.out.mkdir(parents=True, exist_ok=True)
    for name, stats in files.items():
        (args.out / f"{name}.json").write_text(ds.render(stats), encoding="utf-8")
    print(f"wrote {len(files)} files in {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
