"""Fidelity: how much a table *looks like* the real one, marginal by marginal.

Both tables are cut into the same cells (:class:`Cells`), at one of two resolutions, and every
score is reported at both:

- ``"public"``: the public discretisation (:mod:`rdpgan.data.discretize`, ``n_bins`` bins per
  wide numeric column). These cells never depend on private rows, and they are (nearly) the
  cells the generator was trained to match: this resolution asks whether it learnt what it
  was shown.
- ``"quantile"``, *at the data's resolution*: each numeric column is cut at the ``n_bins``-
  quantiles of the reference (real train) column instead, so each value cell holds about
  1/``n_bins`` of its real values (ties merge cells). A generator whose numbers clump inside
  the public bins (Adult's ``fnlwgt`` fills ~5 of its 20 log-scale public bins, and collapses
  to a few points inside them) looks perfect at the public bins and not here: this resolution
  asks whether the numbers are right inside their bins. Its edges are read off the private
  train rows, which is fine: evaluation reads them anyway, and its outputs are marked not for
  publication.

At both, categorical columns are their levels, and a numeric column's declared point masses and
"missing" are cells of their own (as in :class:`~rdpgan.data.discretize.Bins`). Scores, each a
mean over marginals:

- ``tvd_1way``, ``tvd_2way``: total-variation distance of every 1-way and 2-way marginal
  (every column, the target included);
- ``tvd_3way_target``: of every (feature, feature, target) marginal;
- ``k_marginal``: in the style of NIST SDNist, 1000 × (1 − TVD) averaged over *all* 3-way
  marginals (1000 = identical; SDNist samples marginals at random, we take them all);
- ``association_difference``: mean absolute difference of Cramér's V over column pairs, whose
  matrices (``association_real``, ``association_synthetic``) the quality report draws;
- ``duplicate_rows``: the share of the second table's rows that repeat one of its earlier rows
  exactly (every column, raw values; not binned). A resampler that matches marginals by
  repeating its best rows shows here, not in the TVDs (real Adult: 0.06% of its train split).

Why not SDMetrics (MIT-licensed, so usable): its column-shape and contingency metrics bin
numbers by ranges read off the data, so they could not give the public resolution; it would
also bring plotly and more for what is a few histograms here, and copulas (Business Source
License) with it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from itertools import combinations
from typing import Any, Literal

import numpy as np
import pandas as pd

from rdpgan.data.discretize import Bins, cell_index, column_codes, column_size, joint_counts
from rdpgan.data.schema import Continuous, Schema

#: Cells of one histogram of several marginals (:func:`_tvds`): 32 MB a float64 table.
HISTOGRAM_CELLS = 1 << 22
#: Bins per wide numeric column in every fidelity score, and quantile cells per numeric column.
FIDELITY_BINS = 20
Resolution = Literal["public", "quantile"]
RESOLUTIONS: tuple[Resolution, ...] = ("public", "quantile")


@dataclass(frozen=True, eq=False)
class QuantileBins:
    """One continuous column cut at quantiles of a reference column: its value cells, then its
    point masses and "missing", which keep the codes :class:`Bins` gives them."""

    bins: Bins  # the column's public codes: which values are a point mass or missing
    #: Each value cell's lower edge, strictly increasing: the reference's smallest value, then
    #: the distinct quantiles. A value goes to the last cell whose edge it reaches (a value on
    #: an edge goes up), so one beyond the reference's range lands in the first or last cell.
    lower: np.ndarray

    @classmethod
    def fit(cls, column: Continuous, reference: np.ndarray, n_bins: int) -> QuantileBins:
        """About equal shares of ``reference``'s values that are neither a point mass nor
        missing, or one cell per value when it has at most ``n_bins`` distinct ones. Edges are
        observed values, and ties merge them, so every cell holds reference values (a value
        that is 90% of the rows is one cell of 90%)."""
        empty = cls(Bins(column, n_bins), np.array([column.lo]))
        reference = np.asarray(reference, dtype=float)
        values = empty._filled(reference)[~empty._special(reference)]
        if len(values) == 0:
            return empty
        distinct = np.unique(values)
        if len(distinct) <= n_bins:
            return replace(empty, lower=distinct)
        # "higher": the observed value at or above each quantile; with values on an edge
        # going up, n values without ties fall n / n_bins to a cell.
        inner = np.quantile(values, np.arange(1, n_bins) / n_bins, method="higher")
        return replace(empty, lower=np.unique(np.concatenate([distinct[:1], inner])))

    @property
    def n_values(self) -> int:
        return len(self.lower)

    @property
    def size(self) -> int:
        return self.n_values + self.bins.size - self.bins.n_values

    def _special(self, values: np.ndarray) -> np.ndarray:
        """Whether each value is a point mass or missing (a code of its own)."""
        return self.bins.codes(values)[0] >= self.bins.n_values

    def _filled(self, values: np.ndarray) -> np.ndarray:
        """As :meth:`Bins.codes` reads values: missing at the lower bound, clipped."""
        column = self.bins.column
        return np.clip(np.where(np.isnan(values), column.lo, values), column.lo, column.hi)

    def codes(self, values: np.ndarray) -> np.ndarray:
        values = np.asarray(values, dtype=float)
        public = self.bins.codes(values)[0]
        cells = np.searchsorted(self.lower[1:], self._filled(values), side="right")
        special = public >= self.bins.n_values
        return np.where(special, public - self.bins.n_values + self.n_values, cells)


@dataclass(frozen=True, eq=False)
class Cells:
    """How fidelity cuts tables into cells, at one resolution: built once (at ``"quantile"``,
    from the real rows) and applied alike to every table compared with them."""

    schema: Schema
    n_bins: int = FIDELITY_BINS
    resolution: Resolution = "public"
    #: The quantile cells of each continuous column, by name (none at ``"public"``).
    quantiles: dict[str, QuantileBins] = field(default_factory=dict)

    @classmethod
    def build(
        cls, resolution: Resolution, schema: Schema, real: pd.DataFrame, n_bins: int = FIDELITY_BINS
    ) -> Cells:
        """The cells at ``resolution``; ``real`` (conformed) is read only at ``"quantile"``."""
        if resolution not in RESOLUTIONS:
            raise ValueError(f"resolution must be one of {RESOLUTIONS}, not {resolution!r}")
        if resolution == "public":
            return cls(schema, n_bins)
        quantiles = {
            c.name: QuantileBins.fit(c, real[c.name].to_numpy(dtype=float), n_bins)
            for c in schema.columns
            if isinstance(c, Continuous)
        }
        return cls(schema, n_bins, resolution, quantiles)

    @property
    def sizes(self) -> list[int]:
        return [
            self.quantiles[c.name].size if c.name in self.quantiles else column_size(c, self.n_bins)
            for c in self.schema.columns
        ]

    def codes(self, frame: pd.DataFrame) -> np.ndarray:
        """[rows, columns] codes of a conformed frame, columns in schema order."""
        columns = [
            self.quantiles[c.name].codes(frame[c.name].to_numpy(dtype=float))
            if c.name in self.quantiles
            else column_codes(c, frame[c.name], self.n_bins)
            for c in self.schema.columns
        ]
        if not columns:
            return np.zeros((len(frame), 0), dtype=np.int64)
        return np.stack(columns, axis=1)


def _joint(codes: np.ndarray, sizes: list[int], columns: tuple[int, ...]) -> np.ndarray:
    """The normalised histogram of ``codes`` over the cells of ``columns``."""
    counts = joint_counts([codes[:, c] for c in columns], [sizes[c] for c in columns])
    return counts / max(len(codes), 1)


def _tvds(
    a: np.ndarray, b: np.ndarray, sizes: list[int], prefix: tuple[int, ...], lasts: Sequence[int]
) -> list[float]:
    """The TVD of every marginal ``prefix + (k,)``, k in ``lasts``: marginals side by side in
    one histogram a table, up to :data:`HISTOGRAM_CELLS` cells (a larger one alone), so a mean
    over all 3-way marginals costs a bincount or so a pair of columns instead of one a
    marginal (7,140 marginals on 36 columns)."""
    base = math.prod(sizes[c] for c in prefix)
    tvds: list[float] = []
    group: list[int] = []
    for k in lasts:
        if group and (sum(sizes[j] for j in group) + sizes[k]) * base > HISTOGRAM_CELLS:
            tvds += _side_by_side(a, b, sizes, prefix, group)
            group = []
        group.append(k)
    return tvds + (_side_by_side(a, b, sizes, prefix, group) if group else [])


def _side_by_side(
    a: np.ndarray, b: np.ndarray, sizes: list[int], prefix: tuple[int, ...], lasts: list[int]
) -> list[float]:
    """:func:`_tvds` of one histogram: the marginals of ``lasts`` in consecutive cells."""
    widths = [math.prod(sizes[c] for c in prefix) * sizes[k] for k in lasts]
    starts = np.concatenate([[0], np.cumsum(widths)])

    def histogram(codes: np.ndarray) -> np.ndarray:
        cell = (
            cell_index([codes[:, c] for c in prefix], [sizes[c] for c in prefix])
            if prefix
            else np.zeros(len(codes), np.int64)
        )
        index = [s + cell * sizes[k] + codes[:, k] for s, k in zip(starts[:-1], lasts, strict=True)]
        return np.bincount(np.concatenate(index), minlength=starts[-1]) / max(len(codes), 1)

    gaps = np.abs(histogram(a) - histogram(b))
    return (0.5 * np.add.reduceat(gaps, starts[:-1])).tolist()


def cramers_v(codes: np.ndarray, sizes: list[int], i: int, j: int) -> float:
    """Cramér's V of columns i and j (0: independent, 1: one determines the other)."""
    joint = _joint(codes, sizes, (i, j))
    rows, cols = joint.sum(1), joint.sum(0)
    rows, cols = rows[rows > 0], cols[cols > 0]
    k = min(len(rows), len(cols))
    if k < 2:
        return 0.0
    joint = joint[np.ix_(joint.sum(1) > 0, joint.sum(0) > 0)]
    expected = np.outer(rows, cols)
    chi2_over_n = float(((joint - expected) ** 2 / expected).sum())
    return float(np.sqrt(min(chi2_over_n / (k - 1), 1.0)))


def association_matrix(codes: np.ndarray, sizes: list[int]) -> np.ndarray:
    """Cramér's V for every pair of columns (1 on the diagonal)."""
    n = len(sizes)
    matrix = np.eye(n)
    for i, j in combinations(range(n), 2):
        matrix[i, j] = matrix[j, i] = cramers_v(codes, sizes, i, j)
    return matrix


def per_column_tvd(
    real: pd.DataFrame,
    synthetic: pd.DataFrame,
    schema: Schema,
    n_bins: int = FIDELITY_BINS,
    resolution: Resolution = "public",
) -> dict[str, float]:
    """1-way TVD of each column, by name (what the quality report lists)."""
    cells = Cells.build(resolution, schema, real, n_bins)
    a, b, sizes = cells.codes(real), cells.codes(synthetic), cells.sizes
    tvds = _tvds(a, b, sizes, (), range(len(sizes)))
    return {c.name: tvd for c, tvd in zip(schema.columns, tvds, strict=True)}


def fidelity_scores(
    real: pd.DataFrame,
    synthetic: pd.DataFrame,
    schema: Schema,
    target: str,
    n_bins: int = FIDELITY_BINS,
    resolution: Resolution = "public",
) -> dict[str, Any]:
    """The scores listed in the module docstring, of ``synthetic`` against ``real`` (both
    conformed to ``schema``), with the cells at ``resolution``."""
    cells = Cells.build(resolution, schema, real, n_bins)
    a, b, sizes = cells.codes(real), cells.codes(synthetic), cells.sizes
    n = len(sizes)
    label = schema.names.index(target)
    features = [i for i in range(n) if i != label]
    # (A marginal's TVD does not depend on its columns' order: (i, target, j) for (i, j, target).)
    one = _tvds(a, b, sizes, (), range(n))
    two = [tvd for i in range(n) for tvd in _tvds(a, b, sizes, (i,), range(i + 1, n))]
    with_target = [
        tvd
        for m, i in enumerate(features)
        for tvd in _tvds(a, b, sizes, (i, label), features[m + 1 :])
    ]
    three = [
        tvd
        for i, j in combinations(range(n), 2)
        for tvd in _tvds(a, b, sizes, (i, j), range(j + 1, n))
    ]
    real_v, synthetic_v = association_matrix(a, sizes), association_matrix(b, sizes)
    upper = np.triu_indices(n, k=1)
    return {
        "bins": n_bins,
        "resolution": resolution,
        "tvd_1way": float(np.mean(one)),
        "tvd_2way": float(np.mean(two)) if two else 0.0,
        "tvd_3way_target": float(np.mean(with_target)) if with_target else 0.0,
        "k_marginal": float(1000.0 * (1.0 - np.mean(three))) if three else 1000.0,
        "association_difference": float(np.abs(real_v - synthetic_v)[upper].mean())
        if n > 1
        else 0.0,
        "duplicate_rows": float(synthetic.duplicated().mean()) if len(synthetic) else 0.0,
        "columns": schema.names,
        "association_real": real_v.round(4).tolist(),
        "association_synthetic": synthetic_v.round(4).tolist(),
    }
