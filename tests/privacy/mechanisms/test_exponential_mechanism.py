"""Exponential mechanism and the DP quantile: probability ratios over neighbouring datasets."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from rdpgan.privacy.mechanisms.exponential import (
    dp_quantile,
    exponential_mechanism,
    exponential_mechanism_probabilities,
    quantile_intervals,
)

# --- the exponential mechanism -------------------------------------------------------------


def test_probabilities_follow_exp_epsilon_u_over_2_delta():
    u = np.array([0.0, 1.0, 3.0, -2.0])
    probs = exponential_mechanism_probabilities(u, epsilon=0.8, sensitivity=2.0)
    expected = np.exp(0.8 * u / 4.0)
    np.testing.assert_allclose(probs, expected / expected.sum(), rtol=1e-12)


def test_probabilities_are_stable_for_huge_utilities():
    probs = exponential_mechanism_probabilities(np.array([1e6, 1e6 - 1.0, -1e6]), 1.0, 1.0)
    assert np.all(np.isfinite(probs))
    assert probs[0] / probs[1] == pytest.approx(np.exp(0.5))
    assert probs[2] == 0.0


def median_utilities(data: list[int], candidates: np.ndarray) -> np.ndarray:
    """-|#{x < r} - #{x > r}|: sensitivity 1 under adding or removing one value."""
    x = np.asarray(data)
    return -np.abs((x[:, None] < candidates).sum(0) - (x[:, None] > candidates).sum(0)).astype(
        float
    )


@pytest.mark.parametrize("epsilon", [0.3, 1.0, 4.0])
def test_ratio_over_neighbouring_datasets_for_every_candidate(epsilon):
    candidates = np.arange(6)
    worst = 0.0
    for data in ([0, 0, 1, 5], [2, 2, 2], [0, 1, 2, 3, 4, 5, 5], [4]):
        p = exponential_mechanism_probabilities(median_utilities(data, candidates), epsilon, 1.0)
        neighbours = [[*data, v] for v in candidates]
        neighbours += [data[:i] + data[i + 1 :] for i in range(len(data)) if len(data) > 1]
        for other in neighbours:
            q = exponential_mechanism_probabilities(
                median_utilities(other, candidates), epsilon, 1.0
            )
            worst = max(worst, np.max(np.abs(np.log(p) - np.log(q))))
    assert worst <= epsilon + 1e-12
    assert worst >= 0.5 * epsilon  # the test sees real privacy loss, not a constant output


def test_adversarial_shift_approaches_epsilon():
    # One candidate gains Delta while all others lose Delta: the ratio for that candidate tends
    # to e^eps (e^(eps/2) from its weight, e^(eps/2) from the normaliser) and never exceeds it.
    u = np.array([-50.0, 0.0, 0.0, 0.0])
    shift = np.array([1.0, -1.0, -1.0, -1.0])
    p = exponential_mechanism_probabilities(u, 2.0, 1.0)
    q = exponential_mechanism_probabilities(u + shift, 2.0, 1.0)
    ratio = np.log(q[0] / p[0])
    assert 2.0 - 1e-6 <= ratio <= 2.0 + 1e-12


def test_sampling_frequencies_match_probabilities():
    rng = np.random.default_rng(0)
    u = np.array([0.0, 1.0, 2.0, 0.5, 3.0])
    log_base = np.array([0.0, 0.0, -np.inf, 0.0, 0.0])
    probs = exponential_mechanism_probabilities(u, 1.0, 1.0, log_base)
    assert probs[2] == 0.0
    draws = np.array([exponential_mechanism(u, 1.0, 1.0, rng, log_base) for _ in range(5_000)])
    counts = np.bincount(draws, minlength=5)
    assert counts[2] == 0
    keep = probs > 0
    assert stats.chisquare(counts[keep], 5_000 * probs[keep]).pvalue > 1e-3


@pytest.mark.parametrize(
    ("utilities", "epsilon", "sensitivity"),
    [([1.0], 0.0, 1.0), ([1.0], 1.0, -1.0), ([], 1.0, 1.0), ([np.nan], 1.0, 1.0)],
)
def test_exponential_bad_parameters_raise(utilities, epsilon, sensitivity):
    with pytest.raises(ValueError):
        exponential_mechanism(np.array(utilities), epsilon, sensitivity, np.random.default_rng(0))


# --- DP quantile ---------------------------------------------------------------------------


def quantile_density(values, q, lo, hi, epsilon, y):
    """The output density at points y (not on an edge), from the mechanism's intervals."""
    edges, probs = quantile_intervals(values, q, lo, hi, epsilon)
    lengths = np.diff(edges)
    # y inside interval i <=> exactly i clipped values lie below y
    index = np.searchsorted(np.sort(np.clip(values, lo, hi)), y, side="left")
    assert np.all(lengths[index] > 0)
    return probs[index] / lengths[index]


def test_median_of_10000_normal_draws_is_accurate():
    data = np.random.default_rng(42).normal(3.0, 2.0, size=10_000)
    true_median = np.median(data)
    for seed in range(5):
        estimate = dp_quantile(data, 0.5, -20.0, 20.0, 1.0, np.random.default_rng(seed))
        assert abs(estimate - true_median) < 0.05  # sd 2: ~ 2.5% of a standard deviation


@pytest.mark.parametrize("q", [0.01, 0.3, 0.5, 0.99])
@pytest.mark.parametrize("epsilon", [0.5, 2.0])
def test_quantile_density_ratio_over_neighbouring_datasets(q, epsilon):
    lo, hi = 0.0, 10.0
    base = [1.0, 2.5, 2.5, 4.0, 7.25, 9.0, 12.0]  # a tie and a value clipped to hi
    additions = [lo, 1.0, 2.5, 3.0, 5.0, hi, -4.0]
    neighbours = [[*base, v] for v in additions]
    neighbours += [base[:i] + base[i + 1 :] for i in range(len(base))]
    edges = np.unique(np.clip(base + additions, lo, hi))
    y = (edges[:-1] + edges[1:]) / 2  # one point inside every piece of every density
    y = np.concatenate([y, np.linspace(lo + 0.01, hi - 0.01, 50)])
    y = y[~np.isin(y, edges)]
    p = quantile_density(np.array(base), q, lo, hi, epsilon, y)
    worst = 0.0
    for other in neighbours:
        r = quantile_density(np.array(other), q, lo, hi, epsilon, y)
        worst = max(worst, np.max(np.abs(np.log(p) - np.log(r))))
    assert worst <= epsilon + 1e-9
    assert worst >= 0.25 * epsilon


def test_interval_probabilities_follow_rank_utility():
    values = np.array([2.0, 2.0, 2.0, 2.0])
    edges, probs = quantile_intervals(values, 0.25, 0.0, 5.0, 1.0)
    np.testing.assert_array_equal(edges, [0, 2, 2, 2, 2, 5])
    # interval [0, 2] has rank 0 (u = -1), [2, 5] rank 4 (u = -3); the rest have length 0
    weights = np.array([2 * np.exp(-1 / 2), 0, 0, 0, 3 * np.exp(-3 / 2)])
    np.testing.assert_allclose(probs, weights / weights.sum(), rtol=1e-12)


def test_sampler_matches_the_interval_distribution():
    values = np.random.default_rng(3).uniform(0, 1, size=20)
    edges, probs = quantile_intervals(values, 0.5, -1.0, 2.0, 1.0)
    cdf_at_edges = np.concatenate([[0.0], np.cumsum(probs)])

    def cdf(x):
        return np.interp(x, edges, cdf_at_edges)

    rng = np.random.default_rng(11)
    draws = np.array([dp_quantile(values, 0.5, -1.0, 2.0, 1.0, rng) for _ in range(3_000)])
    assert stats.kstest(draws, cdf).pvalue > 1e-3


def test_ties_all_equal_tiny_n_and_clipping():
    rng = np.random.default_rng(0)
    for values in ([3.0] * 50 + [5.0] * 50, [4.0] * 30, [4.0], [], [0.0, 0.0], [10.0]):
        for q in (0.0, 0.5, 1.0):
            out = dp_quantile(np.array(values), q, 0.0, 10.0, 1.0, rng)
            assert 0.0 <= out <= 10.0
    # values outside the public bounds behave exactly like the bounds themselves
    wild = np.array([-100.0, 0.5, 100.0, np.inf])
    tame = np.array([0.0, 0.5, 1.0, 1.0])
    wild_edges, wild_probs = quantile_intervals(wild, 0.5, 0, 1, 1.0)
    tame_edges, tame_probs = quantile_intervals(tame, 0.5, 0, 1, 1.0)
    np.testing.assert_array_equal(wild_edges, tame_edges)
    np.testing.assert_array_equal(wild_probs, tame_probs)
    # n = 1 and n = 0 keep the output in range and put positive mass everywhere
    _, probs = quantile_intervals(np.array([0.3]), 0.5, 0.0, 1.0, 1.0)
    np.testing.assert_allclose(probs, [0.3, 0.7])  # equal utilities: proportional to length
    _, probs = quantile_intervals(np.array([]), 0.5, 0.0, 1.0, 1.0)
    np.testing.assert_allclose(probs, [1.0])


@pytest.mark.parametrize(
    ("q", "lo", "hi", "epsilon", "values", "match"),
    [
        (1.5, 0, 1, 1.0, [0.5], "q must be"),
        (0.5, 1, 1, 1.0, [0.5], "lo < hi"),
        (0.5, 2, 1, 1.0, [0.5], "lo < hi"),
        (0.5, 0, np.inf, 1.0, [0.5], "finite"),
        (0.5, 0, 1, 0.0, [0.5], "epsilon"),
        (0.5, 0, 1, 1.0, [np.nan], "NaN"),
    ],
)
def test_quantile_bad_parameters_raise(q, lo, hi, epsilon, values, match):
    with pytest.raises(ValueError, match=match):
        dp_quantile(np.array(values), q, lo, hi, epsilon, np.random.default_rng(0))
