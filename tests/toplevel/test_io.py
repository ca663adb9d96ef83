"""The one atomic writer: two processes writing one target at once never leave a partial file or a temporary."""

from __future__ import annotations

import json
import multiprocessing
import os
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from r2med_plugin.io import write_json_atomic, write_text_atomic


def _write_many(target: str, marker: int, rounds: int) -> None:
    for round_ in range(rounds):
        write_json_atomic(target, {"writer": marker, "round": round_, "payload": [marker] * 5000})


def test_two_processes_writing_one_target_at_once(tmp_path: Path):
    target = tmp_path / "result.json"
    context = multiprocessing.get_context("spawn")
    writers = [context.Process(target=_write_many, args=(str(target), marker, 40)) for marker in (1, 2)]
    for writer in writers:
        writer.start()
    seen = set()
    while any(writer.is_alive() for writer in writers):
        if target.exists():
            payload = json.loads(target.read_text())  # never half a file
            assert payload["payload"] == [payload["writer"]] * 5000
            seen.add(payload["writer"])
    for writer in writers:
        writer.join()
        assert writer.exitcode == 0
    final = json.loads(target.read_text())
    assert final["round"] == 39 and final["payload"] == [final["writer"]] * 5000
    assert [path.name for path in tmp_path.iterdir()] == ["result.json"]  # no temporary file left behind


def test_files_get_the_umask_permissions_and_interrupted_writes_leave_nothing(tmp_path: Path, monkeypatch):
    mask = os.umask(0o022)
    os.umask(mask)
    path = write_text_atomic(tmp_path / "a" / "b.txt", "x")
    assert stat.S_IMODE(path.stat().st_mode) == 0o666 & ~mask  # as open() creates them (mkstemp would give 0600)
    monkeypatch.setattr("os.replace", lambda *a: (_ for _ in ()).throw(KeyboardInterrupt()))
    with pytest.raises(KeyboardInterrupt):
        write_text_atomic(tmp_path / "a" / "c.txt", "y")
    assert sorted(p.name for p in (tmp_path / "a").iterdir()) == ["b.txt"]


def _write_folder(files: dict[str, str]):
    def write(folder: Path) -> None:
        for name, text in files.items():
            (folder / name).write_text(text)
    return write


def test_a_folder_is_replaced_whole_and_an_interrupted_write_keeps_the_old_one(tmp_path: Path):
    from r2med_plugin.io import atomic_folder

    target = tmp_path / "out"
    atomic_folder(target, _write_folder({"a.json": "1", "b.json": "2"}))
    atomic_folder(target, _write_folder({"c.json": "3"}))
    assert {path.name: path.read_text() for path in target.iterdir()} == {"c.json": "3"}  # nothing of the old folder

    def interrupted(folder: Path) -> None:
        (folder / "d.json").write_text("4")
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        atomic_folder(target, interrupted)
    assert {path.name: path.read_text() for path in target.iterdir()} == {"c.json": "3"}
    assert [path.name for path in tmp_path.iterdir()] == ["out"]  # no temporary or set-aside folder left


def test_a_folder_replaces_a_file_and_a_failed_rename_puts_the_old_folder_back(tmp_path: Path, monkeypatch):
    from r2med_plugin.io import atomic_folder

    target = tmp_path / "out"
    target.write_text("a file")
    atomic_folder(target, _write_folder({"a.json": "1"}))
    assert [path.name for path in target.iterdir()] == ["a.json"] and [p.name for p in tmp_path.iterdir()] == ["out"]
    real_replace = Path.replace

    def failing_replace(self: Path, other):
        if self.name.endswith(".tmp") and Path(other) == target:
            raise OSError("disk gone")
        return real_replace(self, other)

    monkeypatch.setattr(Path, "replace", failing_replace)
    with pytest.raises(OSError, match="disk gone"):
        atomic_folder(target, _write_folder({"b.json": "2"}))
    assert [path.name for path in target.iterdir()] == ["a.json"] and [p.name for p in tmp_path.iterdir()] == ["out"]


def test_interrupted_write_leaves_no_result(tmp_path: Path):
    target = tmp_path / "results" / "R2MEDBiology.json"
    code = f"""
import json, time
from pathlib import Path
import r2med_plugin.evaluation.official as official
def slow_dump(payload, stream, **kwargs):
    stream.write('{{"task_name": "R2MEDBiology", "scores": ')
    stream.flush()
    time.sleep(60)
official.json.dump = slow_dump
official.write_json_atomic(Path({str(target)!r}), {{"x": 1}})
"""
    child = subprocess.Popen([sys.executable, "-c", code])
    deadline = time.monotonic() + 60
    while not list(target.parent.glob("*.tmp")) and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.2)
    child.send_signal(signal.SIGKILL)
    child.wait(timeout=30)
    assert not target.exists()  # nothing MTEB or the leaderboard would read as a result
    from r2med_plugin.io import write_json_atomic

    write_json_atomic(target, {"task_name": "R2MEDBiology"})  # the rerun completes
    assert json.loads(target.read_text()) == {"task_name": "R2MEDBiology"}
