"""Reading a big CSV with nothing declared: how long ``python -m rdpgan.schema`` takes to read a
table, split it row by row and release its schema, as the table grows.

    python scripts/bench/bench_reading.py [--sizes 100000 1000000] [--runs 3] [--code DIR ...]

Each table: n rows of Adult's train split drawn with replacement, numbers jittered within the
declared schema (``bench_scale.scaled_table``), with a header, ``?`` for missing cells, and two
date columns drawn from the same public seed (``visit``, ISO; ``born``, day/month/year), so
that every kind of column a user's CSV holds is read. Timed end to end (start-up, reading,
the per-row split, the private schema's releases, writing)::

    python -m rdpgan.schema dataset=csv dataset.path=<table> dataset.target=income epsilon=8

once per ``--code`` checkout (a worktree of another commit, run on ``PYTHONPATH``; default:
this one), ``--runs`` times each, the checkouts in turn. Appends a row per (checkout, size) to
``results/reading.csv`` (command, seed, date, machine, commit) and rewrites
``results/reading.md`` from it. Run it alone on the machine: the seconds are wall time.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # scripts/: its folders
from bench.bench_scale import scaled_table
from bench.machine_info import code_commit, machine_line, speed_line
from rdpgan.cli import compose_run_config
from rdpgan.data.loading import load_split
from rdpgan.io import atomic_write

ROOT = Path(__file__).resolve().parents[2]
TARGET = "income"
COMMAND = "python -m rdpgan.schema dataset=csv dataset.path=<table> dataset.target=income epsilon=8"


def reading_table(n: int, seed: int) -> pd.DataFrame:
    """Adult-derived rows with a header and two date columns (see the module's docstring)."""
    dataset = compose_run_config(["dataset=adult"]).dataset
    table, train_rows, _ = load_split(dataset)
    rows = scaled_table(train_rows, table.schema, n, seed)
    rng = np.random.default_rng([seed, n])
    visit = pd.Timestamp("2015-01-01") + pd.to_timedelta(rng.integers(0, 3000, n), unit="D")
    born = pd.Timestamp("1930-01-01") + pd.to_timedelta(rng.integers(0, 27000, n), unit="D")
    return rows.assign(visit=visit.strftime("%Y-%m-%d"), born=born.strftime("%d/%m/%Y"))


def timed_release(code: Path, table: Path, work: Path) -> float:
    """Wall seconds of one schema release of ``table`` by the checkout at ``code``."""
    run = Path(tempfile.mkdtemp(dir=work, prefix="run_"))
    args = [f"dataset.path={table}", f"dataset.target={TARGET}", "epsilon=8"]
    env = {**os.environ, "PYTHONPATH": str(code)}
    command = [sys.executable, "-m", "rdpgan.schema", "dataset=csv", *args]
    started = time.perf_counter()
    subprocess.run([*command, f"hydra.run.dir={run}"], check=True, env=env, cwd=work)
    return time.perf_counter() - started


def write_report(frame: pd.DataFrame, results: Path, speed: str) -> None:
    """``reading.md``: the seconds per size and commit, then how they were made (``speed``:
    this machine's GEMM rate, :func:`speed_line`)."""
    table = [
        "| rows | commit | runs | seconds (median) | min | max |",
        "| ---: | --- | ---: | ---: | ---: | ---: |",
    ]
    for row in frame.sort_values(["rows", "date"]).itertuples():
        table.append(
            f"| {row.rows:,} | `{row.commit}` | {row.runs} | {row.median_seconds:.1f} | "
            f"{row.min_seconds:.1f} | {row.max_seconds:.1f} |"
        )
    text = [
        "# Reading a big CSV with nothing declared",
        "",
        *table,
        "",
        f"Each row: `{COMMAND}` on an Adult-derived table of that many rows with two date "
        "columns (`scripts/bench/bench_reading.py`'s docstring), wall seconds of the whole "
        "command (start-up, reading, the per-row split, the private schema's releases, "
        "writing). Commits run in turn in one sitting.",
        "",
        f"Made by `{frame['script_command'].iloc[-1]}` (each `--code` a worktree of the "
        f"commit its rows name); seed {frame['seed'].iloc[-1]}; {frame['date'].min()} – "
        f"{frame['date'].max()}; {frame['machine'].iloc[-1]}. {speed}",
        "",
    ]
    atomic_write(results / "reading.md", lambda tmp: tmp.write_text("\n".join(text)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[100_000, 1_000_000])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--code", type=Path, nargs="+", default=[ROOT])
    parser.add_argument("--results", type=Path, default=ROOT / "results")
    options = parser.parse_args()
    commits = {code: code_commit(code.resolve()) for code in options.code}
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench_reading_") as tmp:
        work = Path(tmp)
        for n in options.sizes:
            table = work / f"table_{n}.csv"
            reading_table(n, options.seed).to_csv(table, index=False, na_rep="?")
            seconds: dict[Path, list[float]] = {code: [] for code in options.code}
            for _ in range(options.runs):  # the checkouts in turn, so that drift hits both
                for code in options.code:
                    seconds[code].append(timed_release(code.resolve(), table, work))
            for code, times in seconds.items():
                rows.append(
                    {
                        "rows": n,
                        "commit": commits[code],
                        "runs": len(times),
                        "median_seconds": round(statistics.median(times), 2),
                        "min_seconds": round(min(times), 2),
                        "max_seconds": round(max(times), 2),
                        "command": COMMAND,
                        "script_command": "python scripts/bench/bench_reading.py "
                        + " ".join(sys.argv[1:]),
                        "seed": options.seed,
                        "date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
                        "machine": machine_line(),
                    }
                )
                print({k: rows[-1][k] for k in ("rows", "commit", "median_seconds")}, flush=True)
    out = options.results / "reading.csv"
    frame = pd.DataFrame(rows)
    if out.exists():
        frame = pd.concat([pd.read_csv(out), frame], ignore_index=True)
    atomic_write(out, lambda tmp: frame.to_csv(tmp, index=False))
    write_report(frame, options.results, speed_line())
    print(f"wrote {out} and reading.md")


if __name__ == "__main__":
    main()
