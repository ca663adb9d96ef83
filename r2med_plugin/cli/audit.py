"""`r2med audit`: argument parsing and printing only. Added to cli.py with one line (``add_commands``)."""

from __future__ import annotations

import argparse
from typing import Any

from r2med_plugin.cli.options import bounded, refuse_unreached
from r2med_plugin.errors import UserError

DEFAULT_THRESHOLD = 0.5  # r2med_plugin.audit.run's defaults, repeated so that building the parser imports nothing
DEFAULT_NGRAM = 3
_threshold = bounded(float, low=0.0, strict=True, high=1.0 + 1e-12,
                     message="must be a Jaccard similarity above 0 and at most 1 (e.g. 0.5), got {value}")
_ngram = bounded(int, low=1, message="must be a positive number of words, got {value}")
TRAINING_OPTIONS = {
    "task": "it chooses the tasks a training set is audited against",
    "threshold": "it is the near-duplicate threshold of a training set's audit",
    "ngram": "it sets the shingles of a training set's audit",
    "corpus": "it adds the corpus to a training set's audit",
    "write_clean": "it writes a cleaned copy of a training set",
    "query_column": "it names a training set's column", "positive_column": "it names a training set's column",
    "negative_column": "it names a training set's column", "text_column": "it names a training set's column",
    "data_dir": "it is where the tasks of a training set's audit load from", "accept_drift": "it applies to loading tasks",
    "out": "only a training set's audit writes files", "quiet": "only a training set's audit shows progress",
}


def add_commands(commands: Any) -> None:
    audit = commands.add_parser(
        "audit", help="train/eval overlap: exact copies, near-duplicates and leaked pairs of R2MED evaluation data in a training set",
        description="Streams each training set through an index of every evaluation query and relevant document of the "
                    "tasks (exact copies after NFKC, case and whitespace normalisation; MinHash LSH near-duplicates "
                    "confirmed by exact Jaccard on word n-grams; leaked query-positive pairs) and writes DIR/audit.json, "
                    "DIR/hits.jsonl and DIR/report.md. With --model, also lists mteb's declared training data of the model.",
    )
    audit.add_argument("train", nargs="*", metavar="TRAIN",
                       help="training sets: JSON Lines, parquet, plain text (one text a line), a folder saved by datasets, "
                            "or a BEIR folder; columns are detected (FlagEmbedding query/pos/neg, sentence-transformers "
                            "anchor/positive/negative or sentence1/sentence2, query/positive, question/answer, BEIR _id/text, text)")
    audit.add_argument("--task", nargs="+", default=None,
                       help="tasks to audit against: names, or all (default), r2med, nano")
    audit.add_argument("--out", default="r2med-audit", help="folder for audit.json, hits.jsonl, report.md (default ./r2med-audit)")
    audit.add_argument("--threshold", type=_threshold, default=DEFAULT_THRESHOLD,
                       help=f"near-duplicate Jaccard threshold on word n-grams (default {DEFAULT_THRESHOLD})")
    audit.add_argument("--ngram", type=_ngram, default=DEFAULT_NGRAM, help=f"words per shingle (default {DEFAULT_NGRAM})")
    audit.add_argument("--corpus", action="store_true", help="also look for every corpus document (reported apart; more memory)")
    audit.add_argument("--write-clean", action="store_true",
                       help="write DIR/clean/: each training set without the rows that hit, in its own format, with its row counts")
    audit.add_argument("--query-column", default=None, metavar="NAME", help="the column of training queries")
    audit.add_argument("--positive-column", nargs="+", default=None, metavar="NAME", help="the column(s) of positives")
    audit.add_argument("--negative-column", nargs="+", default=None, metavar="NAME", help="the column(s) of negatives")
    audit.add_argument("--text-column", nargs="+", default=None, metavar="NAME", help="other text column(s)")
    audit.add_argument("--model", default=None,
                       help="the model trained on TRAIN: recorded for `r2med leaderboard --audit DIR`, and mteb's declared "
                            "training data of it listed, with R2MED's sources among them (alone: only that list)")
    audit.add_argument("--data-dir", default=None, help="local mirror (default: $R2MED_DATA_DIR, else the hub)")
    audit.add_argument("--accept-drift", action="store_true", default=None, help="accept counts/revision that differ from task_metadata")
    audit.add_argument("--quiet", action="store_true", help="no progress bars")
    audit.set_defaults(func=_audit)


def _columns(args: argparse.Namespace) -> dict[str, list[str]] | None:
    given = {"query": [args.query_column] if args.query_column else None, "positive": args.positive_column,
             "negative": args.negative_column, "text": args.text_column}
    return {role: names for role, names in given.items() if names} or None


def _audit(args: argparse.Namespace) -> int:
    if not args.train:
        if not args.model:
            raise UserError("r2med audit needs TRAIN (training files or folders), or --model NAME for mteb's declared data")
        refuse_unreached(args, TRAINING_OPTIONS)
        return _declared_only(args.model)
    from r2med_plugin.audit.minhash import require_datasketch

    require_datasketch()  # before mteb's declared data or any training file is read
    declared = None
    if args.model:
        from r2med_plugin.integrations.mteb_training import declared_training_data

        declared = declared_training_data(args.model)
    from r2med_plugin.audit.report import HITS_FILE, REPORT_FILE, SUMMARY_FILE, render_report
    from r2med_plugin.audit.run import run_audit

    summary = run_audit(args.train, out=args.out, tasks=args.task, threshold=args.threshold, ngram=args.ngram,
                        corpus=args.corpus, write_clean_copy=args.write_clean, columns=_columns(args), model=args.model,
                        declared=declared, data_dir=args.data_dir, accept_drift=args.accept_drift, show_progress=not args.quiet)
    print(render_report(summary), end="")
    print(f"\nwrote {args.out}/{SUMMARY_FILE}, {args.out}/{HITS_FILE} ({summary['hits']} hits), {args.out}/{REPORT_FILE}")
    return 0


def _declared_only(model: str) -> int:
    from r2med_plugin.audit.report import render_declared
    from r2med_plugin.integrations.mteb_training import declared_training_data

    print(render_declared(declared_training_data(model)))
    return 0
