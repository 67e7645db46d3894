"""Gaussian partition selection: the tail of a key one row alone holds, and its cost."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import norm

from rdpgan.privacy.mechanisms.partition import gaussian_partitions, gaussian_threshold, tail_cost


@pytest.mark.parametrize(("std", "delta", "keys"), [(1.0, 1e-6, 1), (40.0, 1e-6, 13), (5, 0.2, 4)])
@pytest.mark.parametrize("weight", [1.0, 3.0])
def test_a_key_only_one_row_holds_clears_the_threshold_with_its_share_of_delta(
    std, delta, keys, weight
):
    """A key the added row alone holds has count ``weight`` (the private schema weighs the
    target's by 3): it clears the threshold with probability delta / keys, no more."""
    threshold = gaussian_threshold(std, delta, keys, weight)
    assert norm.sf(threshold - weight, scale=std) == pytest.approx(delta / keys, rel=1e-6)


def test_the_added_rows_keys_are_released_no_more_often_than_the_tail_allows():
    """Neighbouring tables: ``with`` is ``without`` plus one row holding 4 keys no other row
    holds. Over 20,000 draws the new keys show up with frequency <= delta (both directions of
    tail_cost then hold: 1 <= e^eps (1 - p))."""
    std, delta, keys = 2.0, 0.2, 4
    without = {"a": 50, "b": 7}
    with_row = {**without, **{f"new{k}": 1 for k in range(keys)}}
    threshold = gaussian_threshold(std, delta, keys)
    rng = np.random.default_rng(0)
    draws = 20_000
    shown = sum(
        any(k.startswith("new") for k in gaussian_partitions(with_row, std, threshold, rng))
        for _ in range(draws)
    )
    p = shown / draws
    assert p <= delta and p > 0.5 * delta  # the union bound is close for rare events
    epsilon, tail_delta = tail_cost(delta)
    assert tail_delta == delta and math.exp(epsilon) * (1 - p) + 1e-12 >= 1.0
    assert not any(k.startswith("new") for k in gaussian_partitions(without, std, threshold, rng))
