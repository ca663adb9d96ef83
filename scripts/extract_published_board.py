"""Regenerate reference/r2med_leaderboard.json from a clone of GitHub R2MED/r2med.github.io (the published board).

    git clone https://github.com/R2MED/r2med.github.io board
    python scripts/extract_published_board.py board [--commit c85a571] [--out reference/r2med_leaderboard.json]
    python scripts/generate_task_metadata.py   # then the packaged copy and task_metadata/

Reads index.html at the commit (git show, so the work tree may be dirty) and copies every row of its leaderboard
table as published: Rewriter (the HyDE LLM; "-": none), Retriever, Reranker ("-": none), Avg. and the 8 task scores.
A reranker's paper is the link the board gives it.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from pathlib import Path

REPOSITORY = "https://github.com/R2MED/r2med.github.io"
TARGET = Path(__file__).resolve().parents[1] / "reference" / "r2med_leaderboard.json"
HUB_NAMES = ("Biology", "Bioinformatics", "Medical-Sciences", "MedXpertQA-Exam", "MedQA-Diag", "PMC-Treatment",
             "PMC-Clinical", "IIYi-Clinical")  # the board's task columns, in its order
COLUMNS = ["LLM", "Retriever", "Reranker", "Avg.", "Bio-logy", "Bio-informatics", "Medical-Sciences", "MedXpert-QAExam",
           "MedQA-Diag", "PMC-Treatment", "PMC-Clinical", "IIYi-Clinical"]
NONE = "-"


def git(clone: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(clone), *args], check=True, capture_output=True, text=True).stdout


def _text(cell: str) -> str:
    return re.sub(r"<[^>]+>", "", cell).strip()


def board_rows(html: str) -> tuple[list[dict], dict[str, str]]:
    """(the board's rows as the reference file holds them, reranker name -> the link the board gives it)."""
    body = html[html.index("<tbody>"):html.index("</tbody>")]
    rows, papers = [], {}
    for row in re.findall(r"<tr[^>]*>(.*?)</tr>", body, re.S):
        cells = re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)
        _, rewriter, retriever, reranker, average, *scores = cells
        if len(scores) != len(HUB_NAMES):
            raise SystemExit(f"a board row has {len(scores)} task scores, not {len(HUB_NAMES)}: {_text(row)!r}")
        link = re.search(r'href="([^"]+)"', reranker)
        if _text(reranker) != NONE and link:
            papers[_text(reranker)] = link.group(1)
        rows.append({
            "llm": None if _text(rewriter) == NONE else _text(rewriter),
            "retriever": _text(retriever),
            "reranker": None if _text(reranker) == NONE else _text(reranker),
            "avg": float(_text(average)),
            "scores": {hub: float(_text(score)) for hub, score in zip(HUB_NAMES, scores, strict=True)},
        })
    return rows, papers


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("clone", type=Path)
    parser.add_argument("--commit", default="HEAD")
    parser.add_argument("--out", type=Path, default=TARGET)
    args = parser.parse_args(argv)
    commit = git(args.clone, "rev-parse", args.commit).strip()
    date, subject = git(args.clone, "log", "-1", "--format=%ad%x00%s", "--date=short", commit).strip().split("\0")
    rows, papers = board_rows(git(args.clone, "show", f"{commit}:index.html"))
    document = {
        "source": (f"R2MED project leaderboard, {REPOSITORY.removeprefix('https://')} index.html at commit {commit} "
                   f"({date}, \"{subject}\"), average nDCG@10 x100 across the 8 tasks; LLM = model that generated the "
                   "hypothetical document (HyDE) before retrieval (the board's Rewriter), null = plain retriever; "
                   "reranker = the model that reranked the retriever's results, null = none"),
        "reranker_papers": papers,
        "columns": COLUMNS,
        "rows": rows,
    }
    args.out.write_text(json.dumps(document, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"wrote {args.out} ({len(rows)} rows from {commit[:7]})", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
