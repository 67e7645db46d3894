"""Atomic output: write to a temporary file beside the target, then rename over it.

A reader (or a crash) never sees a half-written CSV, JSON or weights file.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable
from contextlib import suppress
from pathlib import Path
from typing import Any


def _current_umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


_UMASK = _current_umask()


def atomic_write(path: str | Path, write: Callable[[Path], None]) -> Path:
    """Call ``write(tmp_path)`` then rename the temporary file onto ``path``.

    The data is flushed to disk before the rename and the rename before returning, so even
    after a power cut ``path`` holds the old or the new content, and files written in order
    (a checkpoint's tensors, then the JSON that names them) reach the disk in that order.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    try:
        write(Path(tmp))
        os.chmod(tmp, 0o666 & ~_UMASK)  # mkstemp's 0600 would hide a file meant for sharing
        _fsync(tmp)
        os.replace(tmp, path)
    except BaseException:
        with suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    with suppress(OSError):  # the file is in place; some filesystems cannot sync a directory
        _fsync(path.parent)
    return path


def _fsync(path: str | Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_json(path: str | Path, payload: Any) -> Path:
    def dump(tmp: Path) -> None:
        tmp.write_text(json.dumps(payload, indent=2, default=str, allow_nan=False) + "\n")

    return atomic_write(path, dump)


def read_json(path: str | Path) -> Any:
    return json.loads(Path(path).read_text())
