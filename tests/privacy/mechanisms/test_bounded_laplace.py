"""Bounded Laplace (Holohan et al. 2018): calibration, exact e^epsilon ratio bound, sampling."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from rdpgan.privacy.mechanisms.bounded_laplace import (
    bounded_laplace,
    bounded_laplace_cdf,
    bounded_laplace_density,
    bounded_laplace_epsilon,
    bounded_laplace_mass,
    bounded_laplace_scale,
)

L, U = 10.0, 20.0


def worst_log_ratio(scale: float, sensitivity: float) -> float:
    """max over t, t' in [l, u] with |t - t'| <= Delta and outputs y of log p(y|t) / p(y|t')."""
    t = np.linspace(L, U, 41)  # step 0.25: contains l + Delta for the Deltas below
    y = np.linspace(L, U, 401)
    logp = np.log(np.array([bounded_laplace_density(y, ti, scale, L, U) for ti in t]))
    close = np.abs(t[:, None] - t[None, :]) <= sensitivity + 1e-12
    diff = logp[:, None, :] - logp[None, :, :]
    return float(np.max(diff[close]))


@pytest.mark.parametrize("sensitivity", [1.0, 4.0, 7.5, 10.0])
@pytest.mark.parametrize("epsilon", [0.5, 1.0, 3.0])
def test_density_ratio_bound_holds_and_is_tight(sensitivity, epsilon):
    scale = bounded_laplace_scale(sensitivity, epsilon, L, U)
    worst = worst_log_ratio(scale, sensitivity)
    assert worst <= epsilon + 1e-9
    assert worst >= epsilon - 1e-9  # attained at t = l, t' = l + Delta, y = l


@pytest.mark.parametrize("sensitivity", [1.0, 4.0, 7.5])
def test_plain_laplace_scale_is_not_enough_when_delta_below_range(sensitivity):
    # b = Delta / epsilon ignores the t-dependent normaliser and leaks more than epsilon
    epsilon = 1.0
    scale = bounded_laplace_scale(sensitivity, epsilon, L, U)
    assert scale > sensitivity / epsilon
    assert worst_log_ratio(sensitivity / epsilon, sensitivity) > epsilon + 1e-3


def test_local_dp_needs_no_extra_noise():
    # Delta = u - l: DeltaC = C_u / C_l = 1, so b = Delta / epsilon exactly (and it is tight)
    assert bounded_laplace_scale(U - L, 2.0, L, U) == pytest.approx(5.0, rel=1e-15)
    assert bounded_laplace_scale(100.0, 2.0, L, U) == pytest.approx(5.0, rel=1e-15)


@pytest.mark.parametrize("sensitivity", [0.5, 3.0, 9.0])
def test_calibration_is_the_smallest_scale(sensitivity):
    epsilon = 0.7
    scale = bounded_laplace_scale(sensitivity, epsilon, L, U)
    assert bounded_laplace_epsilon(scale, sensitivity, L, U) <= epsilon
    assert bounded_laplace_epsilon(scale * (1 - 1e-7), sensitivity, L, U) > epsilon
    # the privacy loss decreases in b, so every larger scale is private too
    losses = [bounded_laplace_epsilon(b, sensitivity, L, U) for b in np.geomspace(0.01, 1e4, 200)]
    assert np.all(np.diff(losses) < 0)


def test_mass_matches_scipy_and_paper_formula():
    t = np.linspace(L, U, 11)
    laplace = stats.laplace(loc=t, scale=3.0)
    np.testing.assert_allclose(
        bounded_laplace_mass(t, 3.0, L, U), laplace.cdf(U) - laplace.cdf(L), rtol=1e-12
    )
    b, delta = 3.0, 2.0
    paper = np.log(bounded_laplace_mass(L + delta, b, L, U) / bounded_laplace_mass(L, b, L, U))
    assert bounded_laplace_epsilon(b, delta, L, U) == pytest.approx(delta / b + paper, rel=1e-12)


@pytest.mark.parametrize("t", [L, 12.5, 15.0, U])
def test_samples_follow_the_truncated_laplace(t):
    rng = np.random.default_rng(int(t))
    epsilon, sensitivity = 1.0, 4.0
    scale = bounded_laplace_scale(sensitivity, epsilon, L, U)
    draws = bounded_laplace(np.full(20_000, t), sensitivity, epsilon, L, U, rng)
    assert draws.min() >= L and draws.max() <= U
    reference = stats.laplace(loc=t, scale=scale)

    def cdf(y):
        return (reference.cdf(y) - reference.cdf(L)) / (reference.cdf(U) - reference.cdf(L))

    assert stats.kstest(draws, cdf).pvalue > 1e-3
    np.testing.assert_allclose(bounded_laplace_cdf(draws[:100], t, scale, L, U), cdf(draws[:100]))
    # an untruncated (clamped) Laplace would not pass
    clamped = np.clip(t + rng.laplace(0, scale, 20_000), L, U)
    assert stats.kstest(clamped, cdf).pvalue < 1e-3


def test_large_epsilon_and_tiny_noise_stay_in_range():
    rng = np.random.default_rng(0)
    out = bounded_laplace(np.array([L, U, 15.0]), 10.0, 500.0, L, U, rng)
    assert np.all((out >= L) & (out <= U))
    np.testing.assert_allclose(out, [L, U, 15.0], atol=1.0)
    assert isinstance(bounded_laplace(15.0, 1.0, 1.0, L, U, rng), float)


@pytest.mark.parametrize(
    ("value", "sensitivity", "epsilon", "lower", "upper", "match"),
    [
        (15.0, 1.0, 0.0, L, U, "epsilon"),
        (15.0, 1.0, -1.0, L, U, "epsilon"),
        (15.0, 0.0, 1.0, L, U, "sensitivity"),
        (15.0, 1.0, 1.0, U, L, "lower < upper"),
        (15.0, 1.0, 1.0, L, L, "lower < upper"),
        (25.0, 1.0, 1.0, L, U, "lie in"),
        (np.nan, 1.0, 1.0, L, U, "lie in"),
    ],
)
def test_bad_parameters_raise(value, sensitivity, epsilon, lower, upper, match):
    with pytest.raises(ValueError, match=match):
        bounded_laplace(value, sensitivity, epsilon, lower, upper, np.random.default_rng(0))
