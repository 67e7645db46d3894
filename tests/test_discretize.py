"""The public discretisation: codes from the schema alone, and values back from codes."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from rdpgan.data.discretize import Bins, column_size, table_codes, table_sizes
from rdpgan.data.schema import Categorical, Continuous, Schema

AGE = Continuous("age", 17, 90, integer=True)
MONEY = Continuous("money", 0, 99999, integer=True, transform="log1p", point_masses=(0.0,))
SCORE = Continuous("score", 0.0, 10.0)


def test_an_integer_column_with_few_values_gets_one_exact_code_per_value():
    bins = Bins(AGE, 100)
    assert bins.on_grid and bins.size == 74
    ages = np.arange(17, 91)
    codes, offsets = bins.codes(ages)
    np.testing.assert_array_equal(codes, ages - 17)
    np.testing.assert_array_equal(offsets, 0.0)
    np.testing.assert_array_equal(bins.values(codes), ages)


def test_an_integer_column_with_more_values_than_bins_is_binned():
    bins = Bins(AGE, 20)
    assert not bins.on_grid and bins.size == 20
    assert set(bins.codes(np.arange(17, 91))[0]) == set(range(20))


def test_equal_width_bins_and_their_round_trip():
    bins = Bins(SCORE, 5)  # width 2: [0, 2), [2, 4), ..., [8, 10]
    values = np.array([0.0, 0.5, 1.999, 2.0, 5.5, 9.99, 10.0])
    codes, offsets = bins.codes(values)
    np.testing.assert_array_equal(codes, [0, 0, 0, 1, 2, 4, 4])
    np.testing.assert_allclose(bins.values(np.arange(5)), [1, 3, 5, 7, 9])  # centres
    # Exact up to the margin that keeps a decoded value off its bin's edges (1e-6 of a bin).
    np.testing.assert_allclose(bins.values(codes, offsets), values, atol=2.1e-6)
    np.testing.assert_array_equal(bins.codes(bins.values(np.arange(5)))[0], np.arange(5))


def test_out_of_bounds_values_are_clipped_into_the_end_codes():
    np.testing.assert_array_equal(Bins(SCORE, 5).codes(np.array([-3.0, 1e9]))[0], [0, 4])
    np.testing.assert_array_equal(
        Bins(AGE, 100).codes(np.array([0, 16, 91, 500]))[0], [0, 0, 73, 73]
    )
    # Clipped onto a point mass, a value is that point mass (as the generator would emit it).
    bins = Bins(MONEY, 20)
    np.testing.assert_array_equal(bins.codes(np.array([-5.0, 0.0]))[0], [20, 20])


def test_log1p_bins_have_equal_width_in_log_space():
    bins = Bins(Continuous("m", 0, 99999, transform="log1p"), 10)
    edges = np.expm1(np.linspace(0.0, np.log1p(99999), 11))
    inner = edges[1:-1]
    np.testing.assert_array_equal(bins.codes(inner * 1.0001)[0], np.arange(1, 10))
    np.testing.assert_array_equal(bins.codes(inner * 0.9999)[0], np.arange(0, 9))
    midpoints = np.expm1((np.log1p(edges[:-1]) + np.log1p(edges[1:])) / 2)
    np.testing.assert_allclose(bins.values(np.arange(10)), midpoints, rtol=1e-9)


def test_point_masses_and_missing_get_codes_of_their_own():
    column = Continuous(
        "x", 0, 99999, integer=True, transform="log1p", point_masses=(0.0, 1.0), missing=True
    )
    bins = Bins(column, 20)
    assert bins.size == 20 + 2 + 1
    values = np.array([0.0, 1.0, np.nan, 2.0, 50_000.0])
    codes, offsets = bins.codes(values)
    np.testing.assert_array_equal(codes[:3], [20, 21, 22])
    assert np.all(codes[3:] < 20)
    np.testing.assert_array_equal(offsets[:3], 0.0)
    decoded = bins.values(codes, offsets)
    np.testing.assert_array_equal(decoded[:2], [0.0, 1.0])
    assert np.isnan(decoded[2]) and not np.isnan(decoded[3:]).any()
    # No ordinary value ever lands on a special code.
    ordinary = bins.codes(np.linspace(2, 99999, 5000))[0]
    assert ordinary.max() < 20


def test_a_point_mass_on_an_integer_grid_takes_its_value_out_of_the_grid():
    bins = Bins(Continuous("h", 0, 10, integer=True, point_masses=(0.0,)), 20)
    assert bins.on_grid and bins.size == 12
    codes = bins.codes(np.array([0, 1, 10]))[0]
    np.testing.assert_array_equal(codes, [11, 1, 10])
    np.testing.assert_array_equal(bins.values(codes), [0, 1, 10])


def test_a_value_decodes_into_the_bin_it_came_from():
    rng = np.random.default_rng(0)
    for column in (SCORE, MONEY, Continuous("s", -1e4, 1e4, transform="slog1p"), AGE):
        for n_bins in (7, 20, 100):
            bins = Bins(column, n_bins)
            values = rng.uniform(column.lo, column.hi, 2000)
            if column.integer:
                values = np.round(values)
            codes, offsets = bins.codes(values)
            np.testing.assert_array_equal(bins.codes(bins.values(codes))[0], codes)
            np.testing.assert_array_equal(bins.codes(bins.values(codes, offsets))[0], codes)


def test_fine_bins_nest_inside_coarse_ones():
    values = np.random.default_rng(1).uniform(0, 99999, 5000)
    column = Continuous("m", 0, 99999, transform="log1p")
    fine, coarse = Bins(column, 100).codes(values)[0], Bins(column, 20).codes(values)[0]
    np.testing.assert_array_equal(fine // 5, coarse)


def test_codes_depend_on_the_schema_only_never_on_the_rest_of_the_table():
    schema = Schema([AGE, MONEY, SCORE, Categorical("c", ("a", "b"), missing=True)])
    frame = pd.DataFrame(
        {"age": [30, 45], "money": [0, 1200], "score": [2.5, 9.0], "c": ["a", None]}
    )
    rng = np.random.default_rng(2)
    others = pd.DataFrame(
        {
            "age": rng.integers(17, 91, 500),
            "money": rng.integers(0, 10**9, 500),  # far out of bounds
            "score": rng.normal(100, 50, 500),
            "c": rng.choice(["b"], 500),
        }
    )
    alone = table_codes(schema, schema.conform(frame), 20)
    together = table_codes(schema, schema.conform(pd.concat([frame, others])), 20)
    np.testing.assert_array_equal(together[:2], alone)
    np.testing.assert_array_equal(alone[:, 3], [0, 2])
    assert table_sizes(schema, 20) == [20, 21, 20, 3]
    assert np.all(together < np.array(table_sizes(schema, 20)))
    assert column_size(schema["c"], 20) == 3


@pytest.mark.parametrize(
    "column",
    [
        Continuous("money", 0, 99_999, integer=True, transform="log1p", point_masses=(0.0,)),
        Continuous("x", -5, 5),
        Continuous("count", 0, 500, integer=True),
        Continuous("hours", 0, 168, integer=True, point_masses=(41.0,)),  # a mass inside a bin
        Continuous("pair", 0, 1000, integer=True, point_masses=(500.0, 501.0)),
        Continuous("slog", -100, 100, transform="slog1p", point_masses=(0.0,)),
    ],
)
@pytest.mark.parametrize("n_bins", [7, 40])
def test_every_position_decodes_inside_its_own_bin(column, n_bins):
    """A position reaches exactly ±1, rounding can cross an edge and a point mass has a code of its
    own: whatever the offset, the value must encode back to the code raking matched (except
    in a bin that holds no integer but point masses)."""
    bins = Bins(column, n_bins)
    codes = np.repeat(np.arange(bins.n_values), 101)
    offsets = np.tile(np.linspace(-1.0, 1.0, 101), bins.n_values)
    moved = bins.codes(bins.values(codes, offsets))[0] != codes
    possible = np.ones(bins.n_values, bool)
    if column.integer:
        integers = np.arange(column.lo, column.hi + 1)
        integers = integers[~np.isin(integers, column.point_masses)]
        possible = np.isin(np.arange(bins.n_values), bins.codes(integers)[0])
    assert not (moved & possible[codes]).any()


def test_a_released_density_cuts_bins_of_equal_mass_and_places_values_by_it():
    """Mass only in the top quarter of the range: every bin but the first lies there, and a
    value's position within its bin is its quantile of the density (the round trip holds)."""
    density = np.r_[np.zeros(48), np.ones(16)]
    bins = Bins(SCORE, 4, density=tuple(density))
    np.testing.assert_allclose(bins.edges, [-1.0, 0.625, 0.75, 0.875, 1.0])
    values = np.array([7.6, 8.2, 9.1, 9.9])
    codes, offsets = bins.codes(values)
    np.testing.assert_array_equal(codes, [0, 1, 2, 3])
    np.testing.assert_allclose(bins.values(codes, offsets), values, atol=1e-5)
    # Bin 0 spans [0, 8.125) but its mass is in [7.5, 8.125): so are its decoded values.
    decoded = bins.values(np.zeros(99, dtype=int), np.linspace(-0.98, 0.98, 99))
    assert decoded.min() >= 7.5 and decoded.max() < 8.125


def test_coarse_bins_of_a_density_nest_in_its_fine_bins():
    rng = np.random.default_rng(1)
    density = tuple(rng.exponential(size=256))
    fine, coarse = Bins(SCORE, 40, density=density), Bins(SCORE, 20, density=density)
    assert set(coarse.edges) <= set(fine.edges)
    values = rng.uniform(0, 10, 2000)
    pairs = set(zip(fine.codes(values)[0], coarse.codes(values)[0], strict=True))
    assert len({f for f, _ in pairs}) == len(pairs)  # each fine bin in one coarse bin
