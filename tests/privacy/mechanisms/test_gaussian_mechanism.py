"""Gaussian mechanism: Balle & Wang's exact (epsilon, delta) condition; classic vs analytic."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import integrate, stats

from rdpgan.privacy.mechanisms.gaussian import (
    analytic_gaussian_sigma,
    classic_gaussian_sigma,
    gaussian_delta,
    gaussian_noise,
    noisy_histogram,
    snap_grid,
)

GRID = [(0.1, 1e-5), (0.5, 1e-6), (0.9, 1e-3), (1.0, 1e-5), (4.0, 1e-8), (40.0, 1e-5)]


def balle_wang_delta(sigma: float, sensitivity: float, epsilon: float) -> float:
    """Theorem 8 of Balle & Wang 2018, written out independently of the module."""
    a = sensitivity / (2 * sigma)
    b = epsilon * sigma / sensitivity
    return stats.norm.cdf(a - b) - math.exp(epsilon) * stats.norm.cdf(-a - b)


def hockey_stick(sigma: float, sensitivity: float, epsilon: float) -> float:
    """sup_S P(M(D) in S) - e^eps P(M(D') in S) = int max(0, p - e^eps q), by quadrature."""

    def integrand(x: float) -> float:
        p = stats.norm.pdf(x, 0.0, sigma)
        q = stats.norm.pdf(x, sensitivity, sigma)
        return max(0.0, p - math.exp(epsilon) * q)

    # p > e^eps q exactly for x below this point
    cut = sensitivity / 2 - epsilon * sigma**2 / sensitivity
    value, _ = integrate.quad(integrand, -np.inf, cut, epsabs=1e-14, epsrel=1e-10)
    return value


@pytest.mark.parametrize(("epsilon", "delta"), GRID)
@pytest.mark.parametrize("sensitivity", [1.0, 3.0])
def test_analytic_sigma_is_the_smallest_meeting_the_exact_condition(epsilon, delta, sensitivity):
    sigma = analytic_gaussian_sigma(sensitivity, epsilon, delta)
    assert balle_wang_delta(sigma, sensitivity, epsilon) <= delta * (1 + 1e-9)
    assert balle_wang_delta(sigma * (1 - 1e-6), sensitivity, epsilon) > delta
    assert gaussian_delta(sigma, sensitivity, epsilon) <= delta


@pytest.mark.parametrize(("epsilon", "delta"), [(0.5, 1e-5), (1.0, 1e-5), (3.0, 1e-3)])
def test_exact_condition_is_the_privacy_profile(epsilon, delta):
    # delta(sigma) equals the hockey-stick divergence between N(0, s^2) and N(Delta, s^2),
    # i.e. the condition really is the (epsilon, delta)-DP condition, not just a formula.
    sigma = analytic_gaussian_sigma(1.0, epsilon, delta)
    for s in (sigma, 0.7 * sigma):
        assert hockey_stick(s, 1.0, epsilon) == pytest.approx(
            gaussian_delta(s, 1.0, epsilon), rel=1e-6, abs=1e-15
        )


def test_known_value():
    # epsilon = 1, delta = 1e-5, Delta = 1: the analytic Gaussian needs sigma ~ 3.73
    # (vs 4.84 from the classic bound at epsilon -> 1).
    assert analytic_gaussian_sigma(1.0, 1.0, 1e-5) == pytest.approx(3.7306, abs=1e-3)


@pytest.mark.parametrize("epsilon", [0.05, 0.3, 0.7, 0.99])
@pytest.mark.parametrize("delta", [1e-3, 1e-5, 1e-9])
def test_classic_sigma_is_private_and_at_least_the_analytic_one(epsilon, delta):
    classic = classic_gaussian_sigma(2.0, epsilon, delta)
    assert classic == pytest.approx(2.0 * math.sqrt(2 * math.log(1.25 / delta)) / epsilon)
    assert balle_wang_delta(classic, 2.0, epsilon) <= delta
    assert classic >= analytic_gaussian_sigma(2.0, epsilon, delta)


def test_classic_refuses_epsilon_at_least_one():
    with pytest.raises(ValueError, match="epsilon < 1"):
        classic_gaussian_sigma(1.0, 1.0, 1e-5)
    with pytest.raises(ValueError, match="epsilon < 1"):
        gaussian_noise(0.0, 1.0, 2.0, 1e-5, np.random.default_rng(0), calibration="classic")


@pytest.mark.parametrize(
    ("sensitivity", "epsilon", "delta"),
    [(1, 0, 1e-5), (1, -1, 1e-5), (0, 1, 1e-5), (1, 1, 0), (1, 1, 1), (1, 1, np.nan)],
)
def test_bad_parameters_raise(sensitivity, epsilon, delta):
    with pytest.raises(ValueError):
        analytic_gaussian_sigma(sensitivity, epsilon, delta)
    with pytest.raises(ValueError):
        gaussian_noise(0.0, sensitivity, epsilon, delta, np.random.default_rng(0))


def test_noise_has_the_calibrated_sigma():
    rng = np.random.default_rng(0)
    sigma = analytic_gaussian_sigma(1.5, 2.0, 1e-6)
    noisy = gaussian_noise(np.full(20_000, -3.0), 1.5, 2.0, 1e-6, rng)
    assert stats.kstest(noisy, stats.norm(-3.0, sigma).cdf).pvalue > 1e-3
    assert stats.kstest(noisy, stats.norm(-3.0, 1.1 * sigma).cdf).pvalue < 1e-3
    assert isinstance(gaussian_noise(1.0, 1.0, 1.0, 1e-5, rng), float)
    with pytest.raises(ValueError, match="calibration"):
        gaussian_noise(1.0, 1.0, 1.0, 1e-5, rng, calibration="optimal")  # type: ignore[arg-type]


def test_noisy_histogram_is_rounded_to_a_grid_far_below_its_noise():
    counts = np.array([3, 0, 10])
    expected = counts + np.random.default_rng(5).normal(0.0, 2.0, size=3)
    released = noisy_histogram(counts, 2.0, np.random.default_rng(5))
    grid = snap_grid(2.0)
    assert grid == 2.0**-9 and snap_grid(1024.0) == 1.0 and snap_grid(1023.0) == 0.5
    np.testing.assert_allclose(released, expected, atol=grid / 2)
    np.testing.assert_array_equal(released / grid, np.round(released / grid))
    assert not np.array_equal(released, expected)  # the raw float bits are not published
    with pytest.raises(ValueError, match="noise_multiplier"):
        noisy_histogram(counts, 0.0, np.random.default_rng(0))
