"""TableTransformer: a reversible DataFrame ⇄ matrix map, built from the public schema alone.

Kept apart from the model (as CTGAN keeps its DataTransformer) so the networks only ever see
float matrices. Continuous columns become one value in [-1, 1] (public bounds, clipped), plus a
one-hot "mode" block when the schema declares point masses or missing values (is this row an
ordinary value, one of the point masses, or missing?); categorical columns become one-hot
blocks. The target column is not a feature: it is the condition ``y``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from rdpgan.data.schema import Categorical, Continuous, Schema


@dataclass(frozen=True)
class Span:
    """A slice of the feature matrix and the output head the generator uses for it."""

    start: int
    end: int
    activation: str  # "tanh" (a continuous value) or "softmax" (a one-hot block)
    # A tanh value that only counts when its column's mode block says "ordinary value": the
    # index of that mode entry (the value is encoded as 0 on point-mass and missing rows).
    gate: int | None = None


class TableTransformer:
    """Encode features and labels by the schema; decode back to the original table shape."""

    def __init__(self, schema: Schema, target: str):
        label_column = schema[target]
        if not isinstance(label_column, Categorical):
            raise TypeError("the target must be categorical")
        self.schema = schema
        self.target = target
        self.label_column: Categorical = label_column
        self.features = schema.without(target)
        spans: list[Span] = []
        width = 0
        for column in self.features.columns:
            blocks = self._blocks(column)
            gate = width + 1 if len(blocks) == 2 else None  # a value followed by its mode block
            for size, activation in blocks:
                spans.append(
                    Span(width, width + size, activation, gate if activation == "tanh" else None)
                )
                width += size
        self.spans: tuple[Span, ...] = tuple(spans)
        self.width = width

    @staticmethod
    def _blocks(column: Continuous | Categorical) -> list[tuple[int, str]]:
        if isinstance(column, Categorical):
            return [(column.n_codes, "softmax")]
        return [(1, "tanh"), (column.n_modes, "softmax")] if column.n_modes > 1 else [(1, "tanh")]

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
            values = series.to_numpy(dtype=float)
            modes = column.modes(values)
            # A special row (point mass, missing) sits at the centre; its mode carries the fact.
            unit = np.where(modes == 0, column.to_unit(np.nan_to_num(values, nan=column.lo)), 0.0)
            blocks.append(unit[:, None].astype(np.float32))
            if column.n_modes > 1:
                blocks.append(np.eye(column.n_modes, dtype=np.float32)[modes])
        matrix = np.concatenate(blocks, axis=1) if blocks else np.zeros((len(frame), 0), np.float32)
        # Finite by construction (bounded schema, clipped values): checked anyway, since every
        # sensitivity bound downstream assumes it and one NaN row would break them all.
        if not np.isfinite(matrix).all():
            raise ValueError("the encoded rows are not finite: the schema's bounds are unusable")
        return matrix

    def split(self, matrix: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(tanh values, block codes) of an encoded matrix: the argmax of every one-hot block."""
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
        """Decode tanh values (one column per continuous feature, in order) and block codes
        (one per one-hot block, in order): what the generator's sampling path emits directly.
        """
        out: dict[str, pd.Series] = {}
        next_value, next_code = iter(values.T), iter(codes.T)
        for column in self.features.columns:
            if isinstance(column, Categorical):
                out[column.name] = column.decode(next(next_code))
                continue
            decoded = column.from_unit(next(next_value).astype(float))
            if column.n_modes > 1:
                decoded = column.from_modes(next(next_code), decoded)
            out[column.name] = pd.Series(decoded, name=column.name).astype(column.dtype)
        out[self.target] = self.label_column.decode(np.asarray(labels))
        return pd.DataFrame({name: out[name] for name in self.schema.names})
