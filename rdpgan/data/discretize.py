"""Public discretisation: every column as integer codes, from its declared schema alone.

One rule, used wherever a table is cut into cells: the generator's encoding of numbers (fine
bins plus a within-bin offset), the marginals measured with DP, the fidelity metrics and the
marginal-based peers of the benchmark. The cells depend on the schema and a bin count only,
never on private rows, so cutting a table reveals nothing and two tables cut the same way can be
compared cell by cell.

A continuous column's codes are, in order:
- its *value codes*: one per integer in the bounds when the column is integer and has at most
  ``grid_limit`` of them (default ``n_bins``; an exact code per value: spikes such as
  "40 hours" stay representable), else ``n_bins`` equal-width bins over the bounds in the
  column's public transform (so log1p money gets bins of equal width in log space);
- one code per declared point mass (values equal to it never fall in a value code);
- one code for "missing" when the schema declares it.
A categorical column's codes are its levels (and "missing"), as
:meth:`~rdpgan.data.schema.Categorical.encode` gives them.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from functools import cached_property
from typing import TYPE_CHECKING

import numpy as np

from rdpgan.data.schema import Categorical, Column, Continuous, Schema

if TYPE_CHECKING:
    import pandas as pd

# How close to a bin's edge a decoded position may come, as a share of the bin's width.
EDGE_MARGIN = 1e-6
#: Integer columns with at most this many values get one code per value in the generator's
#: encoding (ages, hours a week, small counts), so a spike on one value is exact.
GRID_LIMIT = 100


def configured_grid_limit(n_bins: int) -> int:
    """The most integer values coded one each at ``n_bins`` bins, unless a plan says fewer
    (:mod:`rdpgan.resolution`): :data:`GRID_LIMIT`, or the bins if more."""
    return max(n_bins, GRID_LIMIT)


@dataclass(frozen=True)
class Bins:
    """The codes of one continuous column at a given resolution.

    With a ``density`` (a released distribution over ``len(density)`` equal cells of the
    column's unit interval, :func:`rdpgan.measure.numeric_densities`), the value codes are
    ``n_bins`` bins of equal released mass instead of equal width (cut at cell edges, merged
    where one cell holds more than a bin's share), and a position within a bin is a quantile
    of the released distribution there: numbers are then right inside their bins, at the
    resolution of the release, where a uniform position would spread a bin's values evenly.
    """

    column: Continuous
    n_bins: int
    grid_limit: int | None = None  # most integer values that get a code each (default n_bins)
    density: tuple[float, ...] | None = None

    @property
    def _grid(self) -> tuple[int, int]:
        return math.ceil(self.column.lo), math.floor(self.column.hi)

    @property
    def on_grid(self) -> bool:
        """One code per integer value (no within-bin offset is needed to decode)."""
        first, last = self._grid
        limit = self.n_bins if self.grid_limit is None else self.grid_limit
        return self.column.integer and 1 <= last - first + 1 <= limit

    @cached_property
    def _cumulative(self) -> np.ndarray:
        """The released distribution's CDF at the edges of its cells (uniform without one)."""
        cells = np.ones(1) if self.density is None else np.clip(self.density, 0.0, None)
        total = cells.sum()
        cells = cells / total if total > 0 else np.full(len(cells), 1.0 / len(cells))
        return np.concatenate([[0.0], np.minimum(np.cumsum(cells), 1.0)])

    @cached_property
    def edges(self) -> np.ndarray:
        """The value bins' edges in the unit interval [-1, 1] (n_values + 1 of them)."""
        if self.density is None:
            return np.linspace(-1.0, 1.0, self.n_bins + 1)
        cells = len(self.density)
        shares = np.arange(1, self.n_bins) / self.n_bins
        # The first cell edge where the released CDF reaches each share.
        cut = np.searchsorted(self._cumulative, shares - 1e-12, side="left")
        inner = np.unique(cut[(cut > 0) & (cut < cells)])
        return np.concatenate([[-1.0], 2.0 * inner / cells - 1.0, [1.0]])

    @property
    def n_values(self) -> int:
        first, last = self._grid
        return last - first + 1 if self.on_grid else len(self.edges) - 1

    @property
    def size(self) -> int:
        return self.n_values + len(self.column.point_masses) + int(self.column.missing)

    def value_mask(self, values: np.ndarray) -> np.ndarray:
        """Which values fall in a value code (not missing, not on a declared point mass)."""
        return self.code_of(values) < self.n_values

    def codes(self, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(code, offset in [-1, 1] within the bin) per value; offsets are 0 on a grid, at a
        point mass and when missing."""
        values = np.asarray(values, dtype=float)
        filled = self._filled(values)
        value_codes, unit = self._value_codes(filled)
        offsets = np.zeros(len(values))
        if unit is not None:
            low = self._mass(self.edges[value_codes])
            high = self._mass(self.edges[value_codes + 1])
            within = (self._mass(unit) - low) / np.where(high > low, high - low, 1.0)
            offsets = np.clip(2.0 * within - 1.0, -1.0, 1.0)
        codes = self._with_specials(values, filled, value_codes)
        offsets[codes >= self.n_values] = 0.0
        return codes, offsets

    def code_of(self, values: np.ndarray) -> np.ndarray:
        """:meth:`codes` without the offsets (what a decoded value is checked against)."""
        values = np.asarray(values, dtype=float)
        filled = self._filled(values)
        return self._with_specials(values, filled, self._value_codes(filled)[0])

    def _filled(self, values: np.ndarray) -> np.ndarray:
        """Clipped to the bounds first, as the schema promises: a value beyond a bound that is
        a point mass *is* that point mass (what the generator emits for it), not the edge
        bin's; missing values stand at the lower bound (their code is "missing")."""
        lo, hi = self.column.lo, self.column.hi
        return np.clip(np.where(np.isnan(values), lo, values), lo, hi)

    def _value_codes(self, filled: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
        """(each :meth:`_filled` value's value code, its position in the unit interval: None
        on a grid)."""
        if self.on_grid:
            first, last = self._grid
            return (np.clip(np.round(filled), first, last) - first).astype(np.int64), None
        unit = self.column.to_unit(filled)
        return np.searchsorted(self.edges[1:-1], unit, side="right").astype(np.int64), unit

    def _with_specials(
        self, values: np.ndarray, filled: np.ndarray, value_codes: np.ndarray
    ) -> np.ndarray:
        """``value_codes`` with the codes of point masses and "missing" where ``values`` (and
        their :meth:`_filled` form) are."""
        missing = np.isnan(values)
        codes = value_codes.copy()
        for i, mass in enumerate(self.column.point_masses):
            codes[~missing & (filled == mass)] = self.n_values + i
        if self.column.missing:
            codes[missing] = self.size - 1
        return codes

    def _mass(self, unit: np.ndarray) -> np.ndarray:
        """The released CDF at positions of the unit interval (linear within a cell)."""
        cdf = self._cumulative
        cells = len(cdf) - 1
        position = np.clip((np.asarray(unit, dtype=float) + 1.0) * (cells / 2.0), 0.0, cells)
        cell = np.minimum(position.astype(np.int64), cells - 1)
        return cdf[cell] + (position - cell) * (cdf[cell + 1] - cdf[cell])

    def _position(self, value_codes: np.ndarray, within: np.ndarray) -> np.ndarray:
        """The unit position at quantile ``within`` (in [0, 1]) of each code's bin under the
        released distribution (where a bin holds no released mass: linearly across it)."""
        left, right = self.edges[value_codes], self.edges[value_codes + 1]
        low, high = self._mass(left), self._mass(right)
        grid = np.linspace(-1.0, 1.0, len(self._cumulative))
        # The CDF is linear within a cell, so its inverse is too (np.interp with the CDF as the
        # abscissa; a flat stretch holds no mass and is never landed in from inside a bin).
        target = low + within * (high - low)
        inverse = np.interp(target, self._cumulative, grid)
        linear = left + within * (right - left)
        return np.clip(np.where(high > low, inverse, linear), left, right)

    def values(self, codes: np.ndarray, offsets: np.ndarray | None = None) -> np.ndarray:
        """Values from codes (and offsets; the bin's middle without them): the inverse of
        :meth:`codes` up to the position within a bin."""
        codes = np.asarray(codes, dtype=np.int64)
        value_codes = np.minimum(codes, self.n_values - 1)
        if self.on_grid:
            values = (self._grid[0] + value_codes).astype(float)
        else:
            values = self._within_bins(value_codes, offsets)
        specials = [*self.column.point_masses, *([np.nan] * int(self.column.missing))]
        for i, special in enumerate(specials):
            values = np.where(codes == self.n_values + i, special, values)
        return values

    def _within_bins(self, value_codes: np.ndarray, offsets: np.ndarray | None) -> np.ndarray:
        """A value inside each code's own bin, so that it encodes back to that code: what
        raking matched is then what the decoded table shows. An offset of exactly ±1 would
        sit on an edge, rounding an integer can cross one, and a declared point mass inside a
        bin has a code of its own."""
        within = np.zeros(len(value_codes)) if offsets is None else np.asarray(offsets, float)
        fraction = np.clip((within + 1.0) / 2.0, EDGE_MARGIN, 1.0 - EDGE_MARGIN)
        unit = self._position(value_codes, fraction)
        masses = self.column.point_masses
        if not self.column.integer:
            values = self.column.from_unit(unit)
            on_mass = np.isin(values, masses)
            return np.where(on_mass, np.nextafter(values, np.inf), values)
        exact_column = replace(self.column, integer=False)
        exact = exact_column.from_unit(unit)
        # The integers of each bin: from the ceiling of its left edge to below its right one.
        left = exact_column.from_unit(self.edges[value_codes])
        right = exact_column.from_unit(self.edges[value_codes + 1])
        first = np.ceil(left)
        last = np.where(value_codes == self.n_values - 1, np.floor(right), np.ceil(right) - 1)
        values = np.clip(np.round(exact), first, np.maximum(first, last))
        for _ in range(2):  # step off a point mass (two passes: adjacent masses)
            for mass in masses:
                at = values == mass
                values = np.where(at & (mass + 1 <= last), mass + 1, values)
                values = np.where(at & (mass + 1 > last) & (mass - 1 >= first), mass - 1, values)
        # An integer on an edge: float rounding decides its side; one step over may fit.
        outside = np.flatnonzero(self.code_of(values) != value_codes)
        for step in (1.0, -1.0):
            moved = values[outside] + step
            fits = self.code_of(moved) == value_codes[outside]
            values[outside[fits]] = moved[fits]
            outside = outside[~fits]
        # A bin that holds no integer (narrower than one unit): the nearest one it is.
        values[outside] = np.round(exact[outside])
        return values


def column_size(column: Column, n_bins: int) -> int:
    """How many codes ``column`` has at resolution ``n_bins``."""
    return column.n_codes if isinstance(column, Categorical) else Bins(column, n_bins).size


def column_codes(column: Column, series: pd.Series, n_bins: int) -> np.ndarray:
    """The codes of a conformed column (see :meth:`rdpgan.data.schema.Schema.conform`)."""
    if isinstance(column, Categorical):
        return column.encode(series)
    return Bins(column, n_bins).codes(series.to_numpy(dtype=float))[0]


def table_codes(schema: Schema, frame: pd.DataFrame, n_bins: int) -> np.ndarray:
    """[rows, columns] codes of a conformed frame, columns in schema order."""
    if not schema.columns:
        return np.zeros((len(frame), 0), dtype=np.int64)
    return np.stack([column_codes(c, frame[c.name], n_bins) for c in schema.columns], axis=1)


def table_sizes(schema: Schema, n_bins: int) -> list[int]:
    return [column_size(c, n_bins) for c in schema.columns]


def cell_index(
    columns: Sequence[np.ndarray], sizes: Sequence[int], out: np.ndarray | None = None
) -> np.ndarray:
    """Per row, the index of its cell in the joint table of ``columns`` (codes with ``sizes``
    codes each), row-major: the one place that turns several codes into one. Written into
    ``out`` (integers wide enough for the table's cells, one entry per row) if given: raking
    indexes every row of every pool in dozens of tables, and fresh arrays there cost their
    pages' first touch."""
    index = np.empty(len(columns[0]), dtype=np.int64) if out is None else out
    np.copyto(index, columns[0], casting="same_kind")  # (codes, never floats)
    for codes, size in zip(columns[1:], sizes[1:], strict=True):
        index *= size  # in place: this runs on every row of every raked pool
        index += codes
    return index


def joint_counts(columns: Sequence[np.ndarray], sizes: Sequence[int]) -> np.ndarray:
    """The contingency table of ``columns``: counts, shaped ``sizes``."""
    cells = int(np.prod(sizes))
    counts = np.bincount(cell_index(columns, sizes), minlength=cells).astype(float)
    return counts.reshape(tuple(sizes))
