"""What every results file carries about where it was made: the CPU model, and the commit of
the code that ran; and what one core of it can do (``python scripts/bench/machine_info.py``).

Speed budgets are set for an AVX2-only AMD EPYC of about :data:`REFERENCE_GFLOPS` fp32
GFLOP/s on one thread (issue 54). Capping a faster CPU's libraries to AVX2 does not make it
one (measured 2.2x optimistic), so every speed part records this machine's own measure. The
GEMM's ratio to the reference overstates how much faster whole runs are (imports, numpy,
numba and Python gain less): ``reference_ratio.py`` measures that ratio workload by workload,
and its part of ``results/speed.md`` is the one to read budgets by."""

from __future__ import annotations

import os
import platform
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
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


# fp32 GEMM GFLOP/s on one thread of the machines speed budgets are set for (an AVX2-only AMD
# EPYC, issue 54).
REFERENCE_GFLOPS = 48.0
GEMM_SIZE = 1024


def gemm_gflops(repeats: int = 20) -> float:
    """fp32 matrix-product GFLOP/s on one thread (torch, GEMM_SIZE squared, the best of
    ``repeats`` after a warm-up): what the CPU and its math library deliver to one core. The
    thread count is restored after."""
    import time

    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        a = torch.randn(GEMM_SIZE, GEMM_SIZE)
        b = torch.randn(GEMM_SIZE, GEMM_SIZE)
        torch.mm(a, b)
        best = float("inf")
        for _ in range(repeats):
            start = time.perf_counter()
            torch.mm(a, b)
            best = min(best, time.perf_counter() - start)
    finally:
        torch.set_num_threads(threads)
    return 2.0 * GEMM_SIZE**3 / best / 1e9


def speed_line() -> str:
    """One line for a speed part: this machine's GEMM GFLOP/s and its ratio to the reference."""
    gflops = gemm_gflops()
    return (
        f"One thread does {gflops:.0f} GFLOP/s of fp32 GEMM ({GEMM_SIZE}², torch), "
        f"{gflops / REFERENCE_GFLOPS:.2f}x the AVX2-only EPYC the budgets are set for "
        f"({REFERENCE_GFLOPS:g}); whole workloads gain less (reference_ratio.py's part has "
        "their own ratios, by which to read a budget here)."
    )


def machine_line() -> str:
    """The machine a results row was made on: architecture, cores, CPU model and features."""
    return f"{platform.machine()} {os.cpu_count()} cores, {cpu_model()} [{cpu_features()}]"


def _git(*args: str, repo: Path = REPO) -> str:
    return subprocess.run(["git", *args], capture_output=True, text=True, cwd=repo).stdout.strip()


def code_commit(repo: Path = REPO) -> str:
    """The short commit of ``repo``'s HEAD (a checkout or worktree; default: this one), with
    ``-dirty`` if the code differs from it. Call it when the process starts: what runs is what
    was imported (or launched) then."""
    dirty = _git("status", "--porcelain", *CODE, repo=repo)
    head = _git("rev-parse", "--short", "HEAD", repo=repo)
    return (head or "unknown") + ("-dirty" if dirty else "")


if __name__ == "__main__":
    print(machine_line())
    print(speed_line())
