"""What every results file carries about where it was made: the CPU model, and the commit of
the code that ran."""

from __future__ import annotations

import os
import platform
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
# What a result depends on: a change (or a new file) here, not yet committed, makes the stamp
# "<commit>-dirty"; results/, which the scripts append to, does not.
CODE = ("rdpgan", "configs", "scripts")


def cpu_model() -> str:
    """The first ``model name`` in /proc/cpuinfo, else what :mod:`platform` knows."""
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.is_file():
        for line in cpuinfo.read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown CPU"


def machine_line() -> str:
    """The machine a results row was made on: architecture, cores and CPU model."""
    return f"{platform.machine()} {os.cpu_count()} cores, {cpu_model()}"


def _git(*args: str) -> str:
    return subprocess.run(["git", *args], capture_output=True, text=True, cwd=REPO).stdout.strip()


def code_commit() -> str:
    """The short commit of HEAD, with ``-dirty`` if the code differs from it. Call it when the
    process starts: what runs is what was imported (or launched) then."""
    dirty = _git("status", "--porcelain", *CODE)
    return (_git("rev-parse", "--short", "HEAD") or "unknown") + ("-dirty" if dirty else "")
