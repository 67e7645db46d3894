"""TableTransformer: a reversible DataFrame ⇄ matrix map, built from the public schema alone.

Kept apart from the model (as CTGAN keeps its DataTransformer) so the networks only ever see
float matrices. Every column becomes one one-hot block of its codes
(:mod:`rdpgan.data.discretize`): a categorical column's levels, a numeric column's fine bins
(one per integer value when there are few, so spikes and integer codes are exact), point
masses and "missing". A single scaled scalar per column cannot carry spikes, integer codes and
heavy tails. The target column is not a feature: it is the condition ``y``.

A *wide* numeric column (cut into bins) is cut at equal mass of its released density
(:func:`rdpgan.measure.numeric_densities`; equal width without one), and a decoded number takes
a position within its bin drawn from that density: the generator picks the bin, the release
says where numbers lie inside it. A position learnt by the generator collapsed to a few points
per bin under DP-SGD (Adult's ``fnlwgt``: 1-way TVD 0.40 at quantile bins of the real column).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from itertools import pairwise
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from rdpgan import arrow
from rdpgan.data.discretize import Bins, configured_grid_limit
from rdpgan.data.schema import Categorical, Continuous, Schema
from rdpgan.deferred import DeferredModule

if TYPE_CHECKING:
    import pandas as pd
else:
    pd = DeferredModule("pandas")

#: Bins per wide numeric column; 40 nests the 20 bins of the fidelity metrics and the pair
#: marginals, and a position within the bin carries the rest.
DEFAULT_BINS = 40


@dataclass(frozen=True)
class Span:
    """A slice of the feature matrix: one column's one-hot block of codes."""

    start: int
    end: int


class TableTransformer:
    """Encode features and labels by the schema (and the released densities of its wide
    numeric columns); decode back to the original table shape."""

    def __init__(
        self,
        schema: Schema,
        target: str,
        n_bins: int = DEFAULT_BINS,
        densities: Mapping[str, Sequence[float]] | None = None,
        grid_limit: int | None = None,
    ):
        label_column = schema[target]
        if not isinstance(label_column, Categorical):
            raise TypeError("the target must be categorical")
        self.schema = schema
        self.target = target
        self.n_bins = n_bins
        #: Integer columns with at most this many values get a code per value (default:
        #: configured_grid_limit); the others are cut into n_bins bins.
        self.grid_limit = configured_grid_limit(n_bins) if grid_limit is None else grid_limit
        self.label_column: Categorical = label_column
        self.features = schema.without(target)
        densities = densities or {}
        self.bins = {
            c.name: Bins(c, n_bins, self.grid_limit, _density(densities.get(c.name)))
            for c in self.features.columns
            if isinstance(c, Continuous)
        }
        #: The binned numeric columns, in order: those a released density applies to.
        self.wide_columns = [name for name, bins in self.bins.items() if not bins.on_grid]
        unknown = set(densities) - set(self.wide_columns)
        if unknown:
            raise ValueError(f"densities given for columns that are not binned: {unknown}")
        self.code_sizes = [
            self.bins[c.name].size if isinstance(c, Continuous) else c.n_codes
            for c in self.features.columns
        ]
        starts = np.concatenate([[0], np.cumsum(self.code_sizes)]).astype(int)
        self.spans: tuple[Span, ...] = tuple(Span(int(a), int(b)) for a, b in pairwise(starts))
        self.width = int(starts[-1])

    def __setstate__(self, state: dict[str, Any]) -> None:
        state.setdefault("grid_limit", configured_grid_limit(state["n_bins"]))  # (pickled before)
        self.__dict__.update(state)

    @property
    def densities(self) -> dict[str, list[float]]:
        """The released densities the wide columns are cut by (as given)."""
        return {
            name: list(bins.density) for name, bins in self.bins.items() if bins.density is not None
        }

    def within_bins(self, frame: pd.DataFrame) -> np.ndarray:
        """[rows, wide columns]: each value's position within its bin, in [-1, 1] (0 at a
        point mass or missing), what :meth:`decode_parts` takes back to the exact value."""
        out = [
            self.bins[name].codes(frame[name].to_numpy(dtype=float))[1]
            for name in self.wide_columns
        ]
        return np.stack(out, axis=1) if out else np.zeros((len(frame), 0))

    def positions(self, frame: pd.DataFrame) -> list[np.ndarray]:
        """Per wide column, in order, the positions in the unit interval [-1, 1] of its values
        that fall in a value code (not missing, not a point mass): what a density measures."""
        out = []
        for name in self.wide_columns:
            bins = self.bins[name]
            values = frame[name].to_numpy(dtype=float)
            kept = values[bins.value_mask(values)]
            out.append(bins.column.to_unit(kept))
        return out

    def coarse_maps(self, n_bins: int) -> list[np.ndarray]:
        """Per feature column: each of its codes → its code at ``n_bins`` bins (coarser cells
        of the same public grid, for the pair marginals)."""
        maps = []
        for column in self.features.columns:
            if isinstance(column, Categorical):
                maps.append(np.arange(column.n_codes))
                continue
            fine = self.bins[column.name]
            middles = fine.values(np.arange(fine.size))  # bins' middles, point masses, NaN
            maps.append(Bins(column, n_bins, density=fine.density).codes(middles)[0])
        return maps

    @property
    def n_classes(self) -> int:
        return len(self.label_column.levels)

    def encode_labels(self, frame: pd.DataFrame) -> np.ndarray:
        return self.label_column.encode(frame[self.target])

    def encode(self, frame: pd.DataFrame) -> np.ndarray:
        """Feature matrix (rows × width, float32) of a frame conformed to the schema."""
        blocks: list[np.ndarray] = []
        for column in self.features.columns:
            series = frame[column.name]
            if isinstance(column, Categorical):
                blocks.append(np.eye(column.n_codes, dtype=np.float32)[column.encode(series)])
                continue
            bins = self.bins[column.name]
            codes = bins.codes(series.to_numpy(dtype=float))[0]
            blocks.append(np.eye(bins.size, dtype=np.float32)[codes])
        matrix = np.concatenate(blocks, axis=1) if blocks else np.zeros((len(frame), 0), np.float32)
        # Finite by construction (bounded schema, clipped values): checked anyway, since every
        # sensitivity bound downstream assumes it and one NaN row would break them all.
        if not np.isfinite(matrix).all():
            raise ValueError("the encoded rows are not finite: the schema's bounds are unusable")
        return matrix

    def codes(self, matrix: np.ndarray) -> np.ndarray:
        """[rows, feature columns] codes of an encoded matrix: the argmax of every one-hot
        block is the code of its column."""
        codes = [matrix[:, s.start : s.end].argmax(axis=1) for s in self.spans]
        return np.stack(codes, axis=1) if codes else np.zeros((len(matrix), 0), int)

    def decode(self, matrix: np.ndarray, labels: np.ndarray) -> pd.DataFrame:
        """Back to a DataFrame with the schema's column names, order, dtypes and levels only
        (each wide column's number at its bin's released median)."""
        return self.decode_parts(None, self.codes(matrix), labels)

    def decode_parts(
        self, values: np.ndarray | None, codes: np.ndarray, labels: np.ndarray
    ) -> pd.DataFrame:
        """Decode codes (one per feature column, in order) and within-bin positions (one per
        wide column, in order, in [-1, 1]: a quantile of the released density within the bin,
        drawn uniformly by the sampler; None: the median): what sampling produces."""
        return pd.DataFrame(self._decoded(values, codes, labels, Categorical.decode, _series))

    def decode_arrow(
        self, values: np.ndarray | None, codes: np.ndarray, labels: np.ndarray
    ) -> pa.Table:
        """:meth:`decode_parts` as an Arrow table: the same values, missing as null, without a
        Python object per string (what writing millions of rows to a file needs)."""
        return pa.table(self._decoded(values, codes, labels, Categorical.decode_arrow, _arrow))

    def _decoded(
        self,
        values: np.ndarray | None,
        codes: np.ndarray,
        labels: np.ndarray,
        categorical: Callable[[Categorical, np.ndarray], Any],
        numeric: Callable[[np.ndarray, str], Any],
    ) -> dict[str, Any]:
        """Each column of the schema, in order: ``categorical(column, codes)``, or
        ``numeric(values, dtype)`` for a binned numeric column."""
        out: dict[str, Any] = {}
        next_code = iter(codes.T)
        positions = {} if values is None else dict(zip(self.wide_columns, values.T, strict=True))
        for column in self.features.columns:
            if isinstance(column, Categorical):
                out[column.name] = categorical(column, next(next_code))
                continue
            bins = self.bins[column.name]
            offsets = positions.get(column.name)
            offsets = None if offsets is None else offsets.astype(float)
            out[column.name] = numeric(bins.values(next(next_code), offsets), column.dtype)
        out[self.target] = categorical(self.label_column, np.asarray(labels))
        return {name: out[name] for name in self.schema.names}


def _density(density: Sequence[float] | None) -> tuple[float, ...] | None:
    return None if density is None else tuple(float(p) for p in density)


def _series(values: np.ndarray, dtype: str) -> pd.Series:
    return pd.Series(values).astype(dtype)


def _arrow(values: np.ndarray, dtype: str) -> pa.Array:
    values = values.astype(dtype)
    return arrow.numbers(values, np.isnan(values))  # NaN: null, as pandas writes it
