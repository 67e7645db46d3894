"""Two seeded default runs, on Adult and on Adult plus one duplicated row: their held-out sets.

    python scripts/reports/check_input_table.py

Runs ``python -m rdpgan.train dataset=adult epsilon=8 privacy.noise_seed=1`` twice, once on
``adult.data`` and once on it with one row duplicated (inserted in the middle of the file),
and compares the two runs' ``test.csv`` as multisets of rows: with a per-row split they differ
by at most the added row. Also reports the training rows each run encoded (from the same
loading path), and how many of the validation rows the defaults were tuned on (the stratified
split rdpgan used before: scikit-learn's ``train_test_split`` of the whole table, seed 0, then
of its train part, seed 1) now fall in Adult's held-out part. Writes
``results/input_table.md`` with the command, date, commit and machine.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # scripts/: its folders
from bench.machine_info import code_commit, machine_line
from sklearn.model_selection import train_test_split

from rdpgan.cli import compose_run_config
from rdpgan.data.datasets import data_root
from rdpgan.data.loading import load_split

REPO = Path(__file__).resolve().parents[2]
ARGS = ["dataset=adult", "epsilon=8", "privacy.noise_seed=1"]


def rows(path: Path) -> Counter:
    lines = path.read_text().splitlines()
    return Counter(lines[1:])


def as_rows(frame: pd.DataFrame) -> Counter:
    return Counter(map(tuple, frame.astype(str).to_numpy().tolist()))


def stratified(frame: pd.DataFrame, target: str, seed: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The split rdpgan made before the per-row one: scikit-learn's, stratified, 80/20."""
    return train_test_split(frame, test_size=0.2, random_state=seed, stratify=frame[target])


def every_row(root: str | None = None) -> tuple[pd.DataFrame, str]:
    dataset = compose_run_config(["dataset=adult"]).dataset
    return load_split(replace(dataset, test_size=0.0), root)[1], dataset.target


def tuned_rows_now_held_out() -> tuple[int, int]:
    """(old validation rows in today's held-out part, old validation rows)."""
    rows, target = every_row()
    validation = stratified(stratified(rows, target, 0)[0], target, 1)[1]
    _, _, held_out = load_split(compose_run_config(["dataset=adult"]).dataset)
    return sum((as_rows(validation) & as_rows(held_out)).values()), len(validation)


def main() -> None:
    commit, date = code_commit(), datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    source = data_root() / "adult" / "adult.data"
    lines = source.read_text().splitlines(keepends=True)
    middle = len(lines) // 2
    found = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, content in (
            ("adult", lines),
            ("adult plus one duplicated row", [*lines[:middle], lines[0], *lines[middle:]]),
        ):
            root = Path(tmp) / name.replace(" ", "_")
            (root / "adult").mkdir(parents=True)
            (root / "adult" / "adult.data").write_text("".join(content))
            run = root / "run"
            env = {**os.environ, "RDPGAN_DATA_DIR": str(root)}
            subprocess.run(
                [sys.executable, "-m", "rdpgan.train", *ARGS, f"hydra.run.dir={run}"],
                check=True,
                cwd=REPO,
                env=env,
            )
            dataset = compose_run_config(["dataset=adult"]).dataset
            _, train, test = load_split(dataset, str(root))
            table, target = every_row(str(root))
            before = as_rows(stratified(table, target, 0)[1])
            found[name] = (rows(run / "test.csv"), len(train), len(test), before)
            shutil.rmtree(run)
    (test_a, train_a, held_a, before_a), (test_b, train_b, held_b, before_b) = found.values()
    only_a, only_b = sum((test_a - test_b).values()), sum((test_b - test_a).values())
    moved_a, moved_b = sum((before_a - before_b).values()), sum((before_b - before_a).values())
    overlap, validation = tuned_rows_now_held_out()
    command = "python scripts/reports/check_input_table.py"
    text = (
        "# The held-out rows of neighbouring input tables\n\n"
        f"Made by `{command}` on {date} at {commit} ({machine_line()}): "
        f"`python -m rdpgan.train {' '.join(ARGS)}` on `adult.data` and on `adult.data` with "
        "its first row duplicated into the middle of the file.\n\n"
        "| input | training rows | held-out rows (`test.csv`) |\n| --- | ---: | ---: |\n"
        f"| adult | {train_a} | {held_a} |\n"
        f"| adult plus one duplicated row | {train_b} | {held_b} |\n\n"
        f"Held-out rows in the first run's `test.csv` only: **{only_a}**; in the second's only: "
        f"**{only_b}** (bar: the two differ by at most one row).\n\n"
        f"Under the stratified split rdpgan made before (scikit-learn's, seed 0, on the same "
        f"conformed rows), the same two tables' held-out parts differ by {moved_a} rows that "
        f"only the first holds and {moved_b} that only the second holds.\n\n"
        f"Validation rows the defaults were tuned on (the earlier stratified split) that now "
        f"fall in Adult's held-out part: **{overlap}** of {validation}.\n"
    )
    (REPO / "results" / "input_table.md").write_text(text)
    print(text)
    if only_a + only_b > 1:
        sys.exit(1)


if __name__ == "__main__":
    main()
