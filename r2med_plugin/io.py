"""The one atomic writer every file and folder of this package goes through.

A file is written to a uniquely named temporary file in the same folder (unique across processes and
machines sharing the folder), flushed to disk, and renamed over the target: a reader sees the old
complete file or the new complete one, never a part, and two writers of one target never collide.
The temporary file is created with the process umask (as ``open()`` would), not mkstemp's 0600, so a
group-shared folder stays readable. An interrupted write (Ctrl-C included) leaves no temporary file.
A folder (``atomic_folder``) is written the same way: whole, beside its target, then renamed into place.
"""

from __future__ import annotations

import json
import os
import shutil
import uuid
from collections.abc import Callable
from pathlib import Path


def atomic_write(target: str | os.PathLike, write: Callable[[Path], object]) -> Path:
    """Call ``write(temporary_path)`` and rename the finished file over ``target``."""
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    temporary = _hidden_sibling(target, "tmp")
    try:
        with open(temporary, "xb"):  # created with the umask's permissions
            pass
        write(temporary)
        with open(temporary, "rb+") as stream:
            os.fsync(stream.fileno())  # on disk before the rename makes it visible
        temporary.replace(target)  # os.replace: atomic on POSIX and Windows
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
    return target


def atomic_folder(target: str | os.PathLike, write: Callable[[Path], object]) -> Path:
    """Call ``write(temporary_folder)`` (a new empty folder beside ``target``) and put the finished folder in place of
    ``target``: what ``target`` held is moved aside first and deleted last, so a reader sees the old or the new
    folder, never a mix of the two. An interrupted write (Ctrl-C included) leaves no temporary folder."""
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    temporary = _hidden_sibling(target, "tmp")
    temporary.mkdir()
    try:
        write(temporary)
        _swap_in(temporary, target)
    except BaseException:
        shutil.rmtree(temporary, ignore_errors=True)
        raise
    return target


def _swap_in(folder: Path, target: Path) -> None:
    if not (target.exists() or target.is_symlink()):
        folder.replace(target)
        return
    previous = _hidden_sibling(target, "old")
    target.replace(previous)
    try:
        folder.replace(target)
    except BaseException:
        previous.replace(target)  # the old folder back where it was
        raise
    if previous.is_dir() and not previous.is_symlink():
        shutil.rmtree(previous, ignore_errors=True)
    else:
        previous.unlink()


def _hidden_sibling(target: Path, kind: str) -> Path:
    """A name beside ``target`` (same file system, so a rename moves it), unique across processes and machines."""
    return target.parent / f".{target.name}.{uuid.uuid4().hex}.{kind}"


def write_bytes_atomic(target: str | os.PathLike, data: bytes) -> Path:
    return atomic_write(target, lambda temporary: temporary.write_bytes(data))


def write_text_atomic(target: str | os.PathLike, text: str) -> Path:
    return write_bytes_atomic(target, text.encode("utf-8"))


def write_json_atomic(
    target: str | os.PathLike, payload: object, *, sort_keys: bool = False, trailing_newline: bool = True,
    ensure_ascii: bool = False, indent: int | None = 2,
) -> Path:
    """JSON (``indent`` 2 by default, as every result file of this package) written atomically."""
    text = json.dumps(payload, indent=indent, ensure_ascii=ensure_ascii, sort_keys=sort_keys)
    return write_text_atomic(target, text + ("\n" if trailing_newline else ""))
