"""Check that each declared public dataset schema is *compatible* with its data file.

The schemas in ``configs/dataset/*.yaml`` are written from public documentation, never from the
rows. This script only checks them against the files and reports:

* columns: the file's columns must be exactly the declared ones, in order;
* undeclared levels: a value of a categorical column that is not a declared level (must be none);
* missing: empty cells in a column not declared ``missing: true`` (must be none), and columns
  declared missing that have no empty cell (informational);
* outside bounds: how many values of each continuous column fall below ``lo`` / above ``hi``
  (these get clipped: a few outliers are acceptable, and are reported honestly);
* non-integer values in columns declared ``integer: true`` (informational, they get rounded).

It prints counts only, never the data's own min/max, so it cannot be used to pick bounds.

Usage: python scripts/data/check_schemas.py [--root DIR] [--configs DIR] [--file F] [adult ...]
Data root: --root, else env RDPGAN_DATA_DIR, else ./data. Exit code 1 if any hard problem.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import pandas as pd
import yaml

REPO = Path(__file__).resolve().parents[2]
DEFAULT_CONFIGS = REPO / "configs" / "dataset"
SCHEMA_FILES = ("adult", "cervical", "creditcard")


def data_root(cli_root: str | None) -> Path:
    if cli_root:
        return Path(cli_root)
    env = os.environ.get("RDPGAN_DATA_DIR")
    return Path(env) if env else Path("data")


def read_table(cfg: dict, root: Path) -> pd.DataFrame:
    """The file as rdpgan reads it: text cells without surrounding spaces, blank ones missing."""
    header = cfg.get("header", True)
    df = pd.read_csv(
        root / cfg["file"],
        header=0 if header else None,
        names=None if header else cfg["column_names"],
        sep=cfg.get("sep", ","),
        na_values=cfg.get("na_values") or [],
        skipinitialspace=cfg.get("skipinitialspace", False),
    )
    return df.apply(lambda s: s.map(lambda v: (v.strip() or None) if isinstance(v, str) else v))


def check_dataset(cfg: dict, root: Path) -> int:
    """Print the report for one dataset; return the number of hard problems."""
    problems = 0
    name = cfg["name"]
    path = root / cfg["file"]
    print(f"== {name}: {path}")
    if not path.exists():
        print(f"   ERROR: file not found: {path}")
        return 1
    df = read_table(cfg, root)
    specs = cfg["columns"]
    declared = [c["name"] for c in specs]
    print(f"   rows {len(df):,}, columns {df.shape[1]} (declared {len(declared)})")
    if list(df.columns) != declared:
        problems += 1
        extra = [c for c in df.columns if c not in declared]
        absent = [c for c in declared if c not in df.columns]
        print(f"   ERROR: column mismatch; in file only: {extra}; declared only: {absent}")
        if extra or absent:
            return problems
        print("   ERROR: same columns but in a different order")
    if cfg.get("header") is False and cfg.get("column_names") != declared:
        problems += 1
        print("   ERROR: column_names differ from the names listed under columns")

    by_name = {c["name"]: c for c in specs}
    target = cfg.get("target")
    if target not in by_name:
        problems += 1
        print(f"   ERROR: target {target!r} is not a declared column")
    else:
        levels = by_name[target].get("levels") or []
        if cfg.get("positive_label") not in levels:
            problems += 1
            print(f"   ERROR: positive_label {cfg.get('positive_label')!r} not in {levels}")
        counts = df[target].value_counts(dropna=False).to_dict()
        print(f"   target {target}: " + ", ".join(f"{k!r}={v:,}" for k, v in counts.items()))

    print(f"   {'column':<36} {'kind':<11} {'missing':>16} {'<lo':>6} {'>hi':>6}  notes")
    for spec in specs:
        col = spec["name"]
        if col not in df.columns:
            continue
        s = df[col]
        n_missing = int(s.isna().sum())
        declared_missing = bool(spec.get("missing", False))
        notes = []
        if n_missing and not declared_missing:
            problems += 1
            notes.append("ERROR: missing values but missing: false")
        elif declared_missing and not n_missing:
            notes.append("declared missing, none present")
        present = s.dropna()
        below = above = "-"
        if spec["kind"] == "categorical":
            levels = spec.get("levels") or []
            undeclared = sorted({v for v in present.unique() if v not in levels}, key=str)
            if undeclared:
                problems += 1
                notes.append(f"ERROR: undeclared levels {undeclared[:10]}")
            unused = [lv for lv in levels if lv not in set(present.unique())]
            if unused:
                notes.append(f"{len(unused)} declared level(s) unused")
        elif spec["kind"] == "continuous":
            values = pd.to_numeric(present, errors="coerce")
            n_bad = int(values.isna().sum())
            if n_bad:
                problems += 1
                notes.append(f"ERROR: {n_bad} non-numeric values")
            values = values.dropna()
            below = int((values < spec["lo"]).sum())
            above = int((values > spec["hi"]).sum())
            if below or above:
                notes.append("clipped to bounds")
            if spec.get("integer", False):
                frac = int((values != values.round()).sum())
                if frac:
                    notes.append(f"{frac} non-integer value(s) in an integer column")
        else:
            problems += 1
            notes.append(f"ERROR: unknown kind {spec['kind']!r}")
        miss = f"{n_missing:,} ({'decl' if declared_missing else 'no'})"
        print(
            f"   {col:<36} {spec['kind']:<11} {miss:>16} {below!s:>6} {above!s:>6}  "
            + "; ".join(notes)
        )
    print(f"   -> {problems} problem(s)")
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("datasets", nargs="*", default=list(SCHEMA_FILES))
    parser.add_argument("--root", help="data root (else $RDPGAN_DATA_DIR, else ./data)")
    parser.add_argument("--configs", default=str(DEFAULT_CONFIGS), help="dataset config dir")
    parser.add_argument("--file", help="override the config's file (one dataset only)")
    args = parser.parse_args(argv)
    if args.file and len(args.datasets) != 1:
        parser.error("--file needs exactly one dataset name")
    root = data_root(args.root)
    total = 0
    for ds in args.datasets:
        cfg_path = Path(args.configs) / f"{ds}.yaml"
        try:
            with open(cfg_path) as fh:
                cfg = yaml.safe_load(fh)
        except (OSError, yaml.YAMLError) as exc:
            print(f"== {ds}: ERROR: cannot load {cfg_path}: {exc}")
            total += 1
            continue
        if args.file:
            cfg["file"] = args.file
        total += check_dataset(cfg, root)
    print(f"TOTAL: {total} problem(s)")
    return 1 if total else 0


if __name__ == "__main__":
    sys.exit(main())
