"""Stability-based histogram: DP set union over keys no one listed in advance.

Korolova, Kenthapadi, Mishra & Ntoulas (2009); Bun, Nissim & Stemmer (2016). Each key that
occurs in the data gets Lap(1/epsilon) noise on its count and is released when the noisy count
clears ``tau = 1 + ln(1 / (2 delta)) / epsilon``. One row adds one to one key's count
(add/remove-one). For a key present in both neighbouring tables that is the Laplace mechanism
on one count (epsilon); a key present in one of them only has count 1 there, and is released
with probability P(1 + Lap(1/epsilon) >= tau) = exp(-epsilon (tau - 1)) / 2 = delta. So the
released set (and its noisy counts) is (epsilon, delta)-DP, with no public candidate list.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping

import numpy as np

from rdpgan.privacy.mechanisms import _checks


def stability_threshold(epsilon: float, delta: float) -> float:
    """The noisy count a key must reach: a key seen once then clears it with probability
    ``delta``."""
    epsilon = _checks.positive("epsilon", epsilon)
    delta = _checks.probability("delta", delta)
    return 1.0 + math.log(1.0 / (2.0 * delta)) / epsilon


def stable_keys(
    counts: Mapping[Hashable, int], epsilon: float, delta: float, rng: np.random.Generator
) -> dict[Hashable, float]:
    """The keys whose Laplace-noised count clears :func:`stability_threshold`, with those
    noisy counts. ``counts`` holds only keys that occur (count >= 1), each row counted once."""
    threshold = stability_threshold(epsilon, delta)
    keys = sorted(counts, key=str)  # a fixed order, so a seeded run is reproducible
    if any(counts[k] < 1 for k in keys):
        raise ValueError("counts must hold only keys that occur")
    noisy = np.array([counts[k] for k in keys], dtype=float) + rng.laplace(
        0.0, 1.0 / epsilon, size=len(keys)
    )
    return {k: float(c) for k, c in zip(keys, noisy, strict=True) if c >= threshold}
