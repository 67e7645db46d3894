"""Laplace mechanism: b = Delta / epsilon, the e^epsilon density-ratio bound, sampling."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from rdpgan.privacy.mechanisms.laplace import (
    laplace_cdf,
    laplace_density,
    laplace_noise,
    laplace_scale,
)


@pytest.mark.parametrize(("sensitivity", "epsilon"), [(1.0, 0.1), (1.0, 1.0), (3.0, 2.5)])
def test_density_ratio_is_at_most_e_epsilon_and_tight(sensitivity, epsilon):
    scale = laplace_scale(sensitivity, epsilon)
    t = np.linspace(-5.0, 5.0, 41)
    x = np.linspace(-30.0, 30.0, 601)
    worst = -np.inf
    for t1 in t:
        neighbours = t[np.abs(t - t1) <= sensitivity + 1e-12]
        logp = np.log(laplace_density(x, t1, scale))
        for t2 in neighbours:
            worst = max(worst, np.max(logp - np.log(laplace_density(x, t2, scale))))
    assert worst <= epsilon + 1e-9
    assert worst >= epsilon - 1e-9  # attained (outputs beyond both inputs): no wasted noise


def test_noise_matches_laplace_distribution():
    rng = np.random.default_rng(0)
    scale = laplace_scale(2.0, 0.5)
    assert scale == pytest.approx(4.0)
    noisy = laplace_noise(np.full(20_000, 7.0), 2.0, 0.5, rng)
    assert stats.kstest(noisy, stats.laplace(loc=7.0, scale=4.0).cdf).pvalue > 1e-3
    assert np.var(noisy) == pytest.approx(2 * 4.0**2, rel=0.05)
    # the wrong scale is detected, so the check above has power
    assert stats.kstest(noisy, stats.laplace(loc=7.0, scale=4.4).cdf).pvalue < 1e-3


def test_cdf_matches_scipy():
    x = np.linspace(-10, 10, 101)
    np.testing.assert_allclose(laplace_cdf(x, 1.0, 2.0), stats.laplace(1.0, 2.0).cdf(x))


def test_scalar_in_scalar_out_and_shape_preserved():
    rng = np.random.default_rng(1)
    assert isinstance(laplace_noise(3, 1.0, 1.0, rng), float)
    assert laplace_noise(np.zeros((2, 3)), 1.0, 1.0, rng).shape == (2, 3)


@pytest.mark.parametrize(("sensitivity", "epsilon"), [(1, 0), (1, -1), (0, 1), (1, np.nan)])
def test_bad_parameters_raise(sensitivity, epsilon):
    with pytest.raises(ValueError, match="must be a finite number > 0"):
        laplace_noise(1.0, sensitivity, epsilon, np.random.default_rng(0))
