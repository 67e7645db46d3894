"""TableTransformer: a reversible DataFrame ⇄ matrix map, built from the public schema alone.

Kept apart from the model (as CTGAN keeps its DataTransformer) so the networks only ever see
float matrices. Every column becomes one one-hot block of its public codes
(:mod:`rdpgan.data.discretize`): a categorical column's levels, a numeric column's fine bins
(one per integer value when there are few, so spikes and integer codes are exact), point
masses and "missing". A numeric column cut into bins also gets one value in [-1, 1], its
position within the bin, so a decoded number is not stuck at bin centres. A single scaled
scalar per column, as before, cannot carry spikes, integer codes and heavy tails. The target
column is not a feature: it is the condition ``y``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from rdpgan.data.discretize import Bins
from rdpgan.data.schema import Categorical, Continuous, Schema

#: Bins per wide numeric column; 40 nests the 20 bins of the fidelity metrics and the pair
#: marginals, and a position within the bin carries the rest.
DEFAULT_BINS = 40
#: Integer columns with at most this many values get one code per value (ages, hours a week,
#: small counts), so a spike on one value is exact.
GRID_LIMIT = 100


@dataclass(frozen=True)
class Span:
    """A slice of the feature matrix and the output head the generator uses for it."""

    start: int
    end: int
    activation: str  # "softmax" (a one-hot block of codes) or "tanh" (a position within a bin)


class TableTransformer:
    """Encode features and labels by the schema; decode back to the original table shape."""

    def __init__(self, schema: Schema, target: str, n_bins: int = DEFAULT_BINS):
        label_column = schema[target]
        if not isinstance(label_column, Categorical):
            raise TypeError("the target must be categorical")
        self.schema = schema
        self.target = target
        self.n_bins = n_bins
        self.label_column: Categorical = label_column
        self.features = schema.without(target)
        self.bins = {
            c.name: Bins(c, n_bins, max(n_bins, GRID_LIMIT))
            for c in self.features.columns
            if isinstance(c, Continuous)
        }
        spans: list[Span] = []
        width = 0
        for column in self.features.columns:
            for size, activation in self._blocks(column):
                spans.append(Span(width, width + size, activation))
                width += size
        self.spans: tuple[Span, ...] = tuple(spans)
        self.width = width

    def _blocks(self, column: Continuous | Categorical) -> list[tuple[int, str]]:
        if isinstance(column, Categorical):
            return [(column.n_codes, "softmax")]
        bins = self.bins[column.name]
        return [(bins.size, "softmax")] + ([] if bins.on_grid else [(1, "tanh")])

    @property
    def code_sizes(self) -> list[int]:
        """Codes per feature column, in order: each column is exactly one one-hot block."""
        return [s.end - s.start for s in self.spans if s.activation == "softmax"]

    def coarse_maps(self, n_bins: int) -> list[np.ndarray]:
        """Per feature column: each of its codes → its code at ``n_bins`` bins (coarser cells
        of the same public grid, for the pair marginals)."""
        maps = []
        for column in self.features.columns:
            if isinstance(column, Categorical):
                maps.append(np.arange(column.n_codes))
                continue
            fine = self.bins[column.name]
            centres = fine.values(np.arange(fine.size))  # bin centres, point masses, NaN
            maps.append(Bins(column, n_bins).codes(centres)[0])
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
            codes, offsets = bins.codes(series.to_numpy(dtype=float))
            blocks.append(np.eye(bins.size, dtype=np.float32)[codes])
            if not bins.on_grid:
                blocks.append(offsets[:, None].astype(np.float32))
        matrix = np.concatenate(blocks, axis=1) if blocks else np.zeros((len(frame), 0), np.float32)
        # Finite by construction (bounded schema, clipped values): checked anyway, since every
        # sensitivity bound downstream assumes it and one NaN row would break them all.
        if not np.isfinite(matrix).all():
            raise ValueError("the encoded rows are not finite: the schema's bounds are unusable")
        return matrix

    def split(self, matrix: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(within-bin positions, codes) of an encoded matrix: the argmax of every one-hot block
        is the code of its column."""
        values = matrix[:, [s.start for s in self.spans if s.activation == "tanh"]]
        codes = [
            matrix[:, s.start : s.end].argmax(axis=1)
            for s in self.spans
            if s.activation == "softmax"
        ]
        return values, np.stack(codes, axis=1) if codes else np.zeros((len(matrix), 0), int)

    def decode(self, matrix: np.ndarray, labels: np.ndarray) -> pd.DataFrame:
        """Back to a DataFrame with the schema's column names, order, dtypes and levels only."""
        return self.decode_parts(*self.split(matrix), labels)

    def decode_parts(
        self, values: np.ndarray, codes: np.ndarray, labels: np.ndarray
    ) -> pd.DataFrame:
        """Decode within-bin positions (one per binned numeric column, in order) and codes (one
        per feature column, in order): what the generator's sampling path emits directly.
        """
        return pd.DataFrame(self._decoded(values, codes, labels, Categorical.decode, _series))

    def decode_arrow(self, values: np.ndarray, codes: np.ndarray, labels: np.ndarray) -> pa.Table:
        """:meth:`decode_parts` as an Arrow table: the same values, missing as null, without a
        Python object per string (what writing millions of rows to a file needs)."""
        return pa.table(self._decoded(values, codes, labels, Categorical.decode_arrow, _arrow))

    def _decoded(
        self,
        values: np.ndarray,
        codes: np.ndarray,
        labels: np.ndarray,
        categorical: Callable[[Categorical, np.ndarray], Any],
        numeric: Callable[[np.ndarray, str], Any],
    ) -> dict[str, Any]:
        """Each column of the schema, in order: ``categorical(column, codes)``, or
        ``numeric(values, dtype)`` for a binned numeric column."""
        out: dict[str, Any] = {}
        next_value, next_code = iter(values.T), iter(codes.T)
        for column in self.features.columns:
            if isinstance(column, Categorical):
                out[column.name] = categorical(column, next(next_code))
                continue
            bins = self.bins[column.name]
            offsets = None if bins.on_grid else next(next_value).astype(float)
            out[column.name] = numeric(bins.values(next(next_code), offsets), column.dtype)
        out[self.target] = categorical(self.label_column, np.asarray(labels))
        return {name: out[name] for name in self.schema.names}


def _series(values: np.ndarray, dtype: str) -> pd.Series:
    return pd.Series(values).astype(dtype)


def _arrow(values: np.ndarray, dtype: str) -> pa.Array:
    return pa.array(values.astype(dtype), from_pandas=True)  # NaN: null, as pandas writes it
