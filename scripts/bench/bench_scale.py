"""Scale benchmark (issue 13): wall time and utility of the README's command as the table grows.

    python scripts/bench/bench_scale.py [--sizes 10000 100000 1000000] [--seed 0]

For each n, an Adult-derived table of n rows: rows of Adult's *train* split drawn with
replacement, each numeric value not on a declared point mass moved by Gaussian jitter of 1% of
its declared (public) range, rounded and clipped as the schema says. Nothing else is used: no
hidden data set. Then, timed end to end (start-up, reading, releases, training, sampling the
released row count, writing)::

    python -m rdpgan.train dataset=adult data.root=<work> dataset.file=scaled_<n>.csv \\
        dataset.test_size=0.01 epsilon=8 delta=1e-7 seed=<seed>

Utility: the paper's 8 classifiers trained on at most ``--eval-rows`` rows of the synthetic
table, and (the reference) on as many rows of the scaled real table, each scored by AUROC on
Adult's held-out test split, which no scaled table contains. The same cap at every n, so the
ratio compares generators, not classifier training-set sizes.

Writes ``results/scale.csv`` (one row per n, with command, seed, date, machine and commit),
``results/scale.md`` and ``results/scale.png``. Run it alone on the machine.
"""

from __future__ import annotations

import argparse
import shlex
import sys
import tempfile
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # scripts/: its folders
from bench.any_csv import timed_train  # scripts/, beside this file
from bench.machine_info import code_commit, machine_line
from rdpgan.cli import compose_run_config
from rdpgan.data.loading import load_split
from rdpgan.data.schema import Continuous, Schema
from rdpgan.evaluate import score_table
from rdpgan.io import atomic_write, read_json

ROOT = Path(__file__).resolve().parents[2]
COMMIT = code_commit()  # at start: the code this process runs
JITTER = 0.01  # of a numeric column's declared range
DELTA = 1e-7  # below 1/n at every size (the default 1e-5 is not, for a million rows)
BAR_SECONDS = 600  # issue 13: a 1,000,000-row run in at most 10 minutes
BAR_GAP = 0.01  # ... with AUROC / real within 0.01 of the 100k-row run's


def scaled_table(rows: pd.DataFrame, schema: Schema, n: int, seed: int) -> pd.DataFrame:
    """``n`` rows drawn with replacement from ``rows``, numbers jittered within the schema."""
    rng = np.random.default_rng(seed)
    table = rows.iloc[rng.integers(0, len(rows), n)].reset_index(drop=True)
    for column in schema.columns:
        if not isinstance(column, Continuous) or column.name not in table:
            continue
        values = table[column.name].to_numpy(dtype=float)
        moved = values + rng.normal(0.0, JITTER * (column.hi - column.lo), n)
        moved = np.clip(moved, column.lo, column.hi)
        if column.integer:
            moved = np.round(moved)
        keep = np.isnan(values) | np.isin(values, column.point_masses)
        table[column.name] = np.where(keep, values, moved)
    return table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000, 1_000_000])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--eval-rows", type=int, default=30_000)
    parser.add_argument("--results", type=Path, default=ROOT / "results")
    parser.add_argument(
        "--report", action="store_true", help="only rebuild scale.md and scale.png from scale.csv"
    )
    options = parser.parse_args()
    if options.report:
        write_report(pd.read_csv(options.results / "scale.csv"), options.results)
        return
    dataset = compose_run_config(["dataset=adult"]).dataset
    table, train_rows, test_rows = load_split(dataset)
    schema, target, positive = table.schema, table.target, table.positive_label
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench_scale_") as work:
        for n in options.sizes:
            name = f"scaled_{n}.csv"
            real = scaled_table(train_rows, schema, n, options.seed)
            columns = list(dataset.column_names or real.columns)
            real[columns].to_csv(Path(work) / name, header=False, index=False, na_rep="?")
            args = [
                "dataset=adult",
                f"data.root={work}",
                f"dataset.file={name}",
                "dataset.test_size=0.01",
                "epsilon=8",
                f"delta={DELTA}",
                f"seed={options.seed}",
                "train.progress=false",
            ]
            run = Path(work) / f"run_{n}"
            _, seconds = timed_train(args, run)
            synthetic = schema.read_csv(run / "synthetic.csv")
            metrics = read_json(run / "metrics.json")
            ledger = read_json(run / "privacy.json")
            cap = min(options.eval_rows, len(synthetic), len(real))
            scores = {}
            for kind, frame in (("synthetic", synthetic), ("real", real)):
                sample = frame.sample(n=cap, random_state=options.seed)
                scores[kind] = score_table(sample, test_rows, schema, target, positive, 0).mean
            row = {
                "rows": n,
                "train_rows": n - len(pd.read_csv(run / "test.csv")),
                "seconds": round(seconds, 1),
                "discriminator_steps": metrics["discriminator_steps"],
                "expected_batch_size": metrics["expected_batch_size"],
                "epsilon_spent": round(ledger["epsilon_spent"], 4),
                "synthetic_rows": len(synthetic),
                "eval_rows": cap,
                "synthetic_mean_auroc": round(scores["synthetic"], 4),
                "real_mean_auroc": round(scores["real"], 4),
                "share_of_real": round(scores["synthetic"] / scores["real"], 4),
                "command": "python -m rdpgan.train " + shlex.join(args).replace(work, "<work>"),
                "seed": options.seed,
                "date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
                "machine": machine_line(),
                "commit": COMMIT,
            }
            print({k: row[k] for k in ("rows", "seconds", "share_of_real")}, flush=True)
            rows.append(row)
    frame = pd.DataFrame(rows)
    out = options.results / "scale.csv"
    atomic_write(out, lambda tmp: frame.to_csv(tmp, index=False))
    write_report(frame, options.results)
    print(f"wrote {out}, scale.md and scale.png")


def write_report(frame: pd.DataFrame, results: Path) -> None:
    """``scale.md`` (the table and the bar) and ``scale.png`` (time and utility against n)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, (left, right) = plt.subplots(1, 2, figsize=(9, 3.5))
    left.plot(frame["rows"], frame["seconds"], "o-")
    # Both axes from 0 (time) and over a fixed span (utility): a zoomed axis would make a
    # difference of 0.002 look like a fall.
    left.set(xscale="log", xlabel="rows", ylabel="wall seconds (whole run)", ylim=(0, None))
    right.plot(frame["rows"], frame["share_of_real"], "o-")
    right.set(
        xscale="log",
        xlabel="rows",
        ylabel="mean AUROC / real",
        ylim=(min(0.9, frame["share_of_real"].min() - 0.01), 1.0),
    )
    figure.tight_layout()
    atomic_write(results / "scale.png", lambda tmp: figure.savefig(tmp, format="png", dpi=120))
    first = frame.iloc[0]
    lines = [
        "# Scale",
        "",
        f"Made by `python scripts/bench/bench_scale.py --sizes {' '.join(map(str, frame['rows']))} "
        f"--seed {first['seed']} --eval-rows {frame['eval_rows'].max()}` at commit "
        f"{first['commit']} on {first['date']}, "
        f"{first['machine']}. Command per size: `{first['command']}` (with that size's file).",
        "",
        "Adult-derived tables (Adult's train split resampled, numbers jittered within the "
        "declared schema); utility: the 8 classifiers trained on at most "
        f"{frame['eval_rows'].max():,} rows, scored on Adult's held-out test split.",
        "",
        "| rows | seconds | D steps | batch | ε spent | AUROC | real | ÷ real |",
        "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for _, r in frame.iterrows():
        lines.append(
            f"| {r['rows']:,} | {r['seconds']:.0f} | {r['discriminator_steps']:,} | "
            f"{r['expected_batch_size']} | {r['epsilon_spent']:.3f} | "
            f"{r['synthetic_mean_auroc']:.4f} | {r['real_mean_auroc']:.4f} | "
            f"{r['share_of_real']:.4f} |"
        )
    by_rows = frame.set_index("rows")
    if {100_000, 1_000_000} <= set(by_rows.index):
        million = by_rows.loc[1_000_000]
        gap = abs(million["share_of_real"] - by_rows.loc[100_000, "share_of_real"])
        met = million["seconds"] <= BAR_SECONDS and gap <= BAR_GAP
        lines += [
            "",
            f"Bar (1,000,000 rows in ≤ {BAR_SECONDS} s, AUROC ÷ real within {BAR_GAP} of the "
            f"100k run): {million['seconds']:.0f} s, gap {gap:.4f}: "
            f"**{'met' if met else 'not met'}**.",
        ]
    lines += ["", "![time and utility against rows](scale.png)", ""]
    atomic_write(results / "scale.md", lambda tmp: Path(tmp).write_text("\n".join(lines)))


if __name__ == "__main__":
    main()
