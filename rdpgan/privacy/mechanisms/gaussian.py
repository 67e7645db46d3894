"""The Gaussian mechanism: (epsilon, delta)-DP by adding N(0, sigma^2) noise.

Two calibrations of sigma for a query with L2 sensitivity Delta:

* the classic one of Dwork & Roth 2014 (Theorem A.1), sigma = Delta sqrt(2 ln(1.25/delta)) /
  epsilon, which is only proved for epsilon < 1 and is loose;
* the analytic one of Balle & Wang 2018 ("Improving the Gaussian Mechanism for Differential
  Privacy: Analytical Calibration and Optimal Denoising", Theorem 8): the mechanism is
  (epsilon, delta)-DP *if and only if*
  Phi(Delta/(2 sigma) - epsilon sigma/Delta) - e^epsilon Phi(-Delta/(2 sigma) - epsilon sigma/Delta)
  <= delta, so the smallest sigma satisfying it is the least noise that is private, for any
  epsilon > 0.

The histogram helper below is the product's use: under add/remove-one-row neighbours a histogram
changes in exactly one cell by one, so its L2 sensitivity is 1 and N(0, sigma^2) noise per cell is
the Gaussian mechanism with noise multiplier sigma. In RDP terms it is one step of the sampled
Gaussian mechanism with sampling rate 1, which is how the ledger composes it with DP-SGD.
"""

from __future__ import annotations

import math
from typing import Literal

import numpy as np
from scipy.optimize import brentq
from scipy.special import log_ndtr, ndtr

from rdpgan.privacy.mechanisms import _checks

# The released values are rounded to a grid this many times finer than the noise (at least).
SNAP_RESOLUTION = 1024


def snap_grid(sigma: float) -> float:
    """The public grid a release with noise std ``sigma`` is rounded to: the largest power of
    two at most ``sigma / SNAP_RESOLUTION`` (so 0.1% of the noise or less)."""
    return 2.0 ** math.floor(math.log2(sigma / SNAP_RESOLUTION))


def noisy_histogram(
    counts: np.ndarray, noise_multiplier: float, rng: np.random.Generator
) -> np.ndarray:
    """Counts plus N(0, sigma^2) per cell (sensitivity 1), rounded to :func:`snap_grid`; may be
    negative or fractional.

    The rounding is post-processing, and it keeps the low-order bits of floating-point noise
    out of what is published (Mironov 2012 recovers exact counts from them in Laplace
    samplers' output): every statistic the model keeps derives from these rounded values.
    """
    if noise_multiplier <= 0:
        raise ValueError("noise_multiplier must be positive")
    counts = np.asarray(counts, dtype=float)
    noisy = counts + rng.normal(0.0, noise_multiplier, size=counts.shape)
    grid = snap_grid(noise_multiplier)
    return np.round(noisy / grid) * grid


def noisy_tables(
    tables: list[np.ndarray], std: float, rng: np.random.Generator
) -> list[np.ndarray]:
    """Each table plus N(0, ``std``^2) per cell, in one :func:`noisy_histogram` draw over them
    all (stacked, as one release of several histograms is), split back into their shapes."""
    noisy = noisy_histogram(np.concatenate([t.ravel() for t in tables]), std, rng)
    splits = np.cumsum([t.size for t in tables])[:-1]
    return [part.reshape(t.shape) for part, t in zip(np.split(noisy, splits), tables, strict=True)]


def gaussian_delta(sigma: float, sensitivity: float, epsilon: float) -> float:
    """The exact delta at which N(0, sigma^2) noise is epsilon-DP (Balle & Wang 2018, Thm 8).

    delta(epsilon) = Phi(Delta/(2 sigma) - epsilon sigma/Delta)
                     - e^epsilon Phi(-Delta/(2 sigma) - epsilon sigma/Delta);
    the second term is computed as exp(epsilon + log Phi(.)) so a large epsilon cannot overflow.
    """
    sigma = _checks.positive("sigma", sigma)
    sensitivity = _checks.positive("sensitivity", sensitivity)
    epsilon = _checks.positive("epsilon", epsilon)
    half = sensitivity / (2.0 * sigma)
    shift = epsilon * sigma / sensitivity
    return float(ndtr(half - shift) - math.exp(epsilon + log_ndtr(-half - shift)))


def classic_gaussian_sigma(sensitivity: float, epsilon: float, delta: float) -> float:
    """sigma = Delta sqrt(2 ln(1.25/delta)) / epsilon (Dwork & Roth 2014, Theorem A.1).

    The proof only covers 0 < epsilon < 1, so larger epsilon is refused rather than silently
    returning a sigma that may not be private; use :func:`analytic_gaussian_sigma` there.
    """
    sensitivity = _checks.positive("sensitivity", sensitivity)
    epsilon = _checks.positive("epsilon", epsilon)
    delta = _checks.probability("delta", delta)
    if epsilon >= 1:
        raise ValueError(
            f"the classic Gaussian calibration is only valid for epsilon < 1, got {epsilon}; "
            "use analytic_gaussian_sigma"
        )
    return sensitivity * math.sqrt(2.0 * math.log(1.25 / delta)) / epsilon


def analytic_gaussian_sigma(sensitivity: float, epsilon: float, delta: float) -> float:
    """The smallest sigma with :func:`gaussian_delta` <= delta (Balle & Wang 2018).

    delta(sigma) falls strictly from 1 (sigma -> 0) to 0 (sigma -> inf), so the root is unique;
    it is bracketed by doubling and found by Brent's method on log sigma, then nudged up until
    the condition holds in floating point (the returned sigma is never on the wrong side).
    """
    sensitivity = _checks.positive("sensitivity", sensitivity)
    epsilon = _checks.positive("epsilon", epsilon)
    delta = _checks.probability("delta", delta)

    def excess(log_sigma: float) -> float:
        return gaussian_delta(math.exp(log_sigma), sensitivity, epsilon) - delta

    guess = math.log(sensitivity * math.sqrt(2.0 * math.log(1.25 / delta)) / epsilon)
    lo = hi = guess
    while excess(lo) <= 0:
        lo -= 1.0
    while excess(hi) > 0:
        hi += 1.0
    sigma = math.exp(brentq(excess, lo, hi, xtol=1e-14, rtol=1e-14))
    while gaussian_delta(sigma, sensitivity, epsilon) > delta:
        sigma *= 1.0 + 1e-12
    return sigma


def gaussian_noise(
    value: float | np.ndarray,
    sensitivity: float,
    epsilon: float,
    delta: float,
    rng: np.random.Generator,
    calibration: Literal["analytic", "classic"] = "analytic",
) -> float | np.ndarray:
    """``value`` plus N(0, sigma^2) per element, sigma calibrated to (epsilon, delta).

    ``sensitivity`` is the L2 sensitivity of the whole vector. The analytic calibration is the
    default: it is exact for every epsilon and never needs more noise than the classic one.
    """
    if calibration == "analytic":
        sigma = analytic_gaussian_sigma(sensitivity, epsilon, delta)
    elif calibration == "classic":
        sigma = classic_gaussian_sigma(sensitivity, epsilon, delta)
    else:
        raise ValueError(f"calibration must be 'analytic' or 'classic', got {calibration!r}")
    arr = np.asarray(value, dtype=float)
    noisy = arr + rng.normal(0.0, sigma, size=arr.shape)
    return float(noisy) if noisy.ndim == 0 else noisy
