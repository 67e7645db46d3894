"""The CPU model, for the machine line every results file carries."""

from __future__ import annotations

import platform
from pathlib import Path


def cpu_model() -> str:
    """The first ``model name`` in /proc/cpuinfo, else what :mod:`platform` knows."""
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.is_file():
        for line in cpuinfo.read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown CPU"
