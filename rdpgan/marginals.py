"""The released marginals G matches and the sampler tilts and rakes toward, as a model keeps
them: plain arrays, with nothing of the ledger or the mechanisms that released them (a saved
model is loaded and sampled without those)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

# The ledger's names of the releases the marginals hold.
MARGINALS, PAIR_MARGINALS = "marginals", "pair_marginals"
ADAPTIVE_PAIRS = "adaptive_pair_marginals"


@dataclass
class Marginals:
    """Everything G and the sampler match: released statistics (as safe to keep as the model)
    and the public maps from each column's codes to its coarse codes."""

    by_class: list[np.ndarray]  # per feature column: [class, code] distributions
    pairs: list[tuple[int, int]]  # feature column pairs, chosen privately
    joint: list[np.ndarray]  # per pair: [coarse code, coarse code] distribution
    maps: list[np.ndarray]  # per feature column: code -> coarse code (public)

    def to_dict(self) -> dict[str, Any]:
        return {
            # Full precision (JSON floats round-trip): a loaded model samples the same rows.
            "by_class": [t.tolist() for t in self.by_class],
            "pairs": [list(p) for p in self.pairs],
            "joint": [t.tolist() for t in self.joint],
            "maps": [m.tolist() for m in self.maps],
        }

    @classmethod
    def from_dict(cls, record: dict[str, Any]) -> Marginals:
        return cls(
            [np.asarray(t, dtype=float) for t in record["by_class"]],
            [(int(i), int(j)) for i, j in record["pairs"]],
            [np.asarray(t, dtype=float) for t in record["joint"]],
            [np.asarray(m, dtype=np.int64) for m in record["maps"]],
        )


def coarsen(codes: np.ndarray, maps: Sequence[np.ndarray]) -> np.ndarray:
    """[rows, columns] codes mapped column by column to their coarse codes (public maps)."""
    return np.stack([m[codes[:, i]] for i, m in enumerate(maps)], axis=1)


def shrink_toward(anchor: np.ndarray, noisy: np.ndarray, variance: np.ndarray) -> np.ndarray:
    """``noisy`` distributions (last axis) moved toward ``anchor`` cell by cell, by max(0, 1 -
    variance / d^2) of their difference d: a difference well above the noise is kept, one
    within it dropped; renormalised."""
    deviation = noisy - anchor
    shrink = np.clip(1.0 - variance / np.maximum(deviation**2, 1e-12), 0.0, 1.0)
    shrunk = np.clip(anchor + shrink * deviation, 0.0, None)
    return shrunk / shrunk.sum(axis=-1, keepdims=True)
