"""Issue 27's bar: each development-suite table trained zero-config, beside its declared schema.

    python scripts/bench/zero_config.py --root DIR [--tables acs12 ames] [--draws 5] [--epsilon 8]

``DIR`` holds ``devsuite/<table>.csv``
(``python scripts/data/download_data.py --dataset devsuite``).
For each table:

1. **The released schema alone**, ``--draws`` times (seeded draws of ``schema=private`` on the
   table's train split, at epsilon 8; no training): which columns with at least two values, each
   held by at least 5% of the train rows, are dropped, and which released numeric bounds lie
   outside [min - (max - min), max + (max - min)] of the real column.
2. **Two runs**, as a user types them (seed 0)::

       python -m rdpgan.train dataset=csv dataset.path=DIR/devsuite/<table>.csv \\
           dataset.target=T dataset.positive_label=P schema=private epsilon=8 evaluate=true
       python -m rdpgan.train dataset=<table> data.root=DIR epsilon=8 evaluate=true

   Scored on the same held-out rows: the mean AUROC of the 8 classifiers (the positive label
   against the rest), and the mean 1-way TVD of the raw columns, each numeric one cut at 20
   quantiles of its real train column (missing, and text such as ``N``, a bin of its own), each
   other one by its values as the file spells them; a column the run dropped counts 1. Measured
   on the files' cells, not on a schema's reading of them, so a column merged into ``(other)``
   or clipped by its bounds is scored as a reader of the output sees it. The target's classes
   are those of each run's ``schema.yaml``: the zero-config run's, and every draw's, must be as
   many as the declared run's (a multi-class target keeps its classes).

Appends one row per run to ``results/zero_config.csv`` and rewrites ``results/zero_config.md``
(command, seed, date, machine, commit). Run it alone on the machine: the seconds are wall time.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import pandas as pd
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # scripts/: its folders
from data.download_data import DEV_TABLES

from bench.any_csv import timed_train  # scripts/, beside this file
from bench.machine_info import code_commit, machine_line
from rdpgan.cli import compose_run_config, read_run_config
from rdpgan.config import DatasetConfig, SchemaConfig
from rdpgan.data.datasets import read_cells
from rdpgan.data.schema import Categorical, Schema
from rdpgan.data.split import split
from rdpgan.data.target import class_key
from rdpgan.fidelity import per_column_tvd
from rdpgan.io import atomic_write, read_json
from rdpgan.privacy.private_schema import SchemaBudget, SchemaRelease, private_schema
from rdpgan.runs import load_run_tables

ROOT = Path(__file__).resolve().parents[2]
COMMIT = code_commit()
# Smallest first. Fertility trains on ~204,000 rows: more than 1/delta at delta 1e-5, which
# rdpgan refuses, so both of its runs (and its schema draws) use the delta its config names.
TABLES = tuple(table.name for table in DEV_TABLES)
DELTAS = {"fertility": 1e-6}
COMMON = 0.05  # a value held by this share of the rows must survive (the bar)
BINS = 20


def eligible(cells: pd.Series) -> bool:
    """At least two values, each held by COMMON of the rows: a column the bar says to keep."""
    return int((cells.value_counts(normalize=True, dropna=False) >= COMMON).sum()) >= 2


def schema_checks(
    train: pd.DataFrame, dataset: DatasetConfig, epsilon: float, delta: float, draws: int
) -> list[dict]:
    """Per seeded draw of the private schema: the bar's columns dropped, bounds out of range."""
    rows = []
    for draw in range(draws):
        release = released_schema(train, dataset, epsilon, delta, draw)
        rows.append({"draw": draw, **release_checks(train, dataset, release)})
        rows[-1]["summary"] = release.summary(epsilon)
    return rows


def released_schema(
    train: pd.DataFrame, dataset: DatasetConfig, epsilon: float, delta: float, draw: int
) -> SchemaRelease:
    """``schema=private`` on ``train`` as a run releases it, its noise seeded by ``draw``."""
    budget = SchemaBudget(epsilon, delta)
    rng = np.random.default_rng(draw)
    return private_schema(train, dataset, SchemaConfig(source="private"), budget, rng)[1]


def release_checks(train: pd.DataFrame, dataset: DatasetConfig, release: SchemaRelease) -> dict:
    """The bar's checks of one released schema: eligible columns dropped, bounds outside."""
    schema = release.schema
    dropped = [
        n
        for n in train.columns
        if n != dataset.target and n not in schema.names and eligible(train[n])
    ]
    outside, within = [], []
    for column in schema.columns:
        if isinstance(column, Categorical):
            continue
        real = pd.to_numeric(train[column.name], errors="coerce").dropna()
        span = real.max() - real.min()
        if not (real.min() - span <= column.lo and column.hi <= real.max() + span):
            outside.append(f"{column.name} [{column.lo:g}, {column.hi:g}]")
        within.append(float(real.between(column.lo, column.hi).mean()) if len(real) else 1.0)
    return {
        "columns": len(train.columns) - 1,
        "eligible": sum(eligible(train[n]) for n in train.columns if n != dataset.target),
        "kept": len(schema.names) - 1,
        "eligible_dropped": "; ".join(dropped),
        "bounds_outside": "; ".join(outside),
        # The least share of a numeric column's values inside its bounds (the bar: 0.995).
        "least_within": round(min(within, default=1.0), 4),
        "mean_within": round(float(np.mean(within)) if within else 1.0, 4),
        "target_classes": len(schema[dataset.target].levels),
    }


def value_key(cell: object) -> str:
    """A categorical cell as a reader compares it: numbers by value, text as spelled."""
    return "" if pd.isna(cell) or str(cell).strip() == "" else class_key(cell)


def raw_tvd(
    real: pd.DataFrame, synthetic: pd.DataFrame, train: pd.DataFrame, declared: Schema, target: str
) -> float:
    """Mean 1-way TVD over the declared feature columns, on the cells (see the docstring)."""
    return float(np.mean(list(column_tvds(real, synthetic, train, declared, target).values())))


def worst_columns(tvds: dict[str, float], count: int | None = 3) -> str:
    """The ``count`` (None: all) columns of largest 1-way TVD, as ``name=tvd``."""
    worst = sorted(tvds.items(), key=lambda item: -item[1])[:count]
    return "; ".join(f"{name}={tvd:.4f}" for name, tvd in worst)


def quantile_tvds(run: Path) -> dict[str, float]:
    """Each column's 1-way TVD at 20 quantile bins of the rows the run trained on, as its own
    evaluation scores them (``fidelity_quantile``), column by column."""
    schema = Schema.from_specs(read_json(run / "model.json")["schema"])
    real = load_run_tables(read_run_config(run), run, expected=schema)[0]
    synthetic = schema.read_csv(run / "synthetic.csv")
    return per_column_tvd(real, synthetic, schema, BINS, "quantile")


def column_tvds(
    real: pd.DataFrame, synthetic: pd.DataFrame, train: pd.DataFrame, declared: Schema, target: str
) -> dict[str, float]:
    """Each declared feature column's 1-way TVD, on the cells (see the docstring)."""
    scores = {}
    for column in declared.columns:
        if column.name == target:
            continue
        if column.name not in synthetic.columns:
            scores[column.name] = 1.0
            continue
        if isinstance(column, Categorical):
            a, b = real[column.name].map(value_key), synthetic[column.name].map(value_key)
        else:
            reference = pd.to_numeric(train[column.name], errors="coerce").dropna()
            edges = np.unique(np.quantile(reference, np.linspace(0, 1, BINS + 1))[1:-1])

            def binned(cells: pd.Series, edges: np.ndarray = edges) -> pd.Series:
                values = pd.to_numeric(cells, errors="coerce")
                codes = np.searchsorted(edges, values.to_numpy(dtype=float), side="right")
                return pd.Series(np.where(values.isna(), -1, codes))

            a, b = binned(real[column.name]), binned(synthetic[column.name])
        p, q = a.value_counts(normalize=True), b.value_counts(normalize=True)
        scores[column.name] = 0.5 * float(p.sub(q, fill_value=0.0).abs().sum())
    return scores


def target_levels(schema_yaml: dict, target: str) -> int:
    """The target's classes in a run's schema.yaml: what the run conditions on and writes."""
    return len(next(c for c in schema_yaml["columns"] if c["name"] == target)["levels"])


def train_pair(
    table: str, dataset: DatasetConfig, root: Path, epsilon: float, seed: int, work: Path
) -> list[dict]:
    """The zero-config run and the declared one, scored on the same held-out cells."""
    cells = read_cells(dataset, str(root))
    train, test = split(cells, dataset.test_size, dataset.split_seed)
    declared = Schema.from_specs(dataset.columns)
    common = [f"epsilon={epsilon}", f"delta={DELTAS.get(table, 1e-5)}", "evaluate=true"]
    common.append(f"seed={seed}")
    runs = {
        "zero-config": [
            "dataset=csv",
            f"dataset.path={root / dataset.file}",
            f"dataset.target={dataset.target}",
            f"dataset.positive_label={dataset.positive_label}",
            "schema=private",
            *common,
        ],
        "declared": [f"dataset={table}", f"data.root={root}", *common],
    }
    rows = []
    for name, args in runs.items():
        where = work / f"{table}_{name}"
        _, seconds = timed_train(args, where)
        scores = read_json(where / "evaluation.json")
        synthetic = pd.read_csv(where / "synthetic.csv", dtype=str, keep_default_na=False)
        released = yaml.safe_load((where / "schema.yaml").read_text())
        tvds = column_tvds(test, synthetic, train, declared, dataset.target)
        rows.append(
            {
                "table": table,
                "schema": name,
                "seed": seed,
                "epsilon": epsilon,
                "synthetic_mean_auroc": round(scores["mean"], 4),
                "real_mean_auroc": round(scores["real"]["mean"], 4),
                "tvd_1way_cells": round(float(np.mean(list(tvds.values()))), 4),
                "worst_columns": worst_columns(tvds),
                "quantile_columns": worst_columns(quantile_tvds(where), None),
                "tvd_1way_quantile": round(scores["fidelity_quantile"]["tvd_1way"], 4),
                "target_classes": target_levels(released, dataset.target),
                "dropped": "; ".join(released.get("dropped") or {}),
                "seconds": round(seconds, 1),
                "command": "python -m rdpgan.train " + shlex.join(args),
                "date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
                "machine": machine_line(),
                "commit": COMMIT,
            }
        )
        shown = ("table", "schema", "synthetic_mean_auroc", "tvd_1way_cells")
        print({k: rows[-1][k] for k in shown})
    return rows


def markdown(checks: pd.DataFrame, runs: pd.DataFrame, draws: int, epsilon: float) -> str:
    """results/zero_config.md: the schema draws, the runs, and the bar, table by table."""
    lines = [
        "# Zero configuration on the development suite (issue 27)",
        "",
        f"Made by `python scripts/bench/zero_config.py` at {COMMIT} on {machine_line()}, "
        f"{datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC. Only the target and its positive "
        f"label named, epsilon {epsilon:g}, delta 1e-5 (fertility: 1e-6, below 1 / its rows). "
        "The machine may have run other work beside it: the seconds are indicative only.",
        "",
        f"## The released schema, {draws} seeded draws per table (train split, no training)",
        "",
        "`eligible`: columns with at least two values each held by 5% of the rows; "
        "`eligible dropped` and `bounds outside` list each draw's failures of the bar.",
        "",
        "| table | columns | eligible | kept (min–max) | draws with an eligible column dropped "
        "| draws with a bound outside | target classes | eligible dropped | bounds outside |",
        "| --- | ---: | ---: | --- | ---: | ---: | ---: | --- | --- |",
    ]
    for table, rows in checks.groupby("table", sort=False):
        dropped = sorted({d for cell in rows["eligible_dropped"] for d in cell.split("; ") if d})
        outside = sorted({o for cell in rows["bounds_outside"] for o in cell.split("; ") if o})
        lines.append(
            f"| {table} | {rows['columns'].iloc[0]} | {rows['eligible'].iloc[0]} | "
            f"{rows['kept'].min()}–{rows['kept'].max()} | {(rows['eligible_dropped'] != '').sum()} "
            f"| {(rows['bounds_outside'] != '').sum()} | {rows['target_classes'].iloc[0]} | "
            f"{', '.join(dropped) or '—'} | {', '.join(outside) or '—'} |"
        )
    lines += [
        "",
        "## Zero-config against the declared schema (one run each, held-out rows)",
        "",
        "1-way TVD on the cells: 20 quantile bins of each real numeric column (missing and text "
        "a bin of their own), values as spelled for the others; a dropped column counts 1. "
        "`quantile` is the run's own evaluation (its schema's reading of the rows).",
        "",
        "| table | schema | AUROC | real AUROC | 1-way TVD (cells) | 1-way TVD (quantile) "
        "| target classes | dropped | seconds |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | --- | ---: |",
    ]
    for _, row in runs.iterrows():
        lines.append(
            f"| {row['table']} | {row['schema']} | {row['synthetic_mean_auroc']:.4f} | "
            f"{row['real_mean_auroc']:.4f} | {row['tvd_1way_cells']:.4f} | "
            f"{row['tvd_1way_quantile']:.4f} | {row['target_classes']} | "
            f"{row['dropped'] if isinstance(row['dropped'], str) and row['dropped'] else '—'} | "
            f"{row['seconds']:.0f} |"
        )
    lines += ["", "## The bar", ""]
    met_all = True
    for table, rows in runs.groupby("table", sort=False):
        zero = rows[rows["schema"] == "zero-config"].iloc[-1]
        declared = rows[rows["schema"] == "declared"].iloc[-1]
        auroc = zero["synthetic_mean_auroc"] / declared["synthetic_mean_auroc"]
        tvd = zero["tvd_1way_cells"] / declared["tvd_1way_cells"]
        drawn = checks[checks["table"] == table]
        kept = (drawn["eligible_dropped"] == "").all()
        bounded = (drawn["bounds_outside"] == "").all()
        # The target's classes: the run's as many as the declared run's, and every draw's.
        classes = declared["target_classes"]
        kept_classes = (
            zero["target_classes"] == classes and (drawn["target_classes"] == classes).all()
        )
        met = auroc >= 0.95 and tvd <= 2.0 and kept and bounded and kept_classes
        met_all &= met
        lines.append(
            f"- **{table}**: AUROC {auroc:.3f} × declared (bar ≥ 0.95), 1-way TVD {tvd:.2f} × "
            f"declared (bar ≤ 2), eligible columns kept in "
            f"{(drawn['eligible_dropped'] == '').sum()}/{len(drawn)} draws, bounds in range in "
            f"{(drawn['bounds_outside'] == '').sum()}/{len(drawn)}, target classes "
            f"{zero['target_classes']} in the run (declared {classes}), "
            f"{(drawn['target_classes'] == classes).sum()}/{len(drawn)} draws: "
            f"**{'met' if met else 'not met'}**"
        )
    lines += ["", f"All tables: **{'met' if met_all else 'not met'}**.", ""]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", required=True, help="holds devsuite/<table>.csv")
    parser.add_argument("--tables", nargs="*", default=list(TABLES))
    parser.add_argument("--draws", type=int, default=5)
    parser.add_argument("--epsilon", type=float, default=8.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--results", default="results")
    parser.add_argument("--work", default="outputs/zero_config")
    options = parser.parse_args()
    root = Path(options.root).resolve()
    stamp = datetime.now(timezone.utc).strftime("%Y-%m-%d_%H-%M-%S")
    work = (ROOT / options.work).resolve() / stamp
    checks, runs = [], []
    results = Path(options.results)
    out = results / "zero_config.csv"
    for table in options.tables:  # results written after each table: a long table can wait
        dataset = compose_run_config([f"dataset={table}"]).dataset
        train, _ = split(read_cells(dataset, str(root)), dataset.test_size, dataset.split_seed)
        delta = DELTAS.get(table, 1e-5)
        for row in schema_checks(train, dataset, options.epsilon, delta, options.draws):
            checks.append({"table": table, **row})
        rows = train_pair(table, dataset, root, options.epsilon, options.seed, work)
        runs += rows
        frame = pd.DataFrame(rows)
        if out.is_file():
            frame = pd.concat([pd.read_csv(out), frame], ignore_index=True)
        atomic_write(out, lambda tmp, frame=frame: frame.to_csv(tmp, index=False))
        text = markdown(pd.DataFrame(checks), pd.DataFrame(runs), options.draws, options.epsilon)
        atomic_write(results / "zero_config.md", lambda tmp, text=text: tmp.write_text(text))
        print(f"wrote {out} and {results / 'zero_config.md'}")


if __name__ == "__main__":
    main()
