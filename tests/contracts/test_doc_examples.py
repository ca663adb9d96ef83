"""Every command and Python block of README.md and docs/ runs, offline, on the fixture mirror.

Each page is one test. Its ```bash, ```console (the ``$ `` lines) and ```python blocks run in order in a
working folder of their own, with ``R2MED_DATA_DIR`` set to the fixture mirror (all 16 tasks in the hub
layout, tiny texts; ``R2MED_ACCEPT_DRIFT=1``, since its counts are not the cards'), the hub switched off and
the package's commands (``r2med``, ``mteb``, ``ir_datasets``, ``python``) first on ``PATH``. Shell blocks of
a page share their environment and working folder (an ``export`` or ``cd`` carries to the next block);
Python blocks share one namespace.

A console block's output lines shown in full (not elided with ``...``) must be among the lines its commands print,
so the numbers a page shows are the numbers the commands give.

A block that cannot run here (it needs the hub, a GPU, a server, the network or an API key) is marked by an
HTML comment on the line before it, with the reason and the offline stand-in that runs in its place::

    <!-- example: skip needs-server; instead:
    r2med evaluate --task NanoR2MEDBiology --retriever bm25-lucene
    -->

``<!-- example: before: ... -->`` gives commands that run, unseen, before the next block (a file the block
reads). Nothing is skipped without a stand-in, and a marker that is not followed by a block is an error.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
LANGUAGES = {"bash": "shell", "console": "console", "python": "python"}
SKIP_REASONS = {"needs-hub", "needs-gpu", "needs-server", "needs-network", "needs-key", "installs", "changes-repo"}
MARKER = re.compile(r"<!--\s*example:\s*(?P<body>.*?)-->", re.S)
FENCE = re.compile(r"^(?P<indent> *)```(?P<language>[\w-]*)\s*$")
BLOCK_TIMEOUT_S = 600


@dataclass
class Block:
    page: str
    line: int
    language: str  # shell, console or python
    code: str
    skip: str | None = None  # the reason, when the block does not run
    instead: str | None = None  # what runs in its place
    before: list[str] = field(default_factory=list)  # hidden set-up commands (shell)


def _marker(text: str) -> tuple[str, str, str | None]:
    """(kind, reason, code) of one marker's body: skip/before, its reason, and its stand-in or set-up code."""
    head, _, code = text.partition("\n")
    head = head.strip()
    if head.startswith("before:"):
        return "before", "", code.strip("\n") + "\n"
    match = re.fullmatch(r"skip (?P<reason>[\w-]+)(?P<instead>; instead:)?", head)
    if match is None:
        raise ValueError(f"unreadable example marker {head!r}: write 'skip <reason>; instead:' or 'before:'")
    if match["reason"] not in SKIP_REASONS:
        raise ValueError(f"example marker reason {match['reason']!r} is not one of {sorted(SKIP_REASONS)}")
    if not match["instead"] or not code.strip():
        raise ValueError(f"'skip {match['reason']}' has no stand-in: add '; instead:' and the commands that run offline")
    return "skip", match["reason"], code.strip("\n") + "\n"


def collect(path: Path) -> list[Block]:
    """The runnable blocks of one page, with their markers applied."""
    text = path.read_text(encoding="utf-8")
    lines = text.splitlines()
    name = path.relative_to(ROOT).as_posix()
    markers = {text.count("\n", 0, match.end()): match["body"] for match in MARKER.finditer(text)}
    blocks: list[Block] = []
    pending: list[tuple[int, str]] = []
    index = 0
    while index < len(lines):
        if index in markers:
            pending.append((index, markers[index]))
        opening = FENCE.match(lines[index])
        if opening is None or not opening["language"]:
            index += 1
            continue
        indent, body = len(opening["indent"]), []
        index += 1
        while index < len(lines) and not re.match(r"^ *```\s*$", lines[index]):
            body.append(lines[index][indent:])
            index += 1
        start = index - len(body)
        index += 1
        language = LANGUAGES.get(opening["language"])
        if language is None:
            if pending:
                raise ValueError(f"{name}:{start}: an example marker stands before a ```{opening['language']} block, which never runs")
            continue
        block = Block(name, start, language, "\n".join(body) + "\n")
        for _line, marker in pending:
            kind, reason, code = _marker(marker)
            if kind == "before":
                block.before.append(code)
            else:
                block.skip, block.instead = reason, code
        pending = []
        blocks.append(block)
    if pending:
        raise ValueError(f"{name}:{pending[0][0] + 1}: an example marker with no block after it")
    return blocks


def _console_output(code: str) -> list[str]:
    """The output lines a console block shows in full (not elided with "...", not a parenthetical note)."""
    shown, continuing = [], False
    for line in code.splitlines():
        if line.startswith("$ ") or continuing:
            continuing = line.endswith("\\")
            continue
        if line.strip() and "..." not in line and not line.lstrip().startswith("("):
            shown.append(line.strip())
    return shown


def _console_commands(code: str) -> str:
    """The ``$ `` lines of a console block (with their continuation lines), as one script."""
    commands, continuing = [], False
    for line in code.splitlines():
        if line.startswith("$ ") or continuing:
            commands.append(line[2:] if line.startswith("$ ") and not continuing else line)
            continuing = line.endswith("\\")
    return "\n".join(commands) + "\n"


class PageRun:
    """One page's working folder, environment and Python namespace."""

    def __init__(self, workdir: Path, env: dict[str, str]) -> None:
        self.cwd, self.env, self.namespace = workdir, env, {"__name__": "__doc_example__"}

    def shell(self, script: str, where: str) -> str:
        state = self.cwd.parent / "shell-state"
        wrapped = f"set -e\n{script}\ncd_now=$(pwd); env -0 > {state}.env; printf %s \"$cd_now\" > {state}.cwd\n"
        done = subprocess.run(["bash", "-c", wrapped], cwd=self.cwd, env=self.env, capture_output=True, text=True,
                              timeout=BLOCK_TIMEOUT_S)
        assert done.returncode == 0, f"{where} failed (exit {done.returncode}):\n{script}\n--- stdout\n{done.stdout[-4000:]}\n--- stderr\n{done.stderr[-4000:]}"
        self.env = dict(item.split("=", 1) for item in Path(f"{state}.env").read_text().split("\0") if "=" in item)
        self.cwd = Path(Path(f"{state}.cwd").read_text())
        return done.stdout

    def python(self, code: str, where: str, monkeypatch: pytest.MonkeyPatch) -> None:
        for key in set(os.environ) - set(self.env):
            monkeypatch.delenv(key)
        for key, value in self.env.items():
            monkeypatch.setenv(key, value)
        monkeypatch.chdir(self.cwd)
        exec(compile(code, where, "exec", dont_inherit=True), self.namespace)  # as a reader runs it: not under this module's __future__ imports


def _environment(tmp_path: Path, mirror: Path) -> dict[str, str]:
    bin_dir = Path(sys.executable).parent
    home = tmp_path / "home"
    home.mkdir()
    env = {key: value for key, value in os.environ.items() if not key.startswith(("R2MED_", "PYTEST_"))}
    env.update(PATH=f"{bin_dir}{os.pathsep}{env.get('PATH', '')}", HOME=str(home), R2MED_DATA_DIR=str(mirror),
               R2MED_ACCEPT_DRIFT="1", R2MED_CACHE_DIR=os.environ.get("R2MED_CACHE_DIR", str(tmp_path / "cache")),
               HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1", TRANSFORMERS_OFFLINE="1", MPLBACKEND="Agg",
               IR_DATASETS_HOME=str(tmp_path / "ir_datasets"), R2MED_EXAMPLE_ROOT=str(ROOT), PYTHONPATH=str(ROOT))
    return env


PAGE_BLOCKS = {path.relative_to(ROOT).as_posix(): collect(path) for path in PAGES}
RUNNABLE = sorted(name for name, blocks in PAGE_BLOCKS.items() if blocks)


@pytest.mark.slow
@pytest.mark.parametrize("page", RUNNABLE)
def test_every_example_of_the_page_runs(page: str, fixture_mirror: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    workdir = tmp_path / "work"
    workdir.mkdir()
    run = PageRun(workdir, _environment(tmp_path, fixture_mirror))
    for block in PAGE_BLOCKS[page]:
        where = f"{page}:{block.line}"
        for setup in block.before:
            run.shell(setup, f"{where} (set-up)")
        code = block.instead if block.skip else block.code  # a stand-in is written in its block's language
        if block.language == "python":
            run.python(code, where, monkeypatch)
        elif block.language == "console" and not block.skip:
            printed = {line.strip() for line in run.shell(_console_commands(code), where).splitlines()}
            missing = [line for line in _console_output(code) if line not in printed]
            assert not missing, f"{where}: the page shows output the commands no longer print: {missing}"
        else:
            run.shell(code, where)


def test_the_collector_finds_the_examples_and_every_skip_has_a_stand_in():
    """The pages hold examples, and the markers are read as documented (a skip without a stand-in is an error)."""
    total = sum(len(blocks) for blocks in PAGE_BLOCKS.values())
    assert total >= 40, total
    assert "README.md" in RUNNABLE and "docs/tutorial/index.md" in RUNNABLE
    skipped = [block for blocks in PAGE_BLOCKS.values() for block in blocks if block.skip]
    assert skipped and all(block.instead and block.skip in SKIP_REASONS for block in skipped)
    with pytest.raises(ValueError, match="has no stand-in"):
        _marker("skip needs-hub")
    with pytest.raises(ValueError, match="is not one of"):
        _marker("skip because; instead:\ntrue")
    assert _console_commands("$ r2med a \\\n    --b\noutput\n$ r2med c\n") == "r2med a \\\n    --b\nr2med c\n"
    assert _console_output("$ r2med a\n| 1 | 2 |\n| 3 | ... |\n  (a note)\n") == ["| 1 | 2 |"]


def hub_waits(code: str) -> list[str]:
    """The lines of an offline command block that load a model by hub name (``mteb run``, or a command given a
    Hugging Face cache with ``HF_HOME=``) without ``HF_HUB_OFFLINE=1`` on the line or exported before it: offline,
    such a line waits minutes on hub retries (the tests' environment sets the switch, so they would not see it)."""
    waiting, exported = [], False
    for line in code.splitlines():
        command = line.split("#", 1)[0]
        if re.search(r"\bexport\b.*\bHF_HUB_OFFLINE=1", command):
            exported = True
        loads_models = re.search(r"\bmteb run\b", command) or re.search(r"\bHF_HOME=\S+\s+\S", command)
        if loads_models and not exported and "HF_HUB_OFFLINE=1" not in command:
            waiting.append(line.strip())
    return waiting


def test_every_offline_command_shown_carries_what_keeps_it_off_the_hub():
    offline = [(block, block.instead if block.skip else block.code) for blocks in PAGE_BLOCKS.values() for block in blocks
               if block.language != "python" and (block.skip is None or block.instead)]
    waiting = {f"{block.page}:{block.line}": hub_waits(code) for block, code in offline if hub_waits(code)}
    assert waiting == {}
    assert hub_waits('HF_HOME="$HOME/hf" mteb run -t X -m m') == ['HF_HOME="$HOME/hf" mteb run -t X -m m']
    assert hub_waits('export HF_HOME=h HF_HUB_OFFLINE=1\nmteb run -t X -m m') == []


def test_a_marker_without_a_block_is_an_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    page = tmp_path / "page.md"
    page.write_text("text\n<!-- example: skip needs-hub; instead:\ntrue\n-->\n\nno block\n", encoding="utf-8")
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    with pytest.raises(ValueError, match="no block after it"):
        collect(page)
