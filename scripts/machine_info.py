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


# CPU features speed depends on, as /proc/cpuinfo names them, and as results name them.
FEATURES = (("avx2", "AVX2"), ("avx512f", "AVX-512"), ("avx512_bf16", "BF16"), ("amx_bf16", "AMX"))
# Set to emulate an AVX2-only CPU on a faster one: torch's libraries (oneDNN, MKL and ATen),
# numpy's (OpenBLAS: OPENBLAS_CORETYPE=Haswell; its own kernels: NPY_DISABLE_CPU_FEATURES="X86_V4
# AVX512_ICL AVX512_SPR") and numba's (sampling's kernels: NUMBA_CPU_NAME=haswell) each read
# their own.
EMULATION = (
    "ONEDNN_MAX_CPU_ISA",
    "MKL_ENABLE_INSTRUCTIONS",
    "ATEN_CPU_CAPABILITY",
    "OPENBLAS_CORETYPE",
    "NPY_DISABLE_CPU_FEATURES",
    "NUMBA_CPU_NAME",
)


def cpu_features(caps: bool = True) -> str:
    """The speed-relevant features the CPU has (``AVX2 AVX-512 BF16 AMX``), and (``caps``) the
    ISA caps this process runs under when an AVX2-only CPU is being emulated."""
    flags: set[str] = set()
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.is_file():
        for line in cpuinfo.read_text().splitlines():
            if line.startswith("flags"):
                flags = set(line.split(":", 1)[1].split())
                break
    found = " ".join(name for flag, name in FEATURES if flag in flags) or "no AVX2"
    set_caps = [f"{name}={os.environ[name]}" for name in EMULATION if os.environ.get(name)]
    return found + (f" (emulating: {' '.join(set_caps)})" if caps and set_caps else "")


def machine_line() -> str:
    """The machine a results row was made on: architecture, cores, CPU model and features."""
    return f"{platform.machine()} {os.cpu_count()} cores, {cpu_model()} [{cpu_features()}]"


def _git(*args: str) -> str:
    return subprocess.run(["git", *args], capture_output=True, text=True, cwd=REPO).stdout.strip()


def code_commit() -> str:
    """The short commit of HEAD, with ``-dirty`` if the code differs from it. Call it when the
    process starts: what runs is what was imported (or launched) then."""
    dirty = _git("status", "--porcelain", *CODE)
    return (_git("rev-parse", "--short", "HEAD") or "unknown") + ("-dirty" if dirty else "")
