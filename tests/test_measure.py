"""The marginal releases: which pairs may be measured, the consistency step, the wiring."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from rdpgan import measure
from rdpgan.data.discretize import table_sizes
from rdpgan.data.schema import Schema
from rdpgan.errors import UserInputError
from rdpgan.marginals import Marginals
from rdpgan.privacy.ledger import PrivacyLedger, Release
from rdpgan.privacy.mechanisms.gaussian import snap_grid
from rdpgan.privacy.mechanisms.tree import DENSITY_SPLIT_SHRINK, tree_split
from rdpgan.transform import TableTransformer


def test_a_small_epsilon_keeps_only_the_pairs_whose_tables_are_not_mostly_noise():
    sizes = [2, 7, 16, 16]  # cells per pair: 14, 32, 32, 112, 112, 256
    big = measure.pair_candidates(sizes, 20_000, PrivacyLedger(8.0, 1e-5, "rdp"), 1.9)
    small = measure.pair_candidates(sizes, 2_000, PrivacyLedger(1.0, 1e-5, "rdp"), 0.2375)
    assert len(big) == 6
    assert small == [(0, 1)]  # 14 cells; not 32, 112 or 256
    assert measure.pair_candidates(sizes, 20_000, PrivacyLedger(8.0, 1e-5, "none"), 0) == big
    tiny = measure.pair_candidates(sizes, 50, PrivacyLedger(1.0, 1e-5, "rdp"), 0.2375)
    assert tiny == []


def test_forest_size_counts_the_edges_a_selection_can_make():
    assert measure.forest_size(4, [(0, 1), (1, 2), (0, 2)]) == 2  # a triangle: one is a cycle
    assert measure.forest_size(4, [(0, 1), (2, 3)]) == 2
    assert measure.forest_size(3, []) == 0


def test_consistent_table_sums_to_one_and_zeroes_small_noisy_cells():
    noisy = np.array([[500.0, -3.0, 2.0], [4.0, 300.0, -1.0]])
    table = measure.consistent_table(noisy, 800.0)
    assert table.sum() == pytest.approx(1.0) and (table >= 0).all()
    assert table[0, 1] == 0 and table[1, 2] == 0
    assert table[0, 0] > 0.6  # the big cells keep their mass


def test_consistent_table_is_max_of_zero_and_each_cell_less_the_shift_that_spends_the_total():
    """Its closed form against the definition: t found by bisection on sum(max(0, x - t)) =
    total, on tables of every size and sign, totals above and below their positive mass."""
    rng = np.random.default_rng(2)
    for _ in range(300):
        noisy = rng.normal(0, rng.choice([1, 30]), int(rng.integers(1, 60)))
        noisy += rng.choice([0.0, 40.0]) * rng.random(len(noisy))
        total = float(
            rng.choice([1.0, np.clip(noisy, 0, None).sum() + 1.0, 3 * np.abs(noisy).sum()])
        )
        lo, hi = noisy.min() - total, noisy.max()
        for _ in range(200):
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if np.clip(noisy - mid, 0, None).sum() > total else (lo, mid)
        expected = np.clip(noisy - hi, 0, None)
        if np.clip(noisy, 0, None).sum() > 0:
            np.testing.assert_allclose(
                measure.consistent_table(noisy, total), expected / total, atol=1e-9
            )


SCHEMA = Schema.from_specs(
    [
        {"name": "a", "kind": "categorical", "levels": ["x", "y", "z"]},
        {"name": "b", "kind": "continuous", "lo": 0, "hi": 10, "integer": True},
        {"name": "c", "kind": "categorical", "levels": ["p", "q"]},
        {"name": "y", "kind": "categorical", "levels": [0, 1]},
    ]
)


def dependent_table():
    """3,000 rows where b follows a closely: (frame, features, labels, transformer)."""
    rng = np.random.default_rng(0)
    n = 3000
    a = rng.integers(0, 3, size=n)
    frame = pd.DataFrame(
        {
            "a": np.array(["x", "y", "z"])[a],
            "b": a * 3 + rng.integers(0, 2, size=n),  # b follows a closely
            "c": rng.choice(["p", "q"], size=n),
            "y": rng.integers(0, 2, size=n),
        }
    )
    transformer = TableTransformer(SCHEMA, "y")
    frame = SCHEMA.conform(frame)
    return frame, transformer.encode(frame), transformer.encode_labels(frame), transformer


def test_release_marginals_records_every_release_and_finds_a_copied_column():
    frame, features, labels, transformer = dependent_table()
    rng = np.random.default_rng(0)
    n = len(frame)
    a = transformer.codes(features)[:, 0]
    ledger = PrivacyLedger(8.0, 1e-5, "rdp")
    released = measure.release_marginals(
        features, labels, transformer, np.array([0.5, 0.5]), n, ledger, 0.5, 0.05, rng
    )
    assert [r.name for r in ledger.releases] == ["marginals", "pair_selection", "pair_marginals"]
    assert ledger.epsilon() <= 8.0
    assert (0, 1) in released.pairs  # the strongest dependence is chosen first
    (joint,) = [t for p, t in zip(released.pairs, released.joint, strict=True) if p == (0, 1)]
    assert joint.sum() == pytest.approx(1.0)
    true = np.histogram2d(a, frame["b"], bins=[3, 11], range=[[0, 3], [0, 11]])[0] / n
    assert np.abs(joint - true).sum() / 2 < 0.05
    assert [t.shape for t in released.by_class] == [(2, 3), (2, 11), (2, 2)]
    again = Marginals.from_dict(released.to_dict())
    assert again.pairs == released.pairs
    np.testing.assert_allclose(again.joint[0], released.joint[0], atol=1e-8)


def test_the_candidate_noise_counts_only_the_pairs_there_are():
    """3 columns have 3 pairs, not (3 - 1) * 2 = 4: the noise std is that of sqrt(3) tables."""
    ledger = PrivacyLedger(1.0, 1e-5, "rdp")
    std = ledger.calibrate(1.0, 1, 0.3, alone=True) * math.sqrt(3)
    sizes = [2, 5, 8]  # cells per pair: 10, 16, 40
    total = 16 * std / measure.PAIR_NOISE_LIMIT + 1e-6  # 16 cells fit with sqrt(3), not sqrt(4)
    assert measure.pair_candidates(sizes, total, ledger, 0.3) == [(0, 1), (0, 2)]


class OrderedNoise:
    """A noise source that checks each draw comes after its release is on the record."""

    def __init__(self, ledger: PrivacyLedger, written: list[str]):
        self.ledger, self.written = ledger, written

    def normal(self, loc, scale, size):
        assert self.written and self.written[-1] == self.ledger.releases[-1].name
        return np.zeros(size)

    def random(self):
        return 0.5


def test_release_marginals_spends_shares_of_one_base_and_records_before_each_draw():
    _, features, labels, transformer = dependent_table()
    ledger = PrivacyLedger(8.0, 1e-5, "rdp")
    ledger.record(Release("schema", "pure", epsilon=0.8))  # a private schema came first
    written: list[str] = []
    ledger.on_record = lambda: written.append(ledger.releases[-1].name)
    base = 8.0 - 0.8
    measure.release_marginals(
        features,
        labels,
        transformer,
        np.array([0.5, 0.5]),
        3000,
        ledger,
        0.5,
        0.05,
        OrderedNoise(ledger, written),
    )
    assert written == ["marginals", "pair_selection", "pair_marginals"]
    by_name = {r.name: r for r in ledger.releases}
    expected_sigma = ledger.calibrate(1.0, 1, 0.25 * base, alone=True)
    assert by_name["marginals"].noise_multiplier == pytest.approx(expected_sigma)
    assert by_name["pair_marginals"].noise_multiplier == pytest.approx(expected_sigma)
    assert by_name["pair_selection"].epsilon == pytest.approx(0.05 * base)


@pytest.mark.parametrize("rows", [3000, 30])  # pairs (8 tables, more than 5), and none
def test_the_planned_marginal_noise_is_the_noise_the_release_then_gets(rows):
    """A fit chooses its budget split with the noise planned before anything is released: it
    must be the one the release records (per-class tables and pairs at one sigma, the larger
    sqrt(tables) of the two: 5 per-class tables, 8 pairs of 5 columns)."""
    names = ["a", "b", "c", "d", "e"]
    specs = [{"name": c, "kind": "categorical", "levels": ["p", "q"]} for c in [*names, "y"]]
    schema = Schema.from_specs(specs)
    rng = np.random.default_rng(0)
    frame = schema.conform(pd.DataFrame({c: rng.choice(["p", "q"], 3000) for c in [*names, "y"]}))
    transformer = TableTransformer(schema, "y")
    features, labels = transformer.encode(frame), transformer.encode_labels(frame)
    sizes = table_sizes(transformer.features, measure.PAIR_BINS)
    for fraction, configured in ((0.5, None), (0.75, None), (0.75, 0.5)):
        ledger = PrivacyLedger(8.0, 1e-5, "rdp")
        ledger.record(Release("schema", "pure", epsilon=0.8))
        planned = measure.planned_marginal_releases(sizes, rows, ledger, fraction, 0.05, configured)
        spent = ledger.epsilon_with(planned)
        assert [r.name for r in ledger.releases] == ["schema"]  # nothing recorded
        released = measure.release_marginals(
            features,
            labels,
            transformer,
            np.array([0.5, 0.5]),
            rows,
            ledger,
            fraction,
            0.05,
            rng,
            configured,
        )
        assert len(released.pairs) == (8 if rows == 3000 else 0)
        assert [r.to_dict() for r in planned] == [r.to_dict() for r in ledger.releases[1:]]
        assert measure.largest_noise(planned) == measure.marginal_noise(ledger) > 0
        assert spent == pytest.approx(ledger.epsilon(), rel=1e-12)
    assert (
        measure.planned_marginal_releases(sizes, rows, PrivacyLedger(8, 1e-5, "none"), 0.5, 0) == []
    )


def test_an_accountant_that_cannot_certify_a_pair_release_gets_no_pairs():
    """dp_cgan at epsilon=1: the moments accountant cannot certify 0.25 in one step, so the
    pairs are dropped (the per-class tables then take the whole share) instead of failing."""
    ledger = PrivacyLedger(1.0, 1e-5, "moments")
    assert measure.pair_candidates([2, 3, 4], 20_000, ledger, 0.25) == []
    assert measure.pair_candidates([2, 3, 4], 20_000, ledger, 0.9) != []


def on_grid(values: np.ndarray, std: float) -> bool:
    grid = snap_grid(std)
    return bool(np.array_equal(values / grid, np.round(values / grid)))


def test_every_gaussian_release_is_rounded_to_its_public_grid_where_it_is_drawn():
    """The label counts and the marginal tables leave measure.py already rounded (the model
    keeps only what derives from them), each to the grid of its own noise."""
    ledger = PrivacyLedger(8.0, 1e-5, "rdp")
    labels = np.array([0, 1, 1, 0, 1])
    counts = measure.label_counts(labels, 2, ledger, 10.0, np.random.default_rng(0))
    assert on_grid(counts, 10.0) and not np.array_equal(counts, np.round(counts))
    tables = [np.arange(6.0).reshape(2, 3), np.ones((2, 2))]
    released = measure._gaussian_tables("t", tables, ledger, 1.0, np.random.default_rng(1))
    for table, std in released:
        assert std > 0 and on_grid(table, std) and not on_grid(table, 64 * std)


def test_a_noiseless_hierarchical_histogram_gives_the_exact_finest_distribution():
    rng = np.random.default_rng(0)
    positions = np.clip(rng.normal(0.3, 0.1, 5000), -1, 1)
    levels = measure.level_counts(positions, 6)
    assert [len(t) for t in levels] == [2, 4, 8, 16, 32, 64]
    assert all(t.sum() == 5000 for t in levels)
    np.testing.assert_allclose(measure.tree_density(levels, 0.0), levels[-1] / 5000)


def test_a_cell_below_the_noise_is_split_evenly_not_by_its_noisy_halves():
    """Top down, a cell's estimate below DENSITY_SPLIT_NOISE stds is spread over its halves
    evenly: the noise alone would otherwise decide where a rare value goes."""
    noisy = [np.array([1000.0, 5.0]), np.array([600.0, 400.0, 5.0, 0.0])]
    density, _ = tree_split(noisy, noise_std=10.0)
    np.testing.assert_allclose(density * 1005, [600, 400, 2.5, 2.5])
    # The densities too; their shrink keeps 0.9996 of 1000 / 5's move from even (999.8 / 5.2)
    # and 0.99 of 600 / 400's (0.599 of 999.8), and the 5.2 below the floor still splits evenly.
    density = measure.tree_density(noisy, noise_std=10.0)
    np.testing.assert_allclose(density * 1005, [598.88, 400.92, 2.60, 2.60], atol=0.01)


def test_the_densities_shrink_a_split_within_the_noise_toward_even():
    """Above the floor, the densities move a split from even by 1 - DENSITY_SPLIT_SHRINK ·
    2σ² / d² of its noisy share (d the halves' difference): 60 / 40 at σ = 10 (d² = 2σ² · 2)
    stays even, 90 / 10 keeps 15/16 of its move; the private schema's tree follows both."""
    assert DENSITY_SPLIT_SHRINK == 2.0
    within, clear = [np.array([60.0, 40.0])], [np.array([90.0, 10.0])]
    np.testing.assert_allclose(measure.tree_density(within, 10.0), [0.5, 0.5])
    np.testing.assert_allclose(measure.tree_density(clear, 10.0), [0.875, 0.125])
    np.testing.assert_allclose(tree_split(within, 10.0)[0], [0.6, 0.4])
    np.testing.assert_allclose(tree_split(clear, 10.0)[0], [0.9, 0.1])


def test_the_tree_says_which_mass_it_spread_evenly_and_from_which_level():
    """A cell split evenly for want of counts in its halves (level 2 empty) whose quarter is
    split by counts again below (level 3: 60 / 40) is not spread: only the cells whose mass
    stayed even are, each from the coarsest level it stayed even from."""
    levels = [np.array([100.0, 0.0]), np.zeros(4), np.array([60.0, 40.0, 0, 0, 0, 0, 0, 0])]
    density, spread_from = tree_split(levels, noise_std=1.0)
    np.testing.assert_allclose(density * 100, [30, 20, 25, 25, 0, 0, 0, 0])
    np.testing.assert_array_equal(spread_from, [3, 3, 2, 2, 1, 1, 1, 1])
    # The densities shrink each split by counts a little (60 / 40 at σ = 1 keeps 0.99 of it).
    np.testing.assert_allclose(
        measure.tree_density(levels, 1.0) * 100, [29.94, 20.05, 25, 25, 0, 0, 0, 0], atol=0.01
    )


def test_numeric_densities_are_skipped_where_the_accountant_cannot_certify_them():
    private = PrivacyLedger(1.0, 1e-5, "rdp")
    assert measure.affordable(private, 0.05) and not measure.affordable(private, 0.002)
    moments = PrivacyLedger(1.0, 1e-5, "moments")
    assert measure.affordable(moments, 0.5) and not measure.affordable(moments, 0.2)
    assert measure.affordable(PrivacyLedger(1.0, 1e-5, "none"), 0.05)


def test_pairs_are_released_only_where_the_candidates_link_every_column():
    """Three 2-code columns beside one of 20 codes that no affordable pair reaches: no pair is
    released, and the per-class tables take the marginals' whole share; with ten times the
    rows every pair is affordable, and the pairs are released again."""
    ledger = PrivacyLedger(1.0, 1e-5, "rdp")
    sizes, half = [2, 2, 2, 20], 0.25 * ledger.gaussian_budget()
    # The pair release's noise std (sqrt(6): the most pairs a selection of 4 columns makes).
    std = ledger.calibrate(1.0, 1, half, alone=True) * math.sqrt(6)
    few, many = 20 * std, 200 * std
    assert measure.forest_size(4, measure.pair_candidates(sizes, few, ledger, half)) == 2
    alone = measure.planned_marginal_releases(sizes, few, ledger, 0.5, 0.05)
    assert [r.name for r in alone] == [measure.MARGINALS]
    assert alone[0].noise_multiplier == pytest.approx(
        ledger.calibrate(1.0, 1, 2 * half, alone=True)
    )
    paired = measure.planned_marginal_releases(sizes, many, ledger, 0.5, 0.05)
    assert [r.name for r in paired] == [
        measure.MARGINALS,
        "pair_selection",
        measure.PAIR_MARGINALS,
    ]
    assert paired[0].noise_multiplier == pytest.approx(ledger.calibrate(1.0, 1, half, alone=True))


def test_whether_pairs_link_every_column_is_decided_at_the_configured_share():
    """Rows enough for the 20-code column's pairs at a share of 0.75 but not at the configured
    0.5: the adaptive pairs' share moved to the marginals (0.75 in all) goes to the per-class
    tables alone, not to pairs only the larger share affords."""
    ledger = PrivacyLedger(1.0, 1e-5, "rdp")
    sizes, budget = [2, 2, 2, 20], ledger.gaussian_budget()

    def pair_std(half: float) -> float:
        return ledger.calibrate(1.0, 1, half * budget, alone=True) * math.sqrt(6)

    rows = 81 * pair_std(0.375)  # 40 cells x std <= rows / 2 at 0.375, not at 0.25
    assert 40 * pair_std(0.25) > rows / 2
    both = measure.planned_marginal_releases(sizes, rows, ledger, 0.75, 0.05)
    assert [r.name for r in both] == [measure.MARGINALS, "pair_selection", measure.PAIR_MARGINALS]
    moved = measure.planned_marginal_releases(sizes, rows, ledger, 0.75, 0.05, configured=0.5)
    assert [r.name for r in moved] == [measure.MARGINALS]
    assert moved[0].noise_multiplier == pytest.approx(
        ledger.calibrate(1.0, 1, 0.75 * budget, alone=True)
    )


def test_pairs_are_released_only_where_the_marginals_noise_is_within_the_limit():
    """Candidates that link every column, and the marginals' noise planned with the pairs at
    the configured share: a limit just below it drops the pairs (the per-class tables take the
    whole share), just above it keeps them."""
    ledger = PrivacyLedger(1.0, 1e-5, "rdp")
    sizes, budget, rows = [2, 2, 2, 20], ledger.gaussian_budget(), 10_000
    with_pairs = measure.planned_marginal_releases(sizes, rows, ledger, 0.5, 0.05)
    assert [r.name for r in with_pairs][-1] == measure.PAIR_MARGINALS
    share = measure.largest_noise(with_pairs) / rows
    kept = measure.planned_marginal_releases(sizes, rows, ledger, 0.5, 0.05, None, share * 1.001)
    assert [r.to_dict() for r in kept] == [r.to_dict() for r in with_pairs]
    dropped = measure.planned_marginal_releases(sizes, rows, ledger, 0.5, 0.05, None, share * 0.999)
    assert [r.name for r in dropped] == [measure.MARGINALS]
    assert dropped[0].noise_multiplier == pytest.approx(
        ledger.calibrate(1.0, 1, 0.5 * budget, alone=True)
    )


def test_the_noise_limit_is_read_at_the_configured_share():
    """A limit between the noise planned with the pairs at the configured 0.5 and at the moved
    0.75: the pairs are dropped (decided at the configured share), though the larger share
    alone would keep them."""
    ledger = PrivacyLedger(1.0, 1e-5, "rdp")
    sizes, rows = [2, 2, 2, 20], 10_000

    def noise(fraction: float) -> float:
        planned = measure.planned_marginal_releases(sizes, rows, ledger, fraction, 0.05)
        return measure.largest_noise(planned)

    limit = (noise(0.5) + noise(0.75)) / 2 / rows
    assert noise(0.75) < limit * rows < noise(0.5)
    kept = measure.planned_marginal_releases(sizes, rows, ledger, 0.75, 0.05, None, limit)
    assert [r.name for r in kept][-1] == measure.PAIR_MARGINALS
    moved = measure.planned_marginal_releases(sizes, rows, ledger, 0.75, 0.05, 0.5, limit)
    assert [r.name for r in moved] == [measure.MARGINALS]


def test_a_single_column_needs_no_calibration_for_pairs():
    """One feature column has no pair: the noise limit is not checked (the moments accountant
    cannot certify the pairs' half at epsilon 1), and the per-class tables take the share."""
    ledger = PrivacyLedger(1.0, 1e-5, "moments")
    with pytest.raises(UserInputError):
        ledger.calibrate(1.0, 1, 0.25 * ledger.gaussian_budget(), alone=True)
    planned = measure.planned_marginal_releases([5], 2_000, ledger, 0.5, 0.05, 0.5, 4.3e-3)
    assert [r.name for r in planned] == [measure.MARGINALS]
