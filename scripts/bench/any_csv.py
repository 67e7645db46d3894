"""Issue 12's bar: UCI's ``adult.test`` as a raw CSV, trained with nothing but the target named.

    python scripts/bench/any_csv.py [--repeats 2] [--results results] [--work outputs/any_csv]

1. ``scripts/data/adult_test_csv.py`` writes the raw CSV (``?`` cells, labels like ``>50K.``).
2. Each repeat runs the user's command, exactly::

       python -m rdpgan.train dataset=csv dataset.path=adult_test.csv dataset.target=income \\
           'dataset.positive_label=">50K."' schema=private epsilon=8 evaluate=true

   (plus where to write it), counts the lines it prints besides the progress bar, and checks
   every categorical column of ``synthetic.csv`` holds only released levels, as strings.
3. Then the same command with ``schema.file=<run>/schema.yaml`` (the released schema, declared:
   nothing is released for it) instead of ``schema=private``.

Appends one row per run to ``results/any_csv.csv`` (command, seed, date, machine,
commit); ``scripts/reports/report_benchmark.py`` turns it into the "any CSV" section of
``results/README.md``.
Run it alone on the machine: the seconds column is wall time.
"""

from __future__ import annotations

import argparse
import os
import shlex
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

import pandas as pd
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # scripts/: its folders
from data.adult_test_csv import write_adult_test_csv  # scripts/, beside this file

from bench.machine_info import code_commit, machine_line
from rdpgan.io import atomic_write, read_json

ROOT = Path(__file__).resolve().parents[2]
COMMIT = code_commit()  # at start: the code this process runs
USER_ARGS = [
    "dataset=csv",
    "dataset.target=income",
    'dataset.positive_label=">50K."',
    "epsilon=8",
    "evaluate=true",
]
MAX_LINES = 5  # issue 12: no more than 5 lines besides the progress bar


def printed_lines(output: str) -> list[str]:
    """What a user sees, less the progress bar (tqdm redraws one line with carriage returns)."""
    return [
        line
        for line in output.replace("\r", "\n").splitlines()
        if line.strip() and "step/s" not in line and "?step" not in line
    ]


def only_released_levels(run: Path) -> bool:
    """Every categorical column of the synthetic table holds released levels only, as text."""
    released = yaml.safe_load((run / "schema.yaml").read_text())["columns"]
    synthetic = pd.read_csv(run / "synthetic.csv", dtype=str, keep_default_na=False)
    for column in released:
        if column["kind"] == "categorical":
            allowed = {str(level) for level in column["levels"]} | {""}  # "" is missing
            if not set(synthetic[column["name"]]) <= allowed:
                return False
    return True


def timed_train(args: list[str], run: Path) -> tuple[str, float]:
    """``python -m rdpgan.train args`` into ``run``: what it printed, and its wall seconds."""
    command = [sys.executable, "-m", "rdpgan.train", *args, f"hydra.run.dir={run}"]
    start = time.perf_counter()
    result = subprocess.run(command, capture_output=True, text=True, cwd=ROOT)
    seconds = time.perf_counter() - start
    if result.returncode != 0:
        raise SystemExit(f"{shlex.join(command)} failed:\n{result.stderr[-3000:]}")
    return result.stdout + result.stderr, seconds


def train(args: list[str], run: Path) -> dict[str, object]:
    """One training run as a user types it; its figures and what it printed."""
    output, seconds = timed_train(args, run)
    lines = printed_lines(output)
    scores = read_json(run / "evaluation.json")
    ledger = read_json(run / "privacy.json")
    schema_line = next((line for line in lines if "schema:" in line), "")
    return {
        "command": "python -m rdpgan.train " + shlex.join(args),
        "lines_printed": len(lines),
        "schema_summary": schema_line.split("; see ")[0],
        "synthetic_mean_auroc": round(scores["mean"], 4),
        "real_mean_auroc": round(scores["real"]["mean"], 4),
        "share_of_real": round(scores["mean"] / scores["real"]["mean"], 4),
        "only_released_levels": only_released_levels(run),
        "epsilon_spent": round(ledger["epsilon_spent"], 4),
        "end_to_end": ledger["end_to_end"],
        "seconds": round(seconds, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--results", default="results")
    parser.add_argument("--work", default="outputs/any_csv")
    options = parser.parse_args()
    work = (ROOT / options.work).resolve()
    stamp = datetime.now(timezone.utc)
    work = work / stamp.strftime("%Y-%m-%d_%H-%M-%S")
    csv = write_adult_test_csv(work / "adult_test.csv", os.environ.get("RDPGAN_DATA_DIR"))
    rows = []
    for seed in range(options.repeats):
        base = [*USER_ARGS, f"dataset.path={csv}", f"seed={seed}"]
        private_run = work / f"private_seed{seed}"
        runs = [
            ("schema=private", [*base, "schema=private"], private_run),
            (
                "schema.file=<run>/schema.yaml",
                [*base, f"schema.file={private_run / 'schema.yaml'}"],
                work / f"reused_seed{seed}",
            ),
        ]
        for schema, args, run in runs:
            row = {"schema": schema, "seed": seed, **train(args, run)}
            row.update(
                date=datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
                machine=machine_line(),
                commit=COMMIT,
            )
            print({k: row[k] for k in ("schema", "seed", "share_of_real", "lines_printed")})
            rows.append(row)
    out = Path(options.results) / "any_csv.csv"
    frame = pd.DataFrame(rows)
    if out.is_file():
        frame = pd.concat([pd.read_csv(out), frame], ignore_index=True)
    atomic_write(out, lambda tmp: frame.to_csv(tmp, index=False))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
