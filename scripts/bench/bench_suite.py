"""How long the README's test command takes, and which tests take it.

    python scripts/bench/bench_suite.py [--runs 1] [--slowest 15]

Runs the README's test command (what ``.ci/run`` calls after ``scripts/setup.sh``:
``python -m pytest -q -n 2`` with ``RDPGAN_DATA_DIR``) ``--runs`` times from this checkout,
with pytest's ``--durations`` added, and writes its part of ``results/speed.md`` for this kind
of CPU: the wall time of each run and the slowest tests of the last. The issue's bar is 8 min
for a fresh ``.ci/run`` on an AVX2-only EPYC (set-up included, about 2 min there);
``reference_ratio.py --suite`` estimates the suite there. Run it alone: the suite uses both
cores.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # scripts/: its folders
from bench.bench_speed import COMMIT, machine, write_speed_md
from bench.machine_info import cpu_features

REPO = Path(__file__).resolve().parents[2]
COMMAND = ["python", "-m", "pytest", "-q", "-n", "2"]
DURATION = re.compile(r"^\s*(\d+\.\d+)s (call|setup|teardown)\s+(\S+)$")
SUMMARY = re.compile(r"^=*\s*(\d+ (?:passed|failed).*?) in [\d.]+s")


def one_run(slowest: int) -> tuple[float, str, list[tuple[float, str, str]]]:
    """(wall seconds, pytest's summary, the slowest test phases) of one run of the suite."""
    env = {**os.environ, "RDPGAN_DATA_DIR": os.environ.get("RDPGAN_DATA_DIR", "../shared/data")}
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, *COMMAND[1:], f"--durations={slowest}"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
    )
    wall = time.perf_counter() - started
    lines = done.stdout.splitlines()
    if done.returncode != 0:
        raise SystemExit(f"the suite failed (exit {done.returncode}):\n" + "\n".join(lines[-20:]))
    summary = next((m[1] for line in reversed(lines) if (m := SUMMARY.match(line))), "")
    phases = [(float(m[1]), m[2], m[3]) for line in lines if (m := DURATION.match(line))]
    return wall, summary, phases


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--slowest", type=int, default=15)
    args = parser.parse_args()
    runs = [one_run(args.slowest) for _ in range(args.runs)]
    walls = sorted(wall for wall, _, _ in runs)
    _, summary, phases = runs[-1]
    lines = [
        f"## The test suite, on {cpu_features()}",
        "",
        f"Made by `python scripts/bench/bench_suite.py --runs {args.runs} --slowest "
        f"{args.slowest}` at commit {COMMIT} on {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC.",
        f"Machine: {machine()}",
        "",
        f"`RDPGAN_DATA_DIR=../shared/data {' '.join(COMMAND)}` (the README's test command, "
        "without the set-up): "
        + ", ".join(f"{wall / 60:.1f} min" for wall in walls)
        + f" wall ({summary}).",
        "",
        f"The {len(phases)} slowest test phases of the last run (seconds, on one of the two "
        "workers):",
        "",
        "| seconds | phase | test |",
        "| ---: | --- | --- |",
        *(f"| {seconds:.1f} | {phase} | `{test}` |" for seconds, phase, test in phases),
        "",
        "The bar: a fresh `.ci/run` (set-up included) ≤ 8 min on an AVX2-only EPYC; "
        "`reference_ratio.py --suite`'s part estimates this suite there.",
    ]
    write_speed_md("\n".join(lines), "bench_suite.py")


if __name__ == "__main__":
    main()
