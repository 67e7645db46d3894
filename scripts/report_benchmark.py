"""Regenerate results/README.md tables and figures from results/bench_*.csv and any_csv.csv.

    python scripts/report_benchmark.py [--results results]

Reads only what scripts/benchmark.py wrote (one row per run), so the report can be rebuilt at
any time, e.g. while the grid is still filling in. Nothing here is hand-edited.
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import pandas as pd

from rdpgan.io import atomic_write
from rdpgan.utility import CLASSIFIERS

DATASETS = ("adult", "cervical", "creditcard")
METHODS = ("cgan", "dp_cgan", "rdp_cgan")
# Marginal-based DP references (Private-PGM's AIM and MST, scripts/marginal_peers.py).
PEERS = ("aim", "mst")
PRIVATE_METHODS = ("dp_cgan", "rdp_cgan", *PEERS)
FIDELITY = {
    "tvd_1way": "1-way TVD",
    "tvd_2way": "2-way TVD",
    "tvd_3way_target": "3-way TVD (with target)",
    "k_marginal": "k-marginal",
    "association_difference": "assoc. diff.",
}
# The same TVDs at the data's resolution (scripts/benchmark.py's q_ columns: 20 quantile cells
# of each numeric train column), each shown beside its public one. CSVs written before them
# lack them: their tables show the public columns only, or "–" where some rows lack them.
QUANTILE_FIDELITY = {
    "q_tvd_1way": "1-way TVD (quantiles)",
    "q_tvd_2way": "2-way TVD (quantiles)",
    "q_tvd_3way_target": "3-way TVD (quantiles)",
    "q_worst_numeric_1way": "worst numeric 1-way TVD (quantiles)",
}
# Issue 11's bar on Adult: (epsilon, column, bound, "max" or "min").
BAR = (
    (8.0, "tvd_1way", 0.02, "max"),
    (8.0, "tvd_2way", 0.06, "max"),
    (8.0, "tvd_3way_target", 0.10, "max"),
    (8.0, "share_of_real", 0.97, "min"),
    (1.0, "tvd_1way", 0.03, "max"),
    (1.0, "share_of_real", 0.95, "min"),
)
EPSILONS = (1, 2, 4, 6, 8)
# The paper's reported means (ε = 8, δ = 1e-5); the text gives no credit-card real row.
PAPER = {
    "adult": {"real": 0.9198, "cgan": 0.8986, "rdp_cgan": 0.8523},
    "cervical": {"real": 0.9822, "cgan": 0.9587, "rdp_cgan": 0.9335},
    "creditcard": {"cgan": 0.9348, "rdp_cgan": 0.9136},
}
PAPER_SHARE = {"adult": 0.8523 / 0.9198, "cervical": 0.9335 / 0.9822, "creditcard": 0.927}
MARKER = "<!-- generated below by scripts/report_benchmark.py; edit the script, not the text -->"


def fmt(values: pd.Series) -> str:
    values = values.dropna()
    if values.empty:
        return "–"
    return (
        f"{values.mean():.4f} ± {values.std(ddof=1):.4f}"
        if len(values) > 1
        else (f"{values.mean():.4f}")
    )


def classifier_table(runs: pd.DataFrame, real: pd.DataFrame, dataset: str, eps: float) -> str:
    cells = {
        "real": real,
        "cgan": runs[runs["method"] == "cgan"],
        "dp_cgan": runs[(runs["method"] == "dp_cgan") & (runs["epsilon"] == eps)],
        "rdp_cgan": runs[(runs["method"] == "rdp_cgan") & (runs["epsilon"] == eps)],
    }
    header = ["classifier", *[f"{k} (n={len(v)})" for k, v in cells.items()]]
    lines = ["| " + " | ".join(header) + " |", "|" + " --- |" * len(header)]
    for name in CLASSIFIERS:
        row = [name] + [fmt(frame[f"auroc_{name}"]) for frame in cells.values()]
        lines.append("| " + " | ".join(row) + " |")
    lines.append(
        "| **mean** | " + " | ".join(f"**{fmt(f['mean'])}**" for f in cells.values()) + " |"
    )
    paper = PAPER.get(dataset, {})
    lines.append(
        "| paper's mean | "
        + " | ".join(f"{paper[k]:.4f}" if k in paper else "–" for k in cells)
        + " |"
    )
    return "\n".join(lines)


def epsilon_table(runs: pd.DataFrame, real: pd.DataFrame) -> str:
    epsilons = sorted(runs["epsilon"].dropna().unique())
    lines = [
        "| method | " + " | ".join(f"ε={e:g}" for e in epsilons) + " |",
        "|" + " --- |" * (len(epsilons) + 1),
    ]
    for method in PRIVATE_METHODS:
        sub = runs[runs["method"] == method]
        if sub.empty:
            continue
        lines.append(
            f"| {method} | "
            + " | ".join(fmt(sub[sub["epsilon"] == e]["mean"]) for e in epsilons)
            + " |"
        )
    cgan = fmt(runs[runs["method"] == "cgan"]["mean"])
    lines.append("| cgan (non-private) | " + " | ".join([cgan] * len(epsilons)) + " |")
    lines.append("| real | " + " | ".join([fmt(real["mean"])] * len(epsilons)) + " |")
    return "\n".join(lines)


def share_line(runs: pd.DataFrame, real: pd.DataFrame, dataset: str) -> str:
    rdp8 = runs[(runs["method"] == "rdp_cgan") & (runs["epsilon"] == 8)]["mean"]
    cgan = runs[runs["method"] == "cgan"]["mean"]
    if rdp8.empty or real.empty:
        return "rdp_cgan at ε=8 not run yet."
    share = rdp8.mean() / real["mean"].mean()
    verdict = "meets" if share >= PAPER_SHARE[dataset] else "does NOT meet"
    text = (
        f"rdp_cgan ε=8 mean ÷ real mean = **{share:.3f}** (paper's share "
        f"{PAPER_SHARE[dataset]:.3f}: {verdict} the bar)"
    )
    if not cgan.empty:
        text += f"; non-private cgan ÷ real = {cgan.mean() / real['mean'].mean():.3f}"
    return text + "."


def fidelity_cell(rows: pd.DataFrame, column: str) -> str:
    """``fmt`` of a score, "–" when the rows lack it; the worst numeric column's TVD names the
    column that was worst most often."""
    if column not in rows.columns:
        return "–"
    text = fmt(rows[column])
    if column == "q_worst_numeric_1way" and "q_worst_numeric_column" in rows.columns:
        names = rows["q_worst_numeric_column"].dropna()
        text += f" ({names.mode().iloc[0]})" if not names.empty else ""
    return text


def fidelity_caption(runs: pd.DataFrame) -> str:
    text = (
        "Fidelity against the train split (public bins: 20 per wide numeric column; mean ±"
        " std over repeats; AIM and MST cut numbers into 32 public bins)"
    )
    if any(c in runs.columns for c in QUANTILE_FIDELITY):
        text += (
            ". Columns marked (quantiles) are at the data's resolution: each numeric column cut"
            " at 20 quantiles of its train rows, where numbers that clump inside the public bins"
            " show (the worst numeric column: in brackets, the one most often worst)"
        )
    return text + ":"


def fidelity_table(runs: pd.DataFrame, real: pd.DataFrame) -> str:
    """Mean (± std) of every fidelity score and of AUROC ÷ real, per method and ε, each TVD at
    the data's resolution beside its public one where the CSV has it; the held-out real rows
    first, as the floor."""
    public = [c for c in FIDELITY if c in runs.columns]
    if not public:
        return "No fidelity scores yet."
    columns = []
    for column in public:
        columns.append(column)
        if f"q_{column}" in runs.columns:
            columns.append(f"q_{column}")
    if "q_worst_numeric_1way" in runs.columns:
        columns.append("q_worst_numeric_1way")
    names = {**FIDELITY, **QUANTILE_FIDELITY}
    header = ["", "ε", *[names[c] for c in columns], "AUROC ÷ real", "runs"]
    lines = ["| " + " | ".join(header) + " |", "|" + " --- |" * len(header)]
    if all(c in real.columns for c in public):
        floor = [fidelity_cell(real, c) for c in columns]
        lines.append(f"| held-out real rows (floor) | – | {' | '.join(floor)} | 1 | {len(real)} |")
    cells = [("cgan (non-private)", runs[runs["method"] == "cgan"], "–")]
    for method in PRIVATE_METHODS:
        for eps in sorted(runs[runs["method"] == method]["epsilon"].dropna().unique()):
            sub = runs[(runs["method"] == method) & (runs["epsilon"] == eps)]
            cells.append((method, sub, f"{eps:g}"))
    for name, sub, eps in cells:
        if sub.empty:
            continue
        values = [fidelity_cell(sub, c) for c in columns]
        lines.append(
            f"| {name} | {eps} | {' | '.join(values)} | {fmt(sub['share_of_real'])} | {len(sub)} |"
        )
    return "\n".join(lines)


def bar_lines(runs: pd.DataFrame) -> str:
    """Issue 11's bar for rdp_cgan on Adult, each item met or not (means over repeats)."""
    items = []
    for eps, column, bound, kind in BAR:
        sub = runs[(runs["method"] == "rdp_cgan") & (runs["epsilon"] == eps)]
        if sub.empty or column not in sub.columns:
            items.append(f"- ε={eps:g} {column}: not run yet")
            continue
        value = sub[column].mean()
        met = value <= bound if kind == "max" else value >= bound
        sign = "≤" if kind == "max" else "≥"
        items.append(
            f"- ε={eps:g} {column} = {value:.4f} (bar {sign} {bound}): "
            + ("met" if met else "**NOT met**")
            + f" (mean of {len(sub)} runs)"
        )
    return "\n".join(items)


def tuning_table(results: Path) -> str:
    """Round 8 of the Adult search (validation split of the train split), from
    tuning_adult.csv: what chose the issue-11 defaults."""
    path = results / "tuning_adult.csv"
    if not path.is_file():
        return ""
    rows = pd.read_csv(path)
    rows = rows[rows["round"] == 8]
    if rows.empty:
        return ""
    columns = ["name", "epsilon", "seed", "validation_mean_auroc", *FIDELITY, "commit"]
    columns = [c for c in columns if c in rows.columns and c != "association_difference"]
    lines = ["| " + " | ".join(columns) + " |", "|" + " --- |" * len(columns)]
    for _, row in rows.iterrows():
        lines.append("| " + " | ".join(str(row[c]) for c in columns) + " |")
    return "\n".join(lines)


def any_csv_section(results: Path) -> list[str]:
    """Issue 12's bar, from any_csv.csv (scripts/any_csv.py): adult.test as a raw CSV."""
    path = results / "any_csv.csv"
    if not path.is_file():
        return []
    rows = pd.read_csv(path)
    columns = [
        "schema",
        "seed",
        "share_of_real",
        "synthetic_mean_auroc",
        "real_mean_auroc",
        "lines_printed",
        "only_released_levels",
        "epsilon_spent",
        "seconds",
        "commit",
        "date",
    ]
    lines = ["| " + " | ".join(columns) + " |", "|" + " --- |" * len(columns)]
    for _, row in rows.iterrows():
        lines.append("| " + " | ".join(str(row[c]) for c in columns) + " |")
    private = rows[rows["schema"] == "schema=private"]
    if private.empty:
        return []
    latest = private.iloc[-1]
    command = latest["command"]
    met = (
        (private["share_of_real"] >= 0.90).all()
        and (rows["lines_printed"] <= 5).all()
        and rows["only_released_levels"].all()
    )
    return [
        "### any CSV (issue 12)",
        "",
        "UCI's `adult.test` written as a raw CSV (`scripts/adult_test_csv.py`: `?` cells, labels"
        " like `>50K.`), trained with nothing but the target named, then again with the"
        " `schema.yaml` that run released, declared. Scored on the run's held-out rows; `real`"
        " is the same eight classifiers trained on the real train split.",
        "",
        f"Command: `{re.sub(r'dataset.path=[^ ]*/', 'dataset.path=', command)}` (and the run"
        f" directory). Machine (latest runs): {latest['machine']}.",
        "",
        f"The latest run's schema line ({latest['commit']}): `{latest['schema_summary']}`.",
        "",
        *lines,
        "",
        "Bar (AUROC ÷ real ≥ 0.90 for every schema=private run, ≤ 5 lines besides the progress"
        f" bar, released levels only): **{'met' if met else 'not met'}**"
        f" (share of real: mean {private['share_of_real'].mean():.3f},"
        f" min {private['share_of_real'].min():.3f} over {len(private)} runs).",
        "",
    ]


def provenance_line(runs: pd.DataFrame) -> str:
    """Which code made the rows, and when (each row names its commit and date)."""
    groups = runs.groupby("commit", sort=False)["date"].agg(["size", "min", "max"])
    made = [
        f"`{commit}` ({row['size']} runs, {row['min']} – {row['max']})"
        for commit, row in groups.iterrows()
    ]
    return "Runs by commit: " + "; ".join(made) + "."


def epsilon_panel(
    ax: plt.Axes,
    runs: pd.DataFrame,
    score: str,
    reference: tuple[float, str] | None,
    title: str,
    ylabel: str,
) -> None:
    """``score`` vs ε for each private method (mean ± std over repeats), the non-private cgan
    and ``reference`` (value, label) as lines, on the paper's ε grid."""
    # One colour per method in every panel (each panel of the top row has a legend).
    styles = {
        "dp_cgan": ("s", "C0"),
        "rdp_cgan": ("o", "C1"),
        "aim": ("^", "C2"),
        "mst": ("v", "C3"),
    }
    for method, (marker, colour) in styles.items():
        stats = runs[runs["method"] == method].groupby("epsilon")[score].agg(["mean", "std"])
        if not stats.empty:
            ax.errorbar(
                stats.index,
                stats["mean"],
                yerr=stats["std"].fillna(0),
                marker=marker,
                color=colour,
                capsize=3,
                label=method,
            )
    cgan = runs[runs["method"] == "cgan"][score]
    if not cgan.empty:
        ax.axhline(cgan.mean(), color="grey", linestyle="-.", label="cgan (non-private)")
    if reference is not None:
        ax.axhline(reference[0], color="black", linestyle="--", label=reference[1])
    ax.set_title(title)
    ax.set_xticks(EPSILONS)  # the paper's grid, also while cells are still filling in
    ax.set_xlim(0.5, 8.5)
    ax.set_xlabel("ε (δ = 1e-5)")
    ax.set_ylabel(ylabel)
    ax.grid(alpha=0.3)


def save_figure(fig: plt.Figure, axes, path: Path, legend: str) -> None:
    for ax in axes[0]:
        ax.legend(loc=legend, fontsize=7)
    fig.tight_layout()
    atomic_write(path, lambda tmp: fig.savefig(tmp, format="png", dpi=120))
    plt.close(fig)


def figure(results: Path, data: dict[str, tuple[pd.DataFrame, pd.DataFrame]]) -> None:
    fig, axes = plt.subplots(1, len(data), figsize=(5 * len(data), 4), squeeze=False)
    for ax, (dataset, (runs, real)) in zip(axes[0], data.items(), strict=True):
        reference = None if real.empty else (real["mean"].mean(), "real data")
        epsilon_panel(ax, runs, "mean", reference, dataset, "mean AUROC of 8 classifiers")
    save_figure(fig, axes, results / "auroc_vs_epsilon.png", "lower right")


def fidelity_figure(results: Path, data: dict[str, tuple[pd.DataFrame, pd.DataFrame]]) -> None:
    """Mean 1-way and 2-way TVD vs ε per dataset, the held-out floor as a line."""
    fig, axes = plt.subplots(2, len(data), figsize=(5 * len(data), 7), squeeze=False)
    for col, (dataset, (runs, real)) in enumerate(data.items()):
        for row, score in enumerate(("tvd_1way", "tvd_2way")):
            if score not in runs.columns:
                continue
            floor = (real[score].mean(), "held-out real") if score in real.columns else None
            title, ylabel = (
                f"{dataset}: {FIDELITY[score]}",
                f"mean {FIDELITY[score]} (lower is better)",
            )
            epsilon_panel(axes[row][col], runs, score, floor, title, ylabel)
            axes[row][col].set_ylim(bottom=0)
    save_figure(fig, axes, results / "fidelity_vs_epsilon.png", "upper right")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", default="results")
    args = parser.parse_args()
    results = Path(args.results)
    data = {}
    for dataset in DATASETS:
        runs_path, real_path = (
            results / f"bench_{dataset}.csv",
            results / f"bench_real_{dataset}.csv",
        )
        if runs_path.is_file() and real_path.is_file():
            # One reference per split (before the lock in benchmark.py's real_reference,
            # parallel jobs could each compute and append the same split's).
            real = pd.read_csv(real_path).drop_duplicates(["dataset", "repeat"])
            data[dataset] = (pd.read_csv(runs_path), real)
    sections = []
    for dataset, (runs, real) in data.items():
        repeats = runs.groupby(["method", "epsilon"], dropna=False).size()
        sections += [
            f"### {dataset}",
            "",
            share_line(runs, real, dataset),
            "",
            provenance_line(runs),
            "",
            f"Per classifier at ε=8 (mean ± std over repeats; runs per cell: "
            f"{repeats.min()}–{repeats.max()}):",
            "",
            classifier_table(runs, real, dataset, 8.0),
            "",
            "Mean AUROC by ε:",
            "",
            epsilon_table(runs, real),
            "",
            fidelity_caption(runs),
            "",
            fidelity_table(runs, real),
            "",
        ]
        if dataset == "adult":
            sections += [
                "Issue 11's bar (rdp_cgan, the settings of these runs):",
                "",
                bar_lines(runs),
                "",
            ]
    if data:
        figure(results, data)
        fidelity_figure(results, data)
    readme = results / "README.md"
    head = readme.read_text().split(MARKER)[0] if readme.is_file() else "# Results\n\n"
    sections += any_csv_section(results)
    tuning = tuning_table(results)
    if tuning:
        sections += [
            "### Tuning round 8 (Adult, validation split of the train split)",
            "",
            tuning,
            "",
        ]
    figures = (
        "\n![mean AUROC vs ε](auroc_vs_epsilon.png)\n\n![fidelity vs ε](fidelity_vs_epsilon.png)\n"
    )
    body = "\n".join(sections) + (figures if data else "")
    atomic_write(
        readme, lambda tmp: tmp.write_text(head.rstrip() + "\n\n" + MARKER + "\n\n" + body)
    )
    print(f"wrote {readme}" + (" and the figures" if data else ""))


if __name__ == "__main__":
    main()
