"""Staircase (Geng & Viswanath 2016) and bounded staircase: ratio bounds, eps_hat, sampling."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy import integrate, optimize, stats

from rdpgan.privacy.mechanisms.staircase import (
    bounded_staircase,
    bounded_staircase_cdf,
    bounded_staircase_density,
    bounded_staircase_epsilon_hat,
    optimal_staircase_gamma,
    staircase_cdf,
    staircase_density,
    staircase_mechanism,
    staircase_noise,
    staircase_quantile,
)

L, U = 10.0, 20.0
CASES = [(1.0, None), (2.0, 0.3), (0.5, 0.9), (4.0, 0.0), (1.0, 1.0)]


def gamma_of(epsilon, gamma):
    return optimal_staircase_gamma(epsilon) if gamma is None else gamma


# --- staircase -----------------------------------------------------------------------------


@pytest.mark.parametrize(("epsilon", "gamma"), CASES)
def test_density_ratio_for_shifts_up_to_delta(epsilon, gamma):
    gamma, delta = gamma_of(epsilon, gamma), 2.0
    # step 0.025 comes within 1e-7 of every step edge; the offset keeps x off the edges, where
    # one ulp of rounding in floor() could put x and x + Delta two steps apart
    x = np.linspace(-12.0, 12.0, 961) + 1e-7 * math.pi
    shifts = np.linspace(-delta, delta, 81)
    log_f = np.log(staircase_density(x, epsilon, delta, gamma))
    worst = max(
        np.max(log_f - np.log(staircase_density(x + d, epsilon, delta, gamma))) for d in shifts
    )
    assert worst <= epsilon + 1e-12
    assert worst >= epsilon - 1e-12


@pytest.mark.parametrize(("epsilon", "gamma"), CASES)
def test_density_integrates_to_one_and_matches_cdf(epsilon, gamma):
    gamma, delta = gamma_of(epsilon, gamma), 1.5
    edges = np.sort(
        np.concatenate([np.arange(0, 60) * delta, np.arange(0, 60) * delta + gamma * delta])
    )
    pieces = [
        integrate.quad(lambda z: staircase_density(z, epsilon, delta, gamma), a, b)[0]
        for a, b in itertools.pairwise(edges)
        if b > a
    ]
    assert 2 * sum(pieces) == pytest.approx(1.0, abs=1e-9)
    x = np.array([-4.0, -1.0, 0.0, 0.3, 2.2, 7.0])
    numeric = [
        0.5
        + math.copysign(1, v)
        * integrate.quad(
            lambda z: staircase_density(z, epsilon, delta, gamma),
            0,
            abs(v),
            points=edges[edges < abs(v)],
        )[0]
        for v in x
    ]
    np.testing.assert_allclose(staircase_cdf(x, epsilon, delta, gamma), numeric, atol=1e-9)
    p = np.random.default_rng(0).random(200)
    np.testing.assert_allclose(
        staircase_cdf(staircase_quantile(p, epsilon, delta, gamma), epsilon, delta, gamma),
        p,
        atol=1e-12,
    )


@pytest.mark.parametrize(("epsilon", "gamma"), CASES)
def test_paper_sampler_follows_the_density(epsilon, gamma):
    gamma, delta = gamma_of(epsilon, gamma), 2.0
    noise = staircase_noise(20_000, epsilon, delta, gamma, np.random.default_rng(7))
    assert stats.kstest(noise, lambda z: staircase_cdf(z, epsilon, delta, gamma)).pvalue > 1e-3
    if 0 < gamma < 1:  # the test has power: a different gamma is rejected
        other = gamma + 0.3 if gamma < 0.5 else gamma - 0.3
        assert stats.kstest(noise, lambda z: staircase_cdf(z, epsilon, delta, other)).pvalue < 1e-3


def mean_abs_noise(epsilon: float, gamma: float) -> float:
    """E|X| for Delta = 1, summed step by step (geometric, so 400 steps is plenty)."""
    b = math.exp(-epsilon)
    a = (1 - b) / (2 * (gamma + (1 - gamma) * b))
    k = np.arange(400)
    inner = a * ((k + gamma) ** 2 - k**2) / 2
    outer = a * b * ((k + 1) ** 2 - (k + gamma) ** 2) / 2
    return float(2 * np.sum(b**k * (inner + outer)))


@pytest.mark.parametrize("epsilon", [0.5, 1.0, 3.0, 6.0])
def test_optimal_gamma_minimises_noise_amplitude(epsilon):
    gammas = np.linspace(0.001, 0.999, 999)
    best = gammas[np.argmin([mean_abs_noise(epsilon, g) for g in gammas])]
    assert optimal_staircase_gamma(epsilon) == pytest.approx(best, abs=2e-3)
    # and the staircase beats Laplace (E|X| = Delta / eps), by a lot for large epsilon
    assert mean_abs_noise(epsilon, optimal_staircase_gamma(epsilon)) < 1 / epsilon


def test_mechanism_adds_noise_to_value():
    rng = np.random.default_rng(3)
    out = staircase_mechanism(np.full(20_000, 5.0), 1.0, 2.0, rng)
    gamma = optimal_staircase_gamma(2.0)
    assert stats.kstest(out - 5.0, lambda z: staircase_cdf(z, 2.0, 1.0, gamma)).pvalue > 1e-3
    assert isinstance(staircase_mechanism(1.0, 1.0, 1.0, rng), float)


# --- bounded staircase ---------------------------------------------------------------------


def test_epsilon_hat_test_vector():
    assert bounded_staircase_epsilon_hat(1.0, 0.3) == pytest.approx(0.7703, abs=1e-4)


def normaliser_ratio(eps_hat: float, gamma: float) -> float:
    """max_t C(t) / min_t C(t) for the truncation to [l - t, u - t], on a fine grid of t."""
    t = np.linspace(L, U, 2001)
    mass = staircase_cdf(U - t, eps_hat, U - L, gamma) - staircase_cdf(L - t, eps_hat, U - L, gamma)
    return float(mass.max() / mass.min())


@pytest.mark.parametrize("gamma", [0.05, 0.16, 0.3, 0.49, 0.5, 0.7, 0.95, 1.0])
@pytest.mark.parametrize("epsilon", [0.2, 1.0, 5.0])
def test_epsilon_hat_matches_a_numerical_root(epsilon, gamma):
    def total_loss(eps_hat):
        return eps_hat + math.log(normaliser_ratio(eps_hat, gamma)) - epsilon

    numeric = optimize.brentq(total_loss, 1e-6, epsilon, xtol=1e-13)
    assert bounded_staircase_epsilon_hat(epsilon, gamma) == pytest.approx(numeric, abs=1e-9)


def worst_bounded_log_ratio(epsilon: float, gamma: float) -> float:
    """max over t, t' in [l, u] and outputs y of log p(y|t) / p(y|t') on a grid.

    t is kept 1e-7 off the grid of y, so y - t never sits exactly on a step edge (where a
    one-ulp rounding decides which step it is on).
    """
    t = np.linspace(L + 1e-7, U - 1e-7, 41)
    y = np.linspace(L, U, 401)
    logp = np.log(np.array([bounded_staircase_density(y, ti, epsilon, gamma, L, U) for ti in t]))
    return float(np.max(logp[:, None, :] - logp[None, :, :]))


@pytest.mark.parametrize("gamma", [0.0, 0.16, 0.22, 0.3, 0.45, 0.5, 0.7, 0.95, 1.0])
@pytest.mark.parametrize("epsilon", [0.2, 1.0, 4.0, 10.0])
def test_bounded_density_ratio_is_at_most_epsilon(epsilon, gamma):
    worst = worst_bounded_log_ratio(epsilon, gamma)
    assert worst <= epsilon + 1e-9
    if 0 < gamma < 0.5:  # attained on a whole interval of outputs, so the grid finds it
        assert worst >= epsilon - 1e-3
    # (for gamma >= 1/2 the worst case is a limit; see test_bounded_privacy_loss_reaches_epsilon)


def log_ratio(y: float, t: float, t_other: float, epsilon: float, gamma: float) -> float:
    p = bounded_staircase_density(y, t, epsilon, gamma, L, U)
    q = bounded_staircase_density(y, t_other, epsilon, gamma, L, U)
    return float(np.log(p / q))


@pytest.mark.parametrize("gamma", [0.05, 0.16, 0.3, 0.49, 0.5, 0.7, 0.95])
@pytest.mark.parametrize("epsilon", [0.2, 1.0, 4.0, 10.0])
def test_bounded_privacy_loss_reaches_epsilon(epsilon, gamma):
    # eps_hat is the exact calibration, not just a sufficient one: the worst case is attained
    # (on a set of outputs of positive length) by an input at an end of [l, u], where the
    # truncation keeps the least mass, against an input where it keeps the most.
    width = U - L
    if gamma < 0.5:  # t = l vs the midpoint, outputs just above l
        loss = log_ratio(L + 1e-6, L, (L + U) / 2, epsilon, gamma)
        assert loss == pytest.approx(epsilon, abs=1e-9)
    else:  # t = u vs just below l + (1 - gamma) Delta (where C is maximal), outputs just below u
        loss = log_ratio(U - 1e-7, U, L + (1 - gamma) * width - 1e-6, epsilon, gamma)
        assert loss == pytest.approx(epsilon, abs=1e-6)
    assert loss <= epsilon + 1e-12


def test_unreduced_epsilon_would_leak():
    # running the truncated staircase at eps itself (no reduction) exceeds eps
    t = np.array([L, (L + U) / 2])
    mass = staircase_cdf(U - t, 1.0, U - L, 0.3) - staircase_cdf(L - t, 1.0, U - L, 0.3)
    assert 1.0 + math.log(mass[1] / mass[0]) > 1.2


@pytest.mark.parametrize("t", [L, 12.5, 15.0, 19.0, U])
@pytest.mark.parametrize(("epsilon", "gamma"), [(1.0, 0.3), (5.0, 0.18), (0.3, 0.8)])
def test_bounded_samples_follow_the_truncated_density(t, epsilon, gamma):
    rng = np.random.default_rng(int(10 * t))
    draws = bounded_staircase(np.full(10_000, t), epsilon, gamma, L, U, rng)
    assert draws.min() >= L and draws.max() <= U
    assert (
        stats.kstest(draws, lambda y: bounded_staircase_cdf(y, t, epsilon, gamma, L, U)).pvalue
        > 1e-3
    )


def test_bounded_cdf_integrates_the_density():
    t, epsilon, gamma = 12.0, 1.0, 0.3
    eps_hat = bounded_staircase_epsilon_hat(epsilon, gamma)
    edges = [t - 3.0, t + 3.0]  # step edges at t -/+ gamma (u - l)
    for y in (11.0, 13.5, 17.0, U):
        numeric = integrate.quad(
            lambda z: bounded_staircase_density(z, t, epsilon, gamma, L, U)[()],
            L,
            y,
            points=[e for e in edges if L < e < y],
        )[0]
        assert bounded_staircase_cdf(y, t, epsilon, gamma, L, U) == pytest.approx(numeric, abs=1e-9)
    # and the density is the eps_hat staircase, renormalised over [l - t, u - t]
    y = np.linspace(L, U, 7)
    ratio = bounded_staircase_density(y, t, epsilon, gamma, L, U) / staircase_density(
        y - t, eps_hat, U - L, gamma
    )
    np.testing.assert_allclose(ratio, ratio[0])


@pytest.mark.parametrize(
    ("value", "epsilon", "gamma", "lower", "upper", "match"),
    [
        (15.0, 0.0, 0.3, L, U, "epsilon"),
        (15.0, 1.0, -0.1, L, U, "gamma"),
        (15.0, 1.0, 1.5, L, U, "gamma"),
        (15.0, 1.0, 0.3, U, L, "lower < upper"),
        (9.0, 1.0, 0.3, L, U, "lie in"),
    ],
)
def test_bounded_bad_parameters_raise(value, epsilon, gamma, lower, upper, match):
    with pytest.raises(ValueError, match=match):
        bounded_staircase(value, epsilon, gamma, lower, upper, np.random.default_rng(0))


def test_staircase_bad_parameters_raise():
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError, match="epsilon"):
        staircase_mechanism(0.0, 1.0, -1.0, rng)
    with pytest.raises(ValueError, match="sensitivity"):
        staircase_noise(3, 1.0, 0.0, 0.5, rng)
    with pytest.raises(ValueError, match="gamma"):
        staircase_density(0.0, 1.0, 1.0, float("nan"))
