"""Client for the real-Lucene oracle (../shared/tools/lucene-oracle/oracle.py, relative to the checkout; or
$LUCENE_ORACLE_SCRIPT): texts in, Lucene terms out.

The oracle runs Lucene 9.9.1's English analyzer as pyserini gives it, behind a JSONL pipe. This
client streams many texts through one oracle process (a writer thread feeds stdin while the
caller reads stdout, so the pipe never deadlocks). ``oracle_unavailable()`` says why it cannot run
(no script, or ``python3 oracle.py --setup`` never ran), or returns None.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

ORACLE_ENV = "LUCENE_ORACLE_SCRIPT"
# ../shared/tools/lucene-oracle beside the checkout (as .ci/run finds it), unless $LUCENE_ORACLE_SCRIPT names another copy
_DEFAULT_SCRIPT = Path(__file__).resolve().parents[2].parent / "shared" / "tools" / "lucene-oracle" / "oracle.py"


def oracle_script() -> Path:
    return Path(os.environ.get(ORACLE_ENV) or _DEFAULT_SCRIPT)


def _oracle_home() -> Path:
    home = os.environ.get("LUCENE_ORACLE_HOME")
    if home:
        return Path(home)
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "lucene-oracle"


def oracle_unavailable() -> str | None:
    """Why the oracle cannot run here, or None when it can."""
    script = oracle_script()
    if not script.is_file():
        return f"no Lucene oracle at {script} (set ${ORACLE_ENV})"
    home = _oracle_home()
    if not home.is_dir() or not any(home.glob("*.jar")):
        return f"the Lucene oracle is not set up: run `python3 {script} --setup` (cache {home})"
    return None


def _dumps(text: str) -> str:
    return json.dumps({"text": text}, ensure_ascii=True)  # ASCII escapes carry lone surrogates too


def stream_tokens(texts: Iterable[str]) -> Iterator[list[str]]:
    """Lucene's terms for each text, in order, through one oracle process."""
    reason = oracle_unavailable()
    if reason:
        raise RuntimeError(reason)
    process = subprocess.Popen(
        [sys.executable, str(oracle_script())], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        encoding="utf-8", bufsize=1 << 20,
    )
    count = [0]

    def feed() -> None:
        try:
            for text in texts:
                process.stdin.write(_dumps(text) + "\n")
                count[0] += 1
        finally:
            process.stdin.close()

    writer = threading.Thread(target=feed, daemon=True)
    writer.start()
    try:
        for line in process.stdout:
            yield json.loads(line)["tokens"]
    finally:
        writer.join()
        process.stdout.close()
        if process.wait() != 0:
            raise RuntimeError(f"the Lucene oracle exited with status {process.returncode}")


def lucene_tokens(texts: Sequence[str]) -> list[list[str]]:
    """Lucene's terms for every text (one oracle process)."""
    result = list(stream_tokens(texts))
    if len(result) != len(texts):
        raise RuntimeError(f"the Lucene oracle answered {len(result)} of {len(texts)} texts")
    return result
