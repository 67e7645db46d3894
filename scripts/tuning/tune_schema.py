"""Tuning ``schema=private`` alone, on a validation split of each table's *train* split.

    python scripts/tuning/tune_schema.py --root DIR --label NAME [--set NAME=VALUE ...] [--draws 5]

What a released schema costs a synthetic table before any training: the development suite's
validation rows written through it (a value it did not release becomes ``(other)`` or missing,
a number is clipped to its bounds, a dropped column counts 1) and scored against themselves as
``scripts/bench/zero_config.py`` scores a run (1-way TVD on the cells, numbers at 20 quantile
bins of the rows the schema was released from). No generator can undo this loss, so it is the floor
of a zero-config run's TVD. The schema is released from the other 80% of the train split
(:data:`rdpgan.data.split.VALIDATION_KEY`); the test split is never read.

``--set`` overrides a constant of :mod:`rdpgan.privacy.private_schema` or of one of its parts
in :mod:`rdpgan.privacy.schema` for this process, in the module that defines it and reads it
(the candidates tried). Appends one row per table and draw to ``results/tuning_schema.csv``,
with the bar's schema checks (eligible columns dropped, bounds outside), command, date,
machine and commit.
"""

from __future__ import annotations

import argparse
import ast
import shlex
import sys
from datetime import datetime, timezone
from pathlib import Path
from types import ModuleType

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # scripts/: its folders
from bench.machine_info import code_commit, machine_line
from bench.zero_config import DELTAS, TABLES, raw_tvd, release_checks, released_schema

from rdpgan.cli import compose_run_config
from rdpgan.data.datasets import read_cells
from rdpgan.data.schema import Continuous, Schema
from rdpgan.data.split import VALIDATION_KEY, split
from rdpgan.io import atomic_write
from rdpgan.privacy import private_schema
from rdpgan.privacy.schema import bounds, counts, kinds, profiles

ROOT = Path(__file__).resolve().parents[2]
# The modules whose constants ``--set`` may override (each defined in exactly one of them).
SCHEMA_MODULES = (private_schema, profiles, counts, bounds, kinds)


def through_schema(rows: pd.DataFrame, schema: Schema) -> pd.DataFrame:
    """``rows`` as a synthetic table written with ``schema`` could hold them at best: each
    cell read by the schema, numbers clipped to its bounds, and written back."""
    read = schema.conform(rows[schema.names])
    for column in schema.columns:
        if isinstance(column, Continuous):
            read[column.name] = read[column.name].clip(column.lo, column.hi)
    return schema.written(read)


def defining_module(name: str) -> ModuleType:
    """The one of :data:`SCHEMA_MODULES` that defines constant ``name`` (an unknown name is an
    error)."""
    found = [module for module in SCHEMA_MODULES if name in vars(module)]
    if len(found) != 1:
        where = ", ".join(module.__name__ for module in SCHEMA_MODULES)
        raise SystemExit(f"--set {name}: not a constant of one of {where}")
    return found[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", required=True, help="holds devsuite/<table>.csv")
    parser.add_argument("--label", required=True, help="names the candidate in the results")
    parser.add_argument("--set", nargs="*", default=[], help="private_schema constants")
    parser.add_argument("--tables", nargs="*", default=list(TABLES))
    parser.add_argument("--draws", type=int, default=5)
    parser.add_argument("--epsilon", type=float, default=8.0)
    parser.add_argument("--out", default=str(ROOT / "results" / "tuning_schema.csv"))
    options = parser.parse_args()
    for assignment in options.set:
        name, value = assignment.split("=", 1)
        module = defining_module(name)
        current = getattr(module, name)
        candidate = ast.literal_eval(value)  # a number, or a tuple such as SHARE_RANGE's
        if isinstance(current, float) and isinstance(candidate, int):
            candidate = float(candidate)
        if not isinstance(candidate, type(current)):
            raise SystemExit(f"--set {name}: {value!r} is not a {type(current).__name__}")
        setattr(module, name, candidate)
    rows = []
    for table in options.tables:
        dataset = compose_run_config([f"dataset={table}"]).dataset
        train, _ = split(read_cells(dataset, options.root), dataset.test_size, dataset.split_seed)
        fit, validation = split(train, 0.2, VALIDATION_KEY)
        declared = Schema.from_specs(dataset.columns)
        delta = DELTAS.get(table, 1e-5)
        for draw in range(options.draws):
            release = released_schema(fit, dataset, options.epsilon, delta, draw)
            features = release.schema.without(dataset.target)
            written = through_schema(validation, features)
            rows.append(
                {
                    "label": options.label,
                    "set": " ".join(options.set),
                    "table": table,
                    "draw": draw,
                    "epsilon": options.epsilon,
                    "tvd_1way_cells": round(
                        raw_tvd(validation, written, fit, declared, dataset.target), 4
                    ),
                    **release_checks(fit, dataset, release),
                    "command": "python scripts/tuning/tune_schema.py " + shlex.join(sys.argv[1:]),
                    "date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
                    "machine": machine_line(),
                    "commit": code_commit(),
                }
            )
        drawn = [r for r in rows if r["table"] == table]
        print(
            f"{options.label} {table}: schema-floor 1-way TVD "
            f"{np.mean([r['tvd_1way_cells'] for r in drawn]):.4f}, values within bounds "
            f"{np.mean([r['mean_within'] for r in drawn]):.4f} (least "
            f"{min(r['least_within'] for r in drawn):.4f}), bounds outside "
            f"{sum(bool(r['bounds_outside']) for r in drawn)} of {len(drawn)} draws",
            flush=True,
        )
    frame = pd.DataFrame(rows)
    out = Path(options.out)
    if out.is_file():
        frame = pd.concat([pd.read_csv(out), frame], ignore_index=True)
    atomic_write(out, lambda tmp: frame.to_csv(tmp, index=False))


if __name__ == "__main__":
    main()
