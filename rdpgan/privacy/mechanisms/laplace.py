"""The Laplace mechanism (Dwork, McSherry, Nissim, Smith 2006), pure epsilon-DP.

Adding Lap(0, b) noise with b = sensitivity / epsilon to a query whose value moves by at most
``sensitivity`` (L1) between neighbouring datasets changes the output density by at most a
factor e^epsilon anywhere: |x - f(D)| and |x - f(D')| differ by at most the sensitivity. Use it
for counts (sensitivity 1 under add/remove-one) and for sums of values clipped to [-C, C]
(sensitivity C).
"""

from __future__ import annotations

import numpy as np

from rdpgan.privacy.mechanisms import _checks


def laplace_scale(sensitivity: float, epsilon: float) -> float:
    """The scale b = sensitivity / epsilon that makes the Laplace mechanism epsilon-DP."""
    return _checks.positive("sensitivity", sensitivity) / _checks.positive("epsilon", epsilon)


def laplace_noise(
    value: float | np.ndarray, sensitivity: float, epsilon: float, rng: np.random.Generator
) -> float | np.ndarray:
    """``value`` plus Lap(0, sensitivity / epsilon) noise, independently per element.

    For an array the sensitivity is the L1 sensitivity of the whole vector (e.g. 1 for a
    histogram under add/remove-one, where a single cell changes by one).
    """
    scale = laplace_scale(sensitivity, epsilon)
    arr = np.asarray(value, dtype=float)
    noisy = arr + rng.laplace(0.0, scale, size=arr.shape)
    return float(noisy) if noisy.ndim == 0 else noisy


def laplace_density(x: np.ndarray, center: float, scale: float) -> np.ndarray:
    """Density of Lap(center, scale) at ``x`` (for tests and for plotting the mechanism)."""
    scale = _checks.positive("scale", scale)
    return np.exp(-np.abs(np.asarray(x, dtype=float) - center) / scale) / (2.0 * scale)


def laplace_cdf(x: np.ndarray, center: float, scale: float) -> np.ndarray:
    """CDF of Lap(center, scale) at ``x``."""
    scale = _checks.positive("scale", scale)
    z = (np.asarray(x, dtype=float) - center) / scale
    return np.where(z < 0, 0.5 * np.exp(np.minimum(z, 0.0)), 1.0 - 0.5 * np.exp(-np.maximum(z, 0)))
