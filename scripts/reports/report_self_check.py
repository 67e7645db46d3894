"""How far each benchmark run's rows sit from its own releases, table by table.

    python scripts/reports/report_self_check.py --runs SWEEP_DIR [SWEEP_DIR ...] \
        [--results results/fidelity_resolution]

Reads the self-check every run writes (``metrics.json``'s ``self_check``: per release, the
largest and the root-mean-square gap between the synthetic rows and the released values, in
units of that release's noise std; ``rdpgan.selfcheck``) from the run directories that
``scripts/bench/benchmark.py`` leaves under its sweep directories (``<table>_rdp_cgan_eps<ε>/
repeat<r>/``), and writes ``self_check.md`` beside the benchmark's CSVs, with the commit and
date of the CSV row each run made. Nothing is computed but means over repeats.
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

import pandas as pd

from rdpgan.io import atomic_write

RESULTS = Path(__file__).resolve().parents[2] / "results" / "fidelity_resolution"
CELL = re.compile(r"(?P<table>.+)_rdp_cgan_eps(?P<epsilon>[\d.]+)$")


def read_checks(sweeps: list[Path]) -> pd.DataFrame:
    """One row per (run, release): table, epsilon, repeat, release, cells, worst, rms, where."""
    rows = []
    for sweep in sweeps:
        for metrics in sorted(sweep.glob("*/repeat*/metrics.json")):
            cell = CELL.match(metrics.parent.parent.name)
            if cell is None:
                continue
            repeat = int(metrics.parent.name.removeprefix("repeat"))
            for check in json.loads(metrics.read_text()).get("self_check", []):
                rows.append(
                    {
                        "table": cell["table"],
                        "epsilon": float(cell["epsilon"]),
                        "repeat": repeat,
                        **check,
                    }
                )
    return pd.DataFrame(rows)


def made_by(checks: pd.DataFrame, results: Path) -> pd.DataFrame:
    """The benchmark CSV row (commit, date, machine) of each run read: the latest rdp_cgan row
    of its table, ε and repeat."""
    found = []
    for table in sorted(checks["table"].unique()):
        rows = pd.read_csv(results / f"bench_{table}.csv")
        rows = rows[rows["method"] == "rdp_cgan"]
        latest = rows.groupby(["epsilon", "repeat"], as_index=False).last()
        found.append(latest.assign(table=table)[["table", "epsilon", "repeat", "commit", "date"]])
    return pd.concat(found, ignore_index=True)


def report(checks: pd.DataFrame, runs: pd.DataFrame, command: str) -> str:
    means = (
        checks.groupby(["table", "epsilon", "release"], sort=True)
        .agg(
            cells=("cells", "max"),
            repeats=("repeat", "nunique"),
            worst=("worst", "mean"),
            rms=("rms", "mean"),
            where=("where", lambda w: w.iloc[checks.loc[w.index, "worst"].argmax()]),
        )
        .reset_index()
    )
    lines = [
        "# Self-check: the rows against their own releases",
        "",
        "Each benchmark run's `metrics.json` (`self_check`): per release, the largest and the "
        "root-mean-square gap between the synthetic rows and the released values, in units of "
        "that release's noise std, mean over repeats (the largest gap's cell from the repeat "
        "where it was largest). A gap of a few stds is the release's own noise showing through "
        "G's rows; the run prints a console line beyond a few.",
        "",
        "| table | ε | release | cells | repeats | largest | rms | largest at |",
        "| --- | ---: | --- | ---: | ---: | ---: | ---: | --- |",
    ]
    for row in means.itertuples():
        lines.append(
            f"| {row.table} | {row.epsilon:g} | {row.release} | {row.cells:,} | {row.repeats} | "
            f"{row.worst:.1f} | {row.rms:.2f} | {row.where} |"
        )
    commits = ", ".join(f"`{c}`" for c in sorted(runs["commit"].astype(str).unique()))
    dates = sorted(runs["date"].astype(str))
    lines += [
        "",
        f"Made by `{command}` from the run directories of the rdp_cgan rows in this folder's "
        f"`bench_<table>.csv` (commits {commits}; {dates[0]} – {dates[-1]}).",
        "",
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=Path, nargs="+", required=True)
    parser.add_argument("--results", type=Path, default=RESULTS)
    args = parser.parse_args()
    checks = read_checks(args.runs)
    if checks.empty:
        raise SystemExit(f"no self-checks under {', '.join(map(str, args.runs))}")
    command = "python scripts/reports/report_self_check.py --runs " + " ".join(
        str(p) for p in args.runs
    )
    text = report(checks, made_by(checks, args.results), command)
    out = args.results / "self_check.md"
    atomic_write(out, lambda tmp: tmp.write_text(text))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
