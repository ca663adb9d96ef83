"""The one atomic writer: two processes writing one target at once never leave a partial file or a temporary."""

from __future__ import annotations

import json
import multiprocessing
import os
import signal
import stat
import subprocess
import sys
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


# A child process writes an official result file through the package's writer, with the one step that writes the
# temporary file's bytes (``Path.write_bytes``, called by ``atomic_write``) replaced: it writes the first half of the
# file, flushes it to disk, reports the temporary path on a pipe and waits to be stopped. The parent stops it there.
_MID_WRITE_CHILD = """
import os, pathlib, sys, time
from r2med_plugin.reporting.official_files import write_official_results

ready = os.fdopen(int(sys.argv[2]), "w")

def half_then_wait(self, data):
    with open(self, "wb") as stream:
        stream.write(data[: len(data) // 2])
        stream.flush()
        os.fsync(stream.fileno())
    ready.write(str(self) + "\\n")
    ready.flush()
    time.sleep(600)  # the parent stops this process here, mid-write

pathlib.Path.write_bytes = half_then_wait
write_official_results(sys.argv[1], dataset_name="Biology", model_name="new", scores={"ndcg_at_10": 0.5},
                       evaluation_time=60.0)
"""


def _stop_mid_write(target: Path, stop: signal.Signals) -> tuple[Path, bytes, int]:
    """Run the child above on ``target`` and send ``stop`` once it is mid-write: (its temporary file, the bytes that
    temporary file held at that moment, the child's exit status)."""
    read_end, write_end = os.pipe()
    child = subprocess.Popen([sys.executable, "-c", _MID_WRITE_CHILD, str(target), str(write_end)], pass_fds=[write_end],
                             stderr=subprocess.PIPE)
    os.close(write_end)
    with os.fdopen(read_end) as ready:
        line = ready.readline()  # blocks until the child is mid-write; "" if it ended without getting there
        if not line:
            child.wait(timeout=60)
            pytest.fail(f"the child never reached the write: {child.stderr.read().decode()[-2000:]}")
        temporary = Path(line.strip())
        partial = temporary.read_bytes()
        child.send_signal(stop)
        status = child.wait(timeout=60)
    child.stderr.close()
    return temporary, partial, status


def _previous_result(target: Path) -> bytes:
    from r2med_plugin.reporting.official_files import write_official_results

    write_official_results(target, dataset_name="Biology", model_name="old", scores={"ndcg_at_10": 0.25}, evaluation_time=60.0)
    return target.read_bytes()


@pytest.mark.slow
def test_interrupted_write_leaves_no_result(tmp_path: Path):
    """Killed mid-write (SIGKILL: no clean-up can run), the target still holds the previous complete file and the half
    written bytes sit only in a hidden temporary file beside it, which no result reader opens."""
    from r2med_plugin.reporting.official_files import write_official_results

    target = tmp_path / "results" / "R2MEDBiology.json"
    before = _previous_result(target)
    temporary, partial, status = _stop_mid_write(target, signal.SIGKILL)
    assert status == -signal.SIGKILL
    assert temporary.parent == target.parent and temporary.name.startswith(".R2MEDBiology.json.")
    assert temporary.name.endswith(".tmp")
    assert partial and not partial.endswith(b"}")  # the child was stopped with half a file written
    with pytest.raises(json.JSONDecodeError):
        json.loads(partial)
    assert target.read_bytes() == before  # the result file was never touched: the previous one, complete
    assert sorted(path.name for path in target.parent.glob("*.json")) == ["R2MEDBiology.json"]
    write_official_results(target, dataset_name="Biology", model_name="rerun", scores={"ndcg_at_10": 0.5},
                           evaluation_time=60.0)  # the rerun completes
    assert json.loads(target.read_text())["model_name"] == "rerun"


def test_ctrl_c_mid_write_leaves_the_previous_file_and_no_temporary(tmp_path: Path):
    """Interrupted mid-write by SIGINT (Ctrl-C), the writer removes its temporary file; the previous file stays."""
    target = tmp_path / "results" / "R2MEDBiology.json"
    before = _previous_result(target)
    temporary, partial, status = _stop_mid_write(target, signal.SIGINT)
    assert status == -signal.SIGINT and partial and not partial.endswith(b"}")  # KeyboardInterrupt, uncaught
    assert not temporary.exists()
    assert [path.name for path in target.parent.iterdir()] == ["R2MEDBiology.json"] and target.read_bytes() == before
