"""Gaussian partition selection: a sparse histogram over keys no one listed in advance.

Desfontaines, Voss, Gipson & Mandayam, "Differentially private partition selection" (PoPETs
2022); Wilkins, Kifer, Zhang & Karrer (2024) for the exact analysis of the Gaussian sparse
histogram. Every key that occurs gets N(0, std^2) on its count and is released when the noisy
count clears a threshold. Keys held in both neighbouring tables are the Gaussian mechanism (the
caller declares the L2 sensitivity of the whole release and the ledger composes it). A key held
only by the added row has count 1 and would be released with probability
P(1 + N(0, std^2) >= threshold): those events are what the threshold bounds.

Why the bound is taken e^epsilon times smaller: a run that never releases a new key is the
Gaussian mechanism on the shared keys (plus what follows, adaptively), so
P[A(D) in S] <= e^eps (P[A(D') in S] + P[a new key clears]) + delta_gaussian in the removal
direction, and the same without the factor in the other one. Recording
e^eps_target × P[a new key clears] as the release's delta covers both.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping

import numpy as np
from scipy.special import ndtri

from rdpgan.privacy.mechanisms import _checks
from rdpgan.privacy.mechanisms.gaussian import snap_grid


def gaussian_threshold(std: float, delta: float, keys_per_row: int, epsilon: float) -> float:
    """The noisy count a key must reach so that the (at most ``keys_per_row``) keys one row
    alone holds clear it with probability at most ``delta`` × e^-``epsilon`` in all (a union
    bound over them)."""
    std = _checks.positive("std", std)
    delta = _checks.probability("delta", delta)
    tail = delta * math.exp(-epsilon) / max(keys_per_row, 1)
    return 1.0 + std * float(-ndtri(tail))


def gaussian_partitions(
    counts: Mapping[Hashable, float], std: float, threshold: float, rng: np.random.Generator
) -> dict[Hashable, float]:
    """The keys whose count plus N(0, ``std``^2) clears ``threshold``, with those noisy counts
    (rounded like every Gaussian release, :func:`~rdpgan.privacy.mechanisms.gaussian.snap_grid`).
    ``counts`` holds only keys that occur (count >= 1)."""
    keys = sorted(counts, key=str)  # a fixed order, so a seeded run is reproducible
    if any(counts[k] < 1 for k in keys):
        raise ValueError("counts must hold only keys that occur")
    if not keys:
        return {}
    # The threshold is applied before the rounding every Gaussian release gets: rounded first,
    # a count just below it could round up across it, more often than the tail allows.
    noisy = np.array([counts[k] for k in keys], dtype=float) + rng.normal(0.0, std, len(keys))
    grid = snap_grid(std)
    return {
        k: float(np.round(c / grid) * grid)
        for k, c in zip(keys, noisy, strict=True)
        if c >= threshold
    }
