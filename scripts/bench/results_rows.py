"""Results CSVs that several jobs append to at once (the benchmark's launcher workers, the
tuning scripts): one lock per file around each read-modify-write, written atomically. A module
of its own, light to import, so that a job that only appends rows loads no model code."""

from __future__ import annotations

import fcntl
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pandas as pd

from rdpgan.io import atomic_write


@contextmanager
def locked(path: Path) -> Iterator[None]:
    """Serialise read-modify-write of a results CSV across parallel launcher workers."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_suffix(".lock"), "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def read_rows(path: Path) -> pd.DataFrame:
    """A results CSV's rows, commits as text (a hash of digits alone would read as a number)."""
    return pd.read_csv(path, dtype={"commit": str}) if path.is_file() else pd.DataFrame()


def append_rows(path: Path, rows: list[dict]) -> pd.DataFrame:
    """``path``'s rows with ``rows`` added, written back atomically under its lock (jobs that
    append to one CSV at once lose no row); returns them all."""
    with locked(path):
        done = pd.concat([read_rows(path), pd.DataFrame(rows)], ignore_index=True)
        atomic_write(path, lambda tmp: done.to_csv(tmp, index=False))
    return done
