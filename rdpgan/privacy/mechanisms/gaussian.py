"""The Gaussian mechanism on a histogram (used for the label counts the generator samples from).

Under add/remove-one-row neighbours a histogram changes in exactly one cell by one, so its L2
sensitivity is 1 and N(0, sigma^2) noise per cell is the Gaussian mechanism with noise
multiplier sigma. In RDP terms it is one step of the sampled Gaussian mechanism with sampling
rate 1, which is how the ledger composes it with DP-SGD.
"""

from __future__ import annotations

import numpy as np


def noisy_histogram(
    counts: np.ndarray, noise_multiplier: float, rng: np.random.Generator
) -> np.ndarray:
    """Counts plus N(0, sigma^2) per cell (sensitivity 1); may be negative or fractional."""
    if noise_multiplier <= 0:
        raise ValueError("noise_multiplier must be positive")
    counts = np.asarray(counts, dtype=float)
    return counts + rng.normal(0.0, noise_multiplier, size=counts.shape)
