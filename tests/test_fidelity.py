"""Fidelity scores: hand-computed marginals, Cramér's V, the quantile cells (the data's
resolution), and the floor in evaluation.json."""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pytest
from scipy.stats.contingency import association

from rdpgan import fidelity
from rdpgan.cli import read_run_config
from rdpgan.data.discretize import Bins, joint_counts, table_codes
from rdpgan.data.schema import Categorical, Continuous, Schema
from rdpgan.fidelity import (
    RESOLUTIONS,
    Cells,
    QuantileBins,
    association_matrix,
    cramers_v,
    fidelity_scores,
    per_column_tvd,
)
from rdpgan.io import read_json
from rdpgan.runs import load_run_tables

BITS = ("0", "1")


def binary_schema(*names: str) -> Schema:
    return Schema([Categorical(name, BITS) for name in names])


def frame(rows: list[tuple], names: str) -> pd.DataFrame:
    return pd.DataFrame([[str(v) for v in row] for row in rows], columns=list(names))


@pytest.mark.parametrize("resolution", RESOLUTIONS)
def test_a_table_against_itself_scores_perfectly(resolution):
    rng = np.random.default_rng(0)
    schema = Schema(
        [
            Continuous("x", 0, 1),
            Continuous("n", 0, 99999, integer=True, transform="log1p", point_masses=(0.0,)),
            Categorical("c", ("a", "b", "c"), missing=True),
            Categorical("y", ("no", "yes")),
        ]
    )
    table = schema.conform(
        pd.DataFrame(
            {
                "x": rng.uniform(0, 1, 300),
                "n": rng.integers(0, 100, 300) * (rng.uniform(size=300) < 0.5),
                "c": rng.choice(["a", "b", "c", None], 300),
                "y": rng.choice(["no", "yes"], 300),
            }
        )
    )
    shuffled = table.sample(frac=1.0, random_state=1)
    scores = fidelity_scores(table, shuffled, schema, "y", resolution=resolution)
    assert scores["resolution"] == resolution
    for key in ("tvd_1way", "tvd_2way", "tvd_3way_target", "association_difference"):
        assert scores[key] == pytest.approx(0.0, abs=1e-12), key
    assert scores["k_marginal"] == pytest.approx(1000.0)
    assert scores["columns"] == ["x", "n", "c", "y"]


def test_disjoint_supports_are_as_far_apart_as_can_be():
    schema = binary_schema("a", "b", "y")
    zeros, ones = frame([(0, 0, 0)] * 5, "aby"), frame([(1, 1, 1)] * 7, "aby")
    scores = fidelity_scores(zeros, ones, schema, "y")
    for key in ("tvd_1way", "tvd_2way", "tvd_3way_target"):
        assert scores[key] == pytest.approx(1.0), key
    assert scores["k_marginal"] == pytest.approx(0.0)


def test_repeated_rows_are_the_share_of_exact_repeats_of_an_earlier_row():
    """Duplicates count on raw values (0.10 and 0.11 share a bin but are different rows), in
    the synthetic table only: the real one may repeat rows as it likes."""
    schema = Schema([Continuous("x", 0.0, 1.0), Categorical("y", BITS)])
    real = pd.DataFrame({"x": [0.5, 0.5, 0.5], "y": ["0", "0", "0"]})
    synthetic = pd.DataFrame({"x": [0.10, 0.11, 0.10, 0.10, 0.10], "y": ["0", "0", "0", "1", "0"]})
    assert fidelity_scores(real, synthetic, schema, "y")["duplicate_rows"] == pytest.approx(0.4)
    assert fidelity_scores(synthetic, real, schema, "y")["duplicate_rows"] == pytest.approx(2 / 3)


def test_one_way_tvd_by_hand():
    schema = Schema([Categorical("c", ("a", "b", "c")), Categorical("y", BITS)])
    real = pd.DataFrame({"c": ["a", "a", "b", "c"], "y": ["0", "0", "1", "1"]})
    synthetic = pd.DataFrame({"c": ["a", "b", "b", "b"], "y": ["0", "0", "0", "1"]})
    # c: (1/2, 1/4, 1/4) vs (1/4, 3/4, 0) -> (1/4 + 1/2 + 1/4) / 2; y: (1/2, 1/2) vs (3/4, 1/4)
    tvd = per_column_tvd(real, synthetic, schema)
    assert tvd == pytest.approx({"c": 0.5, "y": 0.25})
    assert fidelity_scores(real, synthetic, schema, "y")["tvd_1way"] == pytest.approx(0.375)


def test_numbers_are_compared_by_public_bin_not_by_value():
    schema = Schema([Continuous("x", 0, 10), Categorical("y", BITS)])
    real = pd.DataFrame({"x": [0.1, 0.2, 5.1, 5.2], "y": ["0"] * 4})
    same_bins = pd.DataFrame({"x": [0.4, 0.3, 5.3, 5.4], "y": ["0"] * 4})
    other_bins = pd.DataFrame({"x": [1.1, 1.2, 6.1, 6.2], "y": ["0"] * 4})
    assert per_column_tvd(real, same_bins, schema, n_bins=10)["x"] == 0.0
    assert per_column_tvd(real, other_bins, schema, n_bins=10)["x"] == 1.0
    assert per_column_tvd(real, other_bins, schema, n_bins=2)["x"] == 0.0


def test_two_way_tvd_sees_a_joint_the_one_way_marginals_miss():
    schema = binary_schema("a", "y")
    together = frame([(0, 0), (1, 1)] * 3, "ay")  # a = y
    crossed = frame([(0, 1), (1, 0)] * 3, "ay")  # a = not y: the same marginals
    scores = fidelity_scores(together, crossed, schema, "y")
    assert scores["tvd_1way"] == 0.0
    assert scores["tvd_2way"] == pytest.approx(1.0)


def xor_rows(parity: int) -> list[tuple[int, int, int, int]]:
    """(a, y, b, w): y = a xor b xor parity, w constant; every pair is uniform."""
    return [(a, a ^ b ^ parity, b, 0) for a, b in itertools.product((0, 1), repeat=2)]


def test_three_way_tvd_with_the_target_and_k_marginal_by_hand():
    # The target sits second: the triples must be found by name, not by position.
    schema = binary_schema("a", "y", "b", "w")
    real, synthetic = frame(xor_rows(0), "aybw"), frame(xor_rows(1), "aybw")
    scores = fidelity_scores(real, synthetic, schema, "y")
    assert scores["tvd_1way"] == 0.0 and scores["tvd_2way"] == 0.0
    # (a, b, y) differs completely; (a, w, y) and (b, w, y) agree.
    assert scores["tvd_3way_target"] == pytest.approx(1 / 3)
    # All four triples: (a, y, b) = 1, (a, y, w) = (a, b, w) = (y, b, w) = 0.
    assert scores["k_marginal"] == pytest.approx(750.0)


@pytest.mark.parametrize("cells", [fidelity.HISTOGRAM_CELLS, 12])
def test_every_marginals_tvd_is_its_own_histograms_on_columns_of_unequal_sizes(cells, monkeypatch):
    """The scores take marginals side by side in one histogram (of at most ``cells`` cells,
    a larger marginal alone): each mean is still the mean of each marginal's own TVD (a
    segment misplaced would move it)."""
    monkeypatch.setattr(fidelity, "HISTOGRAM_CELLS", cells)
    rng = np.random.default_rng(7)
    levels = {"a": "pq", "y": "nmo", "b": "rstuv", "c": "wx", "d": "ghijkl"}
    schema = Schema([Categorical(name, tuple(v)) for name, v in levels.items()])
    real, synthetic = (
        pd.DataFrame(
            {
                n: rng.choice(list(v), rows, p=rng.dirichlet(np.ones(len(v))))
                for n, v in levels.items()
            }
        )
        for rows in (300, 200)
    )
    a, b = (table_codes(schema, t, 20) for t in (real, synthetic))
    sizes = [len(v) for v in levels.values()]

    def tvd(columns: tuple[int, ...]) -> float:
        def joint(codes: np.ndarray) -> np.ndarray:
            return joint_counts([codes[:, c] for c in columns], [sizes[c] for c in columns]) / len(
                codes
            )

        return 0.5 * float(np.abs(joint(a) - joint(b)).sum())

    scores = fidelity_scores(real, synthetic, schema, "y")
    features = [0, 2, 3, 4]
    assert scores["tvd_1way"] == pytest.approx(np.mean([tvd((i,)) for i in range(5)]))
    pairs = itertools.combinations(range(5), 2)
    assert scores["tvd_2way"] == pytest.approx(np.mean([tvd(p) for p in pairs]))
    with_target = [tvd((i, j, 1)) for i, j in itertools.combinations(features, 2)]
    assert scores["tvd_3way_target"] == pytest.approx(np.mean(with_target))
    triples = [tvd(t) for t in itertools.combinations(range(5), 3)]
    assert scores["k_marginal"] == pytest.approx(1000 * (1 - np.mean(triples)))
    by_column = per_column_tvd(real, synthetic, schema)
    assert list(by_column.values()) == pytest.approx([tvd((i,)) for i in range(5)])


def test_cramers_v_is_zero_for_independent_columns_and_one_for_a_copy():
    schema = Schema([Categorical("a", ("p", "q", "r")), Categorical("b", ("s", "t"))])
    product = pd.DataFrame(itertools.product("pqr", "st"), columns=["a", "b"])
    codes = table_codes(schema, product, 20)
    assert cramers_v(codes, [3, 2], 0, 1) == pytest.approx(0.0, abs=1e-12)
    copy = np.stack([codes[:, 0], codes[:, 0]], axis=1)
    assert cramers_v(copy, [3, 3], 0, 1) == pytest.approx(1.0)
    relabelled = np.stack([codes[:, 0], (codes[:, 0] + 1) % 3], axis=1)
    assert cramers_v(relabelled, [3, 3], 0, 1) == pytest.approx(1.0)


def test_cramers_v_by_hand_and_against_scipy():
    # 2x2 counts [[3, 1], [1, 3]]: phi = (3*3 - 1*1) / sqrt(4*4*4*4) = 0.5.
    pairs = [(0, 0)] * 3 + [(0, 1)] + [(1, 0)] + [(1, 1)] * 3
    assert cramers_v(np.array(pairs), [2, 2], 0, 1) == pytest.approx(0.5)
    rng = np.random.default_rng(3)
    a = rng.integers(0, 4, 400)
    b = (a + rng.integers(0, 3, 400)) % 5
    observed = np.zeros((4, 5), dtype=np.int64)
    np.add.at(observed, (a, b), 1)
    expected = association(observed, method="cramer")
    assert cramers_v(np.stack([a, b], 1), [4, 5], 0, 1) == pytest.approx(expected)
    # Declared levels nobody uses change nothing.
    assert cramers_v(np.stack([a, b], 1), [9, 7], 0, 1) == pytest.approx(expected)
    # A column with a single value carries no association (not a division by zero).
    assert cramers_v(np.stack([a, np.zeros_like(a)], 1), [4, 1], 0, 1) == 0.0


def test_association_difference_by_hand():
    schema = binary_schema("a", "y")
    copied = frame([(0, 0), (1, 1)] * 2, "ay")
    independent = frame(list(itertools.product((0, 1), repeat=2)), "ay")
    scores = fidelity_scores(copied, independent, schema, "y")
    assert scores["association_difference"] == pytest.approx(1.0)
    assert scores["association_real"] == [[1.0, 1.0], [1.0, 1.0]]
    assert scores["association_synthetic"] == [[1.0, 0.0], [0.0, 1.0]]
    matrix = association_matrix(table_codes(schema, copied, 20), [2, 2])
    np.testing.assert_array_equal(matrix, matrix.T)


def test_a_missing_value_is_a_cell_of_its_own():
    schema = Schema([Continuous("x", 0, 10, missing=True), Categorical("y", BITS)])
    real = pd.DataFrame({"x": [np.nan, np.nan], "y": ["0", "0"]})
    at_the_bound = pd.DataFrame({"x": [0.0, 0.0], "y": ["0", "0"]})
    assert per_column_tvd(real, at_the_bound, schema)["x"] == 1.0


def assert_same_scores(written: dict, expected: dict) -> None:
    """Score by score: numbers to floating-point tolerance, lists (column names, association
    matrices) element by element (pytest.approx compares no nested structure)."""
    assert written.keys() == expected.keys()
    for key, value in expected.items():
        if isinstance(value, str) or (
            isinstance(value, list) and value and isinstance(value[0], str)
        ):
            assert written[key] == value, key
        else:
            np.testing.assert_allclose(written[key], value, rtol=1e-9, err_msg=key)


def test_evaluation_json_scores_synthetic_rows_and_the_held_out_floor(trained_run, small_adult):
    report = read_json(trained_run / "evaluation.json")
    model = read_json(trained_run / "model.json")
    schema, target = Schema.from_specs(model["schema"]), model["target"]
    cfg = read_run_config(trained_run)
    cfg.data.root = str(small_adult)  # the run found its data through $RDPGAN_DATA_DIR
    train, _, _ = load_run_tables(cfg, trained_run)
    held_out = schema.read_csv(trained_run / "test.csv")
    synthetic = schema.read_csv(trained_run / "synthetic.csv")
    assert_same_scores(report["fidelity_floor"], fidelity_scores(train, held_out, schema, target))
    assert_same_scores(report["fidelity"], fidelity_scores(train, synthetic, schema, target))
    for key, rows in (("fidelity_quantile", synthetic), ("fidelity_quantile_floor", held_out)):
        expected = fidelity_scores(train, rows, schema, target, resolution="quantile")
        assert_same_scores(report[key], expected)
        assert report[key]["resolution"] == "quantile"
    # Fresh real rows are closer to the train split than a 2-epoch DP generator's rows, pair by
    # pair (column by column, its herded rows can be closer than 600 rows drawn at random).
    assert report["fidelity_floor"]["tvd_2way"] < report["fidelity"]["tvd_2way"]
    assert report["fidelity_quantile_floor"]["tvd_2way"] < report["fidelity_quantile"]["tvd_2way"]
    assert 0 < report["fidelity_floor"]["tvd_1way"] < 0.1


# The data's resolution: quantile cells of the real column.

FNLWGT = Continuous("w", 1, 1_500_000, integer=True, transform="log1p")  # Adult's declaration


def lognormal_table(n: int, seed: int) -> pd.DataFrame:
    """A column like Adult's fnlwgt: it fills a few of its 20 public (log-scale) bins."""
    rng = np.random.default_rng(seed)
    w = np.clip(np.round(rng.lognormal(np.log(190_000), 0.5, n)), 1, 1_500_000)
    return pd.DataFrame({"w": w, "y": rng.choice(["0", "1"], n)})


def test_numbers_clumped_inside_their_public_bins_look_perfect_only_at_public_bins():
    """fnlwgt's failure: every value moved to the centre of its public bin (a few points)."""
    schema = Schema([FNLWGT, Categorical("y", BITS)])
    real = lognormal_table(5000, 0)
    bins = Bins(FNLWGT, 20)
    clumped = real.assign(w=bins.values(bins.codes(real["w"].to_numpy())[0]))
    assert clumped["w"].nunique() <= 8
    public = fidelity_scores(real, clumped, schema, "y")
    quantile = fidelity_scores(real, clumped, schema, "y", resolution="quantile")
    assert public["tvd_1way"] == 0.0 and public["tvd_2way"] == 0.0
    assert per_column_tvd(real, clumped, schema, resolution="quantile")["w"] > 0.5
    assert quantile["tvd_1way"] > 0.25 and quantile["tvd_2way"] > 0.5


def test_a_fresh_sample_of_the_same_distribution_scores_near_zero_at_both_resolutions():
    schema = Schema([FNLWGT, Continuous("x", 0, 1), Categorical("y", BITS)])

    def sample(seed: int) -> pd.DataFrame:
        frame = lognormal_table(20_000, seed)
        return frame.assign(x=np.random.default_rng(seed + 10).beta(5, 1, len(frame)))

    real, fresh = sample(0), sample(1)
    for resolution in RESOLUTIONS:
        scores = fidelity_scores(real, fresh, schema, "y", resolution=resolution)
        # Sampling noise only: ~0.045 over the 400 quantile cells of the numeric pair.
        assert scores["tvd_1way"] < 0.02 and scores["tvd_2way"] < 0.06, resolution


def test_fidelity_scores_have_the_same_keys_at_both_resolutions():
    schema = Schema([FNLWGT, Categorical("y", BITS)])
    real, synthetic = lognormal_table(200, 0), lognormal_table(300, 1)
    public = fidelity_scores(real, synthetic, schema, "y")
    quantile = fidelity_scores(real, synthetic, schema, "y", resolution="quantile")
    assert public.keys() == quantile.keys()
    assert (public["resolution"], quantile["resolution"]) == ("public", "quantile")
    with pytest.raises(ValueError, match="resolution"):
        Cells.build("fine", schema, real)  # type: ignore[arg-type]


def test_quantile_cells_hold_equal_shares_of_the_real_rows():
    column = Continuous("x", 0, 1)
    real = np.random.default_rng(0).uniform(0, 1, 1000)
    cells = QuantileBins.fit(column, real, 20)
    assert cells.n_values == cells.size == 20
    np.testing.assert_array_equal(np.bincount(cells.codes(real)), [50] * 20)
    # A value on an edge goes up; beyond the real range, to the first or last cell.
    assert cells.codes(cells.lower[3:4])[0] == 3
    assert list(cells.codes(np.array([0.0, real.min(), 1.0]))) == [0, 0, 19]


def test_ties_merge_quantile_edges_so_every_cell_holds_real_rows():
    """90% zeros in a column that declares no point mass: the zeros are one cell, not 18
    empty ones, and values below them (the bounds allow them) share their cell."""
    column = Continuous("gain", -10, 100_000)
    rng = np.random.default_rng(1)
    real = np.where(rng.uniform(size=2000) < 0.9, 0.0, rng.uniform(1, 100_000, 2000))
    cells = QuantileBins.fit(column, real, 20)
    assert np.all(np.diff(cells.lower) > 0) and cells.lower[0] == 0.0
    counts = np.bincount(cells.codes(real), minlength=cells.n_values)
    assert counts.min() > 0 and counts[0] >= (real == 0).sum()
    assert cells.n_values < 20
    assert list(cells.codes(np.array([-5.0, 0.0, 1e9]))) == [0, 0, cells.n_values - 1]


def test_an_integer_column_with_few_values_gets_a_cell_per_value():
    column = Continuous("k", 0, 100, integer=True)
    cells = QuantileBins.fit(column, np.array([1, 1, 2, 3, 3, 3] * 50), 20)
    np.testing.assert_array_equal(cells.lower, [1, 2, 3])
    # Below the range, on each value, between two (down), above the range.
    assert list(cells.codes(np.array([0, 1, 2, 3, 2.5, 50]))) == [0, 0, 1, 2, 1, 2]


def test_point_masses_and_missing_keep_cells_of_their_own_at_quantile_resolution():
    """The quantiles are read off the other values, so moving the zeros to missing costs
    their share and nothing else."""
    column = Continuous("g", 0, 1000, point_masses=(0.0,), missing=True)
    schema = Schema([column, Categorical("y", BITS)])
    rng = np.random.default_rng(2)
    values = rng.uniform(1, 1000, 1000)
    values[:300], values[300:500] = 0.0, np.nan
    real = pd.DataFrame({"g": values, "y": "0"})
    cells = Cells.build("quantile", schema, real)
    quantile = cells.quantiles["g"]
    assert (quantile.n_values, quantile.size) == (20, 22)
    codes = cells.codes(real)[:, 0]
    assert (codes[:300] == 20).all() and (codes[300:500] == 21).all()
    np.testing.assert_array_equal(np.bincount(codes[500:]), [25] * 20)  # 500 rows, 20 cells
    moved = real.assign(g=np.where(values == 0.0, np.nan, values))
    assert per_column_tvd(real, moved, schema, resolution="quantile")["g"] == pytest.approx(0.3)
    assert cells.sizes == [22, 2]
