"""Gaussian partition selection: a sparse histogram over keys no one listed in advance.

Desfontaines, Voss, Gipson & Mandayam, "Differentially private partition selection" (PoPETs
2022); Wilkins, Kifer, Zhang & Karrer (2024) for the exact analysis of the Gaussian sparse
histogram. Every key that occurs gets N(0, std^2) on its count and is released when the noisy
count clears a threshold. Keys held in both neighbouring tables are the Gaussian mechanism (the
caller declares the L2 sensitivity of the whole release and the ledger composes it). A key held
only by the added row has count 1 and would be released with probability
P(1 + N(0, std^2) >= threshold): those events are what the threshold bounds.

The new keys are a mechanism of their own, on draws of their own: on the table without the
row it releases nothing, on the table with it something with probability at most p (the
threshold's tail, summed over the keys the row alone may hold). So
P[with in S] <= P[without in S] + p, and P[without in S] = 1{nothing in S} <= P[with in S] /
(1 - p): it is (ln(1/(1 - p)), p)-DP in both directions, whatever the run's epsilon
(:func:`tail_cost`), composed with the rest by addition.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping

import numpy as np
from scipy.special import ndtri

from rdpgan.privacy.mechanisms import _checks
from rdpgan.privacy.mechanisms.gaussian import snap_grid


def gaussian_threshold(std: float, delta: float, keys_per_row: int, weight: float = 1.0) -> float:
    """The noisy count a key must reach so that the (at most ``keys_per_row``) keys one row
    alone holds clear it with probability at most ``delta`` in all (a union bound over them),
    when one row adds ``weight`` to a key's count."""
    std = _checks.positive("std", std)
    delta = _checks.probability("delta", delta)
    return weight + std * float(-ndtri(delta / max(keys_per_row, 1)))


def tail_cost(delta: float) -> tuple[float, float]:
    """(epsilon, delta) of the new keys' release when they clear the threshold with
    probability at most ``delta`` (see the module docstring)."""
    return -math.log1p(-delta), delta


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
