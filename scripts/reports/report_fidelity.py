"""The fidelity issue's tables and bars, from the benchmark CSVs of one results folder.

    python scripts/reports/report_fidelity.py [--results results/fidelity_resolution]

Reads only what scripts/bench/benchmark.py wrote there (``bench_<table>.csv``: one row per run)
and writes ``README.md`` in that folder between two markers (the text before and after them is
kept): per table and ε, each method's mean over repeats of the TVDs at the data's resolution
(20 quantile cells of each numeric train column: ``q_`` columns) and at the public bins, the
share of the real AUROC, and the bars — Adult's absolute ones, and on every other table
rdp_cgan against AIM (1-way and 2-way TVD at most AIM's, AUROC share at least AIM's − 0.01).
Nothing between the markers is hand-edited.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # scripts/: its folders
from bench.results_rows import read_rows

from rdpgan.io import atomic_write

START = (
    "<!-- generated below by scripts/reports/report_fidelity.py; edit the script, not the text -->"
)
END = "<!-- end of the generated part: how the rows were made follows, by hand -->"
METHODS = ("rdp_cgan", "aim", "mst")
COLUMNS = {
    "q_tvd_1way": "1-way (q)",
    "q_tvd_2way": "2-way (q)",
    "q_tvd_3way_target": "3-way w. target (q)",
    "q_worst_numeric_1way": "worst numeric 1-way (q)",
    "tvd_1way": "1-way (public)",
    "tvd_2way": "2-way (public)",
    "share_of_real": "AUROC ÷ real",
    "duplicate_rows": "repeated rows",
}
# Adult's bars (fresh default runs): (ε, column, most or least allowed, "max" | "min").
ADULT_BARS = (
    (8.0, "q_tvd_1way", 0.012, "max"),
    (8.0, "q_tvd_2way", 0.040, "max"),
    (8.0, "q_tvd_3way_target", 0.055, "max"),
    (8.0, "q_worst_numeric_1way", 0.03, "max"),
    (8.0, "share_of_real", 0.98, "min"),
    (1.0, "q_tvd_1way", 0.02, "max"),
    (1.0, "share_of_real", 0.97, "min"),
)


def fmt(value: float) -> str:
    return "–" if pd.isna(value) else f"{value:.4f}"


def table_section(name: str, rows: pd.DataFrame) -> list[str]:
    """One table's means by ε and method, with runs per cell."""
    present = [c for c in COLUMNS if c in rows]
    lines = [f"### {name}", ""]
    commits = ", ".join(sorted(rows["commit"].astype(str).unique()))
    dates = f"{rows['date'].min()} – {rows['date'].max()}"
    first_machines = rows.groupby("method")["machine"].first().items()
    machines = "; ".join(f"{method}: {machine}" for method, machine in first_machines)
    lines += [f"Commits: `{commits}`; runs {dates}; machines: {machines}.", ""]
    if "rounds" in rows and rows["method"].eq("aim").any():
        rounds = sorted(rows.loc[rows["method"] == "aim", "rounds"].dropna().astype(int).unique())
        lines += [f"AIM's round cap: {', '.join(map(str, rounds))}.", ""]
    header = ["ε", "method", "runs", *(COLUMNS[c] for c in present)]
    lines += ["| " + " | ".join(header) + " |", "|" + " --- |" * len(header)]
    means = rows.groupby(["epsilon", "method"])[present].mean()
    counts = rows.groupby(["epsilon", "method"]).size()
    for (epsilon, method), values in means.sort_index(ascending=[False, True]).iterrows():
        cells = [f"{epsilon:g}", method, str(counts[(epsilon, method)])]
        lines.append("| " + " | ".join(cells + [fmt(values[c]) for c in present]) + " |")
    return [*lines, ""]


def adult_bars(rows: pd.DataFrame) -> list[str]:
    lines = ["| ε | score | bar | rdp_cgan | met |", "| --- | --- | --- | --- | --- |"]
    ours = rows[rows["method"] == "rdp_cgan"]
    for epsilon, column, bar, kind in ADULT_BARS:
        value = ours.loc[ours["epsilon"] == epsilon, column].mean() if column in ours else None
        if value is None or pd.isna(value):
            lines.append(f"| {epsilon:g} | {column} | {bar} | – | not run |")
            continue
        met = value <= bar if kind == "max" else value >= bar
        sign = "≤" if kind == "max" else "≥"
        lines.append(
            f"| {epsilon:g} | {column} | {sign} {bar} | {value:.4f} | {'yes' if met else 'no'} |"
        )
    return lines


def peer_bars(tables: dict[str, pd.DataFrame], epsilon: float) -> list[str]:
    """rdp_cgan against AIM on every table that has both at ``epsilon``."""
    lines = [
        "| table | 1-way (q) ours / AIM | 2-way (q) ours / AIM | AUROC share ours / AIM | met |",
        "| --- | --- | --- | --- | --- |",
    ]
    for name, rows in tables.items():
        cell = rows[rows["epsilon"] == epsilon].groupby("method")
        if not {"rdp_cgan", "aim"} <= set(cell.groups):
            continue
        ours, aim = cell.get_group("rdp_cgan"), cell.get_group("aim")
        values = {c: (ours[c].mean(), aim[c].mean()) for c in ("q_tvd_1way", "q_tvd_2way")}
        share = (ours["share_of_real"].mean(), aim["share_of_real"].mean())
        met = (
            values["q_tvd_1way"][0] <= values["q_tvd_1way"][1]
            and values["q_tvd_2way"][0] <= values["q_tvd_2way"][1]
            and share[0] >= share[1] - 0.01
        )
        pairs = [f"{a:.4f} / {b:.4f}" for a, b in (*values.values(), share)]
        lines.append(f"| {name} | " + " | ".join(pairs) + f" | {'yes' if met else 'no'} |")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", type=Path, default=Path("results/fidelity_resolution"))
    args = parser.parse_args()
    tables = {
        path.stem.removeprefix("bench_"): read_rows(path)
        for path in sorted(args.results.glob("bench_*.csv"))
        if not path.stem.startswith("bench_real_")
    }
    lines = [
        "Scores against each run's train split, means over repeats. (q): numeric columns cut at",
        "20 quantiles of the real train column (the data's resolution); (public): at the public",
        "bins the generator is trained on. AUROC ÷ real: mean AUROC of the paper's 8 classifiers",
        "trained on synthetic rows, over the same trained on real rows, on held-out real rows.",
        "",
    ]
    if "adult" in tables:
        lines += ["## Adult's bars", "", *adult_bars(tables["adult"]), ""]
    others = {k: v for k, v in tables.items() if k != "adult"}
    for epsilon in (8.0, 1.0):
        bars = peer_bars(others, epsilon)
        if len(bars) > 2:
            lines += [f"## Development suite at ε={epsilon:g}: rdp_cgan against AIM", "", *bars, ""]
    lines += ["## Per table", ""]
    for name, rows in tables.items():
        lines += table_section(name, rows)
    readme = args.results / "README.md"
    old = readme.read_text() if readme.is_file() else ""
    head = old.split(START)[0] if START in old else "# Fidelity at the data's resolution\n\n"
    tail = old.split(END, 1)[1] if END in old else "\n"
    text = head + START + "\n\n" + "\n".join(lines) + "\n" + END + tail
    atomic_write(readme, lambda tmp: Path(tmp).write_text(text))


if __name__ == "__main__":
    main()
