"""How much faster this machine runs our own workloads than the real AVX2-only EPYC the speed
budgets are set for, read off one commit timed on both: issue 54 timed ``a41d0ac`` there.

    python scripts/bench/reference_ratio.py [--runs 3] [--sample-runs 7] [--suite] [--big]

A GEMM's rate (``machine_info.py``) reads a CPU by its matrix products alone, but a run is also
imports, numpy, numba and Python, which a wide vector unit does not speed up as much: on the
Xeon this project's figures come from, the GEMM rate is 3.8-4.5x the EPYC's, while a default
run of ``a41d0ac`` is about 2.3x as fast. So each workload gets its own ratio here: the EPYC's
seconds for ``a41d0ac`` (issue 54) over this machine's, timed in turn with this checkout's
(A B A B, a fresh process each, medians), from a git worktree of ``a41d0ac``. This commit's
seconds here times that ratio estimate its seconds on the EPYC: an estimate, not a
measurement, which holds as far as the two commits spend their time alike.

Workloads: the default run (``python -m rdpgan.train dataset=adult epsilon=8``, progress bar
off, a fresh run directory each), ``python -m rdpgan.sample n=1000`` from each commit's own
model (its first run), with ``--big`` a big sample to Parquet (one run each: ``a41d0ac``'s
2,000,000 rows, as the issue timed it, and this commit's 1,000,000, the bar's), and with
``--suite`` the README's test command (one run each; the set-up's 106 s on the EPYC,
network-bound, is added to the estimate as measured there). Run it alone on the machine.
Writes its part of ``results/speed.md`` for this kind of CPU.
"""

from __future__ import annotations

import argparse
import itertools
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # scripts/: its folders
from bench.bench_speed import COMMIT, machine, user_environment, write_speed_md
from bench.machine_info import cpu_features

REPO = Path(__file__).resolve().parents[2]
REFERENCE = "a41d0ac"
# Issue 54's seconds for REFERENCE on a real AVX2-only 2-core AMD EPYC (no AVX-512, no native
# bf16, about 48 GFLOP/s of fp32 a thread): (low, high) of its runs.
EPYC = {
    "run": (65.0, 68.0),  # "65–68 s"
    "sample": (3.6, 4.4),  # "3.6–4.4 s (median 4.4)"
    "suite": (711.0, 711.0),  # pytest "11 min 51 s" of the README's test command
    "big": (309.0, 309.0),  # "2,000,000 rows to Parquet: 309 s (6.5k rows/s, raked)"
}
# Rows of the big sample: the reference's as the issue timed it, this commit's as the bar says.
BIG_ROWS = {"reference": 2_000_000, "this": 1_000_000}
EPYC_SETUP = 106.0  # scripts/setup.sh there, fresh (issue 54)
# The bars on such a machine, in seconds (the suite's: a fresh .ci/run, set-up included).
BARS = {"run": 45.0, "sample": 2.0, "suite": 480.0, "big": 60.0}
LABELS = {
    "run": "default run, `python -m rdpgan.train dataset=adult epsilon=8`",
    "sample": "`python -m rdpgan.sample n=1000`, end to end",
    "suite": "the README's test command (pytest; + the EPYC's 106 s set-up for the bar)",
    "big": "a big sample to Parquet: `a41d0ac` 2,000,000 rows, this commit 1,000,000",
}


def environment(checkout: Path) -> dict[str, str]:
    """The environment a command of ``checkout`` runs in: its own ``rdpgan`` first on the path,
    the data root absolute, torch's thread variables unset (as a user's shell has them)."""
    env = user_environment()
    data = Path(os.environ.get("RDPGAN_DATA_DIR", REPO.parent / "shared" / "data"))
    env["RDPGAN_DATA_DIR"] = str(data if data.is_absolute() else (REPO / data).resolve())
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(checkout), env.get("PYTHONPATH")]))
    return env


def timed(command: list[str], checkout: Path) -> float:
    """Wall seconds of ``command`` run in ``checkout``; a failure stops the benchmark."""
    started = time.perf_counter()
    done = subprocess.run(
        command, cwd=checkout, env=environment(checkout), capture_output=True, text=True
    )
    wall = time.perf_counter() - started
    if done.returncode != 0:
        tail = "\n".join((done.stdout + done.stderr).splitlines()[-15:])
        raise SystemExit(f"{' '.join(command)} failed in {checkout} ({done.returncode}):\n{tail}")
    return wall


def train_command(run_dir: Path) -> list[str]:
    overrides = ["dataset=adult", "epsilon=8", "train.progress=false", f"hydra.run.dir={run_dir}"]
    return [sys.executable, "-m", "rdpgan.train", *overrides]


def sample_command(run_dir: Path, out: Path, rows: int = 1000) -> list[str]:
    return [sys.executable, "-m", "rdpgan.sample", f"run_dir={run_dir}", f"out={out}", f"n={rows}"]


SUITE_COMMAND = [sys.executable, "-m", "pytest", "-q", "-n", "2", "-p", "no:cacheprovider"]


def per_checkout(
    checkouts: dict[str, Path], command: Callable[[str], list[str]]
) -> dict[str, Callable[[], float]]:
    """For each checkout (by name), a call that times ``command(name)`` run in it."""
    return {
        name: lambda name=name, checkout=checkout: timed(command(name), checkout)
        for name, checkout in checkouts.items()
    }


def in_turn(runs: int, commands: dict[str, Callable[[], float]]) -> dict[str, list[float]]:
    """Each command ``runs`` times, the commands in turn (A B A B), so drift hits both."""
    seconds: dict[str, list[float]] = {name: [] for name in commands}
    for _ in range(runs):
        for name, command in commands.items():
            seconds[name].append(command())
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--sample-runs", type=int, default=7)
    parser.add_argument("--suite", action="store_true")
    parser.add_argument("--big", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        where = Path(scratch)
        reference = where / "reference"
        # (A run killed earlier left its worktree's entry behind: drop it first.)
        subprocess.run(["git", "worktree", "prune"], cwd=REPO, check=True)
        add = ["git", "worktree", "add", "--detach", str(reference), REFERENCE]
        subprocess.run(add, cwd=REPO, check=True, capture_output=True)
        try:
            checkouts = {"reference": reference, "this": REPO}
            models = {name: where / f"model_{name}" for name in checkouts}
            # Each commit's first run: its model to sample from, and numba's cache compiled.
            for name, checkout in checkouts.items():
                timed(train_command(models[name]), checkout)
            counter = itertools.count()
            seconds: dict[str, dict[str, list[float]]] = {}
            run = per_checkout(checkouts, lambda _: train_command(where / f"run{next(counter)}"))
            seconds["run"] = in_turn(args.runs, run)
            sample = per_checkout(
                checkouts, lambda name: sample_command(models[name], where / f"sample_{name}.csv")
            )
            in_turn(1, sample)  # warm-up: the file cache, as a user's second command has it
            seconds["sample"] = in_turn(args.sample_runs, sample)
            if args.big:
                big = per_checkout(
                    checkouts,
                    lambda name: sample_command(
                        models[name], where / f"big_{name}.parquet", BIG_ROWS[name]
                    ),
                )
                seconds["big"] = in_turn(1, big)
            if args.suite:
                seconds["suite"] = in_turn(1, per_checkout(checkouts, lambda _: SUITE_COMMAND))
        finally:
            subprocess.run(
                ["git", "worktree", "remove", "--force", str(reference)], cwd=REPO, check=False
            )
    write_speed_md(report(seconds, args), "reference_ratio.py")


def report(seconds: dict[str, dict[str, list[float]]], args: argparse.Namespace) -> str:
    flags = f"--runs {args.runs} --sample-runs {args.sample_runs}"
    flags += " --suite" * args.suite + " --big" * args.big
    rows = []
    for workload, times in seconds.items():
        ours, here = statistics.median(times["this"]), statistics.median(times["reference"])
        low, high = (epyc / here for epyc in EPYC[workload])
        setup = EPYC_SETUP if workload == "suite" else 0.0
        estimate = (setup + ours * low, setup + ours * high)
        met = "yes" if estimate[1] <= BARS[workload] else "no"
        rows.append(
            f"| {LABELS[workload]} | {here:.2f} | {span(*EPYC[workload])} | "
            f"{span(low, high, '.2f')}× | {ours:.2f} | {span(*estimate)} | "
            f"{BARS[workload]:.0f} | {met} |"
        )
    return "\n".join([
        f"## This machine against the real AVX2-only EPYC, by `{REFERENCE}`, on {cpu_features()}",
        "",
        "| workload | `a41d0ac` here (s) | `a41d0ac` on the EPYC (s, issue 54) | ratio | "
        "this commit here (s) | this commit on the EPYC, estimated (s) | bar (s) | met "
        "(estimated) |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |",
        *rows,
        "",
        f"Made by `python scripts/bench/reference_ratio.py {flags}` at commit {COMMIT} on "
        f"{datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC.",
        f"Machine: {machine()}",
        "",
        "Medians of fresh processes (the big sample and the suite: one run each), the two "
        "commits in turn; each commit's runs import its own "
        "`rdpgan` (a git worktree of `a41d0ac`). Ratio: the EPYC's seconds for `a41d0ac` over "
        "this machine's, over the range of the EPYC's runs the issue gives; the estimate is "
        "this commit's seconds here times it (the suite's adds the EPYC's 106 s of set-up). "
        "All seconds: "
        + "; ".join(
            f"{workload}: `a41d0ac` {listed(times['reference'])}, this commit "
            f"{listed(times['this'])}"
            for workload, times in seconds.items()
        )
        + ".",
    ])  # fmt: skip


def span(low: float, high: float, form: str = ".1f") -> str:
    return f"{low:{form}}" if f"{low:{form}}" == f"{high:{form}}" else f"{low:{form}}–{high:{form}}"


def listed(values: list[float]) -> str:
    return ", ".join(f"{v:.2f}" for v in values)


if __name__ == "__main__":
    main()
