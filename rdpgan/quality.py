"""The quality report: does the synthetic table look like the real one, column by column?

Writes ``quality.md`` with two figures beside it: ``quality_columns.png`` (each column's real
and synthetic distribution at the data's resolution: a numeric column over 20 quantile cells of
its train rows, where the real bars are flat and a synthetic column that clumps inside the
public bins shows) and ``quality_associations.png`` (Cramér's V of every column pair over the
public cells, real, synthetic and their difference). Every number is a :mod:`rdpgan.fidelity`
score against the real train rows, at both of its resolutions; the held-out real rows scored
the same way give the floor, what fresh real data achieves.

Everything here describes private rows without DP: the files are for the data owner only.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.patches import Patch

from rdpgan.data.discretize import Bins
from rdpgan.data.schema import Categorical, Column, Continuous, Schema
from rdpgan.fidelity import FIDELITY_BINS, Cells, Resolution, fidelity_scores, per_column_tvd
from rdpgan.io import atomic_write

REPORT = "quality.md"
COLUMNS_FIGURE = "quality_columns.png"
ASSOCIATIONS_FIGURE = "quality_associations.png"
#: Levels of a categorical column drawn one by one; the rest share one "other" bar.
TOP_LEVELS = 10
#: Panels per row of the column figure.
PANELS_PER_ROW = 3
REAL_COLOUR, SYNTHETIC_COLOUR = "#4c72b0", "#dd8452"
HEADLINE = {
    "tvd_1way": ("1-way TVD", ".4f"),
    "tvd_2way": ("2-way TVD", ".4f"),
    "tvd_3way_target": ("3-way TVD (with target)", ".4f"),
    "k_marginal": ("k-marginal", ".1f"),
    "association_difference": ("association difference", ".4f"),
    "duplicate_rows": ("repeated rows", ".2%"),
}


@dataclass(frozen=True)
class Scores:
    """The scores of one resolution (each a :func:`~rdpgan.fidelity.fidelity_scores` dict)."""

    synthetic: dict[str, Any]
    floor: dict[str, Any]
    #: The synthetic table cut to as many rows as the held-out one (None when it has no more):
    #: TVD grows as a sample shrinks, so only this row compares like with like with the floor.
    synthetic_matched: dict[str, Any] | None
    columns_synthetic: dict[str, float]
    columns_floor: dict[str, float]


@dataclass(frozen=True)
class Quality:
    """The scores the report shows, at the data's resolution and at the public bins."""

    quantile: Scores
    public: Scores


def score_quality(
    train: pd.DataFrame,
    held_out: pd.DataFrame,
    synthetic: pd.DataFrame,
    schema: Schema,
    target: str,
    n_bins: int = FIDELITY_BINS,
) -> Quality:
    """Score the synthetic and the held-out rows against the train rows (all conformed)."""
    sample = None
    if len(synthetic) > len(held_out):
        sample = synthetic.sample(len(held_out), random_state=0)  # synthetic rows are public

    def scores(resolution: Resolution) -> Scores:
        def score(rows: pd.DataFrame) -> dict[str, Any]:
            return fidelity_scores(train, rows, schema, target, n_bins, resolution)

        return Scores(
            synthetic=score(synthetic),
            floor=score(held_out),
            synthetic_matched=None if sample is None else score(sample),
            columns_synthetic=per_column_tvd(train, synthetic, schema, n_bins, resolution),
            columns_floor=per_column_tvd(train, held_out, schema, n_bins, resolution),
        )

    return Quality(quantile=scores("quantile"), public=scores("public"))


def _special_labels(column: Column) -> list[str]:
    masses = [f"={m:g}" for m in column.point_masses] if isinstance(column, Continuous) else []
    return masses + ["missing"] * column.missing


def code_labels(column: Column, n_bins: int) -> list[str]:
    """A short label per public code: a level, a value, a bin's lower edge, "=mass", "missing"."""
    if isinstance(column, Categorical):
        return [str(level) for level in column.levels] + _special_labels(column)
    bins = Bins(column, n_bins)
    codes = np.arange(bins.n_values)
    if bins.on_grid:
        values = [f"{v:g}" for v in bins.values(codes)]
    else:
        edges = column.from_unit(2.0 * codes / n_bins - 1.0)  # each bin's lower edge
        values = [f"{v:.3g}" for v in edges]
    return values + _special_labels(column)


def cell_labels(cells: Cells, column: Column) -> list[str]:
    """A short label per code of ``column`` in ``cells``: at quantile cells, a numeric value
    cell's lower edge (the first: the train rows' smallest value)."""
    if column.name not in cells.quantiles:
        return code_labels(column, cells.n_bins)
    lower = cells.quantiles[column.name].lower
    return [f"{v:.3g}" for v in lower] + _special_labels(column)


def _shares(codes: np.ndarray, size: int) -> np.ndarray:
    return np.bincount(codes, minlength=size) / max(len(codes), 1)


def _draw_categorical(ax: Axes, labels: list[str], real: np.ndarray, synthetic: np.ndarray) -> None:
    """Horizontal bars (long level names stay readable), the most common levels on top."""
    order = np.argsort(-np.maximum(real, synthetic), kind="stable")
    shown = order[:TOP_LEVELS]
    names = [labels[i][:20] for i in shown]
    real_bars, synthetic_bars = list(real[shown]), list(synthetic[shown])
    if len(order) > TOP_LEVELS:
        rest = order[TOP_LEVELS:]
        names.append(f"other ({len(rest)} levels)")
        real_bars.append(real[rest].sum())
        synthetic_bars.append(synthetic[rest].sum())
    y = np.arange(len(names))
    ax.barh(y - 0.2, real_bars, 0.4, color=REAL_COLOUR)
    ax.barh(y + 0.2, synthetic_bars, 0.4, color=SYNTHETIC_COLOUR)
    ax.set_yticks(y, names, fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel("share of rows", fontsize=7)


def _draw_numeric(
    ax: Axes, column: Continuous, labels: list[str], real: np.ndarray, synthetic: np.ndarray
) -> None:
    """Bars over the value cells in order, the point masses and "missing" after a gap."""
    n_values = len(labels) - len(column.point_masses) - int(column.missing)
    x = np.arange(len(labels)) + (np.arange(len(labels)) >= n_values)  # the gap
    ax.bar(x - 0.2, real, 0.4, color=REAL_COLOUR)
    ax.bar(x + 0.2, synthetic, 0.4, color=SYNTHETIC_COLOUR)
    step = max(1, math.ceil(n_values / 6))
    ticks = [*range(0, n_values, step), *range(n_values, len(labels))]
    ax.set_xticks(x[ticks], [labels[i] for i in ticks], fontsize=7, rotation=45, ha="right")
    ax.set_ylabel("share of rows", fontsize=7)


def draw_columns(
    path: Path,
    train: pd.DataFrame,
    synthetic: pd.DataFrame,
    schema: Schema,
    quality: Quality,
    n_bins: int = FIDELITY_BINS,
) -> None:
    """One small panel per column at the data's resolution, worst 1-way TVD first."""
    cells = Cells.build("quantile", schema, train, n_bins)
    real_codes, synthetic_codes = cells.codes(train), cells.codes(synthetic)
    sizes = cells.sizes
    tvd, public = quality.quantile.columns_synthetic, quality.public.columns_synthetic
    order = sorted(range(len(sizes)), key=lambda i: -tvd[schema.columns[i].name])
    rows = math.ceil(len(order) / PANELS_PER_ROW)
    figure = Figure(figsize=(4.6 * PANELS_PER_ROW, 3.1 * rows + 0.6), layout="constrained")
    axes = figure.subplots(rows, PANELS_PER_ROW, squeeze=False).ravel()
    for ax, i in zip(axes, order, strict=False):
        column = schema.columns[i]
        labels = cell_labels(cells, column)
        real = _shares(real_codes[:, i], sizes[i])
        fake = _shares(synthetic_codes[:, i], sizes[i])
        if isinstance(column, Categorical):
            _draw_categorical(ax, labels, real, fake)
        else:
            _draw_numeric(ax, column, labels, real, fake)
        name = column.name
        ax.set_title(f"{name}: TVD {tvd[name]:.3f} (public bins {public[name]:.3f})", fontsize=9)
        ax.tick_params(labelsize=7)
    for ax in axes[len(order) :]:
        ax.set_axis_off()
    handles = [Patch(color=REAL_COLOUR), Patch(color=SYNTHETIC_COLOUR)]
    figure.legend(handles, ["real (train rows)", "synthetic"], loc="outside upper center", ncol=2)
    atomic_write(path, lambda tmp: figure.savefig(tmp, format="png", dpi=100))


def draw_associations(path: Path, scores: dict[str, Any]) -> None:
    """Cramér's V of the real and synthetic tables, and synthetic minus real (annotated when
    the cells are large enough to read)."""
    names = scores["columns"]
    real, synthetic = (np.array(scores[f"association_{t}"]) for t in ("real", "synthetic"))
    difference = synthetic - real
    n = len(names)
    side = max(4.0, 0.32 * n + 1.5)
    figure = Figure(figsize=(3 * side + 1.5, side), layout="constrained")
    axes = figure.subplots(1, 3)
    limit = max(float(np.abs(difference).max()), 0.05)
    panels = (
        ("real (train rows)", real, "viridis", 0.0, 1.0),
        ("synthetic", synthetic, "viridis", 0.0, 1.0),
        ("synthetic − real", difference, "RdBu_r", -limit, limit),
    )
    for ax, (title, matrix, cmap, lo, hi) in zip(axes, panels, strict=True):
        image = ax.imshow(matrix, cmap=cmap, vmin=lo, vmax=hi)
        ax.set_xticks(range(n), names, rotation=90, fontsize=7)
        ax.set_yticks(range(n), names, fontsize=7)
        ax.set_title(f"Cramér's V: {title}", fontsize=10)
        figure.colorbar(image, ax=ax, shrink=0.8)
    if n <= 16:
        for i, j in np.ndindex(n, n):
            if i != j:
                dark = abs(difference[i, j]) > 0.6 * limit
                text = f"{difference[i, j]:.2f}"
                axes[2].text(
                    j, i, text, ha="center", va="center", fontsize=5, color="w" if dark else "k"
                )
    atomic_write(path, lambda tmp: figure.savefig(tmp, format="png", dpi=100))


def _headline(scores: Scores, rows: dict[str, int]) -> list[str]:
    """The headline table of one resolution: synthetic, size-matched synthetic, floor."""
    header = " | ".join(name for name, _ in HEADLINE.values())
    lines = [f"| table | rows | {header} |", "| --- | ---: |" + " ---: |" * len(HEADLINE)]
    table = [("synthetic", rows["synthetic"], scores.synthetic)]
    if scores.synthetic_matched is not None:
        matched = "synthetic, random rows as many as held-out"
        table.append((matched, rows["held_out"], scores.synthetic_matched))
    table.append(("**held-out real rows (floor)**", rows["held_out"], scores.floor))
    for name, count, values in table:
        cells = " | ".join(f"{values[key]:{spec}}" for key, (_, spec) in HEADLINE.items())
        lines.append(f"| {name} | {count} | {cells} |")
    return lines


def markdown(
    quality: Quality, schema: Schema, rows: dict[str, int], n_bins: int = FIDELITY_BINS
) -> str:
    """``rows``: how many rows each table has (``train``, ``held_out``, ``synthetic``)."""
    quantile, public = quality.quantile, quality.public
    lines = [
        "# Quality report",
        "",
        f"Made by `python -m rdpgan.report` on {pd.Timestamp.now('UTC'):%Y-%m-%d %H:%M} UTC.",
        "",
        "**Not for publication.** This file, its figures and `evaluation.json` are statistics of "
        "the private training rows (and of the held-out real rows), computed without "
        "differential privacy. Unlike `synthetic.csv` and the model, they are not covered by "
        "the guarantee: treat them as being as sensitive as the input.",
        "",
        "## Headline",
        "",
        f"Every score compares a table with the **real training rows** ({rows['train']} rows, "
        "the rows the generator learnt from). The synthetic rows are scored against them; so "
        f"are the **held-out real rows** (`test.csv`, {rows['held_out']} rows the generator "
        "never saw), which give the floor: what a fresh sample of real data scores. TVD and "
        "association difference: 0 is identical; k-marginal: 1000 is identical.",
        "",
        "Numbers are cut into cells at two resolutions (categorical levels, point masses and "
        "missing are cells of their own at both). **At the data's resolution** each numeric "
        f"column is cut at {n_bins} quantiles of its training rows (about {100 / n_bins:g}% of "
        "its values each, point masses and missing aside; a value shared by many rows is one "
        "cell): do the synthetic numbers fall where the real ones do? **At the public "
        f"bins** ({n_bins} bins per wide numeric column, from the schema alone) the cells are "
        "nearly those the generator was trained to match: numbers that are right bin by bin but "
        "clump inside their bins score well there only.",
        "",
        "### At the data's resolution",
        "",
        *_headline(quantile, rows),
        "",
        "### At the public bins",
        "",
        *_headline(public, rows),
    ]
    if quantile.synthetic_matched is not None:
        lines += [
            "",
            "TVD grows as a sample shrinks, so the floor is measured at the held-out table's "
            "size: compare it with the second row, the synthetic table cut to that size.",
        ]
    lines += [
        "",
        "## Columns",
        "",
        "Each column's distribution in the real training rows and in the synthetic rows at the "
        f"data's resolution (a numeric column over its {n_bins} quantile cells, in order and "
        "labelled by their lower edges, so the real bars are flat and the axis is not to scale; "
        f"large categorical columns show their {TOP_LEVELS} most common levels), worst first. "
        "The table gives each column's 1-way TVD at both resolutions:",
        "",
        f"![columns]({COLUMNS_FIGURE})",
        "",
        "| column | kind | 1-way TVD synthetic | 1-way TVD held-out real (floor) "
        "| public bins: synthetic | public bins: floor |",
        "| --- | --- | ---: | ---: | ---: | ---: |",
    ]
    worst_first = sorted(schema.columns, key=lambda c: -quantile.columns_synthetic[c.name])
    for column in worst_first:
        kind = "categorical" if isinstance(column, Categorical) else "numeric"
        tvds = (
            f"{scores.columns_synthetic[column.name]:.4f} | {scores.columns_floor[column.name]:.4f}"
            for scores in (quantile, public)
        )
        lines.append(f"| {column.name} | {kind} | {' | '.join(tvds)} |")
    lines += [
        "",
        "## Associations",
        "",
        "Cramér's V of every pair of columns (0: independent, 1: one determines the other) in "
        "the real training rows and in the synthetic rows, over the public bins, and their "
        "difference (red: stronger in the synthetic table, blue: weaker). Mean |difference|: "
        f"{public.synthetic['association_difference']:.4f} (held-out real rows: "
        f"{public.floor['association_difference']:.4f}).",
        "",
        f"![associations]({ASSOCIATIONS_FIGURE})",
    ]
    return "\n".join(lines) + "\n"


def write_quality(
    out_dir: str | Path,
    train: pd.DataFrame,
    held_out: pd.DataFrame,
    synthetic: pd.DataFrame,
    schema: Schema,
    target: str,
    n_bins: int = FIDELITY_BINS,
) -> Quality:
    """Write ``quality.md`` and its figures into ``out_dir`` (tables conformed to ``schema``)."""
    out_dir = Path(out_dir)
    quality = score_quality(train, held_out, synthetic, schema, target, n_bins)
    draw_columns(out_dir / COLUMNS_FIGURE, train, synthetic, schema, quality, n_bins)
    draw_associations(out_dir / ASSOCIATIONS_FIGURE, quality.public.synthetic)
    rows = {"train": len(train), "held_out": len(held_out), "synthetic": len(synthetic)}
    text = markdown(quality, schema, rows, n_bins)
    atomic_write(out_dir / REPORT, lambda tmp: tmp.write_text(text))
    return quality
