"""Stability-based histogram: a key seen once is released with probability delta, and the
released sets of neighbouring count tables are (epsilon, delta)-indistinguishable (exactly)."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from rdpgan.privacy.mechanisms.laplace import laplace_cdf
from rdpgan.privacy.mechanisms.stability import stability_threshold, stable_keys


def release_probability(count: int, epsilon: float, delta: float) -> float:
    """P(count + Lap(1/epsilon) >= threshold): the chance a key with this count is released."""
    return float(1.0 - laplace_cdf(stability_threshold(epsilon, delta), count, 1.0 / epsilon))


def set_distribution(counts: dict[str, int], keys: list[str], epsilon, delta) -> np.ndarray:
    """The probability of every released subset of ``keys`` (keys are released independently)."""
    p = {k: release_probability(counts[k], epsilon, delta) if k in counts else 0.0 for k in keys}
    return np.array(
        [
            math.prod(p[k] if k in chosen else 1.0 - p[k] for k in keys)
            for r in range(len(keys) + 1)
            for chosen in itertools.combinations(keys, r)
        ]
    )


@pytest.mark.parametrize(("epsilon", "delta"), [(0.1, 1e-6), (1.0, 1e-3), (3.0, 0.05)])
def test_a_key_seen_once_is_released_with_probability_delta(epsilon, delta):
    assert release_probability(1, epsilon, delta) == pytest.approx(delta, rel=1e-9)


@pytest.mark.parametrize(("epsilon", "delta"), [(0.5, 1e-3), (1.0, 0.01), (3.0, 0.05)])
def test_neighbouring_count_tables_are_epsilon_delta_indistinguishable(epsilon, delta):
    """Hockey-stick divergence at e^epsilon, both ways, for one row added to an existing key
    or as a new key: at most delta, and reached for a new key (no slack to spend)."""
    base = {"a": 3, "b": 1, "c": 12}
    keys = ["a", "b", "c", "new"]
    worst = 0.0
    for added in keys:
        bigger = {**base, added: base.get(added, 0) + 1}
        p, q = (set_distribution(t, keys, epsilon, delta) for t in (base, bigger))
        for x, y in ((p, q), (q, p)):
            worst = max(worst, float(np.maximum(0.0, x - math.exp(epsilon) * y).sum()))
    assert worst <= delta * (1 + 1e-9)
    assert worst >= 0.9 * delta


def test_frequent_keys_are_kept_rare_ones_rarely_and_counts_carry_noise():
    rng = np.random.default_rng(0)
    epsilon, delta = 1.0, 0.05
    kept = [stable_keys({"often": 100, "once": 1}, epsilon, delta, rng) for _ in range(20000)]
    assert all("often" in k for k in kept)
    assert np.mean(["once" in k for k in kept]) == pytest.approx(delta, abs=0.006)
    assert np.std([k["often"] for k in kept]) == pytest.approx(math.sqrt(2) / epsilon, rel=0.05)


def test_only_keys_that_occur_may_be_counted():
    with pytest.raises(ValueError, match="occur"):
        stable_keys({"a": 0}, 1.0, 1e-5, np.random.default_rng(0))
    with pytest.raises(ValueError):
        stability_threshold(1.0, 0.0)
